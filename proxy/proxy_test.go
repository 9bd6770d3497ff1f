package proxy

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// direct asks the simulator for the same conversation without the proxy.
func (e *env) direct(t stream.Target, msgs []stream.Message, maxTokens int) stream.Result {
	e.t.Helper()
	eps := map[string]stream.Endpoint{t.Provider: e.sim.Endpoint(t.Provider)}
	res := stream.Router{Endpoints: eps}.Do(context.Background(),
		stream.Request{Target: t, Messages: msgs, MaxTokens: maxTokens}, nil)
	if res.Err != nil {
		e.t.Fatalf("direct call: %v", res.Err)
	}
	return res
}

func checkHeaders(t *testing.T, r reply, servedBy string, attempts int) {
	t.Helper()
	if got := r.header.Get(HeaderServedBy); servedBy != "" && got != servedBy {
		t.Errorf("%s = %q, want %q", HeaderServedBy, got, servedBy)
	}
	if got := r.header.Get(HeaderAttempts); got != strconv.Itoa(attempts) {
		t.Errorf("%s = %q, want %d", HeaderAttempts, got, attempts)
	}
	if r.header.Get(HeaderRequestID) == "" {
		t.Errorf("no %s", HeaderRequestID)
	}
}

func checkFinalError(t *testing.T, r reply, status int) {
	t.Helper()
	if r.status != status {
		t.Errorf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if got := r.header.Get("X-Should-Retry"); got != "false" {
		t.Errorf("x-should-retry = %q, want false", got)
	}
}

var hello = []stream.Message{{Role: "user", Content: "Say hello"}}

func TestOpenAIPlain(t *testing.T) {
	e := newEnv(t, nil, nil)
	r := e.do(e.openAIReq(`{"model":"openai/gpt-5.4-mini","messages":[{"role":"user","content":"Say hello"}],"max_tokens":50}`))
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	checkHeaders(t, r, "openai/gpt-5.4-mini", 1)
	m := r.json(t)
	want := e.direct(stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}, hello, 50)
	if got := dig(m, "choices", 0, "message", "content"); got != want.Text || want.Text == "" {
		t.Errorf("content %q, want %q", got, want.Text)
	}
	if dig(m, "object") != "chat.completion" || dig(m, "model") != "gpt-5.4-mini" || dig(m, "choices", 0, "finish_reason") != openAIFinish(want.FinishReason) {
		t.Errorf("envelope %v", m)
	}
	if dig(m, "usage", "prompt_tokens") != float64(want.Usage.InputTokens) || dig(m, "usage", "completion_tokens") != float64(want.Usage.OutputTokens) {
		t.Errorf("usage %v, want %+v", m["usage"], want.Usage)
	}
	if n := e.requests("openai"); n != 2 { // the proxied call and the direct one
		t.Errorf("openai saw %d requests, want 2", n)
	}
}

// An OpenAI-format streaming request served by Anthropic: text and usage
// translated.
func TestOpenAIStreamServedByAnthropic(t *testing.T) {
	e := newEnv(t, nil, nil)
	r := e.do(e.openAIReq(`{"model":"anthropic/claude-haiku-5-5","messages":[{"role":"user","content":"Say hello"}],"max_completion_tokens":60,"stream":true,"stream_options":{"include_usage":true}}`))
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d %s: %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	checkHeaders(t, r, "anthropic/claude-haiku-5-5", 1)
	s := readOpenAIStream(t, r.body)
	want := e.direct(stream.Target{Provider: "anthropic", Model: "claude-haiku-5-5"}, hello, 60)
	if s.text != want.Text || s.text == "" {
		t.Errorf("text %q, want %q", s.text, want.Text)
	}
	if !s.done || s.err != nil || s.finish != openAIFinish(want.FinishReason) {
		t.Errorf("done=%v err=%v finish=%q", s.done, s.err, s.finish)
	}
	if s.usage == nil || s.usage["prompt_tokens"] != float64(want.Usage.InputTokens) || s.usage["completion_tokens"] != float64(want.Usage.OutputTokens) {
		t.Errorf("usage %v, want %+v", s.usage, want.Usage)
	}
	if s.model != "claude-haiku-5-5" {
		t.Errorf("model %q", s.model)
	}
}

// An Anthropic-format request served by OpenAI, plain and streaming.
func TestAnthropicServedByOpenAI(t *testing.T) {
	e := newEnv(t, nil, nil)
	want := e.direct(stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}, hello, 40)

	r := e.do(e.anthropicReq(`{"model":"openai/gpt-5.4-mini","max_tokens":40,"messages":[{"role":"user","content":[{"type":"text","text":"Say hello"}]}]}`))
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	checkHeaders(t, r, "openai/gpt-5.4-mini", 1)
	m := r.json(t)
	if dig(m, "type") != "message" || dig(m, "role") != "assistant" || dig(m, "content", 0, "type") != "text" ||
		dig(m, "content", 0, "text") != want.Text || dig(m, "stop_reason") != anthropicStop(want.FinishReason) || dig(m, "model") != "gpt-5.4-mini" {
		t.Errorf("message %v, want text %q", m, want.Text)
	}
	if dig(m, "usage", "input_tokens") != float64(want.Usage.InputTokens) || dig(m, "usage", "output_tokens") != float64(want.Usage.OutputTokens) {
		t.Errorf("usage %v, want %+v", m["usage"], want.Usage)
	}

	r = e.do(e.anthropicReq(`{"model":"openai/gpt-5.4-mini","max_tokens":40,"stream":true,"messages":[{"role":"user","content":"Say hello"}]}`))
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	s := readAnthropicStream(t, r.body)
	if s.text != want.Text || s.stop != anthropicStop(want.FinishReason) || s.err != nil {
		t.Errorf("stream text %q stop %q err %v, want %q", s.text, s.stop, s.err, want.Text)
	}
	if s.types[0] != "message_start" || s.types[1] != "content_block_start" || s.types[len(s.types)-1] != "message_stop" ||
		s.types[len(s.types)-2] != "message_delta" || s.types[len(s.types)-3] != "content_block_stop" {
		t.Errorf("events %v", s.types)
	}
	if s.usage["output_tokens"] != float64(want.Usage.OutputTokens) || s.usage["input_tokens"] != float64(want.Usage.InputTokens) {
		t.Errorf("usage %v, want %+v", s.usage, want.Usage)
	}
}

func TestAnthropicStreamNative(t *testing.T) {
	e := newEnv(t, nil, nil)
	r := e.do(e.anthropicReq(`{"model":"claude-sonnet-4-5","max_tokens":30,"stream":true,"system":"be brief","messages":[{"role":"user","content":"Say hello"}]}`))
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	checkHeaders(t, r, "anthropic/claude-sonnet-4-5", 1)
	s := readAnthropicStream(t, r.body)
	if s.text == "" || s.stop == "" || s.model != "claude-sonnet-4-5" {
		t.Errorf("stream %+v", s)
	}
}

// A quota error is not retried, keeps the provider's status, code and
// message, and tells the SDK not to retry.
func TestQuotaPassesThrough(t *testing.T) {
	e := newEnv(t, &Config{Aliases: map[string]Alias{"fast": {Name: "fast", Chain: []stream.Target{
		{Provider: "openai", Model: "gpt-5.4-mini"}, {Provider: "anthropic", Model: "claude-haiku-5-5"}}}}}, nil)
	e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultSpendCap, Count: 5})
	r := e.do(e.openAIReq(`{"model":"fast","messages":[{"role":"user","content":"hi"}]}`))
	checkFinalError(t, r, 429)
	checkHeaders(t, r, "", 1)
	m := r.json(t)
	if dig(m, "error", "code") != "insufficient_quota" || dig(m, "error", "type") != "insufficient_quota" ||
		!strings.Contains(dig(m, "error", "message").(string), "exceeded your current quota") {
		t.Errorf("error %v", m)
	}
	if n := e.requests("openai"); n != 1 {
		t.Errorf("openai saw %d requests, want 1", n)
	}
	if n := e.requests("anthropic"); n != 0 {
		t.Errorf("anthropic saw %d requests, want 0 (no failover on quota)", n)
	}
}

func TestQuotaAnthropicCaller(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.inject(sim.Fault{Provider: "anthropic", Kind: sim.FaultSpendCap})
	r := e.do(e.anthropicReq(`{"model":"anthropic/claude-haiku-5-5","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`))
	checkFinalError(t, r, 429)
	m := r.json(t)
	if dig(m, "type") != "error" || dig(m, "error", "type") != "rate_limit_error" ||
		dig(m, "error", "details", "error_code") != "enforced_spend_limit_reached" ||
		!strings.HasPrefix(dig(m, "error", "message").(string), "You have reached your API usage limits") {
		t.Errorf("error %v", m)
	}
	if n := e.requests("anthropic"); n != 1 {
		t.Errorf("anthropic saw %d requests, want 1", n)
	}
	// The cooldown now stops the next call without a request.
	r = e.do(e.anthropicReq(`{"model":"anthropic/claude-haiku-5-5","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`))
	checkFinalError(t, r, 429)
	if n := e.requests("anthropic"); n != 1 {
		t.Errorf("anthropic saw %d requests after the cooldown, want 1", n)
	}
	if ra := r.header.Get("Retry-After"); ra == "" {
		t.Errorf("no retry-after for a cooldown with a known end: %s", r.body)
	}
}

func TestDeferredIs429WithRetryAfter(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultRateLimit, RetryAfter: 10 * time.Minute})
	r := e.do(e.openAIReq(`{"model":"openai/gpt-5.4-mini","messages":[{"role":"user","content":"hi"}],"stream":true}`))
	checkFinalError(t, r, 429)
	ra, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || ra < 590 || ra > 601 {
		t.Errorf("retry-after %q, want about 600", r.header.Get("Retry-After"))
	}
	m := r.json(t)
	if dig(m, "error", "type") != "rate_limit_error" || !strings.Contains(dig(m, "error", "message").(string), "deferred") {
		t.Errorf("error %v", m)
	}
	if n := e.requests("openai"); n != 1 {
		t.Errorf("openai saw %d requests, want 1", n)
	}
}

// An error after the caller's stream began ends it with the dialect's
// error event, and is not retried (text cannot be taken back).
func TestMidStreamErrorEndsStream(t *testing.T) {
	t.Run("openai", func(t *testing.T) {
		e := newEnv(t, nil, nil)
		e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultMidStream})
		r := e.do(e.openAIReq(`{"model":"openai/gpt-5.4-mini","max_tokens":200,"messages":[{"role":"user","content":"Tell me a long story"}],"stream":true}`))
		if r.status != 200 {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		s := readOpenAIStream(t, r.body)
		if s.text == "" || s.err == nil || s.done || s.finish != "" {
			t.Errorf("text %q err %v done %v finish %q: want partial text, an error and no [DONE]", s.text, s.err, s.done, s.finish)
		}
		if s.err != nil && s.err["code"] != "server_is_overloaded" {
			t.Errorf("error %v", s.err)
		}
		if n := e.requests("openai"); n != 1 {
			t.Errorf("openai saw %d requests, want 1", n)
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		e := newEnv(t, nil, nil)
		e.inject(sim.Fault{Provider: "anthropic", Kind: sim.FaultMidStream})
		r := e.do(e.anthropicReq(`{"model":"anthropic/claude-haiku-5-5","max_tokens":200,"stream":true,"messages":[{"role":"user","content":"Tell me a long story"}]}`))
		s := readAnthropicStream(t, r.body)
		if s.text == "" || s.err == nil || s.err["type"] != "overloaded_error" {
			t.Errorf("text %q err %v", s.text, s.err)
		}
		for _, typ := range s.types {
			if typ == "message_stop" || typ == "message_delta" {
				t.Errorf("a broken stream was completed: %v", s.types)
			}
		}
		if s.types[len(s.types)-1] != "error" {
			t.Errorf("last event %q", s.types[len(s.types)-1])
		}
	})
	t.Run("cut, cross-dialect", func(t *testing.T) {
		e := newEnv(t, nil, nil)
		e.inject(sim.Fault{Provider: "anthropic", Kind: sim.FaultCut})
		r := e.do(e.openAIReq(`{"model":"anthropic/claude-haiku-5-5","max_tokens":200,"messages":[{"role":"user","content":"Tell me a long story"}],"stream":true}`))
		s := readOpenAIStream(t, r.body)
		if s.text == "" || s.err == nil || s.done {
			t.Errorf("text %q err %v done %v", s.text, s.err, s.done)
		}
	})
}

// Without streaming, nothing reached the caller yet: a broken stream is
// retried like any transient error.
func TestMidStreamRetriedWhenNotStreaming(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultMidStream})
	r := e.do(e.openAIReq(`{"model":"openai/gpt-5.4-mini","messages":[{"role":"user","content":"Say hello"}]}`))
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	checkHeaders(t, r, "openai/gpt-5.4-mini", 2)
	want := e.direct(stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}, hello, stream.DefaultMaxTokens)
	if got := dig(r.json(t), "choices", 0, "message", "content"); got != want.Text {
		t.Errorf("content %q, want the retry's answer only %q", got, want.Text)
	}
}

// An alias fails over from one dialect to the other.
func TestAliasFailover(t *testing.T) {
	one := retry.Policy{TriesPerTarget: 1}
	cfg := &Config{Aliases: map[string]Alias{"fast": {Name: "fast", Policy: &one, Chain: []stream.Target{
		{Provider: "openai", Model: "gpt-5.4-mini"}, {Provider: "anthropic", Model: "claude-haiku-5-5"}}}}}
	e := newEnv(t, cfg, nil)
	e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultOverload, Count: 10})
	r := e.do(e.openAIReq(`{"model":"fast","messages":[{"role":"user","content":"Say hello"}],"stream":true}`))
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	checkHeaders(t, r, "anthropic/claude-haiku-5-5", 2)
	s := readOpenAIStream(t, r.body)
	want := e.direct(stream.Target{Provider: "anthropic", Model: "claude-haiku-5-5"}, hello, stream.DefaultMaxTokens)
	if s.text != want.Text || s.model != "claude-haiku-5-5" || !s.done {
		t.Errorf("text %q model %q done %v, want %q", s.text, s.model, s.done, want.Text)
	}
	if a, b := e.requests("openai"), e.requests("anthropic"); a != 1 || b != 2 {
		t.Errorf("requests openai %d anthropic %d, want 1 and 2 (one direct)", a, b)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.calls) != 1 || e.calls[0].Route != "fast" || e.calls[0].Client != "OpenAI/Python 2.8.1" || len(e.calls[0].Chain) != 2 {
		t.Errorf("calls %+v", e.calls)
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t, nil, nil)
	for _, c := range []struct {
		name, key, hdr string
		anthropic      bool
	}{
		{"openai none", "", "", false},
		{"openai wrong", "sk-wrong", "Authorization", false},
		{"anthropic wrong", "sk-ant-wrong", "X-Api-Key", true},
		{"provider key", "sim-key-not-a-secret", "Authorization", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r *http.Request
			if c.anthropic {
				r = e.anthropicReq(`{"model":"claude-haiku-5-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
			} else {
				r = e.openAIReq(`{"model":"gpt-5.4-mini","messages":[{"role":"user","content":"hi"}]}`)
			}
			r.Header.Del("Authorization")
			r.Header.Del("X-Api-Key")
			if c.hdr == "Authorization" {
				r.Header.Set("Authorization", "Bearer "+c.key)
			} else if c.hdr != "" {
				r.Header.Set(c.hdr, c.key)
			}
			resp := e.do(r)
			checkFinalError(t, resp, 401)
			m := resp.json(t)
			if c.anthropic && dig(m, "error", "type") != "authentication_error" {
				t.Errorf("body %v", m)
			}
			if !c.anthropic && dig(m, "error", "code") != "invalid_api_key" {
				t.Errorf("body %v", m)
			}
			if strings.Contains(string(resp.body), testToken) {
				t.Error("the token leaked")
			}
		})
	}
	if a, b := e.requests("openai"), e.requests("anthropic"); a+b != 0 {
		t.Errorf("providers saw %d requests", a+b)
	}
	// The Anthropic SDK's Authorization: Bearer (auth_token) works too.
	r := e.anthropicReq(`{"model":"claude-haiku-5-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	r.Header.Del("X-Api-Key")
	r.Header.Set("Authorization", "Bearer "+testToken)
	if resp := e.do(r); resp.status != 200 {
		t.Errorf("bearer on /v1/messages: %d %s", resp.status, resp.body)
	}
}

func TestOriginAndHost(t *testing.T) {
	e := newEnv(t, &Config{AllowedHosts: []string{"devbox.lan"}}, nil)
	body := `{"model":"gpt-5.4-mini","messages":[{"role":"user","content":"hi"}]}`
	r := e.openAIReq(body)
	r.Header.Set("Origin", "https://evil.example")
	resp := e.do(r)
	checkFinalError(t, resp, 403)
	for host, want := range map[string]int{
		"evil.example:4000": 403, "rebind.attacker.test": 403, "localhost:4000": 200, "127.0.0.1": 200,
		"[::1]:4000": 200, "devbox.lan:4000": 200, "DEVBOX.LAN": 200,
	} {
		r := e.openAIReq(body)
		r.Host = host
		resp := e.do(r)
		if resp.status != want {
			t.Errorf("Host %q: status %d, want %d: %s", host, resp.status, want, resp.body)
		}
	}
	if n := e.requests("openai"); n != 5 {
		t.Errorf("openai saw %d requests, want 5 (refused ones never sent)", n)
	}
}

// What cannot be translated is refused before any provider is called.
func TestRefusedBeforeAnyCall(t *testing.T) {
	e := newEnv(t, nil, nil)
	for name, c := range map[string]struct {
		anthropic bool
		body      string
		param     string
	}{
		"openai tools":        {false, `{"model":"gpt-5.4-mini","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}`, "tools"},
		"openai image":        {false, `{"model":"gpt-5.4-mini","messages":[{"role":"user","content":[{"type":"text","text":"what"},{"type":"image_url","image_url":{"url":"data:"}}]}]}`, "messages[0].content[1].type"},
		"openai tool message": {false, `{"model":"gpt-5.4-mini","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"x","content":"1"}]}`, "messages[1].tool_call_id"},
		"openai n":            {false, `{"model":"gpt-5.4-mini","n":2,"messages":[{"role":"user","content":"hi"}]}`, "n"},
		"openai json schema":  {false, `{"model":"gpt-5.4-mini","response_format":{"type":"json_schema"},"messages":[{"role":"user","content":"hi"}]}`, "response_format"},
		"anthropic tools":     {true, `{"model":"claude-haiku-5-5","max_tokens":5,"tools":[{"name":"f","input_schema":{}}],"messages":[{"role":"user","content":"hi"}]}`, ""},
		"anthropic image":     {true, `{"model":"claude-haiku-5-5","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`, ""},
		"anthropic thinking":  {true, `{"model":"claude-haiku-5-5","max_tokens":5,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`, ""},
		"anthropic no max":    {true, `{"model":"claude-haiku-5-5","messages":[{"role":"user","content":"hi"}]}`, ""},
		"not json":            {false, `{"model":`, ""},
		"unknown model":       {false, `{"model":"llama-3","messages":[{"role":"user","content":"hi"}]}`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			var r *http.Request
			if c.anthropic {
				r = e.anthropicReq(c.body)
			} else {
				r = e.openAIReq(c.body)
			}
			resp := e.do(r)
			if resp.status != 400 && resp.status != 404 {
				t.Errorf("status %d: %s", resp.status, resp.body)
			}
			if resp.header.Get("X-Should-Retry") != "false" {
				t.Error("no x-should-retry: false")
			}
			m := resp.json(t)
			if c.anthropic {
				if dig(m, "type") != "error" || dig(m, "error", "type") != "invalid_request_error" {
					t.Errorf("body %v", m)
				}
			} else if c.param != "" && dig(m, "error", "param") != c.param {
				t.Errorf("param %v, want %s: %v", dig(m, "error", "param"), c.param, m)
			}
		})
	}
	var total int64
	for _, p := range sim.Providers() {
		total += e.requests(p)
	}
	if total != 0 {
		t.Errorf("providers saw %d requests", total)
	}
}

// Fields that are safe to drop are named in a header, not silently lost.
func TestIgnoredFieldsReported(t *testing.T) {
	e := newEnv(t, nil, nil)
	r := e.do(e.openAIReq(`{"model":"gpt-5.4-mini","user":"u1","seed":3,"temperature":0.2,"messages":[{"role":"user","content":"hi"}]}`))
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if got := r.header.Get(HeaderIgnored); got != "seed,user" {
		t.Errorf("%s = %q", HeaderIgnored, got)
	}
}

func TestModels(t *testing.T) {
	cfg := &Config{
		Aliases: map[string]Alias{"fast": {Name: "fast", Chain: []stream.Target{{Provider: "openai", Model: "gpt-5.4-mini"}, {Provider: "anthropic", Model: "claude-haiku-5-5"}}},
			"gem": {Name: "gem", Chain: []stream.Target{{Provider: "gemini", Model: "gemini-2.5-flash"}}}},
		Models: []stream.Target{{Provider: "groq", Model: "llama-4"}},
	}
	e := newEnv(t, cfg, func(o *Options) { o.Available = func(p string) bool { return p != "gemini" } })
	get := func(path string, anthropic bool) reply {
		r, _ := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
		r.Header.Set("Authorization", "Bearer "+testToken)
		if anthropic {
			r.Header.Set("Anthropic-Version", "2023-06-01")
		}
		return e.do(r)
	}
	r := get("/v1/models", false)
	m := r.json(t)
	var ids []string
	for _, d := range m["data"].([]any) {
		ids = append(ids, dig(d, "id").(string))
		if dig(d, "object") != "model" {
			t.Errorf("entry %v", d)
		}
	}
	// The aliases, the config's targets, then every keyed provider's
	// default model (gemini has no key here).
	if !strings.HasPrefix(strings.Join(ids, " "), "fast openai/gpt-5.4-mini anthropic/claude-haiku-5-5 groq/llama-4 ") || m["object"] != "list" {
		t.Errorf("models %v", m)
	}
	for _, p := range stream.Providers() {
		want := p.Name != "gemini" && p.DefaultModel != ""
		if got := slices.Contains(ids, p.Name+"/"+p.DefaultModel); got != want {
			t.Errorf("%s/%s listed %v, want %v: %v", p.Name, p.DefaultModel, got, want, ids)
		}
	}
	m = get("/v1/models", true).json(t)
	if dig(m, "data", 0, "type") != "model" || dig(m, "first_id") != "fast" || dig(m, "has_more") != false {
		t.Errorf("anthropic models %v", m)
	}
	if r := get("/v1/models/fast", false); r.status != 200 || r.json(t)["id"] != "fast" {
		t.Errorf("one model: %d %s", r.status, r.body)
	}
	if r := get("/v1/models/nope", true); r.status != 404 || dig(r.json(t), "error", "type") != "not_found_error" {
		t.Errorf("missing model: %d %s", r.status, r.body)
	}
	// gemini has no key: its alias is refused with the variable to set.
	resp := e.do(e.openAIReq(`{"model":"gem","messages":[{"role":"user","content":"hi"}]}`))
	if resp.status != 400 || !strings.Contains(string(resp.body), "GOOGLE_API_KEY") {
		t.Errorf("alias without key: %d %s", resp.status, resp.body)
	}
}

func TestUnknownPathAndMethod(t *testing.T) {
	e := newEnv(t, nil, nil)
	r, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/embeddings", strings.NewReader("{}"))
	r.Header.Set("Authorization", "Bearer "+testToken)
	if resp := e.do(r); resp.status != 404 || resp.header.Get("X-Should-Retry") != "false" {
		t.Errorf("unknown path: %d", resp.status)
	}
	r, _ = http.NewRequest(http.MethodGet, e.srv.URL+"/v1/chat/completions", nil)
	r.Header.Set("Authorization", "Bearer "+testToken)
	if resp := e.do(r); resp.status != 405 {
		t.Errorf("GET completions: %d", resp.status)
	}
}
