package calls

import (
	"context"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/fleet/fleettest"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/tui"
)

// openState opens calls with --state url and extra flags: simulated with
// --sim, else on the providers env names.
func openState(t *testing.T, url string, env map[string]string, args ...string) *Calls {
	t.Helper()
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	var f Flags
	f.Register(fs)
	if err := fs.Parse(append([]string{"--no-history", "--state", url, "--max-attempts", "1"}, args...)); err != nil {
		t.Fatal(err)
	}
	simulated := f.Sim.Sim
	ctx := context.Background()
	c, err := Open(ctx, Env{Getenv: func(k string) string { return env[k] }, Version: "test"}, f, simulated, "send")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(ctx, time.Second) })
	return c
}

func callOn(t *testing.T, c *Calls) retry.Result {
	t.Helper()
	pol := c.policy
	return c.Run(context.Background(), retry.Call{Chain: []stream.Target{{Provider: "openai", Model: "gpt-5.4-mini"}}, Prompt: "hi", Policy: pol}, nil)
}

func openaiRequests(s *sim.Server) int64 {
	for _, p := range s.Status().Providers {
		if p.Provider == "openai" {
			return p.Requests
		}
	}
	return 0
}

// Simulated stops are shared among the clients of one simulator instance,
// never with another simulator (nor with real providers): two processes on
// one simulator share a spend-cap stop; a third on its own embedded
// simulator is not blocked by it.
func TestStateSimulatedStopsScopedToTheInstance(t *testing.T) {
	r := fleettest.Start(t)
	shared, err := sim.Start(context.Background(), "127.0.0.1:0", sim.Options{Scenario: "calm", TokensPerSecond: 1e6})
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	env := map[string]string{"OPENAI_BASE_URL": shared.BaseURL("openai"), "OPENAI_API_KEY": sim.FakeKey}
	a := openState(t, r.URL(), env)
	b := openState(t, r.URL(), env)
	other := openState(t, r.URL(), nil, "--sim", "--scenario", "calm")

	// B and the other simulator's client have each been answered once.
	for _, c := range []*Calls{b, other} {
		if res := callOn(t, c); res.Outcome != retry.OutcomeOK {
			t.Fatalf("first call: %s", res.Outcome)
		}
	}
	if err := shared.Server.Inject(sim.Fault{Provider: "openai", Kind: sim.FaultSpendCap}); err != nil {
		t.Fatal(err)
	}
	if res := callOn(t, a); res.Outcome != retry.OutcomeStopped || res.Cooldown == nil {
		t.Fatalf("A on the spend cap: %s, want stopped with a cooldown", res.Outcome)
	} else if !strings.HasPrefix(res.Cooldown.Scope, "sim:"+shared.Server.Instance()+":") {
		t.Fatalf("the stop's scope %q does not name the simulator instance", res.Cooldown.Scope)
	}
	before := openaiRequests(shared.Server)
	if res := callOn(t, b); res.Outcome != retry.OutcomeStopped || !res.CooldownHit {
		t.Fatalf("B after A's stop: %s (cooldown hit %v), want stopped by the shared cooldown", res.Outcome, res.CooldownHit)
	}
	if n := openaiRequests(shared.Server) - before; n != 0 {
		t.Fatalf("B sent %d requests after A's stop, want 0", n)
	}
	if res := callOn(t, other); res.Outcome != retry.OutcomeOK {
		t.Fatalf("a client of another simulator: %s, want ok (the stop is that instance's)", res.Outcome)
	}
}

// The console's fleet feed brings every process's attempts, its own marked
// as such, with no prompt or answer in them.
func TestStateFleetFeed(t *testing.T) {
	r := fleettest.Start(t)
	a := openState(t, r.URL(), nil, "--sim")
	b := openState(t, r.URL(), nil, "--sim")
	feed := a.FleetFeed()
	if feed == nil || !feed.Up() || strings.Contains(feed.Where(), "@") {
		t.Fatalf("feed %v", feed)
	}
	// The reader starts now: read once so its start is pinned before the
	// calls.
	if _, err := feed.Next(context.Background(), 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Calls{b, a} {
		if res := callOn(t, c); res.Outcome != retry.OutcomeOK {
			t.Fatalf("call: %s", res.Outcome)
		}
	}
	var got []tui.FleetEvent
	for len(got) < 2 {
		evs, err := feed.Next(context.Background(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			t.Fatalf("no event within 5s; got %+v", got)
		}
		got = append(got, evs...)
	}
	mine := 0
	for _, ev := range got {
		if ev.Target != "openai/gpt-5.4-mini" || ev.Status != 200 || ev.Class != stream.ClassOK || ev.Command != "send" {
			t.Errorf("event %+v", ev)
		}
		if ev.Mine {
			mine++
		}
	}
	if mine != 1 {
		t.Fatalf("%d of the events marked the console's own, want 1: %+v", mine, got)
	}
}
