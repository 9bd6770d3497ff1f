package calls

import (
	"context"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/tui"
)

// The console lists the Gemini Interactions API as one more target (after
// the providers: the default chain is unchanged), without a key it names
// the gemini key variable, and the failover demo runs from it: the demo
// menu's failover-demo on an Interactions primary degrades the simulated
// gemini provider, and the call fails over to anthropic.
func TestConsoleInteractionsTargetAndFailoverDemo(t *testing.T) {
	ctx := context.Background()
	p, err := OpenProviders(ctx, func(string) string { return "" }, SimFlags{Sim: true, Seed: 1}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ix := stream.Target{Provider: "gemini:interactions", Model: "gemini-3.8-flash"}
	found := false
	for _, ti := range p.ConsoleTargets() {
		if ti.Target == ix {
			found = ti.Available
		}
	}
	if !found {
		t.Fatalf("%v: no available %s", p.ConsoleTargets(), ix)
	}
	if chain := DefaultChain(p.ConsoleTargets()); len(chain) != 3 || chain[2].Provider != "gemini" {
		t.Fatalf("default chain %v", chain)
	}
	real, err := OpenProviders(ctx, func(string) string { return "" }, SimFlags{}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range real.ConsoleTargets() {
		if ti.Target == ix && (ti.Available || ti.Missing != "GOOGLE_API_KEY") {
			t.Fatalf("%+v", ti)
		}
	}

	anth := stream.Target{Provider: "anthropic", Model: "claude-haiku-5-5"}
	if err := p.Faults().Inject(ctx, tui.FaultRequest{Provider: ix.Provider, Kind: "failover-demo", RetryAfter: time.Minute}); err != nil {
		t.Fatal(err)
	}
	e := &retry.Engine{Doer: &stream.Router{Client: &stream.Client{}, Endpoints: p.Endpoints},
		Cooldowns: retry.NewMemoryCooldowns(), Clock: retrytest.NewFakeClock(time.Now())}
	res := e.Run(ctx, retry.Call{Chain: []stream.Target{ix, anth}, Prompt: "hi"}, nil)
	if res.Outcome != retry.OutcomeOK || res.ServedBy == nil || *res.ServedBy != anth || len(res.Attempts) < 2 {
		t.Fatalf("outcome %s served by %v after %d attempts", res.Outcome, res.ServedBy, len(res.Attempts))
	}
	for _, a := range res.Attempts[:len(res.Attempts)-1] {
		if a.Target != ix || a.Class == stream.ClassOK {
			t.Fatalf("attempt %+v", a)
		}
	}
}
