package proxy

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// fakeTime puts the engine and the handler on one fake clock.
func fakeTime(clock *retrytest.FakeClock) func(*Options) {
	return func(o *Options) { o.Engine.Clock, o.Now = clock, clock.Now }
}

// threeTries is the Vercel AI SDK's loop: it retries a 503 twice more,
// whatever x-should-retry says.
func (e *env) threeTries(body string) []reply {
	var out []reply
	for range 3 {
		r := e.do(e.openAIReq(body))
		out = append(out, r)
		if r.status != 503 {
			break
		}
	}
	return out
}

// A client that retries a final 503 is answered from that failure: one
// call's attempt budget upstream (counted at the simulator), not three. A
// repeat after the window goes upstream again; so does another body.
func TestReplayStackedRetries(t *testing.T) {
	clock := retrytest.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	three := retry.Policy{MaxAttempts: 3, TriesPerTarget: 3}
	cfg := &Config{Policy: three}
	const body = `{"model":"openai/gpt-5.4-mini","messages":[{"role":"user","content":"hi"}]}`
	e := newEnv(t, cfg, fakeTime(clock))
	e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultOverload, Count: 100})
	rs := e.threeTries(body)
	if len(rs) != 3 {
		t.Fatalf("%d replies, want 3", len(rs))
	}
	first := rs[0]
	checkFinalError(t, first, 503)
	if first.header.Get(HeaderReplayed) != "" {
		t.Errorf("the first answer is marked replayed")
	}
	for _, r := range rs[1:] {
		checkFinalError(t, r, 503)
		if got := r.header.Get(HeaderReplayed); got == "" || got != first.header.Get(HeaderRequestID) {
			t.Errorf("%s = %q, want the first call's id %q", HeaderReplayed, got, first.header.Get(HeaderRequestID))
		}
		if !bytes.Equal(r.body, first.body) || r.header.Get(HeaderAttempts) != "0" {
			t.Errorf("replayed %s (attempts %s), want %s", r.body, r.header.Get(HeaderAttempts), first.body)
		}
	}
	if n := e.requests("openai"); n != 3 {
		t.Errorf("openai saw %d requests, want 3 (one call's budget)", n)
	}
	// Another body is another request.
	checkFinalError(t, e.do(e.openAIReq(`{"model":"openai/gpt-5.4-mini","messages":[{"role":"user","content":"hello"}]}`)), 503)
	if n := e.requests("openai"); n != 6 {
		t.Errorf("openai saw %d requests, want 6", n)
	}
	// After the window: upstream again.
	clock.Advance(DefaultReplayWindow)
	r := e.do(e.openAIReq(body))
	checkFinalError(t, r, 503)
	if r.header.Get(HeaderReplayed) != "" {
		t.Errorf("replayed after the window")
	}
	if n := e.requests("openai"); n != 9 {
		t.Errorf("openai saw %d requests, want 9", n)
	}
}

// The window is no longer than the wait the failure suggested, and a
// replay's retry-after counts down from the original.
func TestReplayWindowIsTheSuggestedWait(t *testing.T) {
	clock := retrytest.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	e := newEnv(t, &Config{Policy: retry.Policy{MaxAttempts: 1, MaxWait: time.Second}}, fakeTime(clock))
	e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultRateLimit, RetryAfter: 4 * time.Second, Count: 100})
	const body = `{"model":"openai/gpt-5.4-mini","messages":[{"role":"user","content":"hi"}]}`
	first := e.do(e.openAIReq(body))
	if first.status != 429 || first.header.Get("Retry-After") != "4" {
		t.Fatalf("first: %d retry-after %q %s", first.status, first.header.Get("Retry-After"), first.body)
	}
	clock.Advance(2 * time.Second)
	r := e.do(e.openAIReq(body))
	if r.header.Get(HeaderReplayed) == "" || r.header.Get("Retry-After") != "2" {
		t.Errorf("after 2s: replayed %q retry-after %q", r.header.Get(HeaderReplayed), r.header.Get("Retry-After"))
	}
	clock.Advance(2 * time.Second)
	if r := e.do(e.openAIReq(body)); r.header.Get(HeaderReplayed) != "" {
		t.Errorf("replayed after the suggested wait")
	}
	if n := e.requests("openai"); n != 2 {
		t.Errorf("openai saw %d requests, want 2", n)
	}
}

// Off (Options.ReplayWindow < 0, or replay_window 0 in the file), each
// retry is a call of its own.
func TestReplayOff(t *testing.T) {
	for name, tweak := range map[string]func(*Options){
		"option": func(o *Options) { o.ReplayWindow = -1 },
		"config": func(o *Options) { o.Config.ReplayWindow = new(time.Duration) },
	} {
		t.Run(name, func(t *testing.T) {
			clock := retrytest.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
			e := newEnv(t, &Config{Policy: retry.Policy{MaxAttempts: 2, TriesPerTarget: 2}}, func(o *Options) {
				fakeTime(clock)(o)
				tweak(o)
			})
			e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultOverload, Count: 100})
			if rs := e.threeTries(`{"model":"openai/gpt-5.4-mini","messages":[{"role":"user","content":"hi"}]}`); len(rs) != 3 || rs[2].header.Get(HeaderReplayed) != "" {
				t.Errorf("%d replies, the last replayed %q", len(rs), rs[len(rs)-1].header.Get(HeaderReplayed))
			}
			if n := e.requests("openai"); n != 6 {
				t.Errorf("openai saw %d requests, want 6", n)
			}
		})
	}
}

// An OpenAI-dialect caller never gets a status of another API's own:
// Anthropic's 529 overload reaches it as 503 (an Anthropic caller still
// gets 529).
func TestNoAnthropicStatusForOpenAICaller(t *testing.T) {
	clock := retrytest.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	e := newEnv(t, &Config{Policy: retry.Policy{MaxAttempts: 1}}, fakeTime(clock))
	e.inject(sim.Fault{Provider: "anthropic", Kind: sim.FaultOverload, Count: 100})
	r := e.do(e.openAIReq(`{"model":"anthropic/claude-haiku-5-5","messages":[{"role":"user","content":"hi"}]}`))
	checkFinalError(t, r, 503)
	if typ := dig(r.json(t), "error", "type"); typ != "service_unavailable_error" {
		t.Errorf("type %v", typ)
	}
	r = e.do(e.anthropicReq(`{"model":"anthropic/claude-haiku-5-5","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`))
	checkFinalError(t, r, 529)
	if typ := dig(r.json(t), "error", "type"); typ != "overloaded_error" {
		t.Errorf("type %v", typ)
	}
	if got := fromStream(&stream.Error{Class: stream.ClassOverload, Status: 498}, stream.DialectResponses, stream.DialectOpenAI).status; got != 503 {
		t.Errorf("Groq's 498 to a Responses caller: %d", got)
	}
}

// A streamed request that failed before its stream began is replayed too
// (the Vercel AI SDK's streamText retries it the same way).
func TestReplayStreamedRequest(t *testing.T) {
	clock := retrytest.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	e := newEnv(t, &Config{Policy: retry.Policy{MaxAttempts: 2, TriesPerTarget: 2}}, fakeTime(clock))
	e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultOverload, Count: 100})
	rs := e.threeTries(`{"model":"openai/gpt-5.4-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if len(rs) != 3 || rs[1].header.Get(HeaderReplayed) == "" || rs[2].header.Get(HeaderReplayed) == "" {
		t.Errorf("%d replies, replayed %q %q", len(rs), rs[len(rs)-1].header.Get(HeaderReplayed), rs[0].header.Get(HeaderReplayed))
	}
	if n := e.requests("openai"); n != 2 {
		t.Errorf("openai saw %d requests, want 2", n)
	}
}

// The same request from another address is another caller's; from
// another port of the same address (a new connection), the same caller's.
func TestReplayKey(t *testing.T) {
	req := func(addr, path string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, path, nil)
		r.RemoteAddr = addr
		return r
	}
	body := []byte(`{"model":"m"}`)
	k := replayKey(req("127.0.0.1:5000", "/v1/chat/completions"), body)
	if replayKey(req("127.0.0.1:5001", "/v1/chat/completions"), body) != k {
		t.Error("a new connection from the same address is another caller")
	}
	if replayKey(req("127.0.0.2:5000", "/v1/chat/completions"), body) == k ||
		replayKey(req("127.0.0.1:5000", "/v1/responses"), body) == k ||
		replayKey(req("127.0.0.1:5000", "/v1/chat/completions"), []byte(`{"model":"n"}`)) == k {
		t.Error("another address, route or body has the same key")
	}
}
