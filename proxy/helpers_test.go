package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

const testToken = "lsp-test-token-0123456789abcdef"

// env is a proxy in front of a simulator.
type env struct {
	t      testing.TB
	sim    *sim.Running
	srv    *httptest.Server
	h      *Handler
	mu     sync.Mutex
	calls  []retry.Call
	events []retry.Event
	hits   atomic.Int64 // HTTP requests that reached the proxy
	hcMu   sync.Mutex
	hc     *http.Client // the callers' client, its idle connections closed at cleanup; under hcMu
	up     *http.Client // the proxy's upstream client (to the simulator)
}

// newTestClient is an HTTP client of the test's own: its idle keep-alive
// connections (and their persistConn goroutines, which goleak would see)
// are closed when the test ends.
func newTestClient(t testing.TB) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// client is e's callers' client, made on first use.
func (e *env) client() *http.Client {
	e.hcMu.Lock()
	defer e.hcMu.Unlock()
	if e.hc == nil {
		e.hc = newTestClient(e.t)
	}
	return e.hc
}

func clearEnv(t testing.TB) {
	t.Helper()
	for _, v := range stream.AllEnvVars() {
		t.Setenv(v, "")
	}
}

// eng is an engine over d, as the tests' proxies run on: the commands' own
// (calls.Open) adds the breaker, the pacer and the history's cooldowns.
func eng(d retry.Doer) *retry.Engine { return &retry.Engine{Doer: d} }

// newEnv starts a simulator and a proxy; cfg may be nil; tweak may adjust
// the options.
func newEnv(t testing.TB, cfg *Config, tweak func(*Options)) *env {
	t.Helper()
	return newEnvSim(t, sim.Options{Scenario: "calm", TokensPerSecond: 1e6}, cfg, tweak)
}

// newEnvSim is newEnv with the simulator's options.
func newEnvSim(t testing.TB, so sim.Options, cfg *Config, tweak func(*Options)) *env {
	t.Helper()
	clearEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r, err := sim.Start(ctx, "127.0.0.1:0", so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	eps := map[string]stream.Endpoint{}
	for _, p := range stream.Providers() {
		eps[p.Name] = r.Endpoint(p.Name)
	}
	// The proxy's own upstream client, and the shared one e.direct uses.
	t.Cleanup(stream.CloseIdleConnections)
	upstream := newTestClient(t)
	e := &env{t: t, sim: r, up: upstream}
	o := Options{
		Token:  testToken,
		Engine: eng(stream.Router{Client: &stream.Client{HTTP: upstream}, Endpoints: eps}),
		Config: cfg,
		Events: func(c retry.Call, ev retry.Event) {
			e.mu.Lock()
			defer e.mu.Unlock()
			if ev.Kind == retry.EventCallStart {
				e.calls = append(e.calls, c)
			}
			e.events = append(e.events, ev)
		},
	}
	if tweak != nil {
		tweak(&o)
	}
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

// requests is how many authenticated requests the simulated provider saw.
func (e *env) requests(provider string) int64 {
	for _, p := range e.sim.Server.Status().Providers {
		if p.Provider == provider {
			return p.Requests
		}
	}
	e.t.Fatalf("no provider %s", provider)
	return 0
}

func (e *env) inject(f sim.Fault) {
	e.t.Helper()
	if err := e.sim.Server.Inject(f); err != nil {
		e.t.Fatal(err)
	}
}

// openAIReq builds what openai-python sends for client.chat.completions.create.
func (e *env) openAIReq(body string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/chat/completions", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+testToken)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json")
	r.Header.Set("User-Agent", "OpenAI/Python 2.8.1")
	r.Header.Set("X-Stainless-Lang", "python")
	r.Header.Set("X-Stainless-Package-Version", "2.8.1")
	r.Header.Set("X-Stainless-Retry-Count", "0")
	return r
}

// anthropicReq builds what the anthropic Python SDK sends for messages.create.
func (e *env) anthropicReq(body string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/messages", strings.NewReader(body))
	r.Header.Set("X-Api-Key", testToken)
	r.Header.Set("Anthropic-Version", "2023-06-01")
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json")
	r.Header.Set("User-Agent", "Anthropic/Python 0.75.0")
	r.Header.Set("X-Stainless-Retry-Count", "0")
	return r
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (e *env) do(r *http.Request) reply {
	e.t.Helper()
	resp, err := e.client().Do(r)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, r.body)
	}
	return m
}

// sseEvent is one event of a stream.
type sseEvent struct {
	event string
	data  string
}

func parseSSE(t *testing.T, b []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" || cur.event != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data += strings.TrimPrefix(line, "data: ")
		}
	}
	if cur.data != "" || cur.event != "" {
		out = append(out, cur)
	}
	return out
}

func obj(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not JSON: %v: %s", err, s)
	}
	return m
}

// dig walks a decoded JSON value by keys and indexes.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// openAIStream collects a Chat Completions stream: text, finish reason,
// usage, whether [DONE] came, and an error event.
type openAIStream struct {
	text, finish, model string
	usage               map[string]any
	done                bool
	err                 map[string]any
}

func readOpenAIStream(t *testing.T, b []byte) openAIStream {
	t.Helper()
	var s openAIStream
	for _, ev := range parseSSE(t, b) {
		if ev.data == "[DONE]" {
			s.done = true
			continue
		}
		m := obj(t, ev.data)
		if e, ok := m["error"].(map[string]any); ok {
			s.err = e
			continue
		}
		if md, ok := m["model"].(string); ok {
			s.model = md
		}
		if c, ok := dig(m, "choices", 0, "delta", "content").(string); ok {
			s.text += c
		}
		if f, ok := dig(m, "choices", 0, "finish_reason").(string); ok {
			s.finish = f
		}
		if u, ok := m["usage"].(map[string]any); ok {
			s.usage = u
		}
	}
	return s
}

// anthropicStream collects a Messages stream.
type anthropicStream struct {
	types      []string
	text, stop string
	model      string
	usage      map[string]any
	err        map[string]any
}

func readAnthropicStream(t *testing.T, b []byte) anthropicStream {
	t.Helper()
	var s anthropicStream
	for _, ev := range parseSSE(t, b) {
		m := obj(t, ev.data)
		if typ, _ := m["type"].(string); typ != ev.event {
			t.Errorf("event %q carries type %q", ev.event, typ)
		}
		s.types = append(s.types, ev.event)
		switch ev.event {
		case "message_start":
			s.model, _ = dig(m, "message", "model").(string)
		case "content_block_delta":
			if x, ok := dig(m, "delta", "text").(string); ok {
				s.text += x
			}
		case "message_delta":
			s.stop, _ = dig(m, "delta", "stop_reason").(string)
			s.usage, _ = m["usage"].(map[string]any)
		case "error":
			s.err, _ = m["error"].(map[string]any)
		}
	}
	return s
}
