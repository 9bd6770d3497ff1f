package proxy

import (
	"context"
	"errors"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// tierConfig is a chain whose entries are the same model at flex, then at
// the default tier (the configuration's provider/model+tier spelling).
func tierConfig(t *testing.T) *Config {
	c, err := ParseConfig([]byte(`{"aliases": {"cheap": {"chain": ["openai/gpt-5.4-mini", "openai/gpt-5.4-mini+default"], "policy": {"max_attempts": 5}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if ch := c.Aliases["cheap"].Chain; ch[1].Tier != "default" || ch[0].Tier != "" {
		t.Fatalf("chain %v", ch)
	}
	return c
}

// TestSDKTierPassThrough: openai-go's service_tier reaches the upstream in
// its dialect (a flex_capacity fault, which hits only flex requests, hits
// it), the call fails over to the chain's default-tier entry, and the
// answer names the tier that served it.
func TestSDKTierPassThrough(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, tierConfig(t), nil)
	e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultFlexCapacity, Count: 10})
	c := e.openAI(testToken)
	p := openAIParams("cheap")
	p.ServiceTier = "flex"
	res, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if res.ServiceTier != "default" {
		t.Errorf("service_tier %q, want default (the fallback's)", res.ServiceTier)
	}
	e.mu.Lock()
	var classes []stream.Class
	for _, ev := range e.events {
		if ev.Kind == retry.EventAttemptEnd {
			classes = append(classes, ev.Attempt.Class)
		}
	}
	e.mu.Unlock()
	if len(classes) != 4 || classes[0] != stream.ClassFlexCapacity || classes[3] != stream.ClassOK {
		t.Errorf("attempt classes %v, want 3 flex_capacity then ok", classes)
	}

	// Streamed, a priority request downgraded: the finish chunk says so.
	e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultTierDowngrade})
	p = openAIParams("openai/gpt-5.4-mini")
	p.ServiceTier = "priority"
	s := c.Chat.Completions.NewStreaming(ctx, p)
	defer s.Close()
	served := ""
	for s.Next() {
		if st := s.Current().ServiceTier; st != "" {
			served = string(st)
		}
	}
	if s.Err() != nil || served != "default" {
		t.Errorf("stream: %v, served %q, want default", s.Err(), served)
	}

	// A tier OpenAI does not document is the caller's 400, before any
	// upstream request.
	before := e.requests("openai")
	p.ServiceTier = "turbo"
	_, err = c.Chat.Completions.New(ctx, p)
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || e.requests("openai") != before {
		t.Errorf("unknown tier: %v (upstream requests %d -> %d)", err, before, e.requests("openai"))
	}
}

// TestSDKAnthropicTier: anthropic-sdk-go's service_tier is passed on to an
// OpenAI target in OpenAI's words, and the served tier comes back as
// Anthropic's usage.service_tier.
func TestSDKAnthropicTier(t *testing.T) {
	e := newEnv(t, sdkConfig(), nil)
	c := e.anthropic(testToken)
	p := anthropicParams("openai/gpt-5.4-mini")
	p.ServiceTier = anthropic.MessageNewParamsServiceTierStandardOnly
	m, err := c.Messages.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if m.Usage.ServiceTier != anthropic.UsageServiceTierStandard {
		t.Errorf("usage.service_tier %q", m.Usage.ServiceTier)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if n := len(e.calls); n != 1 || e.calls[0].Chain[0].Tier != "default" {
		t.Errorf("calls %+v: want the chain's target asking OpenAI's default tier", e.calls)
	}
}

// TestTargetTier checks each caller tier's nearest tier at each provider.
func TestTargetTier(t *testing.T) {
	for _, c := range []struct{ caller, provider, want string }{
		{"flex", "openai", "flex"}, {"flex", "gemini", "flex"}, {"flex", "anthropic", ""}, {"flex", "groq", "flex"},
		{"default", "gemini", "standard"}, {"default", "groq", "on_demand"}, {"default", "bedrock", "default"},
		{"standard_only", "anthropic", "standard_only"}, {"standard_only", "openai", "default"},
		{"priority", "anthropic", "auto"}, {"priority", "groq", ""}, {"priority", "bedrock", "priority"},
		{"auto", "gemini", ""}, {"auto", "anthropic", "auto"}, {"flex", "deepseek", ""},
	} {
		p, _ := stream.Provider(c.provider)
		if got := targetTier(c.caller, p); got != c.want {
			t.Errorf("%s at %s: %q, want %q", c.caller, c.provider, got, c.want)
		}
	}
}

// TestSDKResponsesTier: openai-go's Responses client asks priority of a
// Gemini target (Gemini's priority), the simulator downgrades it, and the
// response object names OpenAI's default tier.
func TestSDKResponsesTier(t *testing.T) {
	e := newEnv(t, sdkConfig(), nil)
	e.inject(sim.Fault{Provider: "gemini", Kind: sim.FaultTierDowngrade})
	p := responsesParams("gemini/gemini-3.8-flash", "Say hello")
	p.ServiceTier = "priority"
	res, err := e.openAI(testToken).Responses.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if res.ServiceTier != "default" {
		t.Errorf("service_tier %q, want default (Gemini's standard)", res.ServiceTier)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.calls) != 1 || e.calls[0].Chain[0].Tier != "priority" {
		t.Errorf("calls %+v: want the target asking Gemini's priority", e.calls)
	}
}
