package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

func chainConfig(buffered bool, targets ...stream.Target) *Config {
	one := retry.Policy{TriesPerTarget: 1}
	return &Config{Aliases: map[string]Alias{"chain": {Name: "chain", Policy: &one, Chain: targets, Buffered: buffered}}}
}

var (
	openaiMini  = stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	claudeHaiku = stream.Target{Provider: "anthropic", Model: "claude-haiku-5-5"}
)

const storyBody = `{"model":"chain","messages":[{"role":"user","content":"Tell me a long story"}],"max_tokens":300,"stream":true}`

// partialText is the text the broken attempt had sent.
func (e *env) partialText() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range e.events {
		if ev.Kind == retry.EventAttemptEnd && ev.Attempt.PartialText != "" {
			return ev.Attempt.PartialText
		}
	}
	return ""
}

// A stream cut after its text reached the caller goes on at the next
// target that accepts a prefill (Anthropic's Messages), with the text sent
// as the assistant's turn; only the new text is spliced into the caller's
// stream, which ends well.
func TestBrokenStreamContinuesWithPrefill(t *testing.T) {
	for _, kind := range []string{sim.FaultCut, sim.FaultMidStream} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, chainConfig(false, openaiMini, claudeHaiku), nil)
			e.inject(sim.Fault{Provider: "openai", Kind: kind})
			s := readOpenAIStream(t, e.do(e.openAIReq(storyBody)).body)
			partial := e.partialText()
			if s.err != nil || !s.done || partial == "" {
				t.Fatalf("error %v done %v partial %q", s.err, s.done, partial)
			}
			if !strings.HasPrefix(s.text, partial) || len(s.text) <= len(partial) || !strings.Contains(s.text[len(partial):], "claude-haiku-5-5") {
				t.Errorf("text %q, want %q and then Claude's continuation", s.text, partial)
			}
			if a, b := e.requests("openai"), e.requests("anthropic"); a != 1 || b != 1 {
				t.Errorf("openai %d anthropic %d requests, want 1 and 1", a, b)
			}
			e.mu.Lock()
			defer e.mu.Unlock()
			if len(e.calls) != 2 {
				t.Fatalf("%d calls, want 2", len(e.calls))
			}
			c := e.calls[1]
			last := c.Messages[len(c.Messages)-1]
			if len(c.Chain) != 1 || c.Chain[0] != claudeHaiku || last.Role != "assistant" || last.Content != strings.TrimRight(partial, " \n\t\r") {
				t.Errorf("continuation %+v", c)
			}
		})
	}
}

// Where the next target refuses a prefill (Chat Completions), the stream
// ends with the error event as before, and it is not called.
func TestBrokenStreamNoPrefillTarget(t *testing.T) {
	e := newEnv(t, chainConfig(false, claudeHaiku, openaiMini), nil)
	e.inject(sim.Fault{Provider: "anthropic", Kind: sim.FaultCut})
	s := readOpenAIStream(t, e.do(e.openAIReq(storyBody)).body)
	if s.err == nil || s.done || s.text == "" {
		t.Errorf("error %v done %v text %q", s.err, s.done, s.text)
	}
	if a, b := e.requests("openai"), e.requests("anthropic"); a != 0 || b != 1 {
		t.Errorf("openai %d anthropic %d requests, want 0 and 1", a, b)
	}
}

// Buffered (an alias's setting or the request's header), a streamed answer
// is held until complete: a cut after text is retried like any failure,
// and the caller gets only the answer that completed.
func TestBufferedStream(t *testing.T) {
	for _, c := range []struct {
		name   string
		alias  bool
		header string
		want   bool
	}{
		{"alias", true, "", true},
		{"header", false, "true", true},
		{"header off beats alias", true, "false", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := retrytest.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
			e := newEnv(t, chainConfig(c.alias, openaiMini, openaiMini), fakeTime(clock))
			e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultCut})
			req := e.openAIReq(storyBody)
			if c.header != "" {
				req.Header.Set(HeaderBuffered, c.header)
			}
			r := e.do(req)
			s := readOpenAIStream(t, r.body)
			if got := r.header.Get(HeaderBuffered) == "true"; got != c.want {
				t.Errorf("%s: %v, want %v", HeaderBuffered, got, c.want)
			}
			if c.want {
				if s.err != nil || !s.done || !strings.Contains(s.text, "gpt-5.4-mini") || r.header.Get(HeaderAttempts) != "2" {
					t.Errorf("error %v done %v text %q attempts %s", s.err, s.done, s.text, r.header.Get(HeaderAttempts))
				}
				if n := e.requests("openai"); n != 2 {
					t.Errorf("openai saw %d requests, want 2", n)
				}
				return
			}
			if s.err == nil || s.done {
				t.Errorf("unbuffered: error %v done %v", s.err, s.done)
			}
			if n := e.requests("openai"); n != 1 {
				t.Errorf("openai saw %d requests, want 1", n)
			}
		})
	}
}

// A buffered Anthropic-dialect stream carries the real input token count in
// message_start (the usage is known before the stream is written).
func TestBufferedAnthropicInputTokens(t *testing.T) {
	e := newEnv(t, nil, nil)
	req := e.anthropicReq(`{"model":"anthropic/claude-haiku-5-5","max_tokens":40,"stream":true,"messages":[{"role":"user","content":"Say hello"}]}`)
	req.Header.Set(HeaderBuffered, "true")
	body := e.do(req).body
	evs := parseSSE(t, body)
	if len(evs) == 0 || evs[0].event != "message_start" {
		t.Fatalf("events %v", evs)
	}
	in := dig(obj(t, evs[0].data), "message", "usage", "input_tokens")
	s := readAnthropicStream(t, body)
	if in == float64(0) || in == nil || in != s.usage["input_tokens"] {
		t.Errorf("message_start input_tokens %v, message_delta's %v", in, s.usage["input_tokens"])
	}
}

// The continuation for an Anthropic-dialect caller and for the Responses
// API: one stream that ends well, the partial text then the new text.
func TestBrokenStreamContinuesOtherDialects(t *testing.T) {
	t.Run("messages", func(t *testing.T) {
		e := newEnv(t, chainConfig(false, openaiMini, claudeHaiku), nil)
		e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultMidStream})
		s := readAnthropicStream(t, e.do(e.anthropicReq(`{"model":"chain","max_tokens":300,"stream":true,"messages":[{"role":"user","content":"Tell me a long story"}]}`)).body)
		partial := e.partialText()
		if s.err != nil || s.types[len(s.types)-1] != "message_stop" || partial == "" || !strings.HasPrefix(s.text, partial) || len(s.text) <= len(partial) {
			t.Errorf("error %v events %v text %q partial %q", s.err, s.types, s.text, partial)
		}
	})
	t.Run("responses", func(t *testing.T) {
		e := newEnv(t, chainConfig(false, openaiMini, claudeHaiku), nil)
		e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultCut})
		p := responsesParams("chain", "Tell me a long story")
		r := e.responsesStream(t.Context(), p)
		partial := e.partialText()
		if r.err != nil || r.terminal != "response.completed" || partial == "" || !strings.HasPrefix(r.text, partial) ||
			r.outputText != r.text || r.model != "claude-haiku-5-5" {
			t.Errorf("err %v terminal %q text %q output %q partial %q model %q", r.err, r.terminal, r.text, r.outputText, partial, r.model)
		}
		if a, b := e.requests("openai"), e.requests("anthropic"); a != 1 || b != 1 {
			t.Errorf("openai %d anthropic %d requests, want 1 and 1", a, b)
		}
	})
}

// The continuation spends what is left of the call's attempt budget: with
// none left, the stream ends with the error event and nothing more is sent.
func TestBrokenStreamBudgetSpent(t *testing.T) {
	one := retry.Policy{TriesPerTarget: 1, MaxAttempts: 1}
	cfg := &Config{Aliases: map[string]Alias{"chain": {Name: "chain", Policy: &one, Chain: []stream.Target{openaiMini, claudeHaiku}}}}
	e := newEnv(t, cfg, nil)
	e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultCut})
	s := readOpenAIStream(t, e.do(e.openAIReq(storyBody)).body)
	if s.err == nil || s.done || s.text == "" {
		t.Errorf("error %v done %v text %q", s.err, s.done, s.text)
	}
	if a, b := e.requests("openai"), e.requests("anthropic"); a != 1 || b != 0 {
		t.Errorf("openai %d anthropic %d requests, want 1 and 0", a, b)
	}
}
