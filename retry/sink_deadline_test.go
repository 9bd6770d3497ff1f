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

// TestDeadlineSkipsTheSinksTime: the time a call's sink takes over its text
// (a caller reading its answer slowly) does not count toward the call's
// deadline, while the upstream's own silence does: 20 deltas that the sink
// takes 1 s each end well in one attempt under a 5 s deadline, and an
// upstream that goes quiet for 6 s between two deltas is ended by it.
func TestDeadlineSkipsTheSinksTime(t *testing.T) {
	a := stream.Target{Provider: "openai", Model: "a"}
	deltas := func(n int, pause time.Duration) func(context.Context, stream.Request, func(string)) stream.Result {
		return func(ctx context.Context, _ stream.Request, onText func(string)) stream.Result {
			text := ""
			for i := range n {
				if i == n/2 && pause > 0 {
					select {
					case <-time.After(pause):
					case <-ctx.Done():
						return retrytest.Fail(0, stream.ClassTimeout, "")
					}
				}
				onText("x")
				text += "x"
				if ctx.Err() != nil { // as a stream's reader finds its context ended
					return retrytest.Fail(0, stream.ClassTimeout, "")
				}
			}
			return retrytest.OK(text)
		}
	}
	pol := retry.DefaultPolicy()
	pol.Deadline = 5 * time.Second
	pol.MaxAttempts = 1
	slowSink := func(ev retry.Event) {
		if ev.Kind == retry.EventText {
			time.Sleep(time.Second) // the bubble's fake clock
		}
	}
	synctest.Test(t, func(t *testing.T) {
		d := retrytest.NewDoer().ScriptFunc(a.String(), deltas(20, 0))
		eng := &retry.Engine{Doer: d, Clock: retry.WallClock{}}
		start := time.Now()
		res := eng.Run(t.Context(), retry.Call{Chain: []stream.Target{a}, Prompt: "x", Policy: pol}, slowSink)
		if res.Outcome != retry.OutcomeOK || len(res.Attempts) != 1 || res.Text != "xxxxxxxxxxxxxxxxxxxx" {
			t.Errorf("a slow sink: %s after %d attempts with %q: want ok in one, whole", res.Outcome, len(res.Attempts), res.Text)
		}
		if took := time.Since(start); took != 20*time.Second || res.SinkTime != 20*time.Second {
			t.Errorf("took %s, %s of it in the sink: want the sink's 20 s", took, res.SinkTime)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		d := retrytest.NewDoer().ScriptFunc(a.String(), deltas(4, 6*time.Second))
		eng := &retry.Engine{Doer: d, Clock: retry.WallClock{}}
		start := time.Now()
		res := eng.Run(t.Context(), retry.Call{Chain: []stream.Target{a}, Prompt: "x", Policy: pol}, slowSink)
		if res.Outcome == retry.OutcomeOK || res.Err == nil || res.Err.Class != stream.ClassTimeout {
			t.Errorf("a quiet upstream: %s (%v), want the deadline's timeout", res.Outcome, res.Err)
		}
		// 2 s in the sink before the silence: the deadline falls 7 s in.
		if took := time.Since(start); took != 7*time.Second {
			t.Errorf("ended after %s, want 7 s (the deadline and the sink's 2 s)", took)
		}
	})
}
