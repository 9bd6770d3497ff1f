package proxy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// Anthropic's models on Bedrock take a prefill; Bedrock's other models,
// Chat Completions and Gemini do not.
func TestAcceptsPrefill(t *testing.T) {
	for target, want := range map[string]bool{
		"anthropic/claude-haiku-5-5":                                                                     true,
		"bedrock/anthropic.claude-haiku-5-5-v1:0":                                                        true,
		"bedrock/us-west-2/anthropic.claude-haiku-5-5-v1:0":                                              true,
		"bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0":                                           true,
		"bedrock/eu-central-1/global.anthropic.claude-haiku-5-5":                                         true,
		"bedrock/arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-haiku-5-5": true,
		"bedrock/amazon.nova-pro-v1:0":                                                                   false,
		"bedrock/us-west-2/meta.llama3-70b-instruct-v1:0":                                                false,
		"bedrock/us.meta.llama3-2-90b-instruct-v1:0":                                                     false,
		"openai/gpt-5.4-mini":                                                                            false,
		"gemini/gemini-2.5-flash":                                                                        false,
	} {
		tg, err := stream.ParseTarget(target)
		if err != nil {
			t.Fatal(err)
		}
		if got := acceptsPrefill(tg); got != want {
			t.Errorf("acceptsPrefill(%s) = %v, want %v", target, got, want)
		}
	}
}

// A stream cut after its text reached the caller continues on a Bedrock
// Claude target with the text sent as the assistant's turn, spliced into
// the caller's stream, which ends well.
func TestBrokenStreamContinuesOnBedrock(t *testing.T) {
	bedrockClaude := stream.Target{Provider: "bedrock", Model: "us-west-2/anthropic.claude-haiku-5-5-v1:0"}
	e := newEnv(t, chainConfig(false, openaiMini, bedrockClaude), nil)
	e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultCut})
	r := e.do(e.openAIReq(storyBody))
	s := readOpenAIStream(t, r.body)
	partial := e.partialText()
	if s.err != nil || !s.done || partial == "" {
		t.Fatalf("error %v done %v partial %q", s.err, s.done, partial)
	}
	if !strings.HasPrefix(s.text, partial) || len(s.text) <= len(partial) {
		t.Errorf("text %q, want %q and then the continuation", s.text, partial)
	}
	if a, b := e.requests("openai"), e.requests("bedrock"); a != 1 || b != 1 {
		t.Errorf("openai %d bedrock %d requests, want 1 and 1", a, b)
	}
	if got := r.header.Get(HeaderServedBy); got != "openai/gpt-5.4-mini" {
		t.Errorf("%s %q: the stream began on openai", HeaderServedBy, got)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.calls) != 2 {
		t.Fatalf("%d calls, want 2", len(e.calls))
	}
	c := e.calls[1]
	last := c.Messages[len(c.Messages)-1]
	if len(c.Chain) != 1 || c.Chain[0] != bedrockClaude || last.Role != "assistant" || last.Content != strings.TrimRight(partial, " \n\t\r") {
		t.Errorf("continuation %+v", c)
	}
}

// x-limitscope-served-by names the account that answered
// (provider@account/model), streamed, buffered and not streamed.
func TestServedByKeepsTheAccount(t *testing.T) {
	team := stream.Target{Provider: "openai", Account: "team", Model: "gpt-5.4-mini"}
	e := newEnv(t, chainConfig(false, team), func(o *Options) {
		r := o.Engine.Doer.(stream.Router)
		eps := map[string]stream.Endpoint{}
		for k, v := range r.Endpoints {
			eps[k] = v
		}
		eps[team.EndpointKey()] = r.Endpoints["openai"]
		r.Endpoints = eps
		o.Engine.Doer = r
	})
	for _, c := range []struct {
		name, body string
		buffered   bool
	}{
		{"streamed", `{"model":"chain","stream":true,"messages":[{"role":"user","content":"Say hello"}]}`, false},
		{"buffered", `{"model":"chain","stream":true,"messages":[{"role":"user","content":"Say hello"}]}`, true},
		{"not streamed", `{"model":"chain","messages":[{"role":"user","content":"Say hello"}]}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := e.openAIReq(c.body)
			if c.buffered {
				req.Header.Set(HeaderBuffered, "true")
			}
			r := e.do(req)
			if r.status != http.StatusOK || r.header.Get(HeaderServedBy) != "openai@team/gpt-5.4-mini" {
				t.Errorf("status %d, %s %q, want openai@team/gpt-5.4-mini", r.status, HeaderServedBy, r.header.Get(HeaderServedBy))
			}
		})
	}
}
