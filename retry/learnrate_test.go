package retry_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/stream"
)

// ms is n milliseconds after t0.
func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// send takes a permit at p for C, reserves it at at and returns it with its
// pace.
func send(t *testing.T, p *retry.Pacer, at time.Time) (*retry.Permit, retry.Pace) {
	t.Helper()
	pm, err := p.Acquire(context.Background(), C)
	if err != nil {
		t.Fatal(err)
	}
	return pm, pm.Reserve(at)
}

// answer sends one request at at and answers it with r at the same time;
// it returns the request's pace.
func answer(t *testing.T, p *retry.Pacer, at time.Time, r stream.Result) retry.Pace {
	t.Helper()
	pm, pc := send(t, p, at)
	pm.Done(&r, at)
	return pc
}

func rateLimited() stream.Result {
	return retrytest.Fail(429, stream.ClassRateLimit, "rate_limit_exceeded")
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// Five successes 100 ms apart, no headers: no rate limit. The 429 after
// them sets the rate to the five that got through in the last second, the
// bucket is taken to be empty, and requests are spread at 5 a second.
func TestLearnedRateFromFirst429(t *testing.T) {
	p := retry.NewPacer()
	for i := range 5 {
		if pc := answer(t, p, ms(100*i), retrytest.OK("ok")); pc.Delay != 0 {
			t.Fatalf("request %d paced %v before any 429", i, pc.Delay)
		}
	}
	if st := p.State(C); st.Rate != 0 || st.RateLearned {
		t.Fatalf("rate %v learned %v before any 429, want none", st.Rate, st.RateLearned)
	}
	answer(t, p, ms(500), rateLimited())
	if st := p.State(C); !near(st.Rate, 5) || !st.RateLearned {
		t.Fatalf("after the 429: rate %v learned %v, want 5/s learned", st.Rate, st.RateLearned)
	}
	// Empty bucket of 5 at 5/s: the next fits in 200 ms, then every 200 ms.
	var pms []*retry.Permit
	for i, want := range []time.Duration{200, 400, 600} {
		pm, pc := send(t, p, ms(500))
		pms = append(pms, pm)
		if pc.Delay != want*time.Millisecond || pc.Source != stream.SourceReset || pc.Asked != 0 {
			t.Errorf("request %d after the 429: pace %+v, want %dms (reset)", i, pc, want)
		}
	}
	for _, pm := range pms {
		pm.Cancel(ms(500))
	}
}

// Later 429s cut the learned rate to what got through, by 10% at least
// and by half at most, once per round: a 429 to a request reserved before
// the last cut does not cut again.
func TestLearnedRateCuts(t *testing.T) {
	p := retry.NewPacer()
	for i := range 5 {
		answer(t, p, ms(100*i), retrytest.OK("ok"))
	}
	answer(t, p, ms(500), rateLimited()) // 5/s
	a, _ := send(t, p, ms(500))
	b, _ := send(t, p, ms(500))
	r := rateLimited()
	a.Done(&r, ms(750)) // 5 through in the last second: 5, but at least a 10% cut
	if st := p.State(C); !near(st.Rate, 4.5) {
		t.Fatalf("second 429: rate %v, want 4.5", st.Rate)
	}
	b.Done(&r, ms(950)) // reserved before that cut
	if st := p.State(C); !near(st.Rate, 4.5) {
		t.Fatalf("429 of the same round: rate %v, want 4.5 (no second cut)", st.Rate)
	}
	answer(t, p, ms(5000), rateLimited()) // nothing through in the last second: halve
	if st := p.State(C); !near(st.Rate, 2.25) {
		t.Fatalf("429 with nothing through: rate %v, want 2.25 (half)", st.Rate)
	}
}

// Each success grows the learned rate by RateGrowth/rate: RateGrowth
// requests a second per second.
func TestLearnedRateGrowsAdditively(t *testing.T) {
	p := &retry.Pacer{RateGrowth: 0.5}
	for i := range 5 {
		answer(t, p, ms(100*i), retrytest.OK("ok"))
	}
	answer(t, p, ms(500), rateLimited())
	pm, _ := send(t, p, ms(500))
	ok := retrytest.OK("ok")
	pm.Done(&ok, ms(700))
	if st := p.State(C); !near(st.Rate, 5.1) {
		t.Fatalf("after one success: rate %v, want 5.1", st.Rate)
	}
}

// A server's delay on the 429 is a floor: every request waits it out, and
// the learned rate spreads them after it.
func TestLearnedRateServerDelayFloor(t *testing.T) {
	p := retry.NewPacer()
	for i := range 5 {
		answer(t, p, ms(100*i), retrytest.OK("ok"))
	}
	answer(t, p, ms(500), retrytest.WithDelay(rateLimited(), 3*time.Second, stream.SourceRetryInfo))
	pm, pc := send(t, p, ms(500))
	if pc.Delay != 3*time.Second || pc.Source != stream.SourceRetryInfo || pc.Asked != 3*time.Second {
		t.Fatalf("first after the 429: pace %+v, want the server's 3s", pc)
	}
	pm2, pc2 := send(t, p, ms(500))
	if pc2.Delay != 3200*time.Millisecond || pc2.Source != stream.SourceReset {
		t.Fatalf("second after the 429: pace %+v, want 3.2s (the learned 5/s after the hold)", pc2)
	}
	pm.Cancel(ms(500))
	pm2.Cancel(ms(500))
}

// A 429 before any success teaches nothing: no rate, no pacing.
func TestLearnedRateNeedsSuccesses(t *testing.T) {
	p := retry.NewPacer()
	answer(t, p, t0, rateLimited())
	if st := p.State(C); st.Rate != 0 || st.RateLearned {
		t.Fatalf("rate %v learned %v after a lone 429", st.Rate, st.RateLearned)
	}
	if pc := answer(t, p, t0, retrytest.OK("ok")); pc.Delay != 0 {
		t.Fatalf("paced %v with no rate", pc.Delay)
	}
}

// A target whose answers carry a per-minute requests window is paced from
// the headers alone: a 429 without headers learns nothing. A daily
// requests budget (Groq's) does not count: its rate is learned.
func TestLearnedRateOnlyWithoutPerMinuteHeaders(t *testing.T) {
	perMinute := reqWindow(300, 299, t0.Add(200*time.Millisecond))
	p := retry.NewPacer()
	for i := range 5 {
		answer(t, p, ms(100*i), retrytest.WithLimits(retrytest.OK("ok"), perMinute))
	}
	answer(t, p, ms(500), rateLimited())
	if st := p.State(C); !near(st.Rate, 5) || st.RateLearned {
		t.Fatalf("per-minute headers: rate %v learned %v, want 5/s from the headers", st.Rate, st.RateLearned)
	}
	// The same as the header path without learning: a second 429 leaves the
	// header rate alone.
	answer(t, p, ms(2000), rateLimited())
	if st := p.State(C); !near(st.Rate, 5) || st.RateLearned {
		t.Fatalf("per-minute headers, second 429: rate %v learned %v", st.Rate, st.RateLearned)
	}

	perDay := &stream.Limits{Requests: &stream.Window{Limit: 14400, Remaining: 14000, Reset: t0.Add(10 * time.Hour),
		HasLimit: true, HasRemaining: true, PerDay: true}}
	p = retry.NewPacer()
	for i := range 4 {
		answer(t, p, ms(100*i), retrytest.WithLimits(retrytest.OK("ok"), perDay))
	}
	answer(t, p, ms(500), retrytest.WithLimits(rateLimited(), perDay))
	if st := p.State(C); !near(st.Rate, 4) || !st.RateLearned {
		t.Fatalf("daily requests budget: rate %v learned %v, want 4/s learned", st.Rate, st.RateLearned)
	}
}

// Through the Engine on a fake clock: after a 429 with no headers, the
// next call waits for the learned rate's bucket.
func TestLearnedRateEngine(t *testing.T) {
	d := retrytest.NewDoer()
	rs := []stream.Result{}
	for range 5 {
		rs = append(rs, retrytest.OK("ok"))
	}
	rs = append(rs, rateLimited())
	d.Script(C.String(), rs...).Always(C.String(), retrytest.OK("ok"))
	e, clk := pacedEngine(t, d)
	for i := range 5 {
		if res, _ := runCall(e, call(C)); res.Outcome != retry.OutcomeOK || clk.Slept() != 0 {
			t.Fatalf("call %d: %s, slept %v", i, res.Outcome, clk.Slept())
		}
	}
	c := call(C)
	c.Policy.MaxAttempts = 1
	if res, _ := runCall(e, c); res.Outcome != retry.OutcomeGaveUp {
		t.Fatalf("429 call: %s", res.Outcome)
	}
	res, evs := runCall(e, call(C))
	ws := waits(evs)
	if res.Outcome != retry.OutcomeOK || clk.Slept() != 200*time.Millisecond || len(ws) != 1 || !ws[0].Pacing ||
		ws[0].Source != stream.SourceReset || res.Attempts[0].Paced != 200*time.Millisecond {
		t.Fatalf("after the 429: %s slept %v waits %+v", res.Outcome, clk.Slept(), ws)
	}
	if st := e.Pacer.State(C); !st.RateLearned || st.Rate <= 5 {
		t.Fatalf("rate %v learned %v, want above 5/s after a success", st.Rate, st.RateLearned)
	}
}
