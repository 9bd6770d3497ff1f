package retry

import (
	"context"
	"errors"
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
	// DeadlineIsDefault: Deadline is the default, not the caller's choice
	// (no --deadline). A chain with a flex target then gets its longest
	// flex timeout (stream.Target.FlexTimeout) added to it, so that a slow
	// flex answer leaves the rest of the chain its usual budget; a chosen
	// Deadline is kept as it is.
	DeadlineIsDefault bool
	BackoffBase       time.Duration // full-jitter exponential backoff base (default 500ms)
	BackoffCap        time.Duration // and cap (default 20s)
	Jitter            time.Duration // added to a server's delay: 0..Jitter (default 250ms)
	IgnoreCooldown    bool
	// NoRetryAfterText: once any text of an attempt has reached the caller,
	// an error ends the call instead of retrying or failing over (the proxy,
	// whose caller cannot take text back): gave_up (failed for a caller
	// error), with that error in Result.Err and the text on the attempt's
	// PartialText. A quota error still stops the call and sets its
	// cooldown. Control.CanFailOver turns false at the first text.
	NoRetryAfterText bool
	// FailoverOnQuota: a quota stop still records its cooldown, but moves on
	// to the next target on a different account (its Doer scope differs;
	// targets on the stopped account are skipped, see Result.Skips) instead
	// of ending the call; a cooldown found active before sending moves on
	// the same way. Off by default: a person must act. On or off, a call
	// that met a quota stop has Result.Cooldown and Result.ActionRequired
	// set, also when another account answered (Outcome ok); the move is in
	// Result.Moves with the quota error as its Cause.
	FailoverOnQuota bool
	// FlexTries is the requests made to a target whose flex capacity is
	// short (stream.ClassFlexCapacity) before the call moves on, when a
	// fallback is left (default 3: two short retries); FlexBackoffCap caps
	// their full-jitter backoff (default 2s): the providers advise
	// jittered retries, then the request without flex.
	FlexTries      int
	FlexBackoffCap time.Duration
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
		FlexTries:      3,
		FlexBackoffCap: 2 * time.Second,
	}
}

// CallDeadline is the time budget of a call with policy p over chain: p's
// Deadline, plus the longest flex timeout of the chain's targets when the
// deadline is the default (p.DeadlineIsDefault).
func CallDeadline(p Policy, chain []stream.Target) time.Duration {
	d := p.WithDefaults().Deadline
	if !p.DeadlineIsDefault {
		return d
	}
	var flex time.Duration
	for _, t := range chain {
		flex = max(flex, t.FlexTimeout())
	}
	return d + flex
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
	if p.FlexTries <= 0 {
		p.FlexTries = d.FlexTries
	}
	if p.FlexBackoffCap <= 0 {
		p.FlexBackoffCap = d.FlexBackoffCap
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
	// Queued is how long the call already waited at its caller's own gate
	// before Run (the proxy's concurrency ceiling per alias): it is added to
	// the first attempt's Paced, so the history shows the whole wait.
	Queued time.Duration
}

// Engine runs calls. It is safe for concurrent use.
type Engine struct {
	Doer      Doer
	Clock     Clock          // nil: the wall clock
	Cooldowns Cooldowns      // nil: in memory, for this engine's life
	Pacer     Pacing         // nil: no pacing; NewPacer() is the in-memory one
	Rand      func() float64 // in [0,1); nil: math/rand/v2
	// Breaker, when set, skips a target whose circuit is open (repeated
	// overloads, timeouts or connection failures) and lets one probe at a
	// time through a half-open one (breaker.go); nil: none.
	// NewMemoryBreaker is the in-memory one.
	Breaker Breaker

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

// pacer returns e.Pacer, or nil when it is unset or a nil *Pacer (a typed
// nil in the interface, as a caller passing its own nil *Pacer field makes).
func (e *Engine) pacer() Pacing {
	if p, ok := e.Pacer.(*Pacer); ok && p == nil {
		return nil
	}
	return e.Pacer
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
// sets a cooldown (with FailoverOnQuota, it moves on to the next target on
// another account instead); caller fails it (a model-specific one moves on);
// x-should-retry: false, or a stream over the size cap, moves on or gives
// up; a timeout, or a connection that ended without any response, moves on
// at once while a target is left; otherwise the wait is the server's delay
// plus 0..Jitter (longer than FailoverWait with a target left: move on now;
// longer than MaxWait with none: deferred) or full-jitter backoff, and a
// wait that would cross the deadline moves on or gives up without sleeping.
// Pacing waits follow the same rules. The deadline bounds the whole call,
// the wait for a concurrency slot and the attempt in flight included: an
// attempt still in flight when it passes is ended as a timeout, and the
// call moves on (the next target gets FailoverWait to answer) or gives up.
// The time sink takes over the text events does not count toward the
// deadline: a caller that takes its answer slowly moves it on by as much.
// With NoRetryAfterText, an error after any text reached sink ends the
// call. Call.Control moves the call on at once, from a wait or a stream.
func (e *Engine) Run(ctx context.Context, c Call, sink func(Event)) Result {
	r := &run{
		e:     e,
		ctx:   ctx,
		call:  c,
		pol:   c.Policy.WithDefaults(),
		clock: e.clock(),
		cds:   e.cooldowns(),
		pacer: e.pacer(),
		sink:  sink,
	}
	defer c.Control.setCanMove(false)
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
	pacer    Pacing
	sink     func(Event)
	res      Result
	deadline time.Time
	lastErr  *stream.Error

	failover <-chan struct{} // closed by Control.FailOver while on this target
	textSent bool            // text of the current attempt reached sink
	// sinkMu guards what the deadline's timer shares with the attempt's
	// text callbacks: the time spent in the sink is the caller's, not the
	// call's, and moves the deadline on by as much (see emitText).
	sinkMu   sync.Mutex
	inSink   bool            // a text event is in the sink
	extended time.Duration   // the deadline moved on since the attempt's timer was armed
	due      func()          // the timer fired while in the sink: re-checks when it returns
	move     Move            // why the current target is being left
	stopped  map[string]bool // accounts whose quota stop this call met (FailoverOnQuota)
}

// step is what the loop does after an attempt or before one.
type step int

const (
	stepDone     step = iota // the call ended; r.res is final
	stepRetry                // same target again
	stepFailover             // next target
)

// Errors a call's attempt context is cancelled with, to tell why.
var (
	errUserFailover = errors.New("failed over by the user")
	errCallDeadline = errors.New("the call's deadline passed")
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
	chain := append([]stream.Target(nil), r.call.Chain...)
	r.pol.Deadline = CallDeadline(r.pol, chain)
	r.deadline = now.Add(r.pol.Deadline)
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
		// Taken once per target: a FailOver at any point while on it (a
		// wait, a stream, between the two) moves the call on once.
		r.failover = r.call.Control.requested()
		r.call.Control.setCanMove(next && !(r.pol.NoRetryAfterText && r.textSent))
		r.move = Move{}
		if r.target(t, next) == stepDone {
			return r.res
		}
		m := r.move
		m.From, m.To = t, chain[ti+1]
		r.res.Moves = append(r.res.Moves, m)
	}
	// Unreachable: the last target always ends the call. Keep a sane answer.
	return r.finish(OutcomeGaveUp, r.lastOr(stream.ClassServer, "the chain was exhausted"))
}

// target sends to t until it ends the call (stepDone) or moves on
// (stepFailover).
func (r *run) target(t stream.Target, next bool) step {
	if s, ok := r.sameAccount(t, next); ok {
		return s
	}
	tries := 0
	for {
		if len(r.res.Attempts) >= r.pol.MaxAttempts {
			r.finish(OutcomeGaveUp, r.lastOr(stream.ClassServer, fmt.Sprintf("the budget of %d requests was spent", r.pol.MaxAttempts)))
			return stepDone
		}
		if r.userMoved(t) {
			return stepFailover
		}
		if s := r.cooldownHit(t, next); s != stepRetry {
			return s
		}
		probe, s := r.gate(t, next)
		if s != stepRetry {
			return s
		}
		permit, paced, s := r.pace(t, next)
		if s != stepRetry {
			r.record(t, probe, BreakerNeutral)
			return s
		}
		if permit != nil {
			// Another call may have hit a quota while this one waited.
			if s := r.cooldownHit(t, next); s != stepRetry {
				permit.Cancel(r.clock.Now())
				r.record(t, probe, BreakerNeutral)
				return s
			}
		}
		sr, why := r.send(t, paced, permit)
		r.record(t, probe, breakerOutcome(&sr, why))
		if sr.Err != nil && sr.Err.Class == stream.ClassQuota {
			// Before the slot is given back, so no call queued for it
			// sends after a quota error.
			if cd := r.setCooldown(t, sr.Err); cd != nil {
				r.last().Cooldown = cd
				r.res.Cooldown = cd
			}
		}
		permit.Done(&sr, r.clock.Now())
		tries++
		switch r.decide(t, &sr, why, tries, next) {
		case stepDone:
			return stepDone
		case stepFailover:
			return stepFailover
		}
	}
}

// userMoved reports whether a FailOver came for t between two of its
// waits and requests (not during one): the call moves on without sending
// again, and the last attempt, when it was t's, records the user's move.
func (r *run) userMoved(t stream.Target) bool {
	select {
	case <-r.failover:
	default:
		return false
	}
	r.move.ByUser = true
	r.move.Reason = "failed over by you"
	if n := len(r.res.Attempts); n > 0 && r.res.Attempts[n-1].Target == t {
		a := &r.res.Attempts[n-1]
		a.FailedOverByUser = true
		r.move.Attempt, r.move.Cause = a.N, r.lastErr
	}
	return true
}

// sameAccount skips t, with FailoverOnQuota, when its account already met a
// quota stop in this call: it moves on, or ends the call as stopped when t
// is the last target. ok is false when t is to be tried.
func (r *run) sameAccount(t stream.Target, next bool) (step, bool) {
	if !r.pol.FailoverOnQuota || len(r.stopped) == 0 {
		return stepRetry, false
	}
	acct := r.e.Doer.Scope(t, stream.ScopeAccount)
	if acct == "" || !r.stopped[acct] {
		return stepRetry, false
	}
	reason := fmt.Sprintf("%s is on the account whose quota stop this call met; only another account may answer", t)
	if next {
		r.skip(t, 0, reason)
		return stepFailover, true
	}
	r.res.Skips = append(r.res.Skips, Skip{Target: t, Reason: reason})
	r.finish(OutcomeStopped, r.lastOr(stream.ClassQuota, reason))
	return stepDone, true
}

// skip records t as left unsent, and why, and moves on.
func (r *run) skip(t stream.Target, wait time.Duration, reason string) {
	r.res.Skips = append(r.res.Skips, Skip{Target: t, Wait: wait, Reason: reason})
	if r.move.Reason == "" {
		r.move.Reason = reason
	}
}

// pace acquires a concurrency slot and waits what the pacer asks. It returns
// stepRetry to go on and send, or what the call does instead.
func (r *run) pace(t stream.Target, next bool) (*Permit, time.Duration, step) {
	p := r.pacer
	if p == nil {
		return nil, 0, stepRetry
	}
	asked := r.clock.Now()
	// A wait for a concurrency slot is a wait like any other: the deadline
	// bounds it (its length is not known ahead, so it is bounded, not
	// announced), and so does a FailOver.
	actx, cancel := r.attemptContext(asked)
	permit, err := p.Acquire(actx, t)
	why := context.Cause(actx)
	cancel()
	if err != nil {
		if r.ctx.Err() != nil {
			r.cancelled(r.ctx.Err())
			return nil, 0, stepDone
		}
		waited := r.clock.Now().Sub(asked)
		if errors.Is(why, errUserFailover) {
			r.move.ByUser = true
			r.skip(t, waited, fmt.Sprintf("failed over by you after %s waiting for a concurrency slot", fmtWait(waited)))
			return nil, 0, stepFailover
		}
		reason := fmt.Sprintf("no concurrency slot for %s before the deadline", t)
		if next {
			r.skip(t, waited, reason)
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
		r.skip(t, pc.Delay, pc.Reason)
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
	waited, end2 := r.wait(w, now)
	switch end2 {
	case WaitCancelled:
		permit.Cancel(r.clock.Now())
		r.cancelled(r.ctx.Err())
		return nil, 0, stepDone
	case WaitFailover:
		permit.Cancel(r.clock.Now())
		r.move.ByUser = true
		r.skip(t, waited, userNote(waited, pc.Delay))
		return nil, 0, stepFailover
	}
	return permit, slot + waited, stepRetry
}

// wait emits w, sleeps it (ended early by ctx or a FailOver), emits its
// wait_end with the time actually waited, and returns that time and how the
// wait ended.
func (r *run) wait(w Wait, start time.Time) (time.Duration, WaitEnd) {
	r.emit(Event{Kind: EventWait, Time: start, Wait: &w})
	wctx, cancel := context.WithCancelCause(r.ctx)
	stop := r.watchFailover(cancel)
	err := r.clock.Sleep(wctx, w.Duration)
	stop()
	why := context.Cause(wctx)
	cancel(nil)
	end := r.clock.Now()
	waited := end.Sub(start)
	if waited < 0 {
		waited = 0
	}
	ended := WaitElapsed
	switch {
	case err == nil:
	case r.ctx.Err() != nil:
		ended = WaitCancelled
	case errors.Is(why, errUserFailover):
		ended = WaitFailover
	default:
		ended = WaitCancelled
	}
	we := w
	we.Waited, we.EndedBy = waited, ended
	r.emit(Event{Kind: EventWaitEnd, Time: end, Wait: &we})
	return waited, ended
}

// watchFailover cancels with errUserFailover when the call's Control asks
// to fail over, until the returned stop is called.
func (r *run) watchFailover(cancel context.CancelCauseFunc) (stop func()) {
	ch := r.failover
	if ch == nil {
		return func() {}
	}
	select {
	case <-ch: // asked already, between two waits
		cancel(errUserFailover)
		return func() {}
	default:
	}
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-ch:
			cancel(errUserFailover)
		case <-done:
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// attemptContext returns the context of one attempt (or slot wait) started
// at now: the call's, ended at the call's deadline (errCallDeadline) and by
// a FailOver (errUserFailover). A target reached after the deadline passed
// (the deadline moved the call there) gets FailoverWait to answer, so that
// the move can still be answered and the call stays bounded: at most the
// deadline plus FailoverWait per fallback.
func (r *run) attemptContext(now time.Time) (context.Context, context.CancelFunc) {
	ctx, cancelCause := context.WithCancelCause(r.ctx)
	left := r.deadline.Sub(now)
	if left <= 0 {
		left = r.pol.FailoverWait
	}
	stopTimer := r.deadlineTimer(left, func() { cancelCause(errCallDeadline) })
	stopWatch := r.watchFailover(cancelCause)
	return ctx, func() {
		stopWatch()
		stopTimer()
		cancelCause(nil)
	}
}

// deadlineTimer runs expire once d of the clock's time has passed that the
// attempt did not spend in its sink's text callbacks: when it fires while
// one runs, it waits for it to return; when the sink took time since it was
// armed, it waits that much longer. A caller that reads its answer slowly
// (the proxy's backpressure) so never brings the deadline nearer.
func (r *run) deadlineTimer(d time.Duration, expire func()) (stop func()) {
	var mu sync.Mutex // guards stopped and stopCur against the timer's own re-arming
	stopped := false
	var stopCur func()
	var fire func()
	arm := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			stopCur = afterFunc(r.clock, d, fire)
		}
	}
	fire = func() {
		r.sinkMu.Lock()
		if r.inSink {
			r.due = fire
			r.sinkMu.Unlock()
			return
		}
		ext := r.extended
		r.extended = 0
		r.sinkMu.Unlock()
		if ext > 0 {
			arm(ext)
			return
		}
		mu.Lock()
		live := !stopped
		mu.Unlock()
		if live {
			expire()
		}
	}
	r.sinkMu.Lock()
	r.extended, r.due = 0, nil
	r.sinkMu.Unlock()
	arm(d)
	return func() {
		mu.Lock()
		stopped = true
		f := stopCur
		mu.Unlock()
		if f != nil {
			f()
		}
		r.sinkMu.Lock()
		r.due = nil
		r.sinkMu.Unlock()
	}
}

// emitText hands a text event to the sink; the time the sink takes moves
// the call's deadline on by as much (the caller taking its answer slowly is
// not the call being slow), and a deadline timer that fired meanwhile
// re-checks once it returns.
func (r *run) emitText(ev Event) {
	start := r.clock.Now()
	r.sinkMu.Lock()
	r.inSink = true
	r.sinkMu.Unlock()
	r.emit(ev)
	took := r.clock.Now().Sub(start)
	r.sinkMu.Lock()
	r.inSink = false
	if took > 0 {
		r.deadline = r.deadline.Add(took)
		r.extended += took
		r.res.SinkTime += took
	}
	f := r.due
	r.due = nil
	r.sinkMu.Unlock()
	if f != nil {
		f()
	}
}

// attemptEnd says why an attempt's context ended, when the engine ended it.
type attemptEnd int

const (
	endedByServer   attemptEnd = iota // the attempt ended on its own (or the caller cancelled)
	endedByUser                       // Control.FailOver
	endedByDeadline                   // the call's deadline passed in flight
)

// send makes one attempt and records it. permit (nil: none) learns when
// the answer begins (Permit.Progress).
func (r *run) send(t stream.Target, paced time.Duration, permit *Permit) (stream.Result, attemptEnd) {
	start := r.clock.Now()
	a := Attempt{N: len(r.res.Attempts) + 1, Target: t, StartedAt: start, Paced: paced}
	if a.N == 1 {
		a.Paced += r.call.Queued
	}
	ac := a
	r.emit(Event{Kind: EventAttemptStart, Time: start, Attempt: &ac})
	r.textSent = false
	began := false
	// The answer began: its first text, thinking or usage. Its success
	// headers come first, with the limits they tell (Permit.Progress).
	progress := func() {
		if !began {
			began = true
			permit.Progress(r.clock.Now(), nil)
		}
	}
	onHeaders := func(lim *stream.Limits) {
		if lim != nil {
			permit.Progress(r.clock.Now(), lim)
		}
	}
	onText := func(s string) {
		if s == "" {
			return
		}
		progress()
		if !r.textSent {
			r.textSent = true
			if r.pol.NoRetryAfterText {
				r.call.Control.setCanMove(false) // the caller cannot take text back
			}
		}
		r.emitText(Event{Kind: EventText, Text: s})
	}
	thinking := false
	onThinking := func() {
		progress()
		if !thinking && !r.textSent {
			thinking = true
			r.emit(Event{Kind: EventThinking, Time: r.clock.Now()})
		}
	}
	onUsage := func(u stream.Usage) {
		progress()
		if !r.textSent {
			r.emit(Event{Kind: EventUsage, Time: r.clock.Now(), Usage: &u})
		}
	}
	actx, cancel := r.attemptContext(start)
	sr := r.e.Doer.Do(actx, stream.Request{Target: t, Prompt: r.call.Prompt, MaxTokens: r.call.MaxTokens,
		System: r.call.System, Messages: r.call.Messages, Sampling: r.call.Sampling, OnThinking: onThinking, OnUsage: onUsage, OnHeaders: onHeaders}, onText)
	why := context.Cause(actx)
	cancel()
	end := endedByServer
	if sr.Err != nil && r.ctx.Err() == nil {
		switch {
		case errors.Is(why, errUserFailover):
			end = endedByUser
		case errors.Is(why, errCallDeadline):
			end = endedByDeadline
			// The engine ended it: a timeout of the call, whatever the
			// Doer made of the cancelled context.
			e := *sr.Err
			e.Class, e.Code, e.NoRetry = stream.ClassTimeout, "", false
			e.Delay, e.DelaySource = 0, ""
			e.Message = fmt.Sprintf("the call's deadline (%s) passed with the request to %s in flight", fmtDur(r.pol.Deadline), t)
			e.Err = errCallDeadline
			sr.Err = &e
		}
	}
	a.Duration = r.clock.Now().Sub(start)
	a.Status = sr.Status
	a.Class = sr.Class()
	a.RequestID = sr.RequestID
	a.ResponseID = sr.ResponseID
	a.TTFT = sr.TTFT
	a.TTFText, a.Thinking, a.ReasoningTokens = sr.TTFText, sr.Thinking, sr.ReasoningTokens
	a.ServedTier, a.Downgraded = sr.ServedTier, a.Target.Downgraded(sr.ServedTier)
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
	if end == endedByUser {
		a.FailedOverByUser = true
	}
	r.res.Attempts = append(r.res.Attempts, a)
	return sr, end
}

func serverSource(s stream.DelaySource) bool {
	switch s {
	case stream.SourceRetryAfterMs, stream.SourceRetryAfter, stream.SourceRetryInfo, stream.SourceMessage:
		return true
	}
	return false
}

// oversize reports whether e ended a stream that passed a size cap
// (stream.Error.Oversize): the same target would send it again, so it is not
// retried there.
func oversize(e *stream.Error) bool { return e.Oversize }

// last returns the attempt being decided.
func (r *run) last() *Attempt { return &r.res.Attempts[len(r.res.Attempts)-1] }

// endAttempt records the decision and emits attempt_end.
func (r *run) endAttempt(d Decision) {
	a := r.last()
	a.Decision = d
	ac := *a
	r.emit(Event{Kind: EventAttemptEnd, Attempt: &ac})
}

// moveOn ends the attempt being decided with a failover: its error is what
// moves the call.
func (r *run) moveOn() step {
	r.endAttempt(DecideFailover)
	a := r.last()
	r.move.Attempt = a.N
	r.move.Cause = r.lastErr
	if r.move.Reason == "" {
		r.move.Reason = fmt.Sprintf("%s answered %s", a.Target, describe(r.lastErr))
	}
	return stepFailover
}

// decide applies the policy's verdict (decideAttempt) on the attempt just
// made: it records the decision, ends the call or moves it on, or waits
// before the next try.
func (r *run) decide(t stream.Target, sr *stream.Result, why attemptEnd, tries int, next bool) step {
	e := sr.Err
	if e == nil {
		r.endAttempt(DecideDone)
		r.res.Text = sr.Text
		r.res.TextTruncated = sr.TextTruncated
		r.res.FinishReason = sr.FinishReason
		r.res.Usage = sr.Usage
		served := stream.Target{Provider: t.Provider, Account: t.Account, Model: sr.Model, Tier: t.Tier}
		if served.Model == "" {
			served.Model = t.Model
		}
		r.res.ServedBy = &served
		r.finish(OutcomeOK, nil)
		return stepDone
	}
	ec := *e
	r.lastErr = &ec
	ctxErr := r.ctx.Err()
	now := r.clock.Now()
	v := decideAttempt(verdictIn{
		Target: t, Err: e, Ended: why,
		Cancelled:   ctxErr != nil,
		TextSent:    r.textSent,
		CircuitOpen: next && r.circuitOpen(t),
		Tries:       tries, Next: next,
		BudgetLeft: len(r.res.Attempts) < r.pol.MaxAttempts,
		Now:        now, Deadline: r.deadline,
		Policy: r.pol, Rand: r.e.rand,
	})
	switch v.Decision {
	case DecideCancel:
		r.endAttempt(DecideCancel)
		if ctxErr == nil {
			ctxErr = context.Canceled
		}
		r.cancelled(ctxErr)
		return stepDone
	case DecideFailover:
		if v.StopAccount {
			r.stopAccount(t)
		}
		if v.ByUser {
			r.move.ByUser = true
		}
		if v.Reason != "" {
			r.move.Reason = v.Reason
		}
		return r.moveOn()
	case DecideDefer:
		r.last().DelaySource = e.DelaySource
		r.endAttempt(DecideDefer)
		r.res.RetryAt = v.RetryAt
		r.finish(OutcomeDeferred, r.lastErr)
		return stepDone
	case DecideRetry:
		return r.retryAfter(v.Wait, now)
	}
	r.endAttempt(v.Decision)
	r.finish(v.Outcome, r.lastErr)
	return stepDone
}

// stopAccount leaves t's account for the rest of the call: a quota error
// there moved the call on.
func (r *run) stopAccount(t stream.Target) {
	if acct := r.e.Doer.Scope(t, stream.ScopeAccount); acct != "" {
		if r.stopped == nil {
			r.stopped = map[string]bool{}
		}
		r.stopped[acct] = true
	}
}

// retryAfter ends the attempt being decided with a retry, waits w from now
// and returns stepRetry, or what the call does when the wait ends otherwise.
func (r *run) retryAfter(w Wait, now time.Time) step {
	a := r.last()
	a.DelaySource = w.Source
	// attempt_end carries the wait about to be taken; the wait_end event
	// and the Result carry what was actually waited.
	a.Waited = w.Duration
	a.WaitPlanned = w.Duration
	r.endAttempt(DecideRetry)
	waited, ended := r.wait(w, now)
	a = r.last()
	a.Waited = waited
	switch ended {
	case WaitCancelled:
		r.cancelled(r.ctx.Err())
		return stepDone
	case WaitFailover:
		a.FailedOverByUser = true
		a.Decision = DecideFailover
		r.move.ByUser = true
		r.move.Attempt = a.N
		r.move.Cause = r.lastErr
		r.move.Reason = userNote(waited, w.Duration)
		return stepFailover
	}
	return stepRetry
}

// setCooldown records the cooldown of a quota error on t and returns it (nil
// when the Doer gives no scope key).
func (r *run) setCooldown(t stream.Target, e *stream.Error) *Cooldown {
	s := e.Scope
	if s == stream.ScopeNone {
		s = stream.ScopeAccount
	}
	key := r.e.Doer.Scope(t, s)
	if key == "" {
		return nil
	}
	cd := Cooldown{
		Scope:   key,
		Until:   e.ResetAt,
		Since:   r.clock.Now(),
		Target:  t.String(),
		Code:    e.Code,
		Message: e.Message,
	}
	// A Cooldowns error (a locked store) must not fail the call.
	_ = r.cds.Set(cd)
	return &cd
}

// cooldownHit checks t's account and t itself for an active cooldown. None:
// stepRetry. One: the call ends as stopped (stepDone), or, with
// FailoverOnQuota and a target left, t is skipped (stepFailover).
func (r *run) cooldownHit(t stream.Target, next bool) step {
	if r.pol.IgnoreCooldown {
		return stepRetry
	}
	now := r.clock.Now()
	for _, s := range []stream.Scope{stream.ScopeAccount, stream.ScopeTarget} {
		key := r.e.Doer.Scope(t, s)
		if key == "" {
			continue
		}
		cd, ok, err := getCooldown(r.ctx, r.cds, key)
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
		c := cd
		r.res.Cooldown = &c
		qe := &stream.Error{Class: stream.ClassQuota, Code: cd.Code, Message: msg}
		if r.pol.FailoverOnQuota && next {
			if r.stopped == nil {
				r.stopped = map[string]bool{}
			}
			if acct := r.e.Doer.Scope(t, stream.ScopeAccount); acct != "" && s == stream.ScopeAccount {
				r.stopped[acct] = true
			}
			r.lastErr = qe
			r.move.Cause = qe
			r.skip(t, 0, msg)
			return stepFailover
		}
		r.res.CooldownHit = true
		r.res.CooldownUntil = cd.Until
		r.finish(OutcomeStopped, qe)
		return stepDone
	}
	return stepRetry
}

func (r *run) lastOr(c stream.Class, msg string) *stream.Error {
	if r.lastErr != nil {
		return r.lastErr
	}
	return &stream.Error{Class: c, Message: msg}
}

func (r *run) cancelled(err error) Result {
	if err == nil {
		err = context.Canceled
	}
	msg := "cancelled"
	if cause := context.Cause(r.ctx); cause != nil && cause != err {
		// Whoever cancelled said why (a proxy's caller that went away):
		// the history keeps it.
		msg = "cancelled: " + cause.Error()
		err = fmt.Errorf("%w: %w", err, cause)
	}
	return r.finish(OutcomeCancelled, &stream.Error{Class: stream.ClassCancelled, Message: msg, Err: err})
}

func (r *run) finish(o Outcome, err *stream.Error) Result {
	r.res.Outcome = o
	r.res.Err = err
	r.res.Ended = r.clock.Now()
	r.res.ActionRequired = actionRequired(&r.res)
	r.call.Control.setCanMove(false)
	if r.sink == nil {
		return r.res
	}
	rc := r.res
	rc.Attempts = append([]Attempt(nil), r.res.Attempts...)
	rc.Skips = append([]Skip(nil), r.res.Skips...)
	rc.Moves = append([]Move(nil), r.res.Moves...)
	r.emit(Event{Kind: EventCallEnd, Time: r.res.Ended, Result: &rc})
	return r.res
}

// actionRequired is Result.ActionRequired: the sentence that says a person
// must act on a quota stop, whether or not another account answered.
func actionRequired(res *Result) string {
	cd := res.Cooldown
	if cd == nil {
		return ""
	}
	until := "until cleared"
	if !cd.Until.IsZero() {
		until = "until " + cd.Until.UTC().Format(time.RFC3339)
	}
	what := cd.Target + "'s quota stop"
	if cd.Code != "" {
		what += " (" + cd.Code + ")"
	}
	s := fmt.Sprintf("A person must act: %s blocks %s %s (check the plan, billing or limits, then clear the cooldown).", what, cd.Scope, until)
	if res.Outcome == OutcomeOK && res.ServedBy != nil {
		s = fmt.Sprintf("Answered by %s on another account, but a person must act: %s blocks %s %s (check the plan, billing or limits, then clear the cooldown).",
			res.ServedBy, what, cd.Scope, until)
	}
	return s
}

// userNote is the sentence of a wait the user cut short.
func userNote(waited, planned time.Duration) string {
	return fmt.Sprintf("failed over by you after %s of a %s wait", fmtWait(waited), fmtWait(planned))
}

// fmtWait prints a wait for people: to the second from 10s, else to the
// tenth of a second.
func fmtWait(d time.Duration) string {
	if d >= 10*time.Second {
		return d.Round(time.Second).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// describe names an error briefly for a wait's reason.
func describe(e *stream.Error) string {
	if e == nil {
		return "no error"
	}
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
