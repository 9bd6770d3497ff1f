package retry

import (
	"fmt"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// verdictIn is everything the policy looks at when an attempt ends: the
// attempt's error (its class and delay), how it ended, the tries made, the
// budget left and the policy. It holds no engine state.
type verdictIn struct {
	Target      stream.Target // where the attempt went
	Err         *stream.Error // nil: the attempt succeeded
	Ended       attemptEnd    // whether the engine ended the attempt, and why
	Cancelled   bool          // the caller's context is done
	TextSent    bool          // text of this attempt reached the caller
	CircuitOpen bool          // Target's circuit is open (read only with a target left)
	Tries       int           // requests made to Target, this one included
	Next        bool          // a target is left after Target
	BudgetLeft  bool          // the call may make another request
	Now         time.Time     // when the attempt is decided
	Deadline    time.Time     // the call's deadline
	Policy      Policy
	// Rand draws from [0, 1), at most once, for the wait's jitter or
	// backoff.
	Rand func() float64
}

// verdict is what the policy makes of an attempt's end.
type verdict struct {
	Decision Decision
	// Outcome is the call's outcome when Decision ends the call (not
	// retry, not fail over).
	Outcome Outcome
	// Wait is the wait before the next try (DecideRetry).
	Wait Wait
	// RetryAt is when the server lets the call be sent again (DecideDefer).
	RetryAt time.Time
	// Reason is why the call moves on (DecideFailover) when not the error
	// itself; ByUser says the user moved it.
	Reason string
	ByUser bool
	// StopAccount leaves Target's account for the rest of the call (a quota
	// error moved the call on, FailoverOnQuota).
	StopAccount bool
}

// Shorthands for verdicts without a wait.
var (
	moveOnVerdict = verdict{Decision: DecideFailover}
	giveUpVerdict = verdict{Decision: DecideGiveUp, Outcome: OutcomeGaveUp}
	failVerdict   = verdict{Decision: DecideFail, Outcome: OutcomeFailed}
	stopVerdict   = verdict{Decision: DecideStop, Outcome: OutcomeStopped}
)

// decideAttempt applies the policy to an attempt's end. It is a pure
// function of its input (in.Rand aside, which it calls at most once).
func decideAttempt(in verdictIn) verdict {
	e := in.Err
	if e == nil {
		return verdict{Decision: DecideDone, Outcome: OutcomeOK}
	}
	pol := in.Policy
	if in.Cancelled || (e.Class == stream.ClassCancelled && in.Ended == endedByServer) {
		return verdict{Decision: DecideCancel, Outcome: OutcomeCancelled}
	}
	if pol.NoRetryAfterText && in.TextSent && e.Class != stream.ClassQuota {
		// The caller has part of this answer: another attempt's text
		// cannot be glued onto it.
		if e.Class == stream.ClassCaller {
			return failVerdict
		}
		return giveUpVerdict
	}
	switch in.Ended {
	case endedByUser:
		return verdict{Decision: DecideFailover, ByUser: true, Reason: "failed over by you during the request"}
	case endedByDeadline:
		return moveOnOr(in.Next, giveUpVerdict)
	}
	switch e.Class {
	case stream.ClassQuota: // its cooldown is set already
		if pol.FailoverOnQuota && in.Next && !(pol.NoRetryAfterText && in.TextSent) {
			return verdict{Decision: DecideFailover, StopAccount: true}
		}
		return stopVerdict
	case stream.ClassCaller:
		return moveOnOr(e.ModelSpecific && in.Next, failVerdict)
	}
	return transientVerdict(in)
}

// moveOnOr is a move to the next target when move holds, else v.
func moveOnOr(move bool, v verdict) verdict {
	if move {
		return moveOnVerdict
	}
	return v
}

// transientVerdict decides a transient error: rate_limit, overload, server,
// connection, timeout, flex_capacity (and any class this package does not
// know, treated as server). Short flex capacity is the sub-case of
// flexVerdict: short jittered retries, then the next target.
func transientVerdict(in verdictIn) verdict {
	e, pol, next := in.Err, in.Policy, in.Next
	if e.NoRetry || oversize(e) {
		// x-should-retry: false, or a stream over the size cap.
		return moveOnOr(next && in.BudgetLeft, giveUpVerdict)
	}
	if next && in.CircuitOpen {
		// This failure (or another call's) opened the circuit: another
		// try would only be skipped.
		return verdict{Decision: DecideFailover, Reason: fmt.Sprintf("%s answered %s; its circuit is open", in.Target, describe(e))}
	}
	if next && (e.Class == stream.ClassTimeout || (e.Class == stream.ClassConnection && e.Status == 0 && !e.MidStream)) {
		// A silent provider (a timeout, or a connection that ended without
		// any response) is not retried while a fallback is left; a stream
		// cut part-way is retried like any transient error.
		return moveOnVerdict
	}
	if e.Class == stream.ClassFlexCapacity && next {
		if v, ok := flexVerdict(in); ok {
			return v
		}
	}
	hasDelay := serverSource(e.DelaySource)
	deferred := verdict{Decision: DecideDefer, Outcome: OutcomeDeferred, RetryAt: in.Now.Add(e.Delay)}
	// A flex target's tries are counted by flexVerdict.
	triesSpent := next && in.Tries >= pol.TriesPerTarget && e.Class != stream.ClassFlexCapacity
	if !in.BudgetLeft || triesSpent {
		if !next && hasDelay && e.Delay > pol.MaxWait {
			return deferred
		}
		return moveOnOr(in.BudgetLeft, giveUpVerdict)
	}
	if hasDelay && e.Delay > pol.FailoverWait && next {
		return moveOnVerdict
	}
	if hasDelay && !next && e.Delay > pol.MaxWait {
		return deferred
	}
	w := retryWait(in, hasDelay)
	if w.Until.After(in.Deadline) {
		return moveOnOr(next, giveUpVerdict)
	}
	return verdict{Decision: DecideRetry, Wait: w}
}

// retryWait is the wait before another try at in.Target: the server's delay
// plus 0..Jitter, or full-jitter backoff without one.
func retryWait(in verdictIn, hasDelay bool) Wait {
	e, t := in.Err, in.Target
	w := Wait{Target: t, Deadline: in.Deadline}
	if hasDelay {
		w.Duration = e.Delay + time.Duration(in.Rand()*float64(in.Policy.Jitter))
		w.Asked = e.Delay
		w.Source = e.DelaySource
		w.Reason = fmt.Sprintf("%s asked %s (%s)", t, fmtDur(e.Delay), e.DelaySource)
	} else {
		pol := in.Policy
		if e.Class == stream.ClassFlexCapacity {
			pol.BackoffCap = min(pol.BackoffCap, flexBackoffCap(pol))
		}
		w.Duration = backoff(pol, in.Tries, in.Rand())
		w.Source = stream.SourceBackoff
		w.Reason = fmt.Sprintf("%s answered %s; backing off %s (full jitter, try %d)", t, describe(e), fmtDur(w.Duration), in.Tries)
	}
	w.Until = in.Now.Add(w.Duration)
	return w
}

// backoff is full jitter: rnd's point in [0, min(cap, base*2^(n-1))).
func backoff(pol Policy, n int, rnd float64) time.Duration {
	ceil := pol.BackoffBase
	for i := 1; i < n && ceil < pol.BackoffCap; i++ {
		ceil *= 2
	}
	if ceil > pol.BackoffCap {
		ceil = pol.BackoffCap
	}
	return time.Duration(rnd * float64(ceil))
}

// flexVerdict moves a call whose target's flex capacity is short on to the
// next target (the same model at the default tier, where the chain names
// it) once the target had its flex tries; ok false: decide it as any
// transient error (a short retry).
func flexVerdict(in verdictIn) (verdict, bool) {
	n := in.Policy.FlexTries
	if n <= 0 {
		n = DefaultPolicy().FlexTries
	}
	if in.Tries < n && in.BudgetLeft {
		return verdict{}, false
	}
	return verdict{Decision: DecideFailover, Reason: fmt.Sprintf("%s: flex capacity short after %d tries", in.Target, in.Tries)}, true
}

// flexBackoffCap is the cap of the backoff between flex retries.
func flexBackoffCap(pol Policy) time.Duration {
	if pol.FlexBackoffCap > 0 {
		return pol.FlexBackoffCap
	}
	return DefaultPolicy().FlexBackoffCap
}
