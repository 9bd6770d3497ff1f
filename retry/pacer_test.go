package retry_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/stream"
)

func reqWindow(limit, remaining int64, reset time.Time) *stream.Limits {
	return &stream.Limits{Requests: &stream.Window{Limit: limit, Remaining: remaining, Reset: reset, HasLimit: true, HasRemaining: true}}
}

func pacedEngine(t *testing.T, d *retrytest.Doer) (*retry.Engine, *retrytest.FakeClock) {
	e, clk := newEngine(t, d)
	e.Pacer = retry.NewPacer()
	return e, clk
}

func waits(evs []retry.Event) []retry.Wait {
	var out []retry.Wait
	for _, ev := range evs {
		if ev.Kind == retry.EventWait {
			out = append(out, *ev.Wait)
		}
	}
	return out
}

func TestPacingWaitsUntilOneRequestFits(t *testing.T) {
	// 60 a minute, none left, full again in 60s: one fits in 1s, not 60s.
	first := retrytest.WithLimits(retrytest.OK("a"), reqWindow(60, 0, t0.Add(time.Minute)))
	d := retrytest.NewDoer().Script(A.String(), first, retrytest.OK("b"))
	e, clk := pacedEngine(t, d)
	if res, evs := runCall(e, call(A)); res.Outcome != retry.OutcomeOK || len(waits(evs)) != 0 {
		t.Fatalf("first call: %s %v", res.Outcome, waits(evs))
	}
	res, evs := runCall(e, call(A))
	if res.Outcome != retry.OutcomeOK || clk.Slept() != time.Second {
		t.Fatalf("second call: %s slept %v", res.Outcome, clk.Slept())
	}
	ws := waits(evs)
	if len(ws) != 1 || !ws[0].Pacing || ws[0].Source != stream.SourceReset || ws[0].Duration != time.Second || ws[0].Asked != 0 {
		t.Fatalf("waits %+v", ws)
	}
	if a := res.Attempts[0]; a.Paced != time.Second || a.Waited != 0 {
		t.Fatalf("attempt %+v", a)
	}
}

func TestPacingTokensUntilOneRequestFits(t *testing.T) {
	first := retrytest.OK("a")
	first.Usage = &stream.Usage{InputTokens: 60, OutputTokens: 40}
	first.Limits = &stream.Limits{Tokens: &stream.Window{Limit: 6000, Remaining: 0, Reset: t0.Add(time.Minute), HasLimit: true, HasRemaining: true}}
	d := retrytest.NewDoer().Script(A.String(), first, retrytest.OK("b"))
	e, clk := pacedEngine(t, d)
	runCall(e, call(A))
	res, evs := runCall(e, call(A))
	// 6000 tokens a minute is 100/s; one request of 100 tokens fits in 1s.
	if res.Outcome != retry.OutcomeOK || clk.Slept() != time.Second || waits(evs)[0].Source != stream.SourceReset {
		t.Fatalf("%s slept %v", res.Outcome, clk.Slept())
	}
}

func TestPacingPerDayWindowOnlyHoldsWhenSpent(t *testing.T) {
	perDay := func(remaining int64) *stream.Limits {
		return &stream.Limits{Requests: &stream.Window{Limit: 14400, Remaining: remaining, Reset: t0.Add(24 * time.Hour), HasLimit: true, HasRemaining: true, PerDay: true}}
	}
	d := retrytest.NewDoer().Script(A.String(),
		retrytest.WithLimits(retrytest.OK("a"), perDay(100)),
		retrytest.WithLimits(retrytest.OK("a"), perDay(0)),
		retrytest.OK("c"))
	e, clk := pacedEngine(t, d)
	runCall(e, call(A))
	runCall(e, call(A))
	if clk.Slept() != 0 {
		t.Fatalf("a daily budget with requests left was spread: slept %v", clk.Slept())
	}
	runCall(e, call(A))
	if clk.Slept() != 6*time.Second { // a day / 14400
		t.Fatalf("slept %v, want 6s", clk.Slept())
	}
}

func TestPacingSpreadsInsteadOfBursting(t *testing.T) {
	p := retry.NewPacer()
	p.MaxConcurrency = 100
	ctx := context.Background()
	pm, _ := p.Acquire(ctx, A)
	pm.Reserve(t0)
	// 300 a minute (5/s), none left: the bucket lets one through every
	// 200ms, keeping one request's cushion to the server (so the first
	// waits 400ms).
	r := retrytest.WithLimits(retrytest.OK("x"), reqWindow(300, 0, t0.Add(time.Minute)))
	pm.Done(&r, t0)
	if st := p.State(A); st.Rate != 5 {
		t.Fatalf("rate %v", st.Rate)
	}
	for i := 1; i <= 6; i++ {
		pm, err := p.Acquire(ctx, A)
		if err != nil {
			t.Fatal(err)
		}
		pc := pm.Reserve(t0)
		if want := time.Duration(i+1) * 200 * time.Millisecond; pc.Delay != want || pc.Source != stream.SourceReset {
			t.Fatalf("request %d: %+v, want %v", i, pc, want)
		}
		pm.Cancel(t0) // gives its place back...
		pm, _ = p.Acquire(ctx, A)
		pm.Reserve(t0)   // ...and takes it again, for good
		pm.Done(nil, t0) // (the slot is free again; no answer to learn from)
	}
}

func TestPacingBurstAfterIdle(t *testing.T) {
	p := retry.NewPacer()
	p.MaxConcurrency = 100
	ctx := context.Background()
	pm, _ := p.Acquire(ctx, A)
	pm.Reserve(t0)
	r := retrytest.WithLimits(retrytest.OK("x"), reqWindow(300, 299, t0.Add(time.Second/5)))
	pm.Done(&r, t0)
	// 5/s with a second's burst: after an idle second five go at once, the sixth waits.
	now := t0.Add(time.Second)
	for i := 0; i < 5; i++ {
		pm, _ := p.Acquire(ctx, A)
		if pc := pm.Reserve(now); pc.Delay != 0 {
			t.Fatalf("request %d waited %v", i, pc.Delay)
		}
		pm.Done(nil, now)
	}
	pm, _ = p.Acquire(ctx, A)
	if pc := pm.Reserve(now); pc.Delay != 200*time.Millisecond {
		t.Fatalf("sixth waited %v", pc.Delay)
	}
}

func TestRetryAfterOutranksReset(t *testing.T) {
	// The 429 says 2s; its tokens window says nothing fits for 30s.
	r429 := retrytest.RateLimited(2 * time.Second)
	r429.Limits = &stream.Limits{Tokens: &stream.Window{Limit: 1000, Remaining: 0, Reset: t0.Add(30 * time.Second), HasLimit: true, HasRemaining: true}}
	d := retrytest.NewDoer().Script(A.String(), r429, retrytest.OK("ok"))
	e, clk := pacedEngine(t, d)
	res, evs := runCall(e, call(A))
	if res.Outcome != retry.OutcomeOK || clk.Slept() != 2*time.Second || d.Count(A.String()) != 2 {
		t.Fatalf("%s slept %v (%v)", res.Outcome, clk.Slept(), clk.Sleeps())
	}
	if ws := waits(evs); len(ws) != 1 || ws[0].Source != stream.SourceRetryAfter {
		t.Fatalf("waits %+v", ws)
	}

	// An earlier reset-based hold is cut short by a later retry-after too.
	p := retry.NewPacer()
	ctx := context.Background()
	pm, _ := p.Acquire(ctx, A)
	pm.Reserve(t0)
	ok := retrytest.OK("x")
	ok.Usage = &stream.Usage{InputTokens: 1000}
	ok.Limits = &stream.Limits{Tokens: &stream.Window{Limit: 1000, Remaining: 0, Reset: t0.Add(time.Minute), HasLimit: true, HasRemaining: true}}
	pm.Done(&ok, t0)
	if st := p.State(A); !st.HoldUntil.Equal(t0.Add(time.Minute)) {
		t.Fatalf("hold %v", st.HoldUntil)
	}
	pm, _ = p.Acquire(ctx, A)
	pm.Reserve(t0)
	ra := retrytest.RateLimited(3 * time.Second)
	pm.Done(&ra, t0)
	pm, _ = p.Acquire(ctx, A)
	if pc := pm.Reserve(t0); pc.Delay != 3*time.Second || pc.Source != stream.SourceRetryAfter || pc.Asked != 3*time.Second {
		t.Fatalf("pace %+v", pc)
	}
}

func TestRetryAfterSharedAcrossCalls(t *testing.T) {
	// One call's 429 holds the next call to the same target.
	d := retrytest.NewDoer().Script(A.String(), retrytest.RateLimited(5*time.Second), retrytest.OK("b"))
	e, clk := pacedEngine(t, d)
	c := call(A)
	c.Policy.MaxAttempts = 1
	if res, _ := runCall(e, c); res.Outcome != retry.OutcomeGaveUp {
		t.Fatalf("first: %s", res.Outcome)
	}
	res, evs := runCall(e, call(A))
	ws := waits(evs)
	if res.Outcome != retry.OutcomeOK || clk.Slept() != 5*time.Second || len(ws) != 1 ||
		!ws[0].Pacing || ws[0].Source != stream.SourceRetryAfter || ws[0].Asked != 5*time.Second || res.Attempts[0].Paced != 5*time.Second {
		t.Fatalf("%s slept %v waits %+v", res.Outcome, clk.Slept(), ws)
	}
	// Another target is not held.
	d.Script(B.String(), retrytest.OK("b"))
	before := clk.Slept()
	runCall(e, call(B))
	if clk.Slept() != before {
		t.Fatal("B was held by A's retry-after")
	}
}

func TestRetryAfterSharedAcrossWorkers(t *testing.T) {
	clearEnv(t)
	clk := retrytest.NewBlockingClock(t0)
	first := make(chan struct{})
	d := retrytest.NewDoer().
		ScriptFunc(A.String(), func(context.Context, stream.Request, func(string)) stream.Result {
			return retrytest.RateLimited(4 * time.Second)
		}).
		Always(A.String(), retrytest.OK("ok"))
	e := &retry.Engine{Doer: d, Clock: clk, Pacer: retry.NewPacer(), Rand: func() float64 { return 0 }}
	var wg sync.WaitGroup
	results := make([]retry.Result, 2)
	wg.Add(1)
	go func() {
		defer wg.Done()
		results[0] = e.Run(context.Background(), call(A), func(ev retry.Event) {
			if ev.Kind == retry.EventWait {
				close(first)
			}
		})
	}()
	<-first // worker 1 got its 429 and waits 4s
	var w2 []retry.Wait
	wg.Add(1)
	go func() {
		defer wg.Done()
		results[1] = e.Run(context.Background(), call(A), func(ev retry.Event) {
			if ev.Kind == retry.EventWait {
				w2 = append(w2, *ev.Wait)
			}
		})
	}()
	if err := clk.WaitSleepers(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	if d.Count(A.String()) != 1 {
		t.Fatalf("worker 2 sent before the retry-after passed: %d requests", d.Count(A.String()))
	}
	clk.Advance(4 * time.Second)
	wg.Wait()
	if results[0].Outcome != retry.OutcomeOK || results[1].Outcome != retry.OutcomeOK || d.Count(A.String()) != 3 {
		t.Fatalf("%s %s %d", results[0].Outcome, results[1].Outcome, d.Count(A.String()))
	}
	if len(w2) != 1 || w2[0].Duration != 4*time.Second || w2[0].Source != stream.SourceRetryAfter || !w2[0].Pacing {
		t.Fatalf("worker 2 waits %+v", w2)
	}
}

func TestPacingUnderFailoverMaxWaitDeadline(t *testing.T) {
	spent := retrytest.WithLimits(retrytest.OK("a"), reqWindow(1, 0, t0.Add(time.Minute)))
	t.Run("fails over when the pacing wait is past failover-wait", func(t *testing.T) {
		d := retrytest.NewDoer().Script(A.String(), spent, retrytest.OK("a")).Always(B.String(), retrytest.OK("b"))
		e, clk := pacedEngine(t, d)
		runCall(e, call(A))
		res, _ := runCall(e, call(A, B))
		if servedBy(res) != B.String() || d.Count(A.String()) != 1 || clk.Slept() != 0 || len(res.Skips) != 1 || res.Skips[0].Wait != time.Minute {
			t.Fatalf("served %s A%d slept %v skips %+v", servedBy(res), d.Count(A.String()), clk.Slept(), res.Skips)
		}
		// The place it gave back is still there for the next one.
		if pc := mustReserve(t, e.Pacer, A, clk.Now()); pc.Delay != time.Minute {
			t.Fatalf("pace %+v", pc)
		}
	})
	t.Run("defers past max-wait without a fallback", func(t *testing.T) {
		d := retrytest.NewDoer().Script(A.String(), spent, retrytest.OK("a"))
		e, clk := pacedEngine(t, d)
		runCall(e, call(A))
		c := call(A)
		c.Policy.MaxWait = 30 * time.Second
		res, _ := runCall(e, c)
		if res.Outcome != retry.OutcomeDeferred || !res.RetryAt.Equal(t0.Add(time.Minute)) || d.Count(A.String()) != 1 || clk.Slept() != 0 {
			t.Fatalf("%s %v", res.Outcome, res.RetryAt)
		}
	})
	t.Run("gives up past the deadline", func(t *testing.T) {
		d := retrytest.NewDoer().Script(A.String(), spent, retrytest.OK("a"))
		e, clk := pacedEngine(t, d)
		runCall(e, call(A))
		c := call(A)
		c.Policy.Deadline = 30 * time.Second
		res, _ := runCall(e, c)
		if res.Outcome != retry.OutcomeGaveUp || d.Count(A.String()) != 1 || clk.Slept() != 0 {
			t.Fatalf("%s", res.Outcome)
		}
	})
}

func mustReserve(t *testing.T, p retry.Pacing, tg stream.Target, now time.Time) retry.Pace {
	t.Helper()
	pm, err := p.Acquire(context.Background(), tg)
	if err != nil {
		t.Fatal(err)
	}
	defer pm.Cancel(now)
	return pm.Reserve(now)
}

func TestConcurrencySlowStartAndAIMD(t *testing.T) {
	ctx := context.Background()
	p := retry.NewPacer()
	if st := p.State(A); st.Concurrency != 2 || st.Known {
		t.Fatalf("slow start %+v", st)
	}
	done := func(r stream.Result) {
		pm, err := p.Acquire(ctx, A)
		if err != nil {
			t.Fatal(err)
		}
		pm.Reserve(t0)
		pm.Done(&r, t0)
	}
	// Slow start: one more per success while no headers tell the limit.
	done(retrytest.OK("x"))
	done(retrytest.OK("x"))
	if st := p.State(A); st.Concurrency != 4 {
		t.Fatalf("after two successes %+v", st)
	}
	// A 429 halves and ends slow start.
	done(retrytest.Fail(429, stream.ClassRateLimit, ""))
	if st := p.State(A); st.Concurrency != 2 || !st.Known {
		t.Fatalf("after a 429 %+v", st)
	}
	// A 529 halves again, never below 1.
	done(retrytest.Fail(529, stream.ClassOverload, "overloaded_error"))
	done(retrytest.Fail(529, stream.ClassOverload, "overloaded_error"))
	if st := p.State(A); st.Concurrency != 1 {
		t.Fatalf("after 529s %+v", st)
	}
	// Growth is slow: about one per limit's worth of successes.
	for i := 0; i < 3; i++ {
		done(retrytest.OK("x"))
	}
	if st := p.State(A); st.Concurrency != 2 {
		t.Fatalf("after 3 successes %+v", st)
	}
	for i := 0; i < 3; i++ {
		done(retrytest.OK("x"))
	}
	if st := p.State(A); st.Concurrency != 3 {
		t.Fatalf("after 6 successes %+v", st)
	}
}

func TestConcurrencyHalvesOncePerBurst(t *testing.T) {
	ctx := context.Background()
	p := &retry.Pacer{SlowStart: 8}
	var pms []*retry.Permit
	for i := 0; i < 8; i++ {
		pm, _ := p.Acquire(ctx, A)
		pm.Reserve(t0)
		pms = append(pms, pm)
	}
	r := retrytest.Fail(429, stream.ClassRateLimit, "")
	for _, pm := range pms {
		pm.Done(&r, t0)
	}
	if st := p.State(A); st.Concurrency != 4 {
		t.Fatalf("eight 429s of one burst: %+v, want one halving", st)
	}
}

func TestConcurrencyFromHeaders(t *testing.T) {
	ctx := context.Background()
	p := &retry.Pacer{MaxConcurrency: 16}
	pm, _ := p.Acquire(ctx, A)
	pm.Reserve(t0)
	r := retrytest.WithLimits(retrytest.OK("x"), reqWindow(60, 40, t0.Add(20*time.Second)))
	pm.Done(&r, t0)
	if st := p.State(A); st.Concurrency != 16 || !st.Known {
		t.Fatalf("%+v", st)
	}
	p = retry.NewPacer()
	pm, _ = p.Acquire(ctx, A)
	pm.Reserve(t0)
	r = retrytest.WithLimits(retrytest.OK("x"), reqWindow(300, 5, t0.Add(59*time.Second)))
	pm.Done(&r, t0)
	if st := p.State(A); st.Concurrency != 5 {
		t.Fatalf("%+v", st)
	}
}

func TestConcurrencyGateBlocks(t *testing.T) {
	p := &retry.Pacer{SlowStart: 2}
	bg := context.Background()
	a, _ := p.Acquire(bg, A)
	b, _ := p.Acquire(bg, A)
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	if _, err := p.Acquire(cancelled, A); err == nil {
		t.Fatal("a third request got a slot at concurrency 2")
	}
	got := make(chan *retry.Permit)
	go func() {
		pm, err := p.Acquire(bg, A)
		if err != nil {
			t.Error(err)
		}
		got <- pm
	}()
	b.Cancel(t0)
	c := <-got
	if st := p.State(A); st.InFlight != 2 {
		t.Fatalf("%+v", st)
	}
	a.Cancel(t0)
	c.Cancel(t0)
	if st := p.State(A); st.InFlight != 0 {
		t.Fatalf("%+v", st)
	}
	// Other targets have their own gate.
	if _, err := p.Acquire(cancelled, B); err != nil {
		t.Fatal(err)
	}
}

func TestRampRule(t *testing.T) {
	ctx := context.Background()
	p := &retry.Pacer{SlowStart: 4, MaxConcurrency: 1000, Ramp: retry.OpenAIRamp(4)}
	ok := func(now time.Time, n int) {
		for i := 0; i < n; i++ {
			pm, _ := p.Acquire(ctx, A)
			pm.Reserve(now)
			r := retrytest.OK("x")
			pm.Done(&r, now)
		}
	}
	ok(t0, 100)
	if st := p.State(A); st.Concurrency != 6 {
		t.Fatalf("within 15 minutes: %+v, want 6 (4 + 50%%)", st)
	}
	ok(t0.Add(15*time.Minute), 100)
	if st := p.State(A); st.Concurrency != 9 {
		t.Fatalf("next period: %+v, want 9", st)
	}
}

func TestEngineWithPacerConcurrent(t *testing.T) {
	d := retrytest.NewDoer().Always(A.String(), retrytest.WithLimits(retrytest.OK("x"), reqWindow(600, 500, t0.Add(10*time.Second))))
	e, _ := pacedEngine(t, d)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				if res := e.Run(context.Background(), call(A), nil); res.Outcome != retry.OutcomeOK {
					t.Errorf("%s", res.Outcome)
				}
			}
		}()
	}
	wg.Wait()
	if d.Count(A.String()) != 160 {
		t.Fatalf("%d requests", d.Count(A.String()))
	}
	if st := e.Pacer.State(A); st.InFlight != 0 {
		t.Fatalf("%+v", st)
	}
}

func TestPacerCancelWhileWaitingForSlot(t *testing.T) {
	clearEnv(t)
	clk := retrytest.NewBlockingClock(t0)
	p := &retry.Pacer{SlowStart: 1}
	hold, _ := p.Acquire(context.Background(), A)
	e := &retry.Engine{Doer: retrytest.NewDoer().Always(A.String(), retrytest.OK("x")), Clock: clk, Pacer: p}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan retry.Result)
	started := make(chan struct{})
	go func() {
		close(started)
		done <- e.Run(ctx, call(A), nil)
	}()
	<-started
	cancel()
	if res := <-done; res.Outcome != retry.OutcomeCancelled {
		t.Fatalf("%s", res.Outcome)
	}
	hold.Cancel(t0)
}

func TestQuotaSeenWhileWaitingForASlot(t *testing.T) {
	// Worker 1 holds the only slot and gets a quota error; worker 2, queued
	// for the slot, must not send.
	clearEnv(t)
	release := make(chan struct{})
	d := retrytest.NewDoer().ScriptFunc(A.String(), func(context.Context, stream.Request, func(string)) stream.Result {
		<-release
		return retrytest.Quota("credit_balance_exhausted", stream.ScopeAccount, time.Time{})
	}).Always(A.String(), retrytest.OK("x"))
	e := &retry.Engine{Doer: d, Clock: retrytest.NewFakeClock(t0), Pacer: &retry.Pacer{SlowStart: 1}}
	inDo := make(chan struct{})
	res1 := make(chan retry.Result)
	go func() {
		res1 <- e.Run(context.Background(), call(A), func(ev retry.Event) {
			if ev.Kind == retry.EventAttemptStart {
				close(inDo)
			}
		})
	}()
	<-inDo
	res2 := make(chan retry.Result)
	go func() { res2 <- e.Run(context.Background(), call(A), nil) }()
	for e.Pacer.State(A).Queued != 1 { // worker 2 queues behind worker 1's slot
		runtime.Gosched()
	}
	close(release)
	if r := <-res1; r.Outcome != retry.OutcomeStopped {
		t.Fatalf("worker 1: %s", r.Outcome)
	}
	if r := <-res2; r.Outcome != retry.OutcomeStopped || !r.CooldownHit {
		t.Fatalf("worker 2: %s hit=%v", r.Outcome, r.CooldownHit)
	}
	if n := d.Count(A.String()); n != 1 {
		t.Fatalf("%d requests after the quota error", n-1)
	}
}

// A small bucket's headers (300 RPM, burst 5: nothing left, full again at
// the next second, Anthropic's reset rounded up) tell a refill of 5 a
// second, not 300: the requests after it are spread 200ms apart, with the
// one-request cushion, instead of stampeding.
func TestPacingSmallBucketIsNotAStampede(t *testing.T) {
	p := retry.NewPacer()
	p.MaxConcurrency = 100
	ctx := context.Background()
	pm, _ := p.Acquire(ctx, A)
	pm.Reserve(t0)
	r := retrytest.WithLimits(retrytest.OK("x"), reqWindow(300, 0, t0.Add(2*time.Second)))
	pm.Done(&r, t0)
	if st := p.State(A); st.Rate != 5 {
		t.Fatalf("rate %v/s, want 5/s", st.Rate)
	}
	for i := 1; i <= 10; i++ {
		pm, err := p.Acquire(ctx, A)
		if err != nil {
			t.Fatal(err)
		}
		if pc := pm.Reserve(t0); pc.Delay != time.Duration(i+1)*200*time.Millisecond {
			t.Fatalf("request %d waits %v, want %v", i, pc.Delay, time.Duration(i+1)*200*time.Millisecond)
		}
		pm.Done(nil, t0)
	}
}
