package retry

import (
	"fmt"
	"sync"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// A circuit breaker per target: after Threshold overloads, timeouts or
// connection failures in a row (none more than Window after the one
// before), the target's circuit opens and calls skip it without a request
// for a cool-off; then it is half-open and lets exactly one request through
// (the probe). The probe's success closes the circuit; its failure opens it
// again for twice the cool-off (at most MaxCoolOff). During an outage a
// call then moves to its fallback at once instead of spending its tries on
// the target, and one probe at a time finds out when it is back.
//
// The state sits behind the Breaker interface, as pacing and cooldowns do
// (backend.go), so that a backend shared by several processes can hold it;
// MemoryBreaker is the in-memory one. Keys are the engine's: the Doer's
// target scope (stream.ScopeTarget), so accounts and simulators separate.

// Breaker is the engine's circuit breaker. Its methods must be safe for
// concurrent use and must not block on a request in flight.
type Breaker interface {
	// Allow asks, at now, whether a request to key may be sent. ok: send
	// it, then report its outcome with exactly one Record (probe: it is the
	// half-open circuit's one probe, which no other request may be while it
	// is out). Not ok: the circuit is open, or its probe is out; wait is how
	// long until asking again may let one through (always > 0).
	Allow(key string, now time.Time) (probe, ok bool, wait time.Duration)
	// Record feeds the outcome of a request Allow let through.
	Record(key string, probe bool, o BreakerOutcome, now time.Time)
	// State returns key's state at now, for display.
	State(key string, now time.Time) BreakerState
}

// BreakerOutcome is what one request says about its target's health.
type BreakerOutcome int

// The outcomes, by the attempt's class (breakerOutcome).
const (
	// BreakerNeutral says nothing about the target: not sent, cancelled,
	// ended by the call (its deadline, the user), a rate limit (the
	// pacer's), a server error, a stream cut after HTTP 200.
	BreakerNeutral BreakerOutcome = iota
	// BreakerSuccess: the target answered (a success, a caller error, a
	// quota stop).
	BreakerSuccess
	// BreakerFailure: an overload, a timeout, or a connection that got no
	// response.
	BreakerFailure
)

// CircuitState names a circuit's state.
type CircuitState string

// The circuit states.
const (
	CircuitClosed   CircuitState = "closed"    // requests go
	CircuitOpen     CircuitState = "open"      // requests skip the target until OpenUntil
	CircuitHalfOpen CircuitState = "half_open" // one probe may go (or is out)
)

// BreakerState is a target's circuit, for display.
type BreakerState struct {
	State     CircuitState
	Failures  int       // failures in a row counted (at least Threshold while open)
	OpenUntil time.Time // when an open circuit lets a probe through
	CoolOff   time.Duration
	Probing   bool // half-open with its probe out
}

// Open reports whether the circuit skips the target at now.
func (s BreakerState) Open() bool { return s.State == CircuitOpen }

// BreakerConfig holds a MemoryBreaker's knobs; zero fields take the
// defaults (DefaultBreakerConfig).
type BreakerConfig struct {
	Threshold  int           // failures in a row that open the circuit (default 3)
	Window     time.Duration // a failure longer than this after the previous one starts the count again (default 1m)
	CoolOff    time.Duration // the first open period (default 15s)
	MaxCoolOff time.Duration // the longest, after failed probes (default 2m)
	// ProbeWait is the wait Allow names while the probe is out (default 1s).
	ProbeWait time.Duration
}

// DefaultBreakerConfig returns the documented defaults.
func DefaultBreakerConfig() BreakerConfig {
	return BreakerConfig{Threshold: 3, Window: time.Minute, CoolOff: 15 * time.Second, MaxCoolOff: 2 * time.Minute, ProbeWait: time.Second}
}

func (c BreakerConfig) withDefaults() BreakerConfig {
	d := DefaultBreakerConfig()
	if c.Threshold <= 0 {
		c.Threshold = d.Threshold
	}
	if c.Window <= 0 {
		c.Window = d.Window
	}
	if c.CoolOff <= 0 {
		c.CoolOff = d.CoolOff
	}
	if c.MaxCoolOff < c.CoolOff {
		c.MaxCoolOff = max(d.MaxCoolOff, c.CoolOff)
	}
	if c.ProbeWait <= 0 {
		c.ProbeWait = d.ProbeWait
	}
	return c
}

// MemoryBreaker keeps circuits in memory, for one process's life. It is
// safe for concurrent use.
type MemoryBreaker struct {
	cfg BreakerConfig
	mu  sync.Mutex
	m   map[string]*circuit
}

type circuit struct {
	failures  int
	last      time.Time // the last failure counted
	openUntil time.Time // zero: closed
	coolOff   time.Duration
	probing   bool
}

var _ Breaker = (*MemoryBreaker)(nil)

// NewMemoryBreaker returns an in-memory Breaker with cfg (zero fields: the
// defaults).
func NewMemoryBreaker(cfg BreakerConfig) *MemoryBreaker {
	return &MemoryBreaker{cfg: cfg.withDefaults(), m: map[string]*circuit{}}
}

// get returns key's circuit, creating it; m.mu is held.
func (m *MemoryBreaker) get(key string) *circuit {
	c := m.m[key]
	if c == nil {
		c = &circuit{}
		m.m[key] = c
	}
	return c
}

// Allow implements Breaker.
func (m *MemoryBreaker) Allow(key string, now time.Time) (probe, ok bool, wait time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.m[key]
	switch {
	case c == nil || c.openUntil.IsZero():
		return false, true, 0
	case now.Before(c.openUntil):
		return false, false, c.openUntil.Sub(now)
	case c.probing:
		return false, false, m.cfg.ProbeWait
	}
	c.probing = true
	return true, true, 0
}

// Record implements Breaker.
func (m *MemoryBreaker) Record(key string, probe bool, o BreakerOutcome, now time.Time) {
	if o == BreakerNeutral && !probe {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.get(key)
	if probe {
		c.probing = false
	}
	switch o {
	case BreakerSuccess:
		delete(m.m, key)
	case BreakerFailure:
		switch {
		case probe:
			// The probe failed: open again, for longer.
			c.coolOff = min(2*c.coolOff, m.cfg.MaxCoolOff)
			c.openUntil = now.Add(c.coolOff)
			c.failures++
			c.last = now
		case !c.openUntil.IsZero():
			// A request let through before the circuit opened: it
			// changes nothing.
		default:
			if !c.last.IsZero() && now.Sub(c.last) > m.cfg.Window {
				c.failures = 0
			}
			c.failures++
			c.last = now
			if c.failures >= m.cfg.Threshold {
				c.coolOff = m.cfg.CoolOff
				c.openUntil = now.Add(c.coolOff)
			}
		}
	}
}

// State implements Breaker.
func (m *MemoryBreaker) State(key string, now time.Time) BreakerState {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.m[key]
	if c == nil {
		return BreakerState{State: CircuitClosed}
	}
	s := BreakerState{State: CircuitClosed, Failures: c.failures, CoolOff: c.coolOff, Probing: c.probing}
	switch {
	case c.openUntil.IsZero():
	case now.Before(c.openUntil):
		s.State, s.OpenUntil = CircuitOpen, c.openUntil
	default:
		s.State, s.OpenUntil = CircuitHalfOpen, c.openUntil
	}
	return s
}

// breakerOutcome is what an attempt's result says about its target (see
// BreakerOutcome); an attempt the engine ended (its deadline, the user)
// says nothing.
func breakerOutcome(sr *stream.Result, end attemptEnd) BreakerOutcome {
	if end != endedByServer {
		return BreakerNeutral
	}
	e := sr.Err
	if e == nil {
		return BreakerSuccess
	}
	switch e.Class {
	case stream.ClassOverload, stream.ClassTimeout:
		return BreakerFailure
	case stream.ClassConnection:
		if e.Status == 0 && !e.MidStream {
			return BreakerFailure
		}
	case stream.ClassCaller, stream.ClassQuota:
		return BreakerSuccess
	}
	return BreakerNeutral
}

// breakerKey is t's circuit key: d's target scope, else t itself.
func breakerKey(d Doer, t stream.Target) string {
	if k := d.Scope(t, stream.ScopeTarget); k != "" {
		return k
	}
	return t.String()
}

// gate asks the breaker whether t may be sent to now. With t's circuit
// open and a target left, t is skipped (no request); on the last target the
// call waits for the probe's turn like any wait (longer than MaxWait:
// deferred; past the deadline: given up). ok is true to send (probe: this
// request is the half-open circuit's probe, to be recorded).
func (r *run) gate(t stream.Target, next bool) (probe bool, s step) {
	b := r.e.Breaker
	if b == nil {
		return false, stepRetry
	}
	key := breakerKey(r.e.Doer, t)
	for {
		now := r.clock.Now()
		probe, ok, wait := b.Allow(key, now)
		if ok {
			return probe, stepRetry
		}
		st := b.State(key, now)
		reason := fmt.Sprintf("%s is OVERLOADED: its circuit opened after %d overloads, timeouts or connection failures in a row; one probe in %s", t, st.Failures, fmtWait(wait))
		if st.Probing {
			reason = fmt.Sprintf("%s is OVERLOADED: its circuit's one probe is out", t)
		}
		cause := &stream.Error{Class: stream.ClassOverload, Message: reason}
		if next {
			r.move.Cause = cause
			r.skip(t, wait, reason)
			return false, stepFailover
		}
		until := now.Add(wait)
		switch {
		case wait > r.pol.MaxWait:
			r.res.RetryAt = until
			r.finish(OutcomeDeferred, r.lastOr(stream.ClassOverload, reason))
			return false, stepDone
		case until.After(r.deadline):
			r.finish(OutcomeGaveUp, r.lastOr(stream.ClassOverload, reason))
			return false, stepDone
		}
		w := Wait{Target: t, Duration: wait, Source: stream.SourceBackoff, Reason: reason, Until: until, Deadline: r.deadline}
		// No FailOver ends it: no target is left to move to.
		if _, end := r.wait(w, now); end == WaitCancelled {
			r.cancelled(r.ctx.Err())
			return false, stepDone
		}
	}
}

// record feeds the breaker with an attempt allowed by gate.
func (r *run) record(t stream.Target, probe bool, o BreakerOutcome) {
	if b := r.e.Breaker; b != nil {
		b.Record(breakerKey(r.e.Doer, t), probe, o, r.clock.Now())
	}
}

// circuitOpen reports whether t's circuit is open now (its last failure
// opened it).
func (r *run) circuitOpen(t stream.Target) bool {
	b := r.e.Breaker
	return b != nil && b.State(breakerKey(r.e.Doer, t), r.clock.Now()).Open()
}
