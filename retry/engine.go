package retry

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// Policy holds the knobs of the loop; zero fields take DefaultPolicy's.
type Policy struct {
	MaxAttempts    int           // HTTP requests for the whole call (default 5)
	TriesPerTarget int           // requests per target except the last (default 2)
	FailoverWait   time.Duration // a longer server delay moves to the next target now (default 10s)
	MaxWait        time.Duration // a longer server delay with no fallback left defers (default 2m)
	Deadline       time.Duration // checked before every wait (default 3m)
	BackoffBase    time.Duration // full-jitter exponential backoff base (default 500ms)
	BackoffCap     time.Duration // and cap (default 20s)
	Jitter         time.Duration // added to a server's delay: 0..Jitter (default 250ms)
	IgnoreCooldown bool
	// NoRetryAfterText: once any text of an attempt has reached the caller,
	// an error ends the call instead of retrying or failing over (the proxy,
	// whose caller cannot take text back).
	NoRetryAfterText bool
	// FailoverOnQuota: a quota stop still records its cooldown, but moves on
	// to the next target on a different account (its Doer scope differs)
	// instead of ending the call. Off by default: a person must act.
	FailoverOnQuota bool
}

// DefaultPolicy returns the documented defaults.
func DefaultPolicy() Policy {
	return Policy{
		MaxAttempts:    5,
		TriesPerTarget: 2,
		FailoverWait:   10 * time.Second,
		MaxWait:        2 * time.Minute,
		Deadline:       3 * time.Minute,
		BackoffBase:    500 * time.Millisecond,
		BackoffCap:     20 * time.Second,
		Jitter:         250 * time.Millisecond,
	}
}

// WithDefaults returns p with every zero (or negative) field replaced by
// DefaultPolicy's.
func (p Policy) WithDefaults() Policy {
	d := DefaultPolicy()
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.TriesPerTarget <= 0 {
		p.TriesPerTarget = d.TriesPerTarget
	}
	if p.FailoverWait <= 0 {
		p.FailoverWait = d.FailoverWait
	}
	if p.MaxWait <= 0 {
		p.MaxWait = d.MaxWait
	}
	if p.Deadline <= 0 {
		p.Deadline = d.Deadline
	}
	if p.BackoffBase <= 0 {
		p.BackoffBase = d.BackoffBase
	}
	if p.BackoffCap <= 0 {
		p.BackoffCap = d.BackoffCap
	}
	if p.Jitter <= 0 {
		p.Jitter = d.Jitter
	}
	return p
}

// Call is one prompt through a chain of targets.
type Call struct {
	ID        string          // set by the caller, or generated
	Chain     []stream.Target // primary first, then fallbacks in order
	Prompt    string
	MaxTokens int
	Policy    Policy
	// System and Messages, when Messages is set, are sent instead of Prompt
	// (a conversation, as the proxy receives it); Prompt then only names the
	// call for people (the last user turn). Sampling is sent when set.
	System   string
	Messages []stream.Message
	Sampling stream.Sampling
	// Route and Client describe a call that came from elsewhere, for the
	// history: the proxy sets the model name the client asked for (an alias
	// or provider/model) and the client's User-Agent.
	Route  string
	Client string
	// Control, when set, lets the caller steer the running call (fail over
	// now).
	Control *Control
}

// Engine runs calls. It is safe for concurrent use.
type Engine struct {
	Doer      Doer
	Clock     Clock          // nil: the wall clock
	Cooldowns Cooldowns      // nil: in memory, for this engine's life
	Pacer     *Pacer         // nil: no pacing
	Rand      func() float64 // in [0,1); nil: math/rand/v2

	mu  sync.Mutex // guards mem
	mem *MemoryCooldowns
}

// Skip is a target the call left without sending to it, because pacing
// asked for a wait the policy would not take there.
type Skip struct {
	Target stream.Target
	Wait   time.Duration // the pacing wait refused
	Reason string
}

func (e *Engine) clock() Clock {
	if e.Clock != nil {
		return e.Clock
	}
	return WallClock{}
}

func (e *Engine) cooldowns() Cooldowns {
	if e.Cooldowns != nil {
		return e.Cooldowns
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mem == nil {
		e.mem = NewMemoryCooldowns()
	}
	return e.mem
}

func (e *Engine) rand() float64 {
	f := rand.Float64
	if e.Rand != nil {
		f = e.Rand
	}
	v := f()
	if v < 0 || math.IsNaN(v) {
		return 0
	}
	if v >= 1 {
		return math.Nextafter(1, 0)
	}
	return v
}

// Run runs the call to its end, sending every event to sink (which may be
// nil) in order, from the calling goroutine. ctx cancels a wait or a stream
// at once.
//
// The chain is walked in order, never back. MaxAttempts caps the requests of
// the whole call; each target but the last gets TriesPerTarget. Before each
// request the target's account and target cooldowns are checked (an active
// one stops the call unsent unless IgnoreCooldown) and the Pacer, if any,
// is asked for a slot and a wait. After an error: quota stops the call and
// sets a cooldown; caller fails it (a model-specific one moves on);
// x-should-retry: false moves on or gives up; a timeout, or a connection
// that ended without any response, moves on at once while a target is left;
// otherwise the wait is the server's delay plus 0..Jitter (longer than
// FailoverWait with a target left: move on now; longer than MaxWait with
// none: deferred) or full-jitter backoff, and a wait that would cross the
// deadline moves on or gives up without sleeping. Pacing waits follow the
// same rules.
func (e *Engine) Run(ctx context.Context, c Call, sink func(Event)) Result {
	r := &run{
		e:     e,
		ctx:   ctx,
		call:  c,
		pol:   c.Policy.WithDefaults(),
		clock: e.clock(),
		cds:   e.cooldowns(),
		sink:  sink,
	}
	return r.run()
}

// run is the state of one Run.
type run struct {
	e        *Engine
	ctx      context.Context
	call     Call
	pol      Policy
	clock    Clock
	cds      Cooldowns
	sink     func(Event)
	res      Result
	deadline time.Time
	lastErr  *stream.Error
}

// step is what the loop does after an attempt or before one.
type step int

const (
	stepDone     step = iota // the call ended; r.res is final
	stepRetry                // same target again
	stepFailover             // next target
)

func (r *run) emit(ev Event) {
	if r.sink == nil {
		return
	}
	ev.CallID = r.res.CallID
	if ev.Time.IsZero() {
		ev.Time = r.clock.Now()
	}
	r.sink(ev)
}

func (r *run) run() Result {
	now := r.clock.Now()
	id := r.call.ID
	if id == "" {
		id = strconv.FormatUint(rand.Uint64(), 16)
	}
	r.res = Result{CallID: id, Started: now}
	r.deadline = now.Add(r.pol.Deadline)
	chain := append([]stream.Target(nil), r.call.Chain...)
	r.emit(Event{Kind: EventCallStart, Time: now, Chain: chain})

	if len(chain) == 0 {
		return r.finish(OutcomeFailed, &stream.Error{Class: stream.ClassCaller, Message: "no target to send to"})
	}
	if r.e.Doer == nil {
		return r.finish(OutcomeFailed, &stream.Error{Class: stream.ClassCaller, Message: "engine has no Doer"})
	}
	if err := r.ctx.Err(); err != nil {
		return r.cancelled(err)
	}
	for ti, t := range chain {
		next := ti < len(chain)-1
		if r.target(t, next) == stepDone {
			return r.res
		}
	}
	// Unreachable: the last target always ends the call. Keep a sane answer.
	return r.finish(OutcomeGaveUp, r.lastOr(stream.ClassServer, "the chain was exhausted"))
}

// target sends to t until it ends the call (stepDone) or moves on
// (stepFailover).
func (r *run) target(t stream.Target, next bool) step {
	tries := 0
	for {
		if len(r.res.Attempts) >= r.pol.MaxAttempts {
			r.finish(OutcomeGaveUp, r.lastOr(stream.ClassServer, fmt.Sprintf("the budget of %d requests was spent", r.pol.MaxAttempts)))
			return stepDone
		}
		if r.cooldownHit(t) {
			return stepDone
		}
		permit, paced, s := r.pace(t, next)
		if s != stepRetry {
			return s
		}
		if permit != nil && r.cooldownHit(t) { // another call may have hit a quota while this one waited
			permit.Cancel(r.clock.Now())
			return stepDone
		}
		sr := r.send(t, paced)
		if sr.Err != nil && sr.Err.Class == stream.ClassQuota {
			// Before the slot is given back, so no call queued for it
			// sends after a quota error.
			r.setCooldown(t, sr.Err)
		}
		permit.Done(&sr, r.clock.Now())
		tries++
		switch r.decide(t, &sr, tries, next) {
		case stepDone:
			return stepDone
		case stepFailover:
			return stepFailover
		}
	}
}

// pace acquires a concurrency slot and waits what the pacer asks. It returns
// stepRetry to go on and send, or what the call does instead.
func (r *run) pace(t stream.Target, next bool) (*Permit, time.Duration, step) {
	p := r.e.Pacer
	if p == nil {
		return nil, 0, stepRetry
	}
	asked := r.clock.Now()
	// A wait for a concurrency slot is a wait like any other: the deadline
	// bounds it (its length is not known ahead, so it is bounded, not
	// announced).
	actx, cancel := context.WithTimeout(r.ctx, r.deadline.Sub(asked))
	permit, err := p.Acquire(actx, t)
	cancel()
	if err != nil {
		if r.ctx.Err() != nil {
			r.cancelled(r.ctx.Err())
			return nil, 0, stepDone
		}
		reason := fmt.Sprintf("no concurrency slot for %s before the deadline", t)
		if next {
			r.res.Skips = append(r.res.Skips, Skip{Target: t, Wait: r.clock.Now().Sub(asked), Reason: reason})
			return nil, 0, stepFailover
		}
		r.finish(OutcomeGaveUp, r.lastOr(stream.ClassTimeout, reason))
		return nil, 0, stepDone
	}
	now := r.clock.Now()
	slot := now.Sub(asked) // waited for a concurrency slot (not an event: its length is unknown ahead)
	pc := permit.Reserve(now)
	if pc.Delay <= 0 {
		return permit, slot, stepRetry
	}
	// The same rules as a server's delay: too long with a fallback left
	// moves on, too long without one defers, past the deadline moves on or
	// gives up; all without sleeping.
	skip := func() (*Permit, time.Duration, step) {
		permit.Cancel(now)
		r.res.Skips = append(r.res.Skips, Skip{Target: t, Wait: pc.Delay, Reason: pc.Reason})
		return nil, 0, stepFailover
	}
	end := func(o Outcome) (*Permit, time.Duration, step) {
		permit.Cancel(now)
		if o == OutcomeDeferred {
			r.res.RetryAt = now.Add(pc.Delay)
		}
		r.finish(o, r.lastOr(stream.ClassRateLimit, pc.Reason))
		return nil, 0, stepDone
	}
	switch {
	case next && pc.Delay > r.pol.FailoverWait:
		return skip()
	case !next && pc.Delay > r.pol.MaxWait:
		return end(OutcomeDeferred)
	case now.Add(pc.Delay).After(r.deadline):
		if next {
			return skip()
		}
		return end(OutcomeGaveUp)
	}
	w := Wait{
		Target:   t,
		Duration: pc.Delay,
		Asked:    pc.Asked,
		Source:   pc.Source,
		Reason:   pc.Reason,
		Until:    now.Add(pc.Delay),
		Deadline: r.deadline,
		Pacing:   true,
	}
	r.emit(Event{Kind: EventWait, Time: now, Wait: &w})
	if err := r.clock.Sleep(r.ctx, pc.Delay); err != nil {
		permit.Cancel(r.clock.Now())
		r.cancelled(err)
		return nil, 0, stepDone
	}
	return permit, slot + pc.Delay, stepRetry
}

// send makes one attempt and records it.
func (r *run) send(t stream.Target, paced time.Duration) stream.Result {
	start := r.clock.Now()
	a := Attempt{N: len(r.res.Attempts) + 1, Target: t, StartedAt: start, Paced: paced}
	ac := a
	r.emit(Event{Kind: EventAttemptStart, Time: start, Attempt: &ac})
	onText := func(s string) {
		if s != "" {
			r.emit(Event{Kind: EventText, Text: s})
		}
	}
	sr := r.e.Doer.Do(r.ctx, stream.Request{Target: t, Prompt: r.call.Prompt, MaxTokens: r.call.MaxTokens,
		System: r.call.System, Messages: r.call.Messages, Sampling: r.call.Sampling}, onText)
	a.Duration = r.clock.Now().Sub(start)
	a.Status = sr.Status
	a.Class = sr.Class()
	a.RequestID = sr.RequestID
	a.TTFT = sr.TTFT
	a.Limits = sr.Limits
	if e := sr.Err; e != nil {
		a.Code = e.Code
		a.QuotaID = e.QuotaID
		a.Message = e.Message
		if a.Message == "" && e.Err != nil {
			a.Message = e.Err.Error()
		}
		a.MidStream = e.MidStream
		a.NoRetry = e.NoRetry
		if a.RequestID == "" {
			a.RequestID = e.RequestID
		}
		if serverSource(e.DelaySource) {
			d := e.Delay
			a.RetryAfter = &d
		}
		a.PartialText = sr.Text
	}
	r.res.Attempts = append(r.res.Attempts, a)
	return sr
}

func serverSource(s stream.DelaySource) bool {
	switch s {
	case stream.SourceRetryAfterMs, stream.SourceRetryAfter, stream.SourceRetryInfo, stream.SourceMessage:
		return true
	}
	return false
}

// last returns the attempt being decided.
func (r *run) last() *Attempt { return &r.res.Attempts[len(r.res.Attempts)-1] }

// endAttempt records the decision and emits attempt_end.
func (r *run) endAttempt(d Decision) {
	a := r.last()
	a.Decision = d
	ac := *a
	r.emit(Event{Kind: EventAttemptEnd, Attempt: &ac})
}

// decide applies the policy to the attempt just made.
func (r *run) decide(t stream.Target, sr *stream.Result, tries int, next bool) step {
	e := sr.Err
	if e == nil {
		r.endAttempt(DecideDone)
		r.res.Text = sr.Text
		r.res.FinishReason = sr.FinishReason
		r.res.Usage = sr.Usage
		served := stream.Target{Provider: t.Provider, Model: sr.Model}
		if served.Model == "" {
			served.Model = t.Model
		}
		r.res.ServedBy = &served
		r.finish(OutcomeOK, nil)
		return stepDone
	}
	ec := *e
	r.lastErr = &ec
	if err := r.ctx.Err(); err != nil || e.Class == stream.ClassCancelled {
		r.endAttempt(DecideCancel)
		if err == nil {
			err = context.Canceled
		}
		r.cancelled(err)
		return stepDone
	}

	switch e.Class {
	case stream.ClassQuota: // its cooldown is set already
		r.endAttempt(DecideStop)
		r.finish(OutcomeStopped, &ec)
		return stepDone
	case stream.ClassCaller:
		if e.ModelSpecific && next {
			r.endAttempt(DecideFailover)
			return stepFailover
		}
		r.endAttempt(DecideFail)
		r.finish(OutcomeFailed, &ec)
		return stepDone
	}

	// Transient: rate_limit, overload, server, connection, timeout (and any
	// class this package does not know, treated as server).
	if e.NoRetry {
		return r.moveOrGiveUp(next)
	}
	if next && (e.Class == stream.ClassTimeout || (e.Class == stream.ClassConnection && e.Status == 0 && !e.MidStream)) {
		// A silent provider (a timeout, or a connection that ended without
		// any response) is not retried while a fallback is left; a stream
		// cut part-way is retried like any transient error.
		r.endAttempt(DecideFailover)
		return stepFailover
	}
	hasDelay := serverSource(e.DelaySource)
	budgetLeft := len(r.res.Attempts) < r.pol.MaxAttempts
	if !budgetLeft || (next && tries >= r.pol.TriesPerTarget) {
		if !next && hasDelay && e.Delay > r.pol.MaxWait {
			return r.deferred(e)
		}
		if budgetLeft {
			r.endAttempt(DecideFailover)
			return stepFailover
		}
		r.endAttempt(DecideGiveUp)
		r.finish(OutcomeGaveUp, &ec)
		return stepDone
	}
	if hasDelay && e.Delay > r.pol.FailoverWait && next {
		r.endAttempt(DecideFailover)
		return stepFailover
	}
	if hasDelay && !next && e.Delay > r.pol.MaxWait {
		return r.deferred(e)
	}

	now := r.clock.Now()
	w := Wait{Target: t, Deadline: r.deadline}
	if hasDelay {
		w.Duration = e.Delay + time.Duration(r.e.rand()*float64(r.pol.Jitter))
		w.Asked = e.Delay
		w.Source = e.DelaySource
		w.Reason = fmt.Sprintf("%s asked %s (%s)", t, fmtDur(e.Delay), e.DelaySource)
	} else {
		w.Duration = r.backoff(tries)
		w.Source = stream.SourceBackoff
		w.Reason = fmt.Sprintf("%s answered %s; backing off %s (full jitter, try %d)", t, describe(e), fmtDur(w.Duration), tries)
	}
	w.Until = now.Add(w.Duration)
	if w.Until.After(r.deadline) {
		if next {
			r.endAttempt(DecideFailover)
			return stepFailover
		}
		r.endAttempt(DecideGiveUp)
		r.finish(OutcomeGaveUp, &ec)
		return stepDone
	}
	a := r.last()
	a.DelaySource = w.Source
	a.Waited = w.Duration
	r.endAttempt(DecideRetry)
	r.emit(Event{Kind: EventWait, Time: now, Wait: &w})
	if err := r.clock.Sleep(r.ctx, w.Duration); err != nil {
		r.last().Waited = r.clock.Now().Sub(now)
		r.cancelled(err)
		return stepDone
	}
	return stepRetry
}

// moveOrGiveUp handles x-should-retry: false on a transient error.
func (r *run) moveOrGiveUp(next bool) step {
	if next && len(r.res.Attempts) < r.pol.MaxAttempts {
		r.endAttempt(DecideFailover)
		return stepFailover
	}
	r.endAttempt(DecideGiveUp)
	r.finish(OutcomeGaveUp, r.lastErr)
	return stepDone
}

func (r *run) deferred(e *stream.Error) step {
	a := r.last()
	a.DelaySource = e.DelaySource
	r.endAttempt(DecideDefer)
	r.res.RetryAt = r.clock.Now().Add(e.Delay)
	r.finish(OutcomeDeferred, r.lastErr)
	return stepDone
}

// backoff is full jitter: a random point in [0, min(cap, base*2^(n-1))).
func (r *run) backoff(n int) time.Duration {
	ceil := r.pol.BackoffBase
	for i := 1; i < n && ceil < r.pol.BackoffCap; i++ {
		ceil *= 2
	}
	if ceil > r.pol.BackoffCap {
		ceil = r.pol.BackoffCap
	}
	return time.Duration(r.e.rand() * float64(ceil))
}

func (r *run) setCooldown(t stream.Target, e *stream.Error) {
	s := e.Scope
	if s == stream.ScopeNone {
		s = stream.ScopeAccount
	}
	key := r.e.Doer.Scope(t, s)
	if key == "" {
		return
	}
	// A Cooldowns error (a locked store) must not fail the call.
	_ = r.cds.Set(Cooldown{
		Scope:   key,
		Until:   e.ResetAt,
		Since:   r.clock.Now(),
		Target:  t.String(),
		Code:    e.Code,
		Message: e.Message,
	})
}

// cooldownHit ends the call as stopped when t's account or t itself is
// cooling down.
func (r *run) cooldownHit(t stream.Target) bool {
	if r.pol.IgnoreCooldown {
		return false
	}
	now := r.clock.Now()
	for _, s := range []stream.Scope{stream.ScopeAccount, stream.ScopeTarget} {
		key := r.e.Doer.Scope(t, s)
		if key == "" {
			continue
		}
		cd, ok, err := r.cds.Get(key)
		if err != nil || !ok || !cd.Active(now) {
			continue
		}
		until := "until cleared"
		if !cd.Until.IsZero() {
			until = "until " + cd.Until.UTC().Format(time.RFC3339)
		}
		what := t.String()
		if s == stream.ScopeAccount {
			what = t.Provider + " account"
		}
		msg := fmt.Sprintf("%s is cooling down %s after a quota stop on %s", what, until, cd.Target)
		if cd.Code != "" {
			msg += " (" + cd.Code + ")"
		}
		r.res.CooldownHit = true
		r.res.CooldownUntil = cd.Until
		r.finish(OutcomeStopped, &stream.Error{Class: stream.ClassQuota, Code: cd.Code, Message: msg})
		return true
	}
	return false
}

func (r *run) lastOr(c stream.Class, msg string) *stream.Error {
	if r.lastErr != nil {
		return r.lastErr
	}
	return &stream.Error{Class: c, Message: msg}
}

func (r *run) cancelled(err error) Result {
	return r.finish(OutcomeCancelled, &stream.Error{Class: stream.ClassCancelled, Message: "cancelled", Err: err})
}

func (r *run) finish(o Outcome, err *stream.Error) Result {
	r.res.Outcome = o
	r.res.Err = err
	r.res.Ended = r.clock.Now()
	if r.sink == nil {
		return r.res
	}
	rc := r.res
	rc.Attempts = append([]Attempt(nil), r.res.Attempts...)
	rc.Skips = append([]Skip(nil), r.res.Skips...)
	r.emit(Event{Kind: EventCallEnd, Time: r.res.Ended, Result: &rc})
	return r.res
}

// describe names an error briefly for a wait's reason.
func describe(e *stream.Error) string {
	s := string(e.Class)
	if e.Status != 0 {
		s = fmt.Sprintf("HTTP %d %s", e.Status, e.Class)
	}
	if e.MidStream {
		s += " mid-stream"
	}
	if e.Code != "" {
		s += " " + e.Code
	}
	return s
}

// fmtDur prints a duration to the millisecond.
func fmtDur(d time.Duration) string {
	if d >= time.Millisecond {
		d = d.Round(time.Millisecond)
	}
	return d.String()
}
