package retry

import (
	"testing"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// TestDecideAttempt is the policy's table: each row is an attempt's end (its
// error's class and delay, the tries, the budget, the policy) and the
// verdict it gets, with no engine, clock or network.
func TestDecideAttempt(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	target := stream.Target{Provider: "p", Account: "a", Model: "m"}
	pol := Policy{MaxAttempts: 5, TriesPerTarget: 2, BackoffBase: time.Second, BackoffCap: 8 * time.Second,
		Jitter: time.Second, FailoverWait: 10 * time.Second, MaxWait: time.Minute, Deadline: 5 * time.Minute}
	delayed := func(c stream.Class, d time.Duration) *stream.Error {
		return &stream.Error{Class: c, Status: 429, Delay: d, DelaySource: stream.SourceRetryAfter}
	}
	bare := func(c stream.Class) *stream.Error { return &stream.Error{Class: c, Status: 500} }
	// base is a first try on a target with a fallback left and budget.
	base := func(e *stream.Error) verdictIn {
		return verdictIn{Target: target, Err: e, Tries: 1, Next: true, BudgetLeft: true,
			Now: now, Deadline: now.Add(pol.Deadline), Policy: pol}
	}
	with := func(in verdictIn, f func(*verdictIn)) verdictIn { f(&in); return in }
	last := func(in *verdictIn) { in.Next = false }

	cases := []struct {
		name string
		in   verdictIn
		want Decision
		out  Outcome       // when the decision ends the call
		wait time.Duration // DecideRetry: the wait's duration
		src  stream.DelaySource
	}{
		{name: "success", in: base(nil), want: DecideDone, out: OutcomeOK},
		{name: "caller cancelled", in: with(base(bare(stream.ClassServer)), func(in *verdictIn) { in.Cancelled = true }), want: DecideCancel, out: OutcomeCancelled},
		{name: "cancelled class from the server", in: base(bare(stream.ClassCancelled)), want: DecideCancel, out: OutcomeCancelled},
		{name: "text sent, server error, no retry after text", in: with(base(bare(stream.ClassServer)), func(in *verdictIn) {
			in.TextSent, in.Policy.NoRetryAfterText = true, true
		}), want: DecideGiveUp, out: OutcomeGaveUp},
		{name: "text sent, caller error, no retry after text", in: with(base(bare(stream.ClassCaller)), func(in *verdictIn) {
			in.TextSent, in.Policy.NoRetryAfterText = true, true
		}), want: DecideFail, out: OutcomeFailed},
		{name: "text sent, quota, failover on quota: stop", in: with(base(delayed(stream.ClassQuota, 0)), func(in *verdictIn) {
			in.TextSent, in.Policy.NoRetryAfterText, in.Policy.FailoverOnQuota = true, true, true
		}), want: DecideStop, out: OutcomeStopped},
		{name: "ended by the user", in: with(base(bare(stream.ClassCancelled)), func(in *verdictIn) { in.Ended = endedByUser }), want: DecideFailover},
		{name: "deadline in flight, fallback left", in: with(base(bare(stream.ClassTimeout)), func(in *verdictIn) { in.Ended = endedByDeadline }), want: DecideFailover},
		{name: "deadline in flight, last target", in: with(base(bare(stream.ClassTimeout)), func(in *verdictIn) { in.Ended = endedByDeadline; last(in) }), want: DecideGiveUp, out: OutcomeGaveUp},
		{name: "quota stops", in: base(bare(stream.ClassQuota)), want: DecideStop, out: OutcomeStopped},
		{name: "quota, failover on quota", in: with(base(bare(stream.ClassQuota)), func(in *verdictIn) { in.Policy.FailoverOnQuota = true }), want: DecideFailover},
		{name: "quota, failover on quota, last target", in: with(base(bare(stream.ClassQuota)), func(in *verdictIn) { in.Policy.FailoverOnQuota = true; last(in) }), want: DecideStop, out: OutcomeStopped},
		{name: "caller error fails", in: base(bare(stream.ClassCaller)), want: DecideFail, out: OutcomeFailed},
		{name: "model-specific caller error moves on", in: base(&stream.Error{Class: stream.ClassCaller, ModelSpecific: true}), want: DecideFailover},
		{name: "model-specific caller error, last target", in: with(base(&stream.Error{Class: stream.ClassCaller, ModelSpecific: true}), last), want: DecideFail, out: OutcomeFailed},
		{name: "no-retry moves on", in: base(&stream.Error{Class: stream.ClassServer, NoRetry: true}), want: DecideFailover},
		{name: "no-retry, last target", in: with(base(&stream.Error{Class: stream.ClassServer, NoRetry: true}), last), want: DecideGiveUp, out: OutcomeGaveUp},
		{name: "oversize, budget spent", in: with(base(&stream.Error{Class: stream.ClassServer, Oversize: true}), func(in *verdictIn) { in.BudgetLeft = false }), want: DecideGiveUp, out: OutcomeGaveUp},
		{name: "circuit open moves on", in: with(base(bare(stream.ClassServer)), func(in *verdictIn) { in.CircuitOpen = true }), want: DecideFailover},
		{name: "circuit open, last target: retried", in: with(base(bare(stream.ClassServer)), func(in *verdictIn) { in.CircuitOpen = true; last(in) }), want: DecideRetry, wait: 500 * time.Millisecond, src: stream.SourceBackoff},
		{name: "timeout moves on", in: base(bare(stream.ClassTimeout)), want: DecideFailover},
		{name: "silent connection moves on", in: base(&stream.Error{Class: stream.ClassConnection}), want: DecideFailover},
		{name: "connection cut mid-stream is retried", in: base(&stream.Error{Class: stream.ClassConnection, MidStream: true}), want: DecideRetry, wait: 500 * time.Millisecond, src: stream.SourceBackoff},
		{name: "timeout on the last target is retried", in: with(base(bare(stream.ClassTimeout)), last), want: DecideRetry, wait: 500 * time.Millisecond, src: stream.SourceBackoff},
		{name: "tries on the target spent", in: with(base(bare(stream.ClassServer)), func(in *verdictIn) { in.Tries = 2 }), want: DecideFailover},
		{name: "budget spent", in: with(base(bare(stream.ClassServer)), func(in *verdictIn) { in.BudgetLeft = false }), want: DecideGiveUp, out: OutcomeGaveUp},
		{name: "budget spent, last target, long delay: deferred", in: with(base(delayed(stream.ClassRateLimit, 2*time.Minute)), func(in *verdictIn) { in.BudgetLeft = false; last(in) }), want: DecideDefer, out: OutcomeDeferred},
		{name: "delay over failover wait moves on", in: base(delayed(stream.ClassRateLimit, 11*time.Second)), want: DecideFailover},
		{name: "delay over max wait, last target: deferred", in: with(base(delayed(stream.ClassRateLimit, 2*time.Minute)), last), want: DecideDefer, out: OutcomeDeferred},
		{name: "server's delay plus jitter", in: base(delayed(stream.ClassRateLimit, 3*time.Second)), want: DecideRetry, wait: 3*time.Second + 500*time.Millisecond, src: stream.SourceRetryAfter},
		{name: "last target waits up to max wait", in: with(base(delayed(stream.ClassOverload, 30*time.Second)), last), want: DecideRetry, wait: 30*time.Second + 500*time.Millisecond, src: stream.SourceRetryAfter},
		{name: "backoff doubles per try", in: with(base(bare(stream.ClassOverload)), func(in *verdictIn) { in.Tries = 3; last(in) }), want: DecideRetry, wait: 2 * time.Second, src: stream.SourceBackoff},
		{name: "backoff is capped", in: with(base(bare(stream.ClassOverload)), func(in *verdictIn) { in.Tries = 9; last(in) }), want: DecideRetry, wait: 4 * time.Second, src: stream.SourceBackoff},
		{name: "wait past the deadline moves on", in: with(base(delayed(stream.ClassRateLimit, 3*time.Second)), func(in *verdictIn) { in.Deadline = now.Add(time.Second) }), want: DecideFailover},
		{name: "flex capacity: short retry", in: base(&stream.Error{Class: stream.ClassFlexCapacity, Status: 429}), want: DecideRetry, wait: 500 * time.Millisecond, src: stream.SourceBackoff},
		{name: "flex capacity: retried past tries per target", in: with(base(&stream.Error{Class: stream.ClassFlexCapacity, Status: 498}), func(in *verdictIn) { in.Tries = 2 }), want: DecideRetry, wait: time.Second, src: stream.SourceBackoff},
		{name: "flex capacity: backoff capped short", in: with(base(&stream.Error{Class: stream.ClassFlexCapacity, Status: 503}), func(in *verdictIn) { in.Tries = 2; in.Policy.FlexBackoffCap = 500 * time.Millisecond }), want: DecideRetry, wait: 250 * time.Millisecond, src: stream.SourceBackoff},
		{name: "flex capacity: flex tries spent moves on", in: with(base(&stream.Error{Class: stream.ClassFlexCapacity, Status: 429}), func(in *verdictIn) { in.Tries = 3 }), want: DecideFailover},
		{name: "flex capacity: budget spent moves on", in: with(base(&stream.Error{Class: stream.ClassFlexCapacity, Status: 429}), func(in *verdictIn) { in.BudgetLeft = false }), want: DecideFailover},
		{name: "flex capacity, last target: retried", in: with(base(&stream.Error{Class: stream.ClassFlexCapacity, Status: 429}), func(in *verdictIn) { in.Tries = 4; last(in) }), want: DecideRetry, wait: time.Second, src: stream.SourceBackoff},
		{name: "wait past the deadline, last target", in: with(base(delayed(stream.ClassRateLimit, 3*time.Second)), func(in *verdictIn) { in.Deadline = now.Add(time.Second); last(in) }), want: DecideGiveUp, out: OutcomeGaveUp},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			draws := 0
			c.in.Rand = func() float64 { draws++; return 0.5 }
			v := decideAttempt(c.in)
			if v.Decision != c.want {
				t.Fatalf("decision = %q, want %q (verdict %+v)", v.Decision, c.want, v)
			}
			if v.Outcome != c.out {
				t.Errorf("outcome = %q, want %q", v.Outcome, c.out)
			}
			if draws > 1 {
				t.Errorf("drew %d random numbers, want at most one", draws)
			}
			if c.want != DecideRetry {
				if v.Wait != (Wait{}) {
					t.Errorf("a %q verdict carries a wait: %+v", v.Decision, v.Wait)
				}
				return
			}
			w := v.Wait
			if w.Duration != c.wait || w.Source != c.src {
				t.Errorf("wait = %v from %q, want %v from %q", w.Duration, w.Source, c.wait, c.src)
			}
			if !w.Until.Equal(now.Add(c.wait)) || w.Target != target || !w.Deadline.Equal(c.in.Deadline) || w.Reason == "" {
				t.Errorf("wait = %+v, want until now+%v for %v with a reason and the call's deadline", w, c.wait, target)
			}
		})
	}
}

// TestDecideAttemptSideNotes checks what a verdict tells the engine beside
// its decision: why the call moves on, who moved it, when a deferred call
// may be sent again, and that a quota move leaves the account.
func TestDecideAttemptSideNotes(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	target := stream.Target{Provider: "p", Account: "a", Model: "m"}
	in := verdictIn{Target: target, Tries: 1, Next: true, BudgetLeft: true, Now: now,
		Deadline: now.Add(time.Hour), Policy: DefaultPolicy(), Rand: func() float64 { return 0 }}

	user := in
	user.Err, user.Ended = &stream.Error{Class: stream.ClassCancelled}, endedByUser
	if v := decideAttempt(user); !v.ByUser || v.Reason != "failed over by you during the request" {
		t.Errorf("a move by the user: %+v", v)
	}
	circuit := in
	circuit.Err, circuit.CircuitOpen = &stream.Error{Class: stream.ClassServer, Status: 503}, true
	if v := decideAttempt(circuit); v.ByUser || v.Reason == "" || v.StopAccount {
		t.Errorf("a move for an open circuit: %+v", v)
	}
	quota := in
	quota.Err, quota.Policy.FailoverOnQuota = &stream.Error{Class: stream.ClassQuota}, true
	if v := decideAttempt(quota); !v.StopAccount || v.Reason != "" {
		t.Errorf("a quota move: %+v", v)
	}
	deferred := in
	deferred.Next = false
	deferred.Err = &stream.Error{Class: stream.ClassRateLimit, Delay: 2 * time.Hour, DelaySource: stream.SourceRetryAfter}
	if v := decideAttempt(deferred); v.Decision != DecideDefer || !v.RetryAt.Equal(now.Add(2*time.Hour)) {
		t.Errorf("a deferred call: %+v, want retry at %v", v, now.Add(2*time.Hour))
	}
	plain := in
	plain.Err = &stream.Error{Class: stream.ClassServer, Status: 500}
	plain.Tries = 2
	plain.Policy.TriesPerTarget = 2
	if v := decideAttempt(plain); v.Decision != DecideFailover || v.Reason != "" || v.ByUser || v.StopAccount {
		t.Errorf("a plain move on: %+v", v)
	}
}
