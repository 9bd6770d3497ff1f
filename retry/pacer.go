package retry

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// Pacer gates requests per target from the limits snapshots its responses
// carry. It is safe for concurrent use. Its zero value is ready to use with
// the defaults below; set the fields before the first use.
//
// Per target it keeps:
//   - a hold: a server's delay (retry-after and kin) seen on any response
//     holds every new request to that target until it has passed, so every
//     worker respects the same retry-after; a server's delay outranks a
//     reset header;
//   - a request bucket refilled at the rate estimated from the requests
//     window (limit, remaining, reset), so requests are spread at that rate
//     instead of bursting; when no requests remain the next one waits until
//     one fits, not until the whole window is back;
//   - a token hold: when a tokens window has less left than one request
//     uses, the next request waits until one request's tokens fit;
//   - a concurrency limit with slow start (SlowStart, growing by one per
//     request that makes progress, its first byte of answer (Permit.Progress)
//     or, for a request that reports none, its success, until a response's
//     headers tell the limit or a 429 arrives),
//     halving on a rate_limit or overload answer and growing back by about
//     one per limit's worth of successes (AIMD), never above MaxConcurrency
//     and, with Ramp, never faster than the ramp rule allows;
//   - for a target whose answers carry no per-minute requests window (no
//     rate-limit headers at all, or only a daily requests budget), a
//     request rate learned from its 429s (AIMD on the rate): no limit until
//     the first rate_limit 429 after a success, which sets the rate to the
//     successes seen over the last RateWindow; each later 429 cuts it to
//     that too, but by no more than half and no less than 10%, once per
//     round of requests; each success grows it additively, by about
//     RateGrowth requests per second every second. The learned rate
//     spreads requests through the same bucket as a rate from headers, and
//     a server's delay still holds every request. A target whose answers do
//     carry a per-minute requests window is paced from the headers alone.
type Pacer struct {
	SlowStart int // concurrency before the first headers (default 2)
	// MaxConcurrency is the ceiling of every target's concurrency limit
	// (default DefaultMaxConcurrency); a response's request limit sets the
	// limit below it.
	MaxConcurrency int
	// TargetMax is a ceiling per target ("provider/model", or
	// "provider@account/model") or per provider ("openai"), below or above
	// MaxConcurrency; the target's own entry wins over its provider's. Set
	// it before the first use.
	TargetMax  map[string]int
	Burst      time.Duration // requests let through at once, in refill time (default 1s: one second's worth)
	Ramp       *Ramp         // nil: no ramp rule
	RateWindow time.Duration // learned rate: successes counted over this span at a 429 (default 1s)
	RateGrowth float64       // learned rate: additive growth, requests/s per second (default 0.25)

	mu    sync.Mutex
	gates map[string]*gate
}

// Ramp limits how fast the concurrency limit may grow once it is past
// Threshold: by no more than Growth per Period (OpenAI's rule: once traffic is
// large, grow it by no more than 50% every 15 minutes).
type Ramp struct {
	Threshold float64       // concurrency past which the rule applies
	Growth    float64       // fraction per period (default 0.5)
	Period    time.Duration // default 15m
}

// OpenAIRamp returns OpenAI's ramp rule (50% per 15 minutes) past threshold
// concurrent requests.
func OpenAIRamp(threshold float64) *Ramp {
	return &Ramp{Threshold: threshold, Growth: 0.5, Period: 15 * time.Minute}
}

// NewPacer returns a Pacer with the defaults.
func NewPacer() *Pacer { return &Pacer{} }

// Pace is what the pacer asks of the next request to a target.
type Pace struct {
	Delay  time.Duration      // wait this long before sending; 0: send now
	Asked  time.Duration      // the server's delay when a server's hold decides, else 0
	Source stream.DelaySource // reset, or the server's source when its hold decides
	Reason string             // a sentence
}

// PaceState is a target's pacing state, for display.
type PaceState struct {
	Concurrency int       // the current concurrency limit
	Ceiling     int       // what it may grow to now (the configured ceiling, or less from Little's law)
	InFlight    int       // requests holding a slot
	Queued      int       // requests waiting for a slot
	Rate        float64   // estimated refill, requests per second; 0 when unknown
	HoldUntil   time.Time // no request before this (zero: none)
	Known       bool      // a response's headers told the limit
	RateLearned bool      // Rate was learned from 429s, not read from headers
	// HoldSource is where HoldUntil comes from: the server's own delay
	// (retry-after, retry-after-ms, retry-info, message) or SourceReset when
	// a limit window is spent; "" when there is no hold.
	HoldSource stream.DelaySource
	HoldAsked  time.Duration // the server's delay behind a server's hold (0 otherwise)
}

// gate is one target's pacing state; guarded by Pacer.mu.
type gate struct {
	name string

	// concurrency
	max      float64 // the ceiling (Pacer.ceiling)
	limit    float64
	known    bool // slow start is over
	inflight int
	waiters  []*waiter // first come, first served
	seq      uint64    // requests reserved so far
	lastCut  uint64    // seq when the limit was last halved
	rampBase float64
	rampAt   time.Time

	// request bucket (GCRA): rate per second, burst, theoretical arrival time
	rate   float64
	burst  float64
	tat    time.Time
	obsAt  time.Time             // send time of the newest response resynced from
	active map[*memSlot]struct{} // reserved and not yet done: sent or about to be

	reqHold   time.Time // per-day requests window exhausted: until one fits
	tokHold   time.Time // a tokens window exhausted: until one request fits
	hold      time.Time // a server's delay
	holdSrc   stream.DelaySource
	holdAsked time.Duration

	avgTok, avgIn, avgOut float64 // tokens per request, smoothed
	avgLat                float64 // seconds from a success's send to its end, smoothed

	// learned rate (no per-minute requests window in the headers)
	headerRate bool        // a per-minute requests window was seen: no learning
	learned    bool        // rate was learned from 429s
	rateCut    uint64      // seq when the learned rate was last cut
	succ       []time.Time // answer times of recent successes, oldest first
}

func (p *Pacer) slowStart() float64 {
	if p.SlowStart > 0 {
		return float64(p.SlowStart)
	}
	return 2
}

// DefaultMaxConcurrency is the default ceiling of a target's concurrency
// limit: high enough for 1,000 concurrent streams when the provider's
// request limits allow them (its headers set the limit below it).
const DefaultMaxConcurrency = 1024

func (p *Pacer) maxConc() float64 {
	if p.MaxConcurrency > 0 {
		return float64(p.MaxConcurrency)
	}
	return DefaultMaxConcurrency
}

// ceiling is t's concurrency ceiling: its TargetMax entry, its provider's,
// else MaxConcurrency.
func (p *Pacer) ceiling(t stream.Target) float64 {
	if n, ok := p.TargetMax[t.String()]; ok && n > 0 {
		return float64(n)
	}
	if n, ok := p.TargetMax[t.Provider]; ok && n > 0 {
		return float64(n)
	}
	return p.maxConc()
}

func (p *Pacer) burstTime() time.Duration {
	if p.Burst > 0 {
		return p.Burst
	}
	return time.Second
}

// gateLocked returns t's gate, creating it.
func (p *Pacer) gateLocked(t stream.Target) *gate {
	if p.gates == nil {
		p.gates = make(map[string]*gate)
	}
	k := t.QuotaKey() // tiers that share a quota share a gate
	g := p.gates[k]
	if g == nil {
		ceil := p.ceiling(t)
		g = &gate{name: k, max: ceil, limit: math.Min(p.slowStart(), ceil)}
		p.gates[k] = g
	}
	return g
}

func (g *gate) capacity() int {
	c := int(g.limit)
	if c < 1 {
		c = 1
	}
	return c
}

// waiter is one Acquire waiting for a slot at a gate.
type waiter struct {
	ready   chan struct{} // closed when granted
	granted bool          // the slot is this waiter's (counted in inflight)
}

// grantLocked hands free slots to the waiters in the order they came: a
// slot is given to the oldest waiter, not raced for by all of them, so no
// waiter is passed over again and again (the tail latency a wake-all gate
// has).
func (g *gate) grantLocked() {
	for len(g.waiters) > 0 && g.inflight < g.capacity() {
		w := g.waiters[0]
		g.waiters[0] = nil
		g.waiters = g.waiters[1:]
		w.granted = true
		g.inflight++
		close(w.ready)
	}
	if len(g.waiters) == 0 {
		g.waiters = nil // let the backing array go
	}
}

// State returns t's pacing state.
func (p *Pacer) State(t stream.Target) PaceState {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.gateLocked(t)
	h, src, asked := g.hold, g.holdSrc, g.holdAsked
	for _, x := range []time.Time{g.reqHold, g.tokHold} {
		if x.After(h) {
			h, src, asked = x, stream.SourceReset, 0
		}
	}
	if h.IsZero() {
		src = stream.SourceNone
	}
	return PaceState{Concurrency: g.capacity(), Ceiling: int(p.ceilingLocked(g)), InFlight: g.inflight, Queued: len(g.waiters), Rate: g.rate, HoldUntil: h, Known: g.known,
		RateLearned: g.learned, HoldSource: src, HoldAsked: asked}
}

// Queued is how many requests wait for a concurrency slot, over every
// target: the calls-queued gauge.
func (p *Pacer) Queued() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, g := range p.gates {
		n += len(g.waiters)
	}
	return n
}

// Permit is one request's place at a target's gate: a concurrency slot from
// Acquire, a place in the request bucket from Reserve, both given back by
// Done (after the answer) or Cancel (when the request is not sent). The
// methods of a nil *Permit do nothing. A Pacing backend makes one with
// NewPermit around its own Slot.
type Permit struct {
	slot Slot
}

// NewPermit returns a Permit whose methods are slot's (a nil slot: a Permit
// that does nothing).
func NewPermit(slot Slot) *Permit { return &Permit{slot: slot} }

// Reserve takes the request's place in the gate's bucket and returns how
// long it must wait before sending, at now. Call it once, just before the
// wait and the send.
func (pm *Permit) Reserve(now time.Time) Pace {
	if pm == nil || pm.slot == nil {
		return Pace{}
	}
	return pm.slot.Reserve(now)
}

// Progress tells the gate how the request's answer is going, during slow
// start: with lim, its success headers arrived and lim is what they tell
// (slow start ends where they tell the request window; otherwise nothing
// changes yet); with nil, its first text, thinking or usage arrived (a slot
// opens, once). Backends whose Slot is not a Progresser ignore it.
func (pm *Permit) Progress(now time.Time, lim *stream.Limits) {
	if pm == nil || pm.slot == nil {
		return
	}
	if ps, ok := pm.slot.(Progresser); ok {
		ps.Progress(now, lim)
	}
}

// Cancel gives back the slot and the bucket place of a request not sent.
func (pm *Permit) Cancel(now time.Time) {
	if pm == nil || pm.slot == nil {
		return
	}
	pm.slot.Cancel(now)
}

// Done gives back the slot and feeds the gate with the answer: its limits
// snapshot, its server delay, its class and usage.
func (pm *Permit) Done(r *stream.Result, now time.Time) {
	if pm == nil || pm.slot == nil {
		return
	}
	pm.slot.Done(r, now)
}

// memSlot is the in-memory Pacer's Slot.
type memSlot struct {
	p          *Pacer
	g          *gate
	seq        uint64
	sentAt     time.Time // when it is sent: the end of its pacing wait
	reserved   bool
	tatBefore  time.Time
	tatAfter   time.Time
	closed     bool
	progressed bool // Progress was called
}

// Progress implements Progresser: during slow start, a request whose
// answer began (its first text) opens one more slot at once, so a fresh
// target's long streams do not wait for each other to end; and where its
// success headers tell the request window, slow start ends at them, as it
// would at the answer's end (the limit is the window's remaining
// requests), so a fresh target is not flooded on answers that begin fast.
func (pm *memSlot) Progress(now time.Time, lim *stream.Limits) {
	pm.p.mu.Lock()
	defer pm.p.mu.Unlock()
	g := pm.g
	if pm.closed || pm.progressed || g.known {
		return
	}
	if lim != nil {
		// The headers: a request window ends slow start; without one the
		// first text opens the slot (opening it at the headers, sooner,
		// overshoots a provider that tells no limits).
		if w := lim.Requests; w != nil && w.HasRemaining && !w.PerDay {
			// What the answer's end would learn of the headers, now: the
			// bucket paces from them, and slow start ends.
			g.headerRate, g.learned, g.succ = true, false, nil
			sent := pm.sentAt
			if sent.IsZero() {
				sent = now
			}
			if !sent.Before(g.obsAt) {
				sameRound := sent.Equal(g.obsAt)
				g.obsAt = sent
				pm.p.resyncLocked(g, sent, lim, now, sameRound)
			}
			g.known = true
			pm.p.grow(g, math.Max(g.limit, math.Min(float64(w.Remaining), g.max)), now)
			g.grantLocked()
		}
		return
	}
	pm.progressed = true
	pm.p.grow(g, g.limit+1, now)
	g.grantLocked()
}

var _ Pacing = (*Pacer)(nil)

// Acquire waits for a concurrency slot at t's gate, or until ctx ends.
// Waiters are served first come, first served: a slot that frees goes to
// the oldest waiter.
func (p *Pacer) Acquire(ctx context.Context, t stream.Target) (*Permit, error) {
	p.mu.Lock()
	g := p.gateLocked(t)
	if len(g.waiters) == 0 && g.inflight < g.capacity() {
		g.inflight++
		p.mu.Unlock()
		return NewPermit(&memSlot{p: p, g: g}), nil
	}
	w := &waiter{ready: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	p.mu.Unlock()
	select {
	case <-w.ready:
		return NewPermit(&memSlot{p: p, g: g}), nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	if w.granted {
		// Granted as ctx ended: give the slot to the next in line.
		g.inflight--
	} else {
		for i, x := range g.waiters {
			if x == w {
				g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
				break
			}
		}
	}
	g.grantLocked()
	p.mu.Unlock()
	return nil, fmt.Errorf("waiting for a slot at %s: %w", g.name, ctx.Err())
}

// Reserve implements Slot.
func (pm *memSlot) Reserve(now time.Time) Pace {
	pm.p.mu.Lock()
	defer pm.p.mu.Unlock()
	g := pm.g
	g.seq++
	pm.seq = g.seq
	var pc Pace
	defer func() {
		pm.sentAt = now.Add(pc.Delay)
		if g.active == nil {
			g.active = make(map[*memSlot]struct{})
		}
		g.active[pm] = struct{}{}
	}()

	ready := now
	if g.hold.After(ready) {
		ready = g.hold
		pc.Source, pc.Asked = g.holdSrc, g.holdAsked
		pc.Reason = fmt.Sprintf("%s asked %s (%s); every request to it waits", g.name, fmtDur(g.holdAsked), g.holdSrc)
	}
	if g.reqHold.After(ready) {
		ready = g.reqHold
		pc.Source, pc.Asked = stream.SourceReset, 0
		pc.Reason = fmt.Sprintf("%s has no requests left; one fits in %s (reset)", g.name, fmtDur(ready.Sub(now)))
	}
	if g.tokHold.After(ready) {
		ready = g.tokHold
		pc.Source, pc.Asked = stream.SourceReset, 0
		pc.Reason = fmt.Sprintf("%s has too few tokens left; one request fits in %s (reset)", g.name, fmtDur(ready.Sub(now)))
	}
	if g.rate > 0 {
		T := interval(g.rate)
		tau := time.Duration((g.burst - 1) * float64(T))
		if r := g.tat.Add(-tau); r.After(ready) {
			ready = r
			pc.Source, pc.Asked = stream.SourceReset, 0
			if g.learned {
				pc.Reason = fmt.Sprintf("%s took about %.3g requests/s before its 429s; next fits in %s", g.name, g.rate, fmtDur(ready.Sub(now)))
			} else {
				pc.Reason = fmt.Sprintf("%s refills about %.3g requests/s; next fits in %s (reset)", g.name, g.rate, fmtDur(ready.Sub(now)))
			}
		}
		pm.reserved = true
		pm.tatBefore = g.tat
		base := g.tat
		if ready.After(base) {
			base = ready
		}
		g.tat = base.Add(T)
		pm.tatAfter = g.tat
	}
	pc.Delay = ready.Sub(now)
	if pc.Delay <= 0 {
		pc = Pace{}
	}
	return pc
}

// interval is the time one request takes to refill at rate per second.
func interval(rate float64) time.Duration {
	return time.Duration(float64(time.Second) / rate)
}

// Cancel implements Slot.
func (pm *memSlot) Cancel(now time.Time) {
	pm.p.mu.Lock()
	defer pm.p.mu.Unlock()
	if pm.closed {
		return
	}
	pm.closed = true
	g := pm.g
	delete(g.active, pm)
	if pm.reserved && g.rate > 0 {
		if g.tat.Equal(pm.tatAfter) {
			g.tat = pm.tatBefore
		} else if g.tat.After(now) {
			g.tat = g.tat.Add(-interval(g.rate))
		}
	}
	g.inflight--
	g.grantLocked()
}

// Done implements Slot.
func (pm *memSlot) Done(r *stream.Result, now time.Time) {
	pm.p.mu.Lock()
	defer pm.p.mu.Unlock()
	if pm.closed {
		return
	}
	pm.closed = true
	g := pm.g
	delete(g.active, pm)
	g.inflight--
	sent := pm.sentAt
	if sent.IsZero() { // never reserved
		sent = now
	}
	pm.p.observeLocked(g, pm.seq, sent, r, now, pm.progressed)
	g.grantLocked()
}

// Observe feeds t's gate with an answer obtained without a Permit (a
// request this Pacer did not gate).
func (p *Pacer) Observe(t stream.Target, r *stream.Result, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.gateLocked(t)
	p.observeLocked(g, g.seq, now, r, now, false)
	g.grantLocked()
}

// observeLocked feeds g with the answer r, received at now, to the request
// numbered seq sent at sent.
// progressed: the request already opened its slow-start slot at its first
// byte (memSlot.Progress), so its success adds none.
func (p *Pacer) observeLocked(g *gate, seq uint64, sent time.Time, r *stream.Result, now time.Time, progressed bool) {
	if r == nil {
		return
	}
	e := r.Err
	// Learn tokens per request.
	if e == nil && r.Usage != nil {
		in, out := float64(r.Usage.InputTokens), float64(r.Usage.OutputTokens)
		g.avgIn = ewma(g.avgIn, in)
		g.avgOut = ewma(g.avgOut, out)
		g.avgTok = ewma(g.avgTok, in+out)
	}

	if !r.Limits.Empty() && r.Limits.Requests != nil && r.Limits.Requests.HasRemaining && !r.Limits.Requests.PerDay {
		// The headers tell the requests window: pace from them alone.
		g.headerRate, g.learned, g.succ = true, false, nil
	}
	if !g.headerRate {
		p.learnRateLocked(g, seq, r, now)
	}

	serverDelay := e != nil && serverSource(e.DelaySource) && e.Delay > 0 &&
		e.Class != stream.ClassQuota && e.Class != stream.ClassCaller
	if serverDelay {
		// A server's delay outranks a reset header: it sets the hold, caps
		// holds estimated from resets, and the bucket gives one request at
		// its end.
		until := now.Add(e.Delay)
		if until.After(g.hold) {
			g.hold, g.holdSrc, g.holdAsked = until, e.DelaySource, e.Delay
		}
		if g.reqHold.After(g.hold) {
			g.reqHold = g.hold
		}
		if g.tokHold.After(g.hold) {
			g.tokHold = g.hold
		}
		if g.rate > 0 {
			tau := time.Duration((g.burst - 1) * float64(interval(g.rate)))
			if at := g.hold.Add(tau); at.After(g.tat) {
				g.tat = at
			}
		}
	} else if !r.Limits.Empty() && !sent.Before(g.obsAt) {
		// Only a snapshot newer than the last one used: answers arrive out
		// of order. Answers to requests sent at the same instant are all as
		// new; the server counted them one after the other, so the lowest
		// remaining is the truth, whatever order they arrive in.
		sameRound := sent.Equal(g.obsAt)
		g.obsAt = sent
		p.resyncLocked(g, sent, r.Limits, now, sameRound)
	}

	// Latency: what the answers take, for the ceiling (ceilingLocked).
	if e == nil && now.After(sent) {
		g.avgLat = ewma(g.avgLat, now.Sub(sent).Seconds())
	}
	// Concurrency: AIMD with slow start.
	switch {
	case e != nil && (e.Class == stream.ClassRateLimit || e.Class == stream.ClassOverload):
		if seq > g.lastCut {
			g.limit = math.Max(1, g.limit/2)
			g.lastCut = g.seq
			g.known = true // slow start ends at the first loss
			g.grantLocked()
		}
		if !serverDelay && e.Class == stream.ClassRateLimit && g.rate > 0 {
			// No capacity now: the bucket is empty.
			T := interval(g.rate)
			if at := now.Add(time.Duration(g.burst * float64(T))); at.After(g.tat) {
				g.tat = at
			}
		}
	case e == nil:
		if !g.known {
			if w := r.Limits; w != nil && w.Requests != nil && w.Requests.HasRemaining && !w.Requests.PerDay {
				g.known = true
				p.grow(g, math.Max(g.limit, math.Min(float64(w.Requests.Remaining), g.max)), now)
			} else if !progressed {
				p.grow(g, g.limit+1, now)
			}
		} else {
			p.grow(g, g.limit+1/g.limit, now)
		}
	}
	if c := p.ceilingLocked(g); g.limit > c {
		g.limit = c // the ceiling came down with the latency or the window
	}
}

// LittleMargin is how many times the concurrency a target's request window
// keeps busy its ceiling allows (Pacer.ceilingLocked).
const LittleMargin = 2

// ceilingLocked is g's concurrency ceiling now: the configured one
// (MaxConcurrency, TargetMax) and, once the headers tell a per-minute
// request window and successes have been timed, no more than that window
// can keep busy (Little's law: requests per second × seconds per answer),
// with LittleMargin for bursts and latency that varies, and never below
// SlowStart. Long answers so raise it (1,000 RPM of 30 s streams: 500
// concurrent, a ceiling of 1,000) and short ones lower it (1,000 RPM of
// 0.3 s answers: 5, a ceiling of 10), within the configured one.
func (p *Pacer) ceilingLocked(g *gate) float64 {
	c := g.max
	if g.headerRate && g.rate > 0 && g.avgLat > 0 {
		c = math.Min(c, math.Max(p.slowStart(), math.Ceil(LittleMargin*g.rate*g.avgLat)))
	}
	return c
}

func (p *Pacer) rateWindow() time.Duration {
	if p.RateWindow > 0 {
		return p.RateWindow
	}
	return time.Second
}

func (p *Pacer) rateGrowth() float64 {
	if p.RateGrowth > 0 {
		return p.RateGrowth
	}
	return 0.25
}

// minLearnedRate is the floor of a learned rate, requests per second.
const minLearnedRate = 1.0 / 60

// learnRateLocked is the rate AIMD of a gate whose answers carry no
// per-minute requests window: r, the answer to the request numbered seq,
// received at now, cuts the rate (a rate_limit 429) or grows it (a
// success).
func (p *Pacer) learnRateLocked(g *gate, seq uint64, r *stream.Result, now time.Time) {
	e := r.Err
	win := p.rateWindow()
	cutoff := now.Add(-win)
	i := 0
	for i < len(g.succ) && !g.succ[i].After(cutoff) {
		i++
	}
	g.succ = g.succ[i:]
	switch {
	case e == nil:
		g.succ = append(g.succ, now)
		if g.learned {
			// Additive increase: about RateGrowth requests/s per second.
			g.rate += p.rateGrowth() / g.rate
			p.setBurstLocked(g)
		}
	case e.Class == stream.ClassRateLimit:
		if g.learned && seq <= g.rateCut {
			return // sent before the last cut: the same round of requests
		}
		observed := float64(len(g.succ)) / win.Seconds()
		var rate float64
		if g.rate <= 0 || !g.learned {
			// The first 429: what got through over the last window. With
			// nothing through there is nothing to learn from yet: the
			// server's delay, the backoff and the concurrency limit act.
			if observed <= 0 {
				return
			}
			rate = observed
		} else {
			// What got through, but never more than 90% of the rate
			// that drew the 429 and never less than half of it.
			rate = math.Min(math.Max(observed, g.rate/2), g.rate*0.9)
		}
		g.rate = math.Max(rate, minLearnedRate)
		g.learned = true
		g.rateCut = g.seq
		p.setBurstLocked(g)
	}
}

// setBurstLocked sizes a learned rate's burst: Burst's worth of it.
func (p *Pacer) setBurstLocked(g *gate) {
	g.burst = math.Max(1, math.Floor(g.rate*p.burstTime().Seconds()))
}

// grow raises the concurrency limit towards to, within MaxConcurrency and
// the ramp rule.
func (p *Pacer) grow(g *gate, to float64, now time.Time) {
	to = math.Min(to, p.ceilingLocked(g))
	if rp := p.Ramp; rp != nil && to > rp.Threshold {
		growth, period := rp.Growth, rp.Period
		if growth <= 0 {
			growth = 0.5
		}
		if period <= 0 {
			period = 15 * time.Minute
		}
		if g.rampAt.IsZero() || now.Sub(g.rampAt) >= period {
			g.rampAt = now
			g.rampBase = math.Max(g.limit, rp.Threshold)
		}
		to = math.Min(to, g.rampBase*(1+growth))
	}
	if to > g.limit {
		g.limit = to
	}
}

func ewma(avg, x float64) float64 {
	if avg == 0 {
		return x
	}
	return 0.8*avg + 0.2*x
}

// resyncLocked brings the gate in line with a limits snapshot of the
// request sent at sent, received at now.
//
// With sameRound (the snapshot is as new as the last one used, not newer) it
// may only make the bucket emptier.
func (p *Pacer) resyncLocked(g *gate, sent time.Time, l *stream.Limits, now time.Time, sameRound bool) {
	at := now
	if !l.At.IsZero() && !l.At.After(now) && !l.At.Before(sent) {
		at = l.At // when the headers arrived
	}
	if rw := l.Requests; rw != nil && rw.HasRemaining {
		if rw.PerDay {
			// A daily budget: no spreading, only a hold when it is spent.
			if rw.Remaining <= 0 {
				g.reqHold = laterOf(g.reqHold, oneFits(rw, 1, at))
			}
		} else if rate := estimateRate(rw, at, time.Minute); rate > 0 {
			g.rate = rate
			g.burst = math.Max(1, math.Floor(rate*p.burstTime().Seconds()))
			if rw.HasLimit {
				g.burst = math.Min(g.burst, math.Max(1, float64(rw.Limit)))
			}
			// Tokens in the bucket at: what the server said was left, less
			// the requests sent (or about to be) after this one, which it
			// had not counted yet.
			later := 0
			for o := range g.active {
				if o.reserved && o.sentAt.After(sent) {
					later++
				}
			}
			avail := math.Min(float64(rw.Remaining), g.burst) - float64(later) - cushion(g.burst)
			T := interval(rate)
			if tat := at.Add(time.Duration((g.burst - avail) * float64(T))); !sameRound || tat.After(g.tat) {
				g.tat = tat
			}
		} else if rw.Remaining <= 0 && rw.Reset.After(at) {
			g.reqHold = laterOf(g.reqHold, rw.Reset)
		}
	}
	for _, tw := range []struct {
		w    *stream.Window
		need float64
	}{{l.Tokens, g.avgTok}, {l.InputTokens, g.avgIn}, {l.OutputTokens, g.avgOut}} {
		w := tw.w
		if w == nil || !w.HasRemaining {
			continue
		}
		need := math.Max(1, tw.need)
		if float64(w.Remaining) >= need {
			continue
		}
		g.tokHold = laterOf(g.tokHold, oneFits(w, need, at))
	}
}

// estimateRate estimates a window's refill per second from its limit,
// remaining and reset. A limit per period refills at limit over period,
// never faster, whatever the algorithm behind it: the providers document
// per-minute limits enforced over shorter intervals (Anthropic: 60 RPM "may
// be enforced as 1 request per second"; OpenAI: 60,000 a minute "may be
// enforced as 1,000 requests per second"), so a bucket holding less than
// the limit is full again within a second or so, and (limit - remaining)
// over that reset (as Anthropic's reset, rounded up to the second, reads
// an empty 300 RPM bucket of 5: 300 a second) would be a stampede. A fixed
// window (as OpenAI's can be) gives all of the limit back at its reset,
// which is no faster either. Only a reset further away than the period
// says the window is longer, and the limit is spread over what is left; a
// window without a usable reset is taken to be per period.
func estimateRate(w *stream.Window, at time.Time, period time.Duration) float64 {
	if !w.HasLimit || w.Limit <= 0 {
		return 0
	}
	L := float64(w.Limit)
	if left := w.Reset.Sub(at); w.Remaining < w.Limit && left > period {
		return L / left.Seconds()
	}
	return L / period.Seconds()
}

// oneFits is when need units fit in w again, estimated from limit,
// remaining and reset; the reset itself when the limit is unknown.
func oneFits(w *stream.Window, need float64, at time.Time) time.Time {
	left := w.Reset.Sub(at)
	if left <= 0 {
		if w.PerDay {
			left = 24 * time.Hour
		} else {
			left = time.Minute
		}
	}
	if !w.HasLimit || w.Limit <= 0 {
		return at.Add(left)
	}
	missing := need - float64(w.Remaining)
	refill := float64(w.Limit) - float64(w.Remaining) // refilled over left
	if refill <= 0 {
		return at.Add(left)
	}
	d := time.Duration(float64(left) * missing / refill)
	if d > left {
		d = left
	}
	return at.Add(d)
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// cushion is how many requests of a bucket's burst the pacer leaves to the
// server, so that timing noise (a late answer, a late timer) does not turn
// into a 429: one when the burst allows it.
func cushion(burst float64) float64 {
	return math.Min(1, burst-1)
}
