package retry

import (
	"context"
	"time"
)

// WallClock is the real clock: Now is time.Now and Sleep a timer.
type WallClock struct{}

// Now returns the current time.
func (WallClock) Now() time.Time { return time.Now() }

// Sleep waits d or until ctx ends, returning ctx.Err() in that case.
func (WallClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TimerClock is a Clock that runs a function once d of its own time has
// passed (the call's deadline on an attempt in flight); stop cancels it and
// reports whether it did so before f ran. WallClock is one. The engine
// bounds attempts with a Clock that is not one by wall time.
type TimerClock interface {
	Clock
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// AfterFunc runs f in its own goroutine after d.
func (WallClock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	return time.AfterFunc(d, f).Stop
}

// afterFunc runs f after d of c's time (wall time when c has no timers) and
// returns a function that stops it.
func afterFunc(c Clock, d time.Duration, f func()) (stop func()) {
	if d <= 0 {
		f()
		return func() {}
	}
	var s func() bool
	if tc, ok := c.(TimerClock); ok {
		s = tc.AfterFunc(d, f)
	} else {
		s = time.AfterFunc(d, f).Stop
	}
	return func() { s() }
}
