package retry_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/stream"
)

var s503 = retrytest.Fail(503, stream.ClassOverload, "overloaded")

func breakerEngine(t *testing.T, d *retrytest.Doer) (*retry.Engine, *retrytest.FakeClock) {
	t.Helper()
	e, clk := newEngine(t, d)
	e.Breaker = retry.NewMemoryBreaker(retry.BreakerConfig{})
	return e, clk
}

func targets(res retry.Result) string {
	var out []string
	for _, a := range res.Attempts {
		out = append(out, a.Target.Provider)
	}
	return strings.Join(out, " ")
}

// During an outage of A: the first call spends its two tries on A and
// fails over; the third failure in a row opens A's circuit, so the second
// call moves on after one try without a backoff, and the third call skips A
// without a request. After the cool-off one probe goes: failed, the circuit
// opens again for twice as long; answered, it closes. Exact requests and
// waits on a fake clock; the console reads the state (OVERLOADED until).
func TestBreakerOpensSkipsAndProbes(t *testing.T) {
	d := retrytest.NewDoer().Always(A.String(), s503).Always(B.String(), retrytest.OK("b"))
	e, clk := breakerEngine(t, d)
	run := func(want string) retry.Result {
		t.Helper()
		before := clk.Slept()
		res, _ := runCall(e, call(A, B))
		if res.Outcome != retry.OutcomeOK || targets(res) != want {
			t.Fatalf("%s: requests %q, want %q", res.Outcome, targets(res), want)
		}
		if w := clk.Slept() - before; w != 0 {
			t.Fatalf("waited %s (backoff is 0 here; the breaker must not wait with a fallback left)", w)
		}
		return res
	}
	run("anthropic anthropic openai")
	if st := e.TargetState(A); !st.HasBreaker || st.Breaker.State != retry.CircuitClosed || st.Breaker.Failures != 2 {
		t.Fatalf("after two failures: %+v", st.Breaker)
	}
	res := run("anthropic openai")
	if m := res.Moves[0]; m.Attempt != 1 || !strings.Contains(m.Reason, "circuit is open") {
		t.Fatalf("move %+v", m)
	}
	st := e.TargetState(A).Breaker
	if st.State != retry.CircuitOpen || !st.OpenUntil.Equal(t0.Add(15*time.Second)) || st.Failures != 3 {
		t.Fatalf("after the third failure: %+v", st)
	}
	res = run("openai")
	if len(res.Skips) != 1 || res.Skips[0].Target != A || !strings.Contains(res.Skips[0].Reason, "OVERLOADED") || res.Skips[0].Wait != 15*time.Second {
		t.Fatalf("skips %+v", res.Skips)
	}
	if m := res.Moves[0]; m.Attempt != 0 || m.Cause == nil || m.Cause.Class != stream.ClassOverload {
		t.Fatalf("move %+v", m)
	}
	if n := d.Count(A.String()); n != 3 {
		t.Fatalf("%d requests to A, want 3", n)
	}

	clk.Advance(15 * time.Second) // half-open: one probe, which fails
	if st := e.TargetState(A).Breaker; st.State != retry.CircuitHalfOpen {
		t.Fatalf("after the cool-off: %+v", st)
	}
	run("anthropic openai")
	if st := e.TargetState(A).Breaker; st.State != retry.CircuitOpen || !st.OpenUntil.Equal(t0.Add(45*time.Second)) || st.CoolOff != 30*time.Second {
		t.Fatalf("after a failed probe: %+v", st)
	}
	clk.Advance(29 * time.Second)
	run("openai")
	clk.Advance(time.Second)
	d.Script(A.String(), retrytest.OK("a is back"))
	if res := run("anthropic"); res.Text != "a is back" {
		t.Fatalf("%+v", res)
	}
	if st := e.TargetState(A).Breaker; st.State != retry.CircuitClosed || st.Failures != 0 {
		t.Fatalf("after the probe answered: %+v", st)
	}
	if n := d.Count(A.String()); n != 5 {
		t.Fatalf("%d requests to A, want 5", n)
	}
}

// Half-open under concurrency: of eight calls at once, exactly one sends
// the probe; the seven others skip A while it is out and are served by B.
// The probe's answer closes the circuit.
func TestBreakerHalfOpenSingleProbeUnderConcurrency(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	d := retrytest.NewDoer().Always(A.String(), s503).Always(B.String(), retrytest.OK("b"))
	d.ScriptFunc(A.String(), func(ctx context.Context, _ stream.Request, _ func(string)) stream.Result {
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return retrytest.OK("probe")
	})
	e, clk := breakerEngine(t, d)
	b := e.Breaker
	key := d.Scope(A, stream.ScopeTarget)
	for range 3 {
		b.Record(key, false, retry.BreakerFailure, t0)
	}
	clk.Advance(15 * time.Second)

	const n = 8
	results := make(chan retry.Result, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			res, _ := runCall(e, call(A, B))
			results <- res
		})
	}
	<-started
	// Every call but the probe's ends while the probe is out.
	for range n - 1 {
		res := <-results
		if res.Outcome != retry.OutcomeOK || targets(res) != "openai" || len(res.Skips) != 1 || !strings.Contains(res.Skips[0].Reason, "probe is out") {
			t.Errorf("%s %q skips %+v", res.Outcome, targets(res), res.Skips)
		}
	}
	if a, bb := d.Count(A.String()), d.Count(B.String()); a != 1 || bb != n-1 {
		t.Fatalf("requests A %d B %d with the probe out, want 1 and %d", a, bb, n-1)
	}
	if st := e.TargetState(A).Breaker; st.State != retry.CircuitHalfOpen || !st.Probing {
		t.Fatalf("with the probe out: %+v", st)
	}
	close(release)
	wg.Wait()
	if res := <-results; res.Outcome != retry.OutcomeOK || targets(res) != "anthropic" {
		t.Fatalf("the probe's call: %s %q", res.Outcome, targets(res))
	}
	if st := e.TargetState(A).Breaker; st.State != retry.CircuitClosed {
		t.Fatalf("after the probe: %+v", st)
	}
}

// With no fallback, an open circuit is a wait like any other: the call
// waits for the probe's turn (bounded by MaxWait: deferred past it) instead
// of sending into the outage.
func TestBreakerLastTargetWaitsForTheProbe(t *testing.T) {
	d := retrytest.NewDoer().Script(A.String(), s503, s503, s503, retrytest.OK("a"))
	e, clk := breakerEngine(t, d)
	res, _ := runCall(e, call(A))
	if res.Outcome != retry.OutcomeOK || d.Count(A.String()) != 4 {
		t.Fatalf("%s after %d requests", res.Outcome, d.Count(A.String()))
	}
	if got := clk.Slept(); got != 15*time.Second {
		t.Fatalf("waited %s (sleeps %v), want the 15s cool-off", got, clk.Sleeps())
	}

	d = retrytest.NewDoer().Always(A.String(), s503)
	e, _ = breakerEngine(t, d)
	c := call(A)
	c.Policy.MaxWait = 10 * time.Second
	res, _ = runCall(e, c)
	if res.Outcome != retry.OutcomeDeferred || d.Count(A.String()) != 3 || !res.RetryAt.Equal(t0.Add(15*time.Second)) {
		t.Fatalf("%s after %d requests, retry at %v", res.Outcome, d.Count(A.String()), res.RetryAt)
	}
}

// What counts: overloads, timeouts and connections with no response open
// the circuit; a stream cut after HTTP 200, rate limits and server errors
// count for nothing; an answer (even a caller error) starts the count
// again; failures further apart than the window do not add up.
func TestBreakerCounts(t *testing.T) {
	noResp := stream.Result{Err: &stream.Error{Class: stream.ClassConnection, Message: "refused"}}
	cut := stream.Result{Status: 200, Err: &stream.Error{Class: stream.ClassConnection, Status: 200, MidStream: true}}
	timeout := stream.Result{Err: &stream.Error{Class: stream.ClassTimeout}}
	cases := []struct {
		name    string
		results []stream.Result
		open    bool
	}{
		{"overloads", []stream.Result{s503, s503, s503}, true},
		{"timeouts and refused connections", []stream.Result{timeout, noResp, timeout}, true},
		{"cuts after 200 count for nothing", []stream.Result{s503, cut, s503, cut}, false},
		{"rate limits and 500s count for nothing", []stream.Result{s503, retrytest.RateLimited(time.Millisecond), s503, retrytest.Fail(500, stream.ClassServer, "x"), s503}, true},
		{"a caller error is an answer", []stream.Result{s503, s503, retrytest.Fail(400, stream.ClassCaller, "bad"), s503, s503}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := retrytest.NewDoer().Script(A.String(), c.results...)
			e, _ := breakerEngine(t, d)
			for range c.results {
				cl := call(A)
				cl.Policy.MaxAttempts = 1
				runCall(e, cl)
			}
			if got := e.TargetState(A).Breaker.Open(); got != c.open || d.Count(A.String()) != len(c.results) {
				t.Fatalf("open %v after %d requests, want %v", got, d.Count(A.String()), c.open)
			}
		})
	}

	b := retry.NewMemoryBreaker(retry.BreakerConfig{Threshold: 2, Window: time.Minute, CoolOff: time.Second, MaxCoolOff: 3 * time.Second})
	b.Record("k", false, retry.BreakerFailure, t0)
	b.Record("k", false, retry.BreakerFailure, t0.Add(61*time.Second))
	if b.State("k", t0.Add(61*time.Second)).Open() {
		t.Fatal("failures a window apart opened the circuit")
	}
	b.Record("k", false, retry.BreakerFailure, t0.Add(62*time.Second))
	now := t0.Add(62 * time.Second)
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second} {
		if st := b.State("k", now); !st.Open() || st.OpenUntil.Sub(now) != want {
			t.Fatalf("open %d: %+v, want %s", i, st, want)
		}
		now = now.Add(want)
		probe, ok, _ := b.Allow("k", now)
		if !probe || !ok {
			t.Fatalf("no probe after the cool-off")
		}
		if _, ok, wait := b.Allow("k", now); ok || wait != time.Second {
			t.Fatalf("a second probe: ok %v wait %s", ok, wait)
		}
		b.Record("k", true, retry.BreakerFailure, now) // the probe failed: open again, up to MaxCoolOff
	}
	now = now.Add(3 * time.Second)
	probe, _, _ := b.Allow("k", now)
	b.Record("k", probe, retry.BreakerNeutral, now) // a probe that says nothing lets another go
	if probe2, ok, _ := b.Allow("k", now); !probe2 || !ok {
		t.Fatal("the probe was not released")
	}
}
