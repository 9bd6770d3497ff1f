package retry_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/stream"
)

// TestSlotWaitBoundedByDeadline: a call that cannot get a concurrency slot
// does not wait past its deadline: it fails over when a target is left,
// else gives up, and sends nothing to the busy target.
func TestSlotWaitBoundedByDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := stream.Target{Provider: "openai", Model: "a"}
		b := stream.Target{Provider: "anthropic", Model: "b"}
		release := make(chan struct{})
		d := retrytest.NewDoer().
			ScriptFunc(a.String(), func(ctx context.Context, _ stream.Request, _ func(string)) stream.Result {
				<-release // holds the only slot
				return retrytest.OK("first")
			}).
			Always(b.String(), retrytest.OK("fallback"))
		eng := &retry.Engine{Doer: d, Clock: retry.WallClock{}, Pacer: &retry.Pacer{SlowStart: 1, MaxConcurrency: 1}}
		pol := retry.DefaultPolicy()
		pol.Deadline = 5 * time.Second

		holder := make(chan retry.Result)
		go func() {
			holder <- eng.Run(t.Context(), retry.Call{Chain: []stream.Target{a}, Prompt: "x", Policy: pol}, nil)
		}()
		synctest.Wait() // the first call holds the slot

		start := time.Now()
		alone := eng.Run(t.Context(), retry.Call{Chain: []stream.Target{a}, Prompt: "x", Policy: pol}, nil)
		if alone.Outcome != retry.OutcomeGaveUp || len(alone.Attempts) != 0 {
			t.Errorf("no fallback: %s with %d attempts, want gave_up with none", alone.Outcome, len(alone.Attempts))
		}
		if waited := time.Since(start); waited != pol.Deadline {
			t.Errorf("waited %s for a slot, want the deadline %s", waited, pol.Deadline)
		}
		withB := eng.Run(t.Context(), retry.Call{Chain: []stream.Target{a, b}, Prompt: "x", Policy: pol}, nil)
		if withB.Outcome != retry.OutcomeOK || withB.ServedBy == nil || withB.ServedBy.Provider != "anthropic" {
			t.Errorf("with a fallback: %s served by %v, want ok by anthropic", withB.Outcome, withB.ServedBy)
		}
		if n := d.Count(a.String()); n != 1 {
			t.Errorf("%d requests to the busy target, want only the holder's 1", n)
		}
		close(release)
		if r := <-holder; r.Outcome != retry.OutcomeOK {
			t.Errorf("the holder: %s", r.Outcome)
		}
	})
}
