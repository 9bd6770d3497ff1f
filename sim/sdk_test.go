package sim

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"
)

// The official Go SDKs as oracles: each with its default retries, pointed
// at the simulator on the wall clock, sees for each fault the error type,
// status, code and request count the provider's docs say it would see from
// the real API. Delays are kept short (sub-second holds, which the 1 s
// Retry-After header covers) so no case waits much over two seconds; the
// cases run in parallel.

// sdkSim serves a fresh simulator on loopback and counts the requests
// that reach it.
func sdkSim(t *testing.T) (*Server, string, func() int64) {
	t.Helper()
	s, err := New(Options{TokensPerSecond: 1e9, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return s, ts.URL, n.Load
}

func sdkCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestOpenAISDKOracle(t *testing.T) {
	cases := []struct {
		name     string
		fault    Fault
		stream   bool
		status   int    // 0: success
		code     string // the SDK error's code
		requests int64
	}{
		// 429 with retry-after: the SDK waits it out (1 s) and is served.
		{"rate limit then served", Fault{Kind: FaultRateLimit, RetryAfter: 300 * time.Millisecond}, false, 0, "", 2},
		// insufficient_quota persists: the SDK's two retries fail too.
		{"insufficient_quota", Fault{Kind: FaultSpendCap}, false, 429, "insufficient_quota", 3},
		{"overload once", Fault{Kind: FaultOverload}, false, 0, "", 2},
		{"context length", Fault{Kind: FaultContextLength}, false, 400, "context_length_exceeded", 1},
		{"mid-stream error", Fault{Kind: FaultMidStream}, true, -1, "server_is_overloaded", 1},
		{"cut stream", Fault{Kind: FaultCut}, true, -1, "", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, url, count := sdkSim(t)
			f := c.fault
			f.Provider = "openai"
			if err := s.Inject(f); err != nil {
				t.Fatal(err)
			}
			client := openai.NewClient(ooption.WithBaseURL(url+"/openai/v1"), ooption.WithAPIKey(FakeKey))
			params := openai.ChatCompletionNewParams{Model: "gpt-5.4-mini",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}}
			ctx := sdkCtx(t)
			var err error
			var text string
			if c.stream {
				st := client.Chat.Completions.NewStreaming(ctx, params)
				for st.Next() {
					if ch := st.Current(); len(ch.Choices) > 0 {
						text += ch.Choices[0].Delta.Content
					}
				}
				err = st.Err()
			} else {
				var res *openai.ChatCompletion
				res, err = client.Chat.Completions.New(ctx, params)
				if err == nil {
					text = res.Choices[0].Message.Content
				}
			}
			switch {
			case c.status == 0:
				if err != nil || !strings.Contains(text, "gpt-5.4-mini") {
					t.Fatalf("err %v, text %q", err, text)
				}
			case c.status > 0:
				var ae *openai.Error
				if !errors.As(err, &ae) || ae.StatusCode != c.status || ae.Code != c.code {
					t.Fatalf("error %v, want *openai.Error %d %s", err, c.status, c.code)
				}
			default: // after HTTP 200
				if err == nil {
					t.Fatalf("a broken stream read as success (%q)", text)
				}
				if c.code != "" && !strings.Contains(err.Error(), c.code) {
					t.Errorf("error %v, want %s", err, c.code)
				}
			}
			if n := count(); n != c.requests {
				t.Errorf("%d requests, want %d", n, c.requests)
			}
		})
	}
}

func TestAnthropicSDKOracle(t *testing.T) {
	cases := []struct {
		name     string
		fault    Fault
		stream   bool
		status   int
		typ      string // the error body's error.type
		requests int64
	}{
		{"served with bearer auth", Fault{}, false, 0, "", 1},
		{"rate limit then served", Fault{Kind: FaultRateLimit, RetryAfter: 300 * time.Millisecond}, false, 0, "", 2},
		{"overloaded once", Fault{Kind: FaultOverload}, false, 0, "", 2},
		// The spend limit persists: the SDK retries the 429 and fails.
		{"spend limit", Fault{Kind: FaultSpendCap}, false, 429, "rate_limit_error", 3},
		{"usage limit 400", Fault{Kind: FaultSpendCap, Code: "usage_limit"}, false, 400, "invalid_request_error", 1},
		{"mid-stream overloaded", Fault{Kind: FaultMidStream}, true, -1, "overloaded_error", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, url, count := sdkSim(t)
			if c.fault.Kind != "" {
				f := c.fault
				f.Provider = "anthropic"
				if err := s.Inject(f); err != nil {
					t.Fatal(err)
				}
			}
			client := anthropic.NewClient(aoption.WithBaseURL(url+"/anthropic"), aoption.WithAPIKey(FakeKey))
			params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 64,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello there"))}}
			ctx := sdkCtx(t)
			var err error
			var text string
			if c.stream {
				st := client.Messages.NewStreaming(ctx, params)
				for st.Next() {
					if ev := st.Current(); ev.Type == "content_block_delta" {
						text += ev.Delta.Text
					}
				}
				err = st.Err()
			} else {
				var msg *anthropic.Message
				msg, err = client.Messages.New(ctx, params)
				if err == nil && len(msg.Content) > 0 {
					text = msg.Content[0].Text
				}
			}
			switch {
			case c.status == 0:
				if err != nil || !strings.Contains(text, "claude-sonnet-4-5") {
					t.Fatalf("err %v, text %q", err, text)
				}
			case c.status > 0:
				var ae *anthropic.Error
				if !errors.As(err, &ae) || ae.StatusCode != c.status || !strings.Contains(ae.RawJSON(), `"type":"`+c.typ+`"`) {
					t.Fatalf("error %v, want *anthropic.Error %d %s", err, c.status, c.typ)
				}
			default:
				if err == nil || !strings.Contains(err.Error(), c.typ) {
					t.Fatalf("error %v after HTTP 200, want %s (text %q)", err, c.typ, text)
				}
			}
			if n := count(); n != c.requests {
				t.Errorf("%d requests, want %d", n, c.requests)
			}
		})
	}
}

func TestGenAISDKOracle(t *testing.T) {
	cases := []struct {
		name     string
		fault    Fault
		stream   bool
		status   int
		want     string // APIError.Status, or text in the error
		requests int64
	}{
		{"served", Fault{}, false, 0, "", 1},
		{"daily quota", Fault{Kind: FaultDailyQuota}, false, 429, "RESOURCE_EXHAUSTED", 1},
		{"prepay depleted", Fault{Kind: FaultSpendCap}, false, 402, "RESOURCE_EXHAUSTED", 1},
		{"overloaded", Fault{Kind: FaultOverload}, false, 503, "UNAVAILABLE", 1},
		{"mid-stream, documented framing", Fault{Kind: FaultMidStream}, true, 503, "UNAVAILABLE", 1},
		{"mid-stream, bare form", Fault{Kind: FaultMidStream, Code: "bare"}, true, 503, "UNAVAILABLE", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, url, count := sdkSim(t)
			if c.fault.Kind != "" {
				f := c.fault
				f.Provider = "gemini"
				if err := s.Inject(f); err != nil {
					t.Fatal(err)
				}
			}
			ctx := sdkCtx(t)
			client, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: FakeKey, Backend: genai.BackendGeminiAPI,
				HTTPOptions: genai.HTTPOptions{BaseURL: url + "/gemini/"}})
			if err != nil {
				t.Fatal(err)
			}
			var text string
			if c.stream {
				for res, e := range client.Models.GenerateContentStream(ctx, "gemini-2.5-flash", genai.Text("hello there"), nil) {
					if e != nil {
						err = e
						break
					}
					text += res.Text()
				}
			} else {
				var res *genai.GenerateContentResponse
				res, err = client.Models.GenerateContent(ctx, "gemini-2.5-flash", genai.Text("hello there"), nil)
				if err == nil {
					text = res.Text()
				}
			}
			if c.status == 0 {
				if err != nil || !strings.Contains(text, "gemini-2.5-flash") {
					t.Fatalf("err %v, text %q", err, text)
				}
			} else {
				var ae genai.APIError
				if !errors.As(err, &ae) || ae.Code != c.status || ae.Status != c.want {
					t.Fatalf("error %#v, want APIError %d %s", err, c.status, c.want)
				}
			}
			if n := count(); n != c.requests {
				t.Errorf("%d requests, want %d", n, c.requests)
			}
		})
	}
}
