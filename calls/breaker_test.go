package calls

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// The engine every command runs on (send, the console, the proxy) has the
// circuit breaker: during an outage of the primary, the first call spends
// its two tries on it, the second one (the third failure opens the circuit)
// and the third none; the engine's TargetState shows the circuit open, for
// the console's OVERLOADED with its time left.
func TestCommandsEngineHasTheBreaker(t *testing.T) {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	var f Flags
	f.Register(fs)
	if err := fs.Parse([]string{"--sim", "--seed", "3", "--no-history"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	clk := retrytest.NewFakeClock(time.Now())
	c, err := Open(ctx, Env{Getenv: func(string) string { return "" }, Clock: clk}, f, true, "send")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx, time.Second)
	ix := stream.Target{Provider: "gemini:interactions", Model: "gemini-3.8-flash"}
	anth := stream.Target{Provider: "anthropic", Model: "claude-haiku-5-5"}
	if _, err := c.Providers.Sim.Server.Arm(sim.Fault{Provider: "gemini", Kind: sim.FaultOverload, For: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{2, 1, 0} {
		res := c.Run(ctx, retry.Call{Chain: []stream.Target{ix, anth}, Prompt: "hi", MaxTokens: 16}, nil)
		n := 0
		for _, a := range res.Attempts {
			if a.Target == ix {
				n++
			}
		}
		if res.Outcome != retry.OutcomeOK || res.ServedBy == nil || res.ServedBy.Provider != "anthropic" || n != want {
			t.Fatalf("call %d: %s, %d requests to %s, want %d", i+1, res.Outcome, n, ix, want)
		}
	}
	st := c.Engine.TargetState(ix)
	if left := st.Breaker.OpenUntil.Sub(clk.Now()); !st.HasBreaker || !st.Breaker.Open() || left <= 0 || left > 15*time.Second {
		t.Fatalf("%+v", st.Breaker)
	}
}
