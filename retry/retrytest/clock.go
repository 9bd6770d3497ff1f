package retrytest

import (
	"context"
	"sync"
	"time"

	"github.com/limitscope/limitscope/retry"
)

// FakeClock is a virtual clock. In its default mode Sleep advances virtual
// time at once and returns; in blocking mode (NewBlockingClock) Sleep waits
// until Advance moves time past its end, or its context ends. Every sleep is
// recorded. It is safe for concurrent use.
type FakeClock struct {
	mu       sync.Mutex
	now      time.Time
	blocking bool
	sleeps   []time.Duration
	sleepers []*sleeper
	changed  chan struct{} // closed and replaced whenever sleepers change
	timers   []*timer
}

type timer struct {
	at time.Time
	f  func()
}

type sleeper struct {
	until time.Time
	done  chan struct{}
}

var _ retry.TimerClock = (*FakeClock)(nil)

// NewFakeClock returns a clock at start whose Sleep advances time at once.
func NewFakeClock(start time.Time) *FakeClock {
	return &FakeClock{now: start, changed: make(chan struct{})}
}

// NewBlockingClock returns a clock at start whose Sleep blocks until Advance
// moves time past its end (for tests of concurrent callers and of
// cancellation during a wait).
func NewBlockingClock(start time.Time) *FakeClock {
	c := NewFakeClock(start)
	c.blocking = true
	return c
}

// Now returns the virtual time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep records d and waits it in virtual time. It returns ctx.Err() if ctx
// is done before (or, in blocking mode, while) it waits.
func (c *FakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	if !c.blocking || d <= 0 {
		var due []func()
		if d > 0 {
			c.now = c.now.Add(d)
			due = c.dueLocked()
		}
		c.mu.Unlock()
		for _, f := range due {
			f()
		}
		return nil
	}
	s := &sleeper{until: c.now.Add(d), done: make(chan struct{})}
	c.sleepers = append(c.sleepers, s)
	c.signalLocked()
	c.mu.Unlock()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		c.removeLocked(s)
		c.mu.Unlock()
		return ctx.Err()
	}
}

func (c *FakeClock) signalLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *FakeClock) removeLocked(s *sleeper) {
	for i, x := range c.sleepers {
		if x == s {
			c.sleepers = append(c.sleepers[:i], c.sleepers[i+1:]...)
			c.signalLocked()
			return
		}
	}
}

// Advance moves virtual time forward by d, waking every sleeper whose end
// has come.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.sleepers[:0]
	for _, s := range c.sleepers {
		if !s.until.After(c.now) {
			close(s.done)
		} else {
			kept = append(kept, s)
		}
	}
	c.sleepers = kept
	c.signalLocked()
	due := c.dueLocked()
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
	c.mu.Lock() // for the deferred Unlock
}

// dueLocked removes and returns the functions of the timers whose time has
// come.
func (c *FakeClock) dueLocked() []func() {
	var due []func()
	kept := c.timers[:0]
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			due = append(due, t.f)
		} else {
			kept = append(kept, t)
		}
	}
	c.timers = kept
	return due
}

// AfterFunc runs f (on the goroutine that moves time) once virtual time
// reaches d from now; stop cancels it, reporting whether it had not run.
func (c *FakeClock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	c.mu.Lock()
	t := &timer{at: c.now.Add(d), f: f}
	if d <= 0 {
		c.mu.Unlock()
		f()
		return func() bool { return false }
	}
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.timers {
			if x == t {
				c.timers = append(c.timers[:i], c.timers[i+1:]...)
				return true
			}
		}
		return false
	}
}

// Set moves virtual time to t (forward only) like Advance.
func (c *FakeClock) Set(t time.Time) {
	d := t.Sub(c.Now())
	if d > 0 {
		c.Advance(d)
	}
}

// Sleepers returns how many Sleep calls are blocked now (blocking mode).
func (c *FakeClock) Sleepers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sleepers)
}

// WaitSleepers blocks until at least n Sleep calls are blocked, or ctx ends.
func (c *FakeClock) WaitSleepers(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		if len(c.sleepers) >= n {
			c.mu.Unlock()
			return nil
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Sleeps returns every duration passed to Sleep, in order.
func (c *FakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// Slept returns the sum of every duration passed to Sleep.
func (c *FakeClock) Slept() time.Duration {
	var t time.Duration
	for _, d := range c.Sleeps() {
		t += d
	}
	return t
}
