package proxy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// Every simulated provider serves an OpenAI-format and an Anthropic-format
// request, streamed, with the same text it gives directly.
func TestEveryProviderBothDialects(t *testing.T) {
	e := newEnv(t, nil, nil)
	models := map[string]string{"openai": "gpt-5.4-mini", "anthropic": "claude-haiku-5-5", "gemini": "gemini-2.5-flash",
		"groq": "llama-3.3-70b-versatile", "deepseek": "deepseek-chat", "mistral": "mistral-small-latest", "xai": "grok-4"}
	for _, p := range sim.Providers() {
		tg := stream.Target{Provider: p, Model: models[p]}
		if tg.Model == "" {
			info, _ := stream.Provider(p)
			tg.Model = info.DefaultModel // the simulator knows it
		}
		want := e.direct(tg, hello, 40)
		r := e.do(e.openAIReq(`{"model":"` + tg.String() + `","max_tokens":40,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Say hello"}]}`))
		s := readOpenAIStream(t, r.body)
		if r.status != 200 || s.text != want.Text || !s.done || s.usage == nil || s.usage["completion_tokens"] != float64(want.Usage.OutputTokens) {
			t.Errorf("%s via OpenAI format: %d text %q want %q usage %v", p, r.status, s.text, want.Text, s.usage)
		}
		r = e.do(e.anthropicReq(`{"model":"` + tg.String() + `","max_tokens":40,"stream":true,"messages":[{"role":"user","content":"Say hello"}]}`))
		as := readAnthropicStream(t, r.body)
		if r.status != 200 || as.text != want.Text || as.types[len(as.types)-1] != "message_stop" || as.usage["output_tokens"] != float64(want.Usage.OutputTokens) {
			t.Errorf("%s via Anthropic format: %d text %q want %q", p, r.status, as.text, want.Text)
		}
	}
}

// A target whose provider has no key is skipped in an alias.
func TestAliasSkipsProvidersWithoutKey(t *testing.T) {
	cfg := &Config{Aliases: map[string]Alias{"x": {Name: "x", Chain: []stream.Target{
		{Provider: "gemini", Model: "gemini-2.5-flash"}, {Provider: "openai", Model: "gpt-5.4-mini"}}}}}
	e := newEnv(t, cfg, func(o *Options) { o.Available = func(p string) bool { return p != "gemini" } })
	r := e.do(e.openAIReq(`{"model":"x","messages":[{"role":"user","content":"hi"}]}`))
	if r.status != 200 || r.header.Get(HeaderServedBy) != "openai/gpt-5.4-mini" {
		t.Errorf("%d %s: %s", r.status, r.header.Get(HeaderServedBy), r.body)
	}
	if n := e.requests("gemini"); n != 0 {
		t.Errorf("gemini saw %d requests", n)
	}
	r = e.do(e.openAIReq(`{"model":"gemini/gemini-2.5-flash","messages":[{"role":"user","content":"hi"}]}`))
	if r.status != 400 || !strings.Contains(string(r.body), "GOOGLE_API_KEY") {
		t.Errorf("no key: %d %s", r.status, r.body)
	}
}

func TestBodyTooLarge(t *testing.T) {
	e := newEnv(t, nil, func(o *Options) { o.MaxBody = 100 })
	r := e.do(e.anthropicReq(`{"model":"claude-haiku-5-5","max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("x", 200) + `"}]}`))
	checkFinalError(t, r, http.StatusRequestEntityTooLarge)
	if dig(r.json(t), "error", "type") != "request_too_large" {
		t.Errorf("body %s", r.body)
	}
}
