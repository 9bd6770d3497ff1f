package retry_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/stream"
)

// runAsync runs c on e in a goroutine, collecting its events, and returns a
// function that waits for its Result and events.
func runAsync(ctx context.Context, e *retry.Engine, c retry.Call, onEvent func(retry.Event)) func() (retry.Result, []retry.Event) {
	done := make(chan struct{})
	var res retry.Result
	var evs []retry.Event
	go func() {
		defer close(done)
		res = e.Run(ctx, c, func(ev retry.Event) {
			evs = append(evs, ev)
			if onEvent != nil {
				onEvent(ev)
			}
		})
	}()
	return func() (retry.Result, []retry.Event) {
		<-done
		return res, evs
	}
}

func waitEnds(evs []retry.Event) []retry.Wait {
	var out []retry.Wait
	for _, ev := range evs {
		if ev.Kind == retry.EventWaitEnd {
			out = append(out, *ev.Wait)
		}
	}
	return out
}

// ctrl+f during a 20 s Retry-After wait, 11 s in,
// moves the one call to the fallback at once; the attempt records the 11 s
// actually waited, not 20 s, and that the user moved it.
func TestFailOverDuringWait(t *testing.T) {
	clearEnv(t)
	d := retrytest.NewDoer().Script(A.String(), retrytest.RateLimited(20*time.Second)).Always(B.String(), retrytest.OK("from b"))
	clk := retrytest.NewBlockingClock(t0)
	e := &retry.Engine{Doer: d, Clock: clk, Rand: func() float64 { return 0 }}
	ctl := retry.NewControl()
	c := call(A, B)
	c.Control = ctl
	c.Policy.FailoverWait = time.Minute
	wait := runAsync(context.Background(), e, c, nil)
	if err := clk.WaitSleepers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if !ctl.CanFailOver() {
		t.Fatal("CanFailOver false on the primary with a fallback left")
	}
	clk.Advance(11 * time.Second)
	if !ctl.FailOver() {
		t.Fatal("FailOver not taken during the wait")
	}
	res, evs := wait()
	if res.Outcome != retry.OutcomeOK || servedBy(res) != B.String() || d.Count(A.String()) != 1 || d.Count(B.String()) != 1 {
		t.Fatalf("%s served by %s A%d B%d", res.Outcome, servedBy(res), d.Count(A.String()), d.Count(B.String()))
	}
	a := res.Attempts[0]
	if !a.FailedOverByUser || a.Waited != 11*time.Second || a.WaitPlanned != 20*time.Second || a.Decision != retry.DecideFailover {
		t.Fatalf("attempt %+v", a)
	}
	if got, want := a.FailoverNote(), "failed over by you after 11s of a 20s wait"; got != want {
		t.Fatalf("note %q, want %q", got, want)
	}
	we := waitEnds(evs)
	if len(we) != 1 || we[0].Waited != 11*time.Second || we[0].EndedBy != retry.WaitFailover || we[0].Duration != 20*time.Second {
		t.Fatalf("wait_end %+v", we)
	}
	if len(res.Moves) != 1 || !res.Moves[0].ByUser || res.Moves[0].From != A || res.Moves[0].To != B || res.Moves[0].Attempt != 1 {
		t.Fatalf("moves %+v", res.Moves)
	}
	if ctl.CanFailOver() || ctl.FailOver() {
		t.Fatal("the ended call still offers a failover")
	}
	ends := 0
	for _, ev := range evs {
		if ev.Kind == retry.EventCallEnd {
			ends++
		}
	}
	if ends != 1 {
		t.Fatalf("%d call_end events, want one call", ends)
	}
}

// ctrl+f while the primary streams: its stream is cancelled and the call
// moves on; the partial text stays on the attempt, the answer is the
// fallback's.
func TestFailOverDuringStream(t *testing.T) {
	clearEnv(t)
	ctl := retry.NewControl()
	d := retrytest.NewDoer().ScriptFunc(A.String(), func(ctx context.Context, _ stream.Request, onText func(string)) stream.Result {
		onText("Once upon")
		<-ctx.Done()
		return stream.Result{Status: 200, Text: "Once upon", Err: &stream.Error{Class: stream.ClassCancelled, Status: 200, MidStream: true, Err: ctx.Err()}}
	}).Always(B.String(), retrytest.OK("from b"))
	e, clk := newEngine(t, d)
	c := call(A, B)
	c.Control = ctl
	res := e.Run(context.Background(), c, func(ev retry.Event) {
		if ev.Kind == retry.EventText && ev.Text == "Once upon" {
			if !ctl.FailOver() {
				t.Error("FailOver not taken during the stream")
			}
		}
	})
	if res.Outcome != retry.OutcomeOK || servedBy(res) != B.String() || res.Text != "from b" || clk.Slept() != 0 {
		t.Fatalf("%s served by %s text %q slept %v", res.Outcome, servedBy(res), res.Text, clk.Slept())
	}
	a := res.Attempts[0]
	if !a.FailedOverByUser || a.Decision != retry.DecideFailover || a.PartialText != "Once upon" || a.FailoverNote() != "failed over by you during the request" {
		t.Fatalf("attempt %+v note %q", a, a.FailoverNote())
	}
	if len(res.Moves) != 1 || !res.Moves[0].ByUser {
		t.Fatalf("moves %+v", res.Moves)
	}
}

// CanFailOver is true only while a next target exists.
func TestCanFailOverOnlyWithATargetLeft(t *testing.T) {
	clearEnv(t)
	ctl := retry.NewControl()
	var seen []bool
	d := retrytest.NewDoer().
		ScriptFunc(A.String(), func(context.Context, stream.Request, func(string)) stream.Result {
			seen = append(seen, ctl.CanFailOver())
			return retrytest.Fail(500, stream.ClassServer, "x")
		}).
		ScriptFunc(A.String(), func(context.Context, stream.Request, func(string)) stream.Result {
			seen = append(seen, ctl.CanFailOver())
			return retrytest.Fail(500, stream.ClassServer, "x")
		}).
		ScriptFunc(B.String(), func(context.Context, stream.Request, func(string)) stream.Result {
			seen = append(seen, ctl.CanFailOver(), ctl.FailOver())
			return retrytest.OK("b")
		})
	e, _ := newEngine(t, d)
	c := call(A, B)
	c.Control = ctl
	if res, _ := runCall(e, c); res.Outcome != retry.OutcomeOK {
		t.Fatalf("%s", res.Outcome)
	}
	if want := []bool{true, true, false, false}; len(seen) != 4 || seen[0] != want[0] || seen[1] != want[1] || seen[2] != want[2] || seen[3] != want[3] {
		t.Fatalf("CanFailOver/FailOver seen %v, want %v", seen, want)
	}
	if ctl.CanFailOver() {
		t.Fatal("true after the call")
	}
}

// A wait cut short by esc records what was really waited, in the attempt
// and in wait_end.
func TestCancelMidWaitRecordsActualWait(t *testing.T) {
	clearEnv(t)
	d := retrytest.NewDoer().Script(A.String(), retrytest.RateLimited(20*time.Second))
	clk := retrytest.NewBlockingClock(t0)
	e := &retry.Engine{Doer: d, Clock: clk, Rand: func() float64 { return 0 }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := runAsync(ctx, e, call(A), nil)
	if err := clk.WaitSleepers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(3 * time.Second)
	cancel()
	res, evs := wait()
	if res.Outcome != retry.OutcomeCancelled || res.Attempts[0].Waited != 3*time.Second {
		t.Fatalf("%s waited %v", res.Outcome, res.Attempts[0].Waited)
	}
	if we := waitEnds(evs); len(we) != 1 || we[0].Waited != 3*time.Second || we[0].EndedBy != retry.WaitCancelled {
		t.Fatalf("wait_end %+v", we)
	}
}

// Policy.NoRetryAfterText (the proxy's rule): once text reached the caller,
// an error ends the call; before any text it is retried as usual.
func TestNoRetryAfterText(t *testing.T) {
	clearEnv(t)
	broken := func(ctx context.Context, _ stream.Request, onText func(string)) stream.Result {
		onText("Hello")
		return stream.Result{Status: 200, Text: "Hello", Err: &stream.Error{Class: stream.ClassServer, Status: 200, MidStream: true, Message: "cut"}}
	}
	t.Run("after text: ends the call", func(t *testing.T) {
		d := retrytest.NewDoer().ScriptFunc(A.String(), broken).Always(A.String(), retrytest.OK("again")).Always(B.String(), retrytest.OK("b"))
		e, _ := newEngine(t, d)
		c := call(A, B)
		c.Policy.NoRetryAfterText = true
		c.Control = retry.NewControl()
		res, _ := runCall(e, c)
		if res.Outcome != retry.OutcomeGaveUp || d.Total() != 1 || res.Err == nil || res.Err.Message != "cut" || res.Attempts[0].Decision != retry.DecideGiveUp {
			t.Fatalf("%s after %d requests err %v", res.Outcome, d.Total(), res.Err)
		}
	})
	t.Run("without the option: retried", func(t *testing.T) {
		d := retrytest.NewDoer().ScriptFunc(A.String(), broken).Always(A.String(), retrytest.OK("again"))
		e, _ := newEngine(t, d)
		if res, _ := runCall(e, call(A, B)); res.Outcome != retry.OutcomeOK || d.Total() != 2 {
			t.Fatalf("%s after %d requests", res.Outcome, d.Total())
		}
	})
	t.Run("before any text: retried", func(t *testing.T) {
		d := retrytest.NewDoer().Script(A.String(), retrytest.Fail(500, stream.ClassServer, "x"), retrytest.OK("again"))
		e, _ := newEngine(t, d)
		c := call(A)
		c.Policy.NoRetryAfterText = true
		if res, _ := runCall(e, c); res.Outcome != retry.OutcomeOK || d.Total() != 2 {
			t.Fatalf("%s after %d requests", res.Outcome, d.Total())
		}
	})
	t.Run("ctrl+f is not offered once text reached the caller", func(t *testing.T) {
		ctl := retry.NewControl()
		var can []bool
		d := retrytest.NewDoer().ScriptFunc(A.String(), func(ctx context.Context, _ stream.Request, onText func(string)) stream.Result {
			can = append(can, ctl.CanFailOver())
			onText("Hello")
			can = append(can, ctl.CanFailOver())
			return retrytest.OK("Hello")
		})
		e, _ := newEngine(t, d)
		c := call(A, B)
		c.Policy.NoRetryAfterText = true
		c.Control = ctl
		runCall(e, c)
		if len(can) != 2 || !can[0] || can[1] {
			t.Fatalf("CanFailOver before/after text %v, want [true false]", can)
		}
	})
}

// The cooldown's scope and target are on the attempt and the result, when
// recorded and when found active before sending (no message parsing).
func TestCooldownOnAttemptAndResult(t *testing.T) {
	clearEnv(t)
	reset := t0.Add(time.Hour)
	d := retrytest.NewDoer().Script(A.String(), retrytest.Quota("insufficient_quota", stream.ScopeAccount, reset))
	e, _ := newEngine(t, d)
	res, evs := runCall(e, call(A))
	cd := res.Attempts[0].Cooldown
	if res.Outcome != retry.OutcomeStopped || cd == nil || cd.Scope != "account:anthropic" || cd.Target != A.String() || !cd.Until.Equal(reset) || cd.Code != "insufficient_quota" {
		t.Fatalf("%s attempt cooldown %+v", res.Outcome, cd)
	}
	if res.Cooldown == nil || *res.Cooldown != *cd || !strings.Contains(strings.ToLower(res.ActionRequired), "a person must act") {
		t.Fatalf("result cooldown %+v action %q", res.Cooldown, res.ActionRequired)
	}
	var endCd *retry.Cooldown
	for _, ev := range evs {
		if ev.Kind == retry.EventAttemptEnd {
			endCd = ev.Attempt.Cooldown
		}
	}
	if endCd == nil || endCd.Scope != cd.Scope {
		t.Fatalf("attempt_end cooldown %+v", endCd)
	}
	res, _ = runCall(e, call(A))
	if !res.CooldownHit || res.Cooldown == nil || res.Cooldown.Scope != "account:anthropic" || res.Cooldown.Target != A.String() || d.Total() != 1 {
		t.Fatalf("second call: hit %v cooldown %+v requests %d", res.CooldownHit, res.Cooldown, d.Total())
	}
	if ts := e.TargetState(A); ts.Cooldown == nil || ts.Cooldown.Scope != "account:anthropic" || ts.HasPacer {
		t.Fatalf("target state %+v", ts)
	}
}

// Policy.FailoverOnQuota: the quota stop records its cooldown, skips the
// targets on the same account and is answered by another account, and the
// result still says a person must act. Off, the call stops.
func TestFailoverOnQuota(t *testing.T) {
	clearEnv(t)
	A2 := stream.Target{Provider: "anthropic", Model: "claude-other"}
	quota := retrytest.Quota("credit_balance_exhausted", stream.ScopeAccount, time.Time{})
	t.Run("on", func(t *testing.T) {
		d := retrytest.NewDoer().Script(A.String(), quota).Always(A2.String(), retrytest.OK("a2")).Always(B.String(), retrytest.OK("b"))
		e, _ := newEngine(t, d)
		e.Cooldowns = retry.NewMemoryCooldowns()
		c := call(A, A2, B)
		c.Policy.FailoverOnQuota = true
		res, _ := runCall(e, c)
		if res.Outcome != retry.OutcomeOK || servedBy(res) != B.String() || d.Count(A2.String()) != 0 || d.Count(A.String()) != 1 {
			t.Fatalf("%s served by %s A%d A2:%d", res.Outcome, servedBy(res), d.Count(A.String()), d.Count(A2.String()))
		}
		if res.Cooldown == nil || res.Cooldown.Scope != "account:anthropic" || res.Attempts[0].Decision != retry.DecideFailover {
			t.Fatalf("cooldown %+v attempt %+v", res.Cooldown, res.Attempts[0])
		}
		if !strings.Contains(strings.ToLower(res.ActionRequired), "a person must act") || !strings.Contains(res.ActionRequired, B.String()) {
			t.Fatalf("action %q", res.ActionRequired)
		}
		if len(res.Skips) != 1 || res.Skips[0].Target != A2 {
			t.Fatalf("skips %+v", res.Skips)
		}
		if cd, ok, _ := e.Cooldowns.Get("account:anthropic"); !ok || cd.Target != A.String() {
			t.Fatalf("cooldown not stored: %+v", cd)
		}
		if len(res.Moves) != 2 || res.Moves[0].Cause == nil || res.Moves[0].Cause.Class != stream.ClassQuota {
			t.Fatalf("moves %+v", res.Moves)
		}
		// The next call finds the cooldown and moves on as well.
		res, _ = runCall(e, c)
		if res.Outcome != retry.OutcomeOK || servedBy(res) != B.String() || d.Count(A.String()) != 1 || res.Cooldown == nil {
			t.Fatalf("second call %s served by %s A%d", res.Outcome, servedBy(res), d.Count(A.String()))
		}
	})
	t.Run("only the same account left: stopped", func(t *testing.T) {
		d := retrytest.NewDoer().Script(A.String(), quota).Always(A2.String(), retrytest.OK("a2"))
		e, _ := newEngine(t, d)
		c := call(A, A2)
		c.Policy.FailoverOnQuota = true
		res, _ := runCall(e, c)
		if res.Outcome != retry.OutcomeStopped || d.Count(A2.String()) != 0 || res.Cooldown == nil || res.ActionRequired == "" {
			t.Fatalf("%s A2:%d", res.Outcome, d.Count(A2.String()))
		}
	})
	t.Run("off: the call stops", func(t *testing.T) {
		d := retrytest.NewDoer().Script(A.String(), quota).Always(B.String(), retrytest.OK("b"))
		e, _ := newEngine(t, d)
		res, _ := runCall(e, call(A, B))
		if res.Outcome != retry.OutcomeStopped || d.Count(B.String()) != 0 {
			t.Fatalf("%s B%d", res.Outcome, d.Count(B.String()))
		}
	})
}

// The move names the 429 that caused it, not the 503
// retried before it.
func TestMoveNamesItsCause(t *testing.T) {
	clearEnv(t)
	d := retrytest.NewDoer().Script(A.String(), retrytest.Fail(503, stream.ClassOverload, "overloaded"), retrytest.RateLimited(time.Minute)).
		Always(B.String(), retrytest.OK("b"))
	e, _ := newEngine(t, d)
	res, _ := runCall(e, call(A, B))
	if servedBy(res) != B.String() || len(res.Moves) != 1 {
		t.Fatalf("served by %s moves %+v", servedBy(res), res.Moves)
	}
	m := res.Moves[0]
	if m.Cause == nil || m.Cause.Status != 429 || m.Attempt != 2 || m.ByUser || m.From != A || m.To != B {
		t.Fatalf("move %+v cause %+v", m, m.Cause)
	}
}

// A stream over the size cap is not retried
// on the same target.
func TestOversizeNotRetriedOnSameTarget(t *testing.T) {
	clearEnv(t)
	big := stream.Result{Status: 200, Err: &stream.Error{Class: stream.ClassServer, Status: 200, MidStream: true, Oversize: true,
		Message: "the stream passed MaxStreamSize (67108864 bytes) without ending"}}
	d := retrytest.NewDoer().Always(A.String(), big).Always(B.String(), retrytest.OK("b"))
	e, _ := newEngine(t, d)
	if res, _ := runCall(e, call(A, B)); servedBy(res) != B.String() || d.Count(A.String()) != 1 {
		t.Fatalf("served by %s after %d requests to A", servedBy(res), d.Count(A.String()))
	}
	d = retrytest.NewDoer().Always(A.String(), big)
	e, _ = newEngine(t, d)
	if res, _ := runCall(e, call(A)); res.Outcome != retry.OutcomeGaveUp || d.Count(A.String()) != 1 {
		t.Fatalf("%s after %d requests", res.Outcome, d.Count(A.String()))
	}
}

// hang streams one delta, then keep-alives forever: it ends only when its
// context does.
func hang(ctx context.Context, _ stream.Request, onText func(string)) stream.Result {
	onText("one")
	<-ctx.Done()
	return stream.Result{Status: 200, Text: "one", Err: &stream.Error{Class: stream.ClassCancelled, Status: 200, MidStream: true, Err: ctx.Err()}}
}

// The deadline bounds an attempt in flight;
// on expiry the call fails over when a target is left, else gives up.
func TestDeadlineBoundsAttemptInFlight(t *testing.T) {
	clearEnv(t)
	synctest.Test(t, func(t *testing.T) {
		pol := retry.Policy{Deadline: 20 * time.Second}
		d := retrytest.NewDoer().ScriptFunc(A.String(), hang).Always(B.String(), retrytest.OK("b"))
		e := &retry.Engine{Doer: d, Clock: retry.WallClock{}}
		start := time.Now()
		res := e.Run(t.Context(), retry.Call{Chain: []stream.Target{A, B}, Prompt: "x", Policy: pol}, nil)
		if res.Outcome != retry.OutcomeOK || servedBy(res) != B.String() || time.Since(start) != 20*time.Second {
			t.Fatalf("%s served by %s after %v", res.Outcome, servedBy(res), time.Since(start))
		}
		if a := res.Attempts[0]; a.Class != stream.ClassTimeout || a.Decision != retry.DecideFailover || a.PartialText != "one" {
			t.Fatalf("attempt %+v", a)
		}

		d = retrytest.NewDoer().ScriptFunc(A.String(), hang)
		e = &retry.Engine{Doer: d, Clock: retry.WallClock{}}
		start = time.Now()
		res = e.Run(t.Context(), retry.Call{Chain: []stream.Target{A}, Prompt: "x", Policy: pol}, nil)
		if res.Outcome != retry.OutcomeGaveUp || time.Since(start) != 20*time.Second || d.Total() != 1 || res.Err == nil || res.Err.Class != stream.ClassTimeout {
			t.Fatalf("%s after %v, %d requests, err %v", res.Outcome, time.Since(start), d.Total(), res.Err)
		}

		// A fallback reached by the deadline gets FailoverWait, not forever.
		d = retrytest.NewDoer().ScriptFunc(A.String(), hang).ScriptFunc(B.String(), hang)
		e = &retry.Engine{Doer: d, Clock: retry.WallClock{}}
		start = time.Now()
		res = e.Run(t.Context(), retry.Call{Chain: []stream.Target{A, B}, Prompt: "x", Policy: pol}, nil)
		if res.Outcome != retry.OutcomeGaveUp || time.Since(start) != 30*time.Second || d.Total() != 2 {
			t.Fatalf("%s after %v, %d requests", res.Outcome, time.Since(start), d.Total())
		}
	})
}

// The same with the fake clock: its timers end the attempt in virtual time.
func TestDeadlineBoundsAttemptInFlightFakeClock(t *testing.T) {
	clearEnv(t)
	started := make(chan struct{})
	d := retrytest.NewDoer().ScriptFunc(A.String(), func(ctx context.Context, req stream.Request, onText func(string)) stream.Result {
		close(started)
		return hang(ctx, req, onText)
	})
	clk := retrytest.NewBlockingClock(t0)
	e := &retry.Engine{Doer: d, Clock: clk}
	wait := runAsync(context.Background(), e, retry.Call{Chain: []stream.Target{A}, Prompt: "x", Policy: retry.Policy{Deadline: 20 * time.Second}}, nil)
	<-started // its deadline timer is set before the request is sent
	clk.Advance(19 * time.Second)
	clk.Advance(time.Second)
	res, _ := wait()
	if res.Outcome != retry.OutcomeGaveUp || res.Attempts[0].Class != stream.ClassTimeout {
		t.Fatalf("%s %+v", res.Outcome, res.Attempts)
	}
}

// A nil *Pacer in the interface field (a caller's own nil field passed on)
// is no pacer, not a crash; TargetState reads a past hold as none.
func TestNilPacerAndTargetState(t *testing.T) {
	clearEnv(t)
	var p *retry.Pacer
	d := retrytest.NewDoer().Always(A.String(), retrytest.OK("x"))
	e, _ := newEngine(t, d)
	e.Pacer = p
	if res, _ := runCall(e, call(A)); res.Outcome != retry.OutcomeOK {
		t.Fatalf("%s", res.Outcome)
	}
	if ts := e.TargetState(A); ts.HasPacer {
		t.Fatalf("%+v", ts)
	}
	d = retrytest.NewDoer().Script(A.String(), retrytest.RateLimited(2*time.Second), retrytest.OK("x"))
	e, clk := newEngine(t, d)
	e.Pacer = retry.NewPacer()
	c := call(A)
	wantHold := t0.Add(2 * time.Second)
	var held time.Time
	res := e.Run(context.Background(), c, func(ev retry.Event) {
		if ev.Kind == retry.EventWait {
			held = e.TargetState(A).Pace.HoldUntil
		}
	})
	if res.Outcome != retry.OutcomeOK || !held.Equal(wantHold) {
		t.Fatalf("%s hold during the wait %v, want %v", res.Outcome, held, wantHold)
	}
	clk.Advance(time.Second)
	if ts := e.TargetState(A); !ts.HasPacer || !ts.Pace.HoldUntil.IsZero() {
		t.Fatalf("after the hold: %+v", ts)
	}
}

// A FailOver between two requests (the wait before the retry was zero)
// moves on without sending the retry.
func TestFailOverBetweenRequests(t *testing.T) {
	clearEnv(t)
	ctl := retry.NewControl()
	d := retrytest.NewDoer().
		ScriptFunc(A.String(), func(context.Context, stream.Request, func(string)) stream.Result {
			ctl.FailOver() // the user presses ctrl+f as the answer ends
			return retrytest.Fail(500, stream.ClassServer, "api_error")
		}).
		Always(A.String(), retrytest.OK("a")).Always(B.String(), retrytest.OK("b"))
	e, _ := newEngine(t, d) // Rand 0: a zero backoff
	c := call(A, B)
	c.Control = ctl
	res, _ := runCall(e, c)
	if servedBy(res) != B.String() || d.Count(A.String()) != 1 || !res.Attempts[0].FailedOverByUser || len(res.Moves) != 1 || !res.Moves[0].ByUser {
		t.Fatalf("served by %s A%d attempts %+v moves %+v", servedBy(res), d.Count(A.String()), res.Attempts, res.Moves)
	}
}
