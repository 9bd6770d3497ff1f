package calls

import (
	"context"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// The console lists the Responses API as one more target (after the
// providers, so the default chain is unchanged), and the failover demo runs
// from it: the demo menu's failover-demo on a Responses primary degrades
// the simulated openai provider, and the call fails over to anthropic.
func TestConsoleResponsesTargetAndFailoverDemo(t *testing.T) {
	ctx := context.Background()
	resp := stream.Target{Provider: "openai:responses", Model: "gpt-5.4-mini"}
	p := simConsole(t, resp)
	if chain := DefaultChain(p.ConsoleTargets()); len(chain) != 3 || chain[0].Provider != "openai" || chain[1].Provider != "anthropic" {
		t.Fatalf("default chain %v", chain)
	}

	// Real, without a key: listed, naming the variable it lacks.
	real, err := OpenProviders(ctx, func(string) string { return "" }, SimFlags{}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range real.ConsoleTargets() {
		if ti.Target == resp && (ti.Available || ti.Missing != "OPENAI_API_KEY") {
			t.Fatalf("%+v", ti)
		}
	}

	runFailoverDemo(t, p, resp)
}

// Clearing a provider's faults in the demo menu also ends the simulated
// stops met through its other API: one account, one set of stops.
func TestClearFaultsCoversTheResponsesAPI(t *testing.T) {
	ctx := context.Background()
	p, err := OpenProviders(ctx, func(string) string { return "" }, SimFlags{Sim: true, Seed: 1}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, clear := range []string{"openai", "openai:responses"} {
		cool := retry.NewMemoryCooldowns()
		for _, c := range []retry.Cooldown{
			{Scope: "sim:x:account:openai:abc", Target: "openai:responses/gpt-5.4-mini", Since: time.Now()},
			{Scope: "sim:x:target:openai/gpt-5.4-mini", Target: "openai/gpt-5.4-mini", Since: time.Now()},
			{Scope: "sim:x:account:anthropic:abc", Target: "anthropic/claude-haiku-5-5", Since: time.Now()},
		} {
			_ = cool.Set(c)
		}
		if err := p.ArmedFaults(cool).ClearFaults(ctx, clear); err != nil {
			t.Fatal(err)
		}
		if cds, _ := cool.List(); len(cds) != 1 || cds[0].Target != "anthropic/claude-haiku-5-5" {
			t.Errorf("clearing %s left %+v, want anthropic's only", clear, cds)
		}
	}
}
