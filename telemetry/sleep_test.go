package telemetry

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/limitscope/limitscope/retry"
)

// TestIdleWorkerSleeps: with nothing handed over, the export worker stops
// its ticker after two ticks (an idle console is not woken four times a
// second); the next call handed over wakes it and is built at once, and
// it sleeps again when calls stop.
func TestIdleWorkerSleeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		tel, err := New(ctx, Options{Getenv: func(string) string { return "" }, Prometheus: true, Command: "tui"})
		if err != nil || tel == nil {
			t.Fatalf("New: %v, %v", tel, err)
		}
		defer tel.Close(ctx)

		time.Sleep(drainEvery / 2)
		synctest.Wait()
		if tel.asleep.Load() {
			t.Fatal("asleep before two empty ticks")
		}
		time.Sleep(2 * drainEvery)
		synctest.Wait()
		if !tel.asleep.Load() {
			t.Fatal("the worker still ticks with nothing to do")
		}
		// A long idle stretch: the worker stays asleep and nothing is built.
		time.Sleep(time.Hour)
		synctest.Wait()
		if !tel.asleep.Load() {
			t.Fatal("the worker woke with nothing handed over")
		}

		start := time.Now()
		sink := tel.Sink(retry.Call{}, nil)
		sink(retry.Event{Kind: retry.EventCallEnd, Result: &retry.Result{}})
		synctest.Wait()
		if tel.asleep.Load() || len(tel.jobs) != 0 {
			t.Fatalf("a call handed over to a sleeping worker: asleep %v, %d jobs waiting", tel.asleep.Load(), len(tel.jobs))
		}
		if time.Since(start) != 0 {
			t.Fatalf("the call waited %v for the worker", time.Since(start))
		}
		if got := tel.Stats().Calls; got != 1 {
			t.Fatalf("calls handed over: %d, want 1", got)
		}
		time.Sleep(3 * drainEvery)
		synctest.Wait()
		if !tel.asleep.Load() {
			t.Fatal("the worker did not sleep again after the call")
		}
		// Flush of a sleeping worker returns (its barrier is drained).
		if err := tel.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
