package retry_test

import (
	"context"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
)

// TestCeilingFollowsLatency: once the headers tell a per-minute request
// window, a target's concurrency ceiling is what that window keeps busy at
// the answers' observed latency (Little's law) times retry.LittleMargin,
// within the configured ceiling: 600 RPM of 30 s answers lets 600 through
// (2 × 10/s × 30 s), answers of 0.5 s bring it down to 10 or 11, and a
// configured ceiling of 100 caps the long ones. On a fake clock.
func TestCeilingFollowsLatency(t *testing.T) {
	ctx := context.Background()
	at := t0
	answer := func(p *retry.Pacer, took time.Duration) {
		t.Helper()
		pm, err := p.Acquire(ctx, A)
		if err != nil {
			t.Fatal(err)
		}
		pm.Reserve(at)
		at = at.Add(took)
		r := retrytest.WithLimits(retrytest.OK("x"), reqWindow(600, 599, at.Add(time.Minute)))
		pm.Done(&r, at)
	}
	p := retry.NewPacer()
	answer(p, 30*time.Second)
	if st := p.State(A); st.Ceiling != 600 || st.Concurrency != 599 || !st.Known {
		t.Errorf("600 RPM of 30 s answers: %+v, want a ceiling of 600 and the 599 requests left", st)
	}
	for range 100 {
		answer(p, 500*time.Millisecond)
	}
	if st := p.State(A); st.Ceiling < 10 || st.Ceiling > 11 || st.Concurrency != st.Ceiling {
		t.Errorf("600 RPM of 0.5 s answers: %+v, want a ceiling and limit of 10 or 11", st)
	}
	for range 100 {
		answer(p, 30*time.Second)
	}
	// The ceiling is back at once; the limit grows to it additively.
	if st := p.State(A); st.Ceiling != 600 || st.Concurrency <= 11 {
		t.Errorf("back to 30 s answers: %+v, want a ceiling of 600 and a limit growing", st)
	}
	capped := &retry.Pacer{TargetMax: map[string]int{A.Provider: 100}}
	answer(capped, 30*time.Second)
	if st := capped.State(A); st.Concurrency != 100 || st.Ceiling != 100 {
		t.Errorf("a configured ceiling of 100: %+v, want 100", st)
	}
	// Without a request window in the headers, latency sets no ceiling:
	// slow start grows by one per success.
	free := retry.NewPacer()
	for range 3 {
		pm, _ := free.Acquire(ctx, A)
		pm.Reserve(at)
		at = at.Add(time.Second)
		r := retrytest.OK("x")
		pm.Done(&r, at)
	}
	if st := free.State(A); st.Concurrency != 5 || st.Known {
		t.Errorf("no headers: %+v, want slow start's 5", st)
	}
}
