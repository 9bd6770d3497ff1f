package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// fakeClock is a settable clock for the limits.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// t0 is a fixed start, mid-month, mid-day UTC.
var t0 = time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)

func clearEnv(t *testing.T) {
	t.Helper()
	for _, v := range stream.AllEnvVars() {
		t.Setenv(v, "")
	}
}

// newTestSim starts a simulator on an httptest server with a fake clock and
// no pacing.
func newTestSim(t *testing.T, opts Options) (*Server, *httptest.Server, *fakeClock) {
	t.Helper()
	clearEnv(t)
	clk := newFakeClock(t0)
	if opts.Clock == nil {
		opts.Clock = clk
	}
	if opts.TokensPerSecond == 0 {
		opts.TokensPerSecond = 1e9
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return s, ts, clk
}

// scenarioFile writes a scenario file and returns its path.
func scenarioFile(t *testing.T, text string) string {
	t.Helper()
	p := t.TempDir() + "/test.ini"
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// send makes one request through the stream package's client.
func send(t *testing.T, ts *httptest.Server, provider, model string, opt stream.Options) stream.Result {
	t.Helper()
	c := &stream.Client{Options: opt}
	ep := stream.Endpoint{Provider: provider, BaseURL: BaseURL(ts.URL, provider), Key: stream.Secret(FakeKey)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Do(ctx, ep, stream.Request{Target: stream.Target{Provider: provider, Model: model}, Prompt: "hello there", MaxTokens: 64}, nil)
}

// raw is one HTTP exchange read whole.
type raw struct {
	status int
	header http.Header
	body   []byte
}

// testModels are the models these tests ask of the first providers;
// modelFor gives any other its default model in stream's table.
var testModels = map[string]string{
	"openai": "gpt-5.4-mini", "anthropic": "claude-sonnet-4-5", "gemini": "gemini-2.5-flash",
	"groq": "llama-3.3-70b-versatile", "deepseek": "deepseek-chat", "mistral": "mistral-small-latest", "xai": "grok-4",
	"bedrock": "anthropic.claude-haiku-5-5-v1:0",
}

// modelFor is the model the tests ask of provider.
func modelFor(provider string) string {
	if m, ok := testModels[provider]; ok {
		return m
	}
	info, _ := stream.Provider(provider)
	return info.DefaultModel
}

// request builds a minimal valid request for a provider, as its SDK would.
func request(t *testing.T, root, provider string, stream bool) *http.Request {
	t.Helper()
	model := modelFor(provider)
	var url string
	var body any
	h := http.Header{}
	switch provider {
	case "anthropic":
		url = BaseURL(root, provider) + "/v1/messages"
		body = map[string]any{"model": model, "max_tokens": 64, "stream": stream,
			"messages": []any{map[string]any{"role": "user", "content": "hello there"}}}
		h.Set("x-api-key", FakeKey)
		h.Set("anthropic-version", "2023-06-01")
	case "gemini":
		method := "generateContent"
		if stream {
			method = "streamGenerateContent?alt=sse"
		}
		url = BaseURL(root, provider) + "/v1beta/models/" + model + ":" + method
		body = map[string]any{"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "hello there"}}}},
			"generationConfig": map[string]any{"maxOutputTokens": 64}}
		h.Set("x-goog-api-key", FakeKey)
	default:
		url = BaseURL(root, provider) + "/chat/completions"
		m := map[string]any{"model": model, "max_tokens": 64, "stream": stream,
			"messages": []any{map[string]any{"role": "user", "content": "hello there"}}}
		if stream && provider != "mistral" { // Mistral rejects stream_options
			m["stream_options"] = map[string]any{"include_usage": true}
		}
		body = m
		h.Set("Authorization", "Bearer "+FakeKey)
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	return req
}

// exchange sends a request straight to the handler (no network).
func exchange(s *Server, req *http.Request) raw {
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	res := rec.Result()
	b, _ := io.ReadAll(res.Body)
	return raw{status: res.StatusCode, header: res.Header, body: b}
}

// call sends a minimal request for provider to s and reads the answer.
func call(t *testing.T, s *Server, provider string, stream bool) raw {
	t.Helper()
	return exchange(s, request(t, "http://sim.test", provider, stream))
}

// jsonOf decodes a body into a generic value.
func jsonOf(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, b)
	}
	return v
}

// path reads a dotted path ("error.details.error_code") from a decoded body.
func path(v any, p string) any {
	for _, k := range strings.Split(p, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
