package retry

import (
	"context"
	"sync"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// Control steers one running call through the engine's own API (the
// console's "fail over now"), instead of cancel-and-rerun. Pass it in
// Call.Control; its methods are safe from any goroutine, and a nil *Control
// does nothing.
type Control struct {
	mu       sync.Mutex
	failover chan struct{} // closed (and replaced) by FailOver
	canMove  bool          // a target is left after the current one
}

// NewControl returns a Control for one call.
func NewControl() *Control { return &Control{failover: make(chan struct{})} }

// FailOver asks the call to move to its next target now: a wait in progress
// ends at once (its attempt records the time actually waited and that the
// user moved it), and a stream in flight is ended and recorded as failed over
// by the user. It reports whether the request was taken (false when no target
// is left or the call is not running).
func (c *Control) FailOver() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.canMove {
		return false
	}
	close(c.failover)
	c.failover = make(chan struct{})
	return true
}

// CanFailOver reports whether the call has a target left to move to now (the
// console shows its ctrl+f hint only then).
func (c *Control) CanFailOver() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.canMove
}

// setCanMove is the engine's side: whether a fallback is left now.
func (c *Control) setCanMove(ok bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.canMove = ok
	c.mu.Unlock()
}

// requested returns a channel closed at the next FailOver (nil for a nil
// Control: it never fires).
func (c *Control) requested() <-chan struct{} {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failover
}

// WaitEnd says how a wait ended.
type WaitEnd string

// How waits end.
const (
	WaitElapsed   WaitEnd = "elapsed"   // waited the whole time
	WaitFailover  WaitEnd = "failover"  // the user failed over during it
	WaitCancelled WaitEnd = "cancelled" // the call was cancelled during it
)

// TargetState is what the engine knows of a target now, for display: read,
// not rebuilt from attempts or parsed from messages.
type TargetState struct {
	Cooldown *Cooldown // the active cooldown blocking the target (account or target scope); nil when none
	Pace     PaceState // the pacer's state; zero when the engine has no pacer
	HasPacer bool
	// Breaker is the target's circuit (open: OVERLOADED until OpenUntil);
	// zero when the engine has no breaker.
	Breaker    BreakerState
	HasBreaker bool
}

// TargetState returns what the engine knows of t now, read through the
// same Pacing and Cooldowns the engine acts on: the active cooldown blocking
// it (account scope first, then target scope) and the pacer's state (a hold
// already past reads as none).
func (e *Engine) TargetState(t stream.Target) TargetState {
	var ts TargetState
	now := e.clock().Now()
	if p := e.pacer(); p != nil {
		ts.Pace = p.State(t)
		ts.HasPacer = true
		if !ts.Pace.HoldUntil.After(now) {
			ts.Pace.HoldUntil = time.Time{}
		}
	}
	if e.Doer == nil {
		return ts
	}
	if e.Breaker != nil {
		ts.Breaker, ts.HasBreaker = e.Breaker.State(breakerKey(e.Doer, t), now), true
	}
	cds := e.cooldowns()
	for _, s := range []stream.Scope{stream.ScopeAccount, stream.ScopeTarget} {
		key := e.Doer.Scope(t, s)
		if key == "" {
			continue
		}
		if cd, ok, err := getCooldown(context.Background(), cds, key); err == nil && ok && cd.Active(now) {
			ts.Cooldown = &cd
			break
		}
	}
	return ts
}
