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

// simConsole opens the console's providers on the simulator with no key and
// checks that target is listed there, available.
func simConsole(t *testing.T, target stream.Target) *Providers {
	t.Helper()
	p, err := OpenProviders(context.Background(), func(string) string { return "" }, SimFlags{Sim: true, Seed: 1}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	found := false
	for _, ti := range p.ConsoleTargets() {
		if ti.Target == target {
			found = ti.Available
		}
	}
	if !found {
		t.Fatalf("%v: no available %s", p.ConsoleTargets(), target)
	}
	return p
}

// runFailoverDemo arms the demo menu's failover-demo on primary and runs a
// call from primary to Anthropic direct: the fallback must serve, every
// attempt before it on primary and failed. It returns the call's result.
func runFailoverDemo(t *testing.T, p *Providers, primary stream.Target) retry.Result {
	t.Helper()
	ctx := context.Background()
	anth := stream.Target{Provider: "anthropic", Model: "claude-haiku-5-5"}
	if err := p.Faults().Inject(ctx, tui.FaultRequest{Provider: primary.Provider, Kind: "failover-demo", RetryAfter: time.Minute}); err != nil {
		t.Fatal(err)
	}
	e := &retry.Engine{Doer: &stream.Router{Client: &stream.Client{}, Endpoints: p.Endpoints},
		Cooldowns: retry.NewMemoryCooldowns(), Clock: retrytest.NewFakeClock(time.Now())}
	res := e.Run(ctx, retry.Call{Chain: []stream.Target{primary, anth}, Prompt: "hi"}, nil)
	if res.Outcome != retry.OutcomeOK || res.ServedBy == nil || *res.ServedBy != anth || len(res.Attempts) < 2 {
		t.Fatalf("outcome %s served by %v after %d attempts", res.Outcome, res.ServedBy, len(res.Attempts))
	}
	for _, a := range res.Attempts[:len(res.Attempts)-1] {
		if a.Target != primary || a.Class == stream.ClassOK {
			t.Fatalf("attempt %+v, want a failure of %s", a, primary)
		}
	}
	return res
}
