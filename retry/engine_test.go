package retry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/stream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	A  = stream.Target{Provider: "anthropic", Model: "claude-haiku-5-5"}
	B  = stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	C  = stream.Target{Provider: "gemini", Model: "gemini-3.8-flash"}
)

func clearEnv(t *testing.T) {
	t.Helper()
	for _, v := range stream.AllEnvVars() {
		t.Setenv(v, "")
	}
}

func newEngine(t *testing.T, d *retrytest.Doer) (*retry.Engine, *retrytest.FakeClock) {
	t.Helper()
	clearEnv(t)
	clk := retrytest.NewFakeClock(t0)
	return &retry.Engine{Doer: d, Clock: clk, Rand: func() float64 { return 0 }}, clk
}

func call(chain ...stream.Target) retry.Call {
	return retry.Call{ID: "c1", Chain: chain, Prompt: "hi", MaxTokens: 16}
}

func runCall(e *retry.Engine, c retry.Call) (retry.Result, []retry.Event) {
	var evs []retry.Event
	res := e.Run(context.Background(), c, func(ev retry.Event) { evs = append(evs, ev) })
	return res, evs
}

func servedBy(r retry.Result) string {
	if r.ServedBy == nil {
		return ""
	}
	return r.ServedBy.String()
}

func with(r stream.Result, f func(e *stream.Error)) stream.Result {
	e := *r.Err
	f(&e)
	r.Err = &e
	return r
}

// The retry core's worked cases, with exact request counts.
func TestWorkedCases(t *testing.T) {
	ok := retrytest.OK("hello there")
	ra := retrytest.RateLimited
	s503 := retrytest.Fail(503, stream.ClassOverload, "overloaded")
	s500 := retrytest.Fail(500, stream.ClassServer, "api_error")
	credit := retrytest.Quota("credit_balance_exhausted", stream.ScopeAccount, time.Time{})
	spend := retrytest.Quota("enforced_spend_limit_reached", stream.ScopeAccount, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	ctxLen := with(retrytest.Fail(400, stream.ClassCaller, "context_length_exceeded"), func(e *stream.Error) { e.ModelSpecific = true })

	cases := []struct {
		name    string
		a, b    []stream.Result
		noB     bool
		pol     retry.Policy
		wantA   int
		wantB   int
		outcome retry.Outcome
		served  string
		slept   time.Duration
		retryAt time.Duration // from t0, when deferred
	}{
		{name: "429 retry-after 1 then 200", a: []stream.Result{ra(time.Second), ok}, noB: true,
			wantA: 2, outcome: retry.OutcomeOK, served: A.String(), slept: time.Second},
		{name: "429 retry-after 600, no fallback", a: []stream.Result{ra(600 * time.Second)}, noB: true,
			wantA: 1, outcome: retry.OutcomeDeferred, retryAt: 600 * time.Second},
		{name: "429 retry-after 600, B 200", a: []stream.Result{ra(600 * time.Second)}, b: []stream.Result{ok},
			wantA: 1, wantB: 1, outcome: retry.OutcomeOK, served: B.String()},
		{name: "503 503, B 200", a: []stream.Result{s503, s503}, b: []stream.Result{ok},
			wantA: 2, wantB: 1, outcome: retry.OutcomeOK, served: B.String()},
		{name: "500 then 200, B available", a: []stream.Result{s500, ok}, b: []stream.Result{ok},
			wantA: 2, outcome: retry.OutcomeOK, served: A.String()},
		{name: "credit_balance_exhausted, B available", a: []stream.Result{credit}, b: []stream.Result{ok},
			wantA: 1, outcome: retry.OutcomeStopped},
		{name: "429 retry-after 600, B spend cap", a: []stream.Result{ra(600 * time.Second)}, b: []stream.Result{spend},
			wantA: 1, wantB: 1, outcome: retry.OutcomeStopped},
		{name: "503 x5, no fallback, max-attempts 3", a: []stream.Result{s503, s503, s503, s503, s503}, noB: true,
			pol: retry.Policy{MaxAttempts: 3}, wantA: 3, outcome: retry.OutcomeGaveUp},
		{name: "context_length_exceeded, B 200", a: []stream.Result{ctxLen}, b: []stream.Result{ok},
			wantA: 1, wantB: 1, outcome: retry.OutcomeOK, served: B.String()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := retrytest.NewDoer().Script(A.String(), tc.a...).Script(B.String(), tc.b...)
			e, clk := newEngine(t, d)
			c := call(A, B)
			if tc.noB {
				c = call(A)
			}
			c.Policy = tc.pol
			res, _ := runCall(e, c)
			if got := d.Count(A.String()); got != tc.wantA {
				t.Errorf("requests to A = %d, want %d", got, tc.wantA)
			}
			if got := d.Count(B.String()); got != tc.wantB {
				t.Errorf("requests to B = %d, want %d", got, tc.wantB)
			}
			if res.Outcome != tc.outcome {
				t.Errorf("outcome = %s, want %s (err %v)", res.Outcome, tc.outcome, res.Err)
			}
			if got := servedBy(res); got != tc.served {
				t.Errorf("served by %q, want %q", got, tc.served)
			}
			if got := clk.Slept(); got != tc.slept {
				t.Errorf("slept %v, want %v", got, tc.slept)
			}
			if tc.retryAt != 0 && !res.RetryAt.Equal(t0.Add(tc.retryAt)) {
				t.Errorf("retry at %v, want t0+%v", res.RetryAt, tc.retryAt)
			}
			if len(res.Attempts) != tc.wantA+tc.wantB {
				t.Errorf("%d attempts recorded, want %d", len(res.Attempts), tc.wantA+tc.wantB)
			}
			if res.Outcome == retry.OutcomeOK && (res.Text != "hello there" || res.Err != nil) {
				t.Errorf("text %q err %v", res.Text, res.Err)
			}
			if res.Outcome != retry.OutcomeOK && res.Err == nil {
				t.Errorf("no Err on %s", res.Outcome)
			}
		})
	}
}

func TestStoppedExitCode(t *testing.T) {
	if retry.OutcomeStopped.ExitCode() != 3 || retry.OutcomeDeferred.ExitCode() != 4 || retry.OutcomeCancelled.ExitCode() != 130 {
		t.Fatal("exit codes changed")
	}
}

func TestServerDelayIsAFloorWithJitter(t *testing.T) {
	d := retrytest.NewDoer().Script(A.String(), retrytest.RateLimited(23*time.Second), retrytest.OK("x"))
	e, clk := newEngine(t, d)
	e.Rand = func() float64 { return 0.5 }
	res, evs := runCall(e, call(A))
	if res.Outcome != retry.OutcomeOK {
		t.Fatalf("outcome %s", res.Outcome)
	}
	want := 23*time.Second + 125*time.Millisecond
	if got := clk.Sleeps(); len(got) != 1 || got[0] != want {
		t.Fatalf("sleeps %v, want [%v]", got, want)
	}
	a := res.Attempts[0]
	if a.RetryAfter == nil || *a.RetryAfter != 23*time.Second || a.DelaySource != stream.SourceRetryAfter || a.Waited != want || a.Decision != retry.DecideRetry {
		t.Fatalf("attempt %+v", a)
	}
	var w *retry.Wait
	for _, ev := range evs {
		if ev.Kind == retry.EventWait {
			w = ev.Wait
		}
	}
	if w == nil || w.Reason != "anthropic/claude-haiku-5-5 asked 23s (retry-after)" || w.Asked != 23*time.Second ||
		w.Duration != want || !w.Until.Equal(t0.Add(want)) || !w.Deadline.Equal(t0.Add(3*time.Minute)) || w.Pacing {
		t.Fatalf("wait %+v", w)
	}
}

func TestBackoffFullJitter(t *testing.T) {
	s := retrytest.Fail(500, stream.ClassServer, "")
	d := retrytest.NewDoer().Script(A.String(), s, s, s, s, retrytest.OK("x"))
	e, clk := newEngine(t, d)
	e.Rand = func() float64 { return 0.5 }
	res, _ := runCall(e, call(A))
	if res.Outcome != retry.OutcomeOK || d.Count(A.String()) != 5 {
		t.Fatalf("outcome %s, %d requests", res.Outcome, d.Count(A.String()))
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}
	got := clk.Sleeps()
	if len(got) != len(want) {
		t.Fatalf("sleeps %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sleeps %v, want %v", got, want)
		}
		if res.Attempts[i].DelaySource != stream.SourceBackoff || res.Attempts[i].RetryAfter != nil {
			t.Fatalf("attempt %d: %+v", i, res.Attempts[i])
		}
	}

	// The cap holds.
	d = retrytest.NewDoer().Always(A.String(), s)
	e, clk = newEngine(t, d)
	e.Rand = func() float64 { return 0.999999 }
	c := call(A)
	c.Policy = retry.Policy{MaxAttempts: 10, BackoffCap: 3 * time.Second, Deadline: time.Hour}
	runCall(e, c)
	for _, s := range clk.Sleeps() {
		if s > 3*time.Second {
			t.Fatalf("sleep %v above the cap", s)
		}
	}
}

func TestClassDecisions(t *testing.T) {
	noResp := func(c stream.Class) stream.Result {
		return stream.Result{Err: &stream.Error{Class: c, Message: "no response"}}
	}
	cut := stream.Result{Status: 200, Text: "partial ans", Err: &stream.Error{Class: stream.ClassConnection, Status: 200, MidStream: true, Message: "stream cut"}}
	cases := []struct {
		name         string
		a            stream.Result
		fallback     bool
		wantA, wantB int
		outcome      retry.Outcome
		decision     retry.Decision
	}{
		{"caller fails, no failover", retrytest.Fail(400, stream.ClassCaller, "invalid_request_error"), true, 1, 0, retry.OutcomeFailed, retry.DecideFail},
		{"401 fails", retrytest.Fail(401, stream.ClassCaller, "authentication_error"), true, 1, 0, retry.OutcomeFailed, retry.DecideFail},
		{"model-specific caller, no fallback, fails", with(retrytest.Fail(400, stream.ClassCaller, "context_length_exceeded"), func(e *stream.Error) { e.ModelSpecific = true }), false, 1, 0, retry.OutcomeFailed, retry.DecideFail},
		{"quota stops", retrytest.Quota("insufficient_quota", stream.ScopeAccount, time.Time{}), true, 1, 0, retry.OutcomeStopped, retry.DecideStop},
		{"timeout, no response, fails over at once", noResp(stream.ClassTimeout), true, 1, 1, retry.OutcomeOK, retry.DecideFailover},
		{"connection, no response, fails over at once", noResp(stream.ClassConnection), true, 1, 1, retry.OutcomeOK, retry.DecideFailover},
		{"timeout, no response, last target retries", noResp(stream.ClassTimeout), false, 2, 0, retry.OutcomeOK, retry.DecideRetry},
		{"cut stream retried like any transient", cut, true, 2, 0, retry.OutcomeOK, retry.DecideRetry},
		{"stall timeout mid-stream fails over at once", stream.Result{Status: 200, Text: "par", Err: &stream.Error{Class: stream.ClassTimeout, Status: 200, MidStream: true}}, true, 1, 1, retry.OutcomeOK, retry.DecideFailover},
		{"first-token timeout after headers fails over at once", stream.Result{Status: 200, Err: &stream.Error{Class: stream.ClassTimeout, Status: 200}}, true, 1, 1, retry.OutcomeOK, retry.DecideFailover},
		{"rate_limit retried", retrytest.Fail(429, stream.ClassRateLimit, ""), true, 2, 0, retry.OutcomeOK, retry.DecideRetry},
		{"overload retried", retrytest.Fail(529, stream.ClassOverload, "overloaded_error"), true, 2, 0, retry.OutcomeOK, retry.DecideRetry},
		{"server retried", retrytest.Fail(502, stream.ClassServer, ""), true, 2, 0, retry.OutcomeOK, retry.DecideRetry},
		{"unknown class treated as transient", retrytest.Fail(599, stream.Class("weird"), ""), true, 2, 0, retry.OutcomeOK, retry.DecideRetry},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := retrytest.NewDoer().Script(A.String(), tc.a, retrytest.OK("full answer")).Script(B.String(), retrytest.OK("full answer"))
			e, clk := newEngine(t, d)
			c := call(A)
			if tc.fallback {
				c = call(A, B)
			}
			res, _ := runCall(e, c)
			if d.Count(A.String()) != tc.wantA || d.Count(B.String()) != tc.wantB {
				t.Fatalf("requests A%d B%d, want A%d B%d", d.Count(A.String()), d.Count(B.String()), tc.wantA, tc.wantB)
			}
			if res.Outcome != tc.outcome {
				t.Fatalf("outcome %s, want %s", res.Outcome, tc.outcome)
			}
			if got := res.Attempts[0].Decision; got != tc.decision {
				t.Fatalf("decision %q, want %q", got, tc.decision)
			}
			if tc.decision == retry.DecideFailover && clk.Slept() != 0 {
				t.Fatalf("slept %v before failing over", clk.Slept())
			}
			if res.Outcome == retry.OutcomeOK && res.Text != "full answer" {
				t.Fatalf("text %q: partial text glued on?", res.Text)
			}
		})
	}
}

func TestPartialTextStaysOnItsAttempt(t *testing.T) {
	cut := stream.Result{Status: 200, Text: "The answer is", Err: &stream.Error{Class: stream.ClassOverload, Status: 200, MidStream: true, Code: "overloaded_error"}}
	d := retrytest.NewDoer().Script(A.String(), cut, retrytest.OK("Forty-two."))
	e, _ := newEngine(t, d)
	res, evs := runCall(e, call(A))
	if res.Text != "Forty-two." {
		t.Fatalf("text %q", res.Text)
	}
	a := res.Attempts[0]
	if a.PartialText != "The answer is" || !a.MidStream || a.Status != 200 || a.Class != stream.ClassOverload {
		t.Fatalf("attempt %+v", a)
	}
	if res.Attempts[1].PartialText != "" || res.Attempts[1].Class != stream.ClassOK {
		t.Fatalf("second attempt %+v", res.Attempts[1])
	}
	// Text events follow their own attempt.
	var texts []string
	n := 0
	for _, ev := range evs {
		switch ev.Kind {
		case retry.EventAttemptStart:
			n = ev.Attempt.N
		case retry.EventText:
			texts = append(texts, string(rune('0'+n))+":"+ev.Text)
		}
	}
	if got := strings.Join(texts, "|"); got != "1:The |1:answer |1:is|2:Forty-two." {
		t.Fatalf("text events %q", got)
	}
}

func TestServedByReportedModel(t *testing.T) {
	r := retrytest.OK("x")
	r.Model = "claude-haiku-5-5-20261001"
	d := retrytest.NewDoer().Script(A.String(), r)
	e, _ := newEngine(t, d)
	res, _ := runCall(e, call(A))
	if res.ServedBy == nil || res.ServedBy.Provider != "anthropic" || res.ServedBy.Model != "claude-haiku-5-5-20261001" {
		t.Fatalf("served by %+v", res.ServedBy)
	}
}

func TestNoRetry(t *testing.T) {
	nr := with(retrytest.Fail(503, stream.ClassOverload, ""), func(e *stream.Error) { e.NoRetry = true })
	t.Run("moves on", func(t *testing.T) {
		d := retrytest.NewDoer().Script(A.String(), nr, retrytest.OK("a")).Script(B.String(), retrytest.OK("b"))
		e, clk := newEngine(t, d)
		res, _ := runCall(e, call(A, B))
		if d.Count(A.String()) != 1 || d.Count(B.String()) != 1 || servedBy(res) != B.String() || clk.Slept() != 0 {
			t.Fatalf("A%d B%d served %s slept %v", d.Count(A.String()), d.Count(B.String()), servedBy(res), clk.Slept())
		}
		if !res.Attempts[0].NoRetry || res.Attempts[0].Decision != retry.DecideFailover {
			t.Fatalf("attempt %+v", res.Attempts[0])
		}
	})
	t.Run("ends", func(t *testing.T) {
		d := retrytest.NewDoer().Script(A.String(), nr, retrytest.OK("a"))
		e, _ := newEngine(t, d)
		res, _ := runCall(e, call(A))
		if d.Count(A.String()) != 1 || res.Outcome != retry.OutcomeGaveUp {
			t.Fatalf("A%d outcome %s", d.Count(A.String()), res.Outcome)
		}
	})
	t.Run("even a retry-after", func(t *testing.T) {
		r := with(retrytest.RateLimited(time.Second), func(e *stream.Error) { e.NoRetry = true })
		d := retrytest.NewDoer().Script(A.String(), r, retrytest.OK("a"))
		e, clk := newEngine(t, d)
		res, _ := runCall(e, call(A))
		if d.Count(A.String()) != 1 || res.Outcome != retry.OutcomeGaveUp || clk.Slept() != 0 {
			t.Fatalf("A%d outcome %s", d.Count(A.String()), res.Outcome)
		}
	})
}

func TestDeadline(t *testing.T) {
	pol := retry.Policy{Deadline: 5 * time.Second}
	t.Run("fails over now when a target is left", func(t *testing.T) {
		d := retrytest.NewDoer().Script(A.String(), retrytest.RateLimited(8*time.Second)).Script(B.String(), retrytest.OK("b"))
		e, clk := newEngine(t, d)
		c := call(A, B)
		c.Policy = pol
		res, _ := runCall(e, c)
		if d.Count(A.String()) != 1 || d.Count(B.String()) != 1 || servedBy(res) != B.String() || clk.Slept() != 0 {
			t.Fatalf("A%d B%d served %s slept %v", d.Count(A.String()), d.Count(B.String()), servedBy(res), clk.Slept())
		}
	})
	t.Run("gives up without sleeping", func(t *testing.T) {
		d := retrytest.NewDoer().Script(A.String(), retrytest.RateLimited(8*time.Second), retrytest.OK("a"))
		e, clk := newEngine(t, d)
		c := call(A)
		c.Policy = pol
		res, _ := runCall(e, c)
		if d.Count(A.String()) != 1 || res.Outcome != retry.OutcomeGaveUp || clk.Slept() != 0 {
			t.Fatalf("A%d outcome %s slept %v", d.Count(A.String()), res.Outcome, clk.Slept())
		}
		if res.Attempts[0].Decision != retry.DecideGiveUp || res.Err == nil || res.Err.Status != 429 {
			t.Fatalf("attempt %+v err %v", res.Attempts[0], res.Err)
		}
	})
	t.Run("counts earlier waits", func(t *testing.T) {
		r := retrytest.RateLimited(2 * time.Second)
		d := retrytest.NewDoer().Script(A.String(), r, r, r, retrytest.OK("a"))
		e, clk := newEngine(t, d)
		c := call(A)
		c.Policy = pol
		res, _ := runCall(e, c)
		// Two waits of 2s fit in 5s; the third would end at 6s.
		if d.Count(A.String()) != 3 || res.Outcome != retry.OutcomeGaveUp || clk.Slept() != 4*time.Second {
			t.Fatalf("A%d outcome %s slept %v", d.Count(A.String()), res.Outcome, clk.Slept())
		}
	})
}

func TestTriesPerTargetAndLastTarget(t *testing.T) {
	s := retrytest.Fail(503, stream.ClassOverload, "")
	t.Run("two targets", func(t *testing.T) {
		d := retrytest.NewDoer().Always(A.String(), s).Always(B.String(), s)
		e, _ := newEngine(t, d)
		res, _ := runCall(e, call(A, B))
		if d.Count(A.String()) != 2 || d.Count(B.String()) != 3 || res.Outcome != retry.OutcomeGaveUp {
			t.Fatalf("A%d B%d %s", d.Count(A.String()), d.Count(B.String()), res.Outcome)
		}
		if res.Attempts[4].Decision != retry.DecideGiveUp || res.Attempts[1].Decision != retry.DecideFailover {
			t.Fatalf("decisions %v %v", res.Attempts[1].Decision, res.Attempts[4].Decision)
		}
	})
	t.Run("three targets, one try each but the last", func(t *testing.T) {
		d := retrytest.NewDoer().Always(A.String(), s).Always(B.String(), s).Always(C.String(), s)
		e, _ := newEngine(t, d)
		c := call(A, B, C)
		c.Policy = retry.Policy{TriesPerTarget: 1}
		runCall(e, c)
		if d.Count(A.String()) != 1 || d.Count(B.String()) != 1 || d.Count(C.String()) != 3 {
			t.Fatalf("A%d B%d C%d", d.Count(A.String()), d.Count(B.String()), d.Count(C.String()))
		}
	})
	t.Run("the cap caps the whole call", func(t *testing.T) {
		d := retrytest.NewDoer().Always(A.String(), s).Always(B.String(), s).Always(C.String(), s)
		e, _ := newEngine(t, d)
		c := call(A, B, C)
		c.Policy = retry.Policy{MaxAttempts: 3}
		res, _ := runCall(e, c)
		if d.Count(A.String()) != 2 || d.Count(B.String()) != 1 || d.Count(C.String()) != 0 || res.Outcome != retry.OutcomeGaveUp {
			t.Fatalf("A%d B%d C%d %s", d.Count(A.String()), d.Count(B.String()), d.Count(C.String()), res.Outcome)
		}
	})
	t.Run("chain exhausted: last target defers", func(t *testing.T) {
		d := retrytest.NewDoer().Always(A.String(), s).Always(B.String(), retrytest.RateLimited(10*time.Minute))
		e, _ := newEngine(t, d)
		res, _ := runCall(e, call(A, B))
		if d.Count(A.String()) != 2 || d.Count(B.String()) != 1 || res.Outcome != retry.OutcomeDeferred || !res.RetryAt.Equal(e.Clock.Now().Add(10*time.Minute)) {
			t.Fatalf("A%d B%d %s %v", d.Count(A.String()), d.Count(B.String()), res.Outcome, res.RetryAt)
		}
	})
}

func TestEmptyChainFails(t *testing.T) {
	e, _ := newEngine(t, retrytest.NewDoer())
	res, evs := runCall(e, call())
	if res.Outcome != retry.OutcomeFailed || len(evs) != 2 || evs[1].Kind != retry.EventCallEnd {
		t.Fatalf("%s %v", res.Outcome, evs)
	}
}

func TestEventsOrder(t *testing.T) {
	d := retrytest.NewDoer().Script(A.String(), retrytest.RateLimited(time.Second), retrytest.OK("one two"))
	e, _ := newEngine(t, d)
	res, evs := runCall(e, call(A))
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, string(ev.Kind))
		if ev.CallID != "c1" {
			t.Fatalf("event %s call id %q", ev.Kind, ev.CallID)
		}
	}
	want := "call_start attempt_start attempt_end wait wait_end attempt_start text text attempt_end call_end"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
	if len(evs[0].Chain) != 1 || evs[1].Attempt.N != 1 || evs[2].Attempt.Decision != retry.DecideRetry ||
		evs[2].Attempt.Status != 429 || evs[8].Attempt.Decision != retry.DecideDone || evs[9].Result.Outcome != retry.OutcomeOK {
		t.Fatalf("event payloads wrong: %+v", evs)
	}
	if we := evs[4].Wait; we == nil || we.Waited != time.Second || we.EndedBy != retry.WaitElapsed || we.Duration != time.Second || !evs[4].Time.Equal(t0.Add(time.Second)) {
		t.Fatalf("wait_end %+v at %v", we, evs[4].Time)
	}
	if !evs[5].Time.Equal(t0.Add(time.Second)) || !evs[5].Attempt.StartedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("second attempt at %v", evs[5].Time)
	}
	// The final event's result is a copy equal to the returned one.
	if len(evs[9].Result.Attempts) != len(res.Attempts) || !res.Ended.Equal(t0.Add(time.Second)) || !res.Started.Equal(t0) {
		t.Fatalf("result %+v", res)
	}
}

type brokenCooldowns struct{}

func (brokenCooldowns) Get(string) (retry.Cooldown, bool, error) {
	return retry.Cooldown{}, false, errors.New("store locked")
}
func (brokenCooldowns) Set(retry.Cooldown) error        { return errors.New("store locked") }
func (brokenCooldowns) Clear(string) error              { return errors.New("store locked") }
func (brokenCooldowns) List() ([]retry.Cooldown, error) { return nil, errors.New("store locked") }

func TestCooldowns(t *testing.T) {
	reset := t0.Add(time.Hour)
	A2 := stream.Target{Provider: A.Provider, Model: "claude-sonnet-5-5"}
	t.Run("account stop blocks the provider until the reset", func(t *testing.T) {
		d := retrytest.NewDoer().
			Script(A.String(), retrytest.Quota("enforced_spend_limit_reached", stream.ScopeAccount, reset)).
			Always(A2.String(), retrytest.OK("ok")).Always(B.String(), retrytest.OK("b"))
		e, clk := newEngine(t, d)
		cds := retry.NewMemoryCooldowns()
		e.Cooldowns = cds
		res, _ := runCall(e, call(A))
		if res.Outcome != retry.OutcomeStopped || res.CooldownHit {
			t.Fatalf("first: %s hit=%v", res.Outcome, res.CooldownHit)
		}
		list, _ := cds.List()
		if len(list) != 1 || list[0].Scope != "account:anthropic" || !list[0].Until.Equal(reset) ||
			list[0].Code != "enforced_spend_limit_reached" || list[0].Target != A.String() || !list[0].Since.Equal(t0) {
			t.Fatalf("cooldowns %+v", list)
		}
		// Another model of the same account: not sent.
		res, _ = runCall(e, call(A2, B))
		if res.Outcome != retry.OutcomeStopped || !res.CooldownHit || !res.CooldownUntil.Equal(reset) || d.Count(A2.String()) != 0 || d.Count(B.String()) != 0 {
			t.Fatalf("second: %s hit=%v until=%v A2=%d", res.Outcome, res.CooldownHit, res.CooldownUntil, d.Count(A2.String()))
		}
		if len(res.Attempts) != 0 || res.Err == nil || res.Err.Class != stream.ClassQuota || !strings.Contains(res.Err.Message, "2026-11-01T13:00:00Z") {
			t.Fatalf("err %v", res.Err)
		}
		if res.Outcome.ExitCode() != 3 {
			t.Fatal("exit code")
		}
		// --ignore-cooldown sends.
		c := call(A2)
		c.Policy.IgnoreCooldown = true
		if res, _ = runCall(e, c); res.Outcome != retry.OutcomeOK || d.Count(A2.String()) != 1 {
			t.Fatalf("ignore: %s", res.Outcome)
		}
		// After the reset it sends again.
		clk.Set(reset.Add(time.Second))
		if res, _ = runCall(e, call(A2)); res.Outcome != retry.OutcomeOK || d.Count(A2.String()) != 2 {
			t.Fatalf("after reset: %s", res.Outcome)
		}
	})
	t.Run("target stop blocks only that model, until cleared", func(t *testing.T) {
		d := retrytest.NewDoer().
			Script(A.String(), retrytest.Quota("RESOURCE_EXHAUSTED", stream.ScopeTarget, time.Time{})).
			Always(A2.String(), retrytest.OK("ok"))
		e, clk := newEngine(t, d) // default in-memory cooldowns
		runCall(e, call(A))
		clk.Advance(24 * time.Hour)
		res, _ := runCall(e, call(A))
		if res.Outcome != retry.OutcomeStopped || !res.CooldownHit || !res.CooldownUntil.IsZero() || d.Count(A.String()) != 1 {
			t.Fatalf("%s hit=%v A=%d", res.Outcome, res.CooldownHit, d.Count(A.String()))
		}
		if !strings.Contains(res.Err.Message, "until cleared") {
			t.Fatalf("message %q", res.Err.Message)
		}
		if res, _ = runCall(e, call(A2)); res.Outcome != retry.OutcomeOK {
			t.Fatalf("other model: %s", res.Outcome)
		}
	})
	t.Run("a cooldown on the fallback stops at the fallback", func(t *testing.T) {
		d := retrytest.NewDoer().Script(A.String(), retrytest.RateLimited(time.Hour)).Always(B.String(), retrytest.OK("b"))
		e, _ := newEngine(t, d)
		cds := retry.NewMemoryCooldowns()
		_ = cds.Set(retry.Cooldown{Scope: "account:openai", Since: t0})
		e.Cooldowns = cds
		res, _ := runCall(e, call(A, B))
		if res.Outcome != retry.OutcomeStopped || !res.CooldownHit || d.Count(A.String()) != 1 || d.Count(B.String()) != 0 {
			t.Fatalf("%s A%d B%d", res.Outcome, d.Count(A.String()), d.Count(B.String()))
		}
	})
	t.Run("a broken store does not fail the call", func(t *testing.T) {
		d := retrytest.NewDoer().Script(A.String(), retrytest.Quota("credit_balance_exhausted", stream.ScopeAccount, time.Time{}), retrytest.OK("x"))
		e, _ := newEngine(t, d)
		e.Cooldowns = brokenCooldowns{}
		if res, _ := runCall(e, call(A)); res.Outcome != retry.OutcomeStopped {
			t.Fatalf("%s", res.Outcome)
		}
		if res, _ := runCall(e, call(A)); res.Outcome != retry.OutcomeOK {
			t.Fatalf("%s", res.Outcome)
		}
	})
}

func TestCancelMidWait(t *testing.T) {
	clearEnv(t)
	d := retrytest.NewDoer().Script(A.String(), retrytest.RateLimited(5*time.Second), retrytest.OK("x"))
	clk := retrytest.NewBlockingClock(t0)
	e := &retry.Engine{Doer: d, Clock: clk, Rand: func() float64 { return 0 }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan retry.Result)
	go func() { done <- e.Run(ctx, call(A), nil) }()
	if err := clk.WaitSleepers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	res := <-done
	if res.Outcome != retry.OutcomeCancelled || d.Count(A.String()) != 1 || res.Err.Class != stream.ClassCancelled {
		t.Fatalf("%s A%d %v", res.Outcome, d.Count(A.String()), res.Err)
	}
	if res.Attempts[0].Waited != 0 || !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("waited %v err %v", res.Attempts[0].Waited, res.Err)
	}
}

func TestCancelMidStream(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := retrytest.NewDoer().ScriptFunc(A.String(), func(ctx context.Context, _ stream.Request, onText func(string)) stream.Result {
		onText("Once upon")
		<-ctx.Done()
		return stream.Result{Status: 200, Text: "Once upon", Err: &stream.Error{Class: stream.ClassCancelled, Status: 200, MidStream: true, Err: ctx.Err()}}
	}).Script(B.String(), retrytest.OK("b"))
	e, clk := newEngine(t, d)
	var kinds []retry.EventKind
	res := e.Run(ctx, call(A, B), func(ev retry.Event) {
		kinds = append(kinds, ev.Kind)
		if ev.Kind == retry.EventText {
			cancel()
		}
	})
	if res.Outcome != retry.OutcomeCancelled || d.Count(B.String()) != 0 || clk.Slept() != 0 {
		t.Fatalf("%s B%d", res.Outcome, d.Count(B.String()))
	}
	a := res.Attempts[0]
	if a.Decision != retry.DecideCancel || a.PartialText != "Once upon" || res.Text != "" {
		t.Fatalf("attempt %+v text %q", a, res.Text)
	}
	if kinds[len(kinds)-1] != retry.EventCallEnd || kinds[len(kinds)-2] != retry.EventAttemptEnd {
		t.Fatalf("events %v", kinds)
	}
}

func TestCancelledBeforeStart(t *testing.T) {
	d := retrytest.NewDoer().Always(A.String(), retrytest.OK("x"))
	e, _ := newEngine(t, d)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res := e.Run(ctx, call(A), nil); res.Outcome != retry.OutcomeCancelled || d.Total() != 0 {
		t.Fatalf("%s %d", res.Outcome, d.Total())
	}
}

func TestWallClock(t *testing.T) {
	var c retry.Clock = retry.WallClock{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("sleep on a cancelled context: %v", err)
	}
	if err := c.Sleep(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if c.Now().IsZero() {
		t.Fatal("zero now")
	}
}
