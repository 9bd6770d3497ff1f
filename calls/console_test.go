package calls

import (
	"context"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/tui"
)

// TestArmedFaultsListAndClear: the console's demo menu lists what the
// embedded simulator still has armed, and clearing a provider disarms its
// faults and ends the simulated stops they caused, leaving other providers'.
func TestArmedFaultsListAndClear(t *testing.T) {
	ctx := context.Background()
	p, err := OpenProviders(ctx, func(string) string { return "" }, SimFlags{Sim: true, Seed: 1}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cool := retry.NewMemoryCooldowns()
	armed := p.ArmedFaults(cool)
	if armed == nil {
		t.Fatal("no armed-fault API on a simulated session")
	}
	faults := p.Faults()
	for _, f := range []tui.FaultRequest{
		{Provider: "openai", Kind: "overload", Count: 3, For: 15 * time.Second},
		{Provider: "anthropic", Kind: "spend_cap"},
	} {
		if err := faults.Inject(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	list, err := armed.Armed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byProv := map[string]tui.ArmedFault{}
	for _, f := range list {
		byProv[f.Provider] = f
	}
	if f := byProv["openai"]; f.Kind != "overload" || f.Left != 3 {
		t.Errorf("openai armed %+v, want overload with 3 left (all: %+v)", f, list)
	}
	if f := byProv["anthropic"]; f.Kind != "spend_cap" {
		t.Errorf("anthropic armed %+v, want spend_cap (all: %+v)", f, list)
	}
	for _, c := range []retry.Cooldown{
		{Scope: "sim:x:account:openai:abc", Target: "openai/gpt-5.4-mini", Since: time.Now()},
		{Scope: "sim:x:account:anthropic:abc", Target: "anthropic/claude-haiku-5-5", Since: time.Now()},
	} {
		_ = cool.Set(c)
	}
	if err := armed.ClearFaults(ctx, "anthropic"); err != nil {
		t.Fatal(err)
	}
	list, _ = armed.Armed(ctx)
	for _, f := range list {
		if f.Provider == "anthropic" {
			t.Errorf("anthropic fault still armed after clearing: %+v", f)
		}
	}
	cds, _ := cool.List()
	if len(cds) != 1 || cds[0].Target != "openai/gpt-5.4-mini" {
		t.Errorf("stops after clearing anthropic: %+v, want openai's only", cds)
	}
	real := &Providers{}
	if real.ArmedFaults(cool) != nil {
		t.Error("a real session offers an armed-fault API")
	}
}
