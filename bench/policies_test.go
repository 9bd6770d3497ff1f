package bench

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// fakeDoer answers with fn, recording when each request was sent.
type fakeDoer struct {
	mu    sync.Mutex
	fn    func(n int, req stream.Request) stream.Result
	n     int
	times []time.Time
}

func (d *fakeDoer) Do(_ context.Context, req stream.Request, _ func(string)) stream.Result {
	d.mu.Lock()
	d.n++
	n := d.n
	d.times = append(d.times, time.Now())
	d.mu.Unlock()
	return d.fn(n, req)
}

func (d *fakeDoer) Scope(t stream.Target, s stream.Scope) string {
	if s == stream.ScopeTarget {
		return "target:" + t.String()
	}
	return "account:" + t.Provider + ":fp"
}

func always(r stream.Result) func(int, stream.Request) stream.Result {
	return func(int, stream.Request) stream.Result { return r }
}

var target = stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}

func ok() stream.Result { return stream.Result{Status: 200, Text: "hi", FinishReason: "stop"} }

func rateLimited(retryAfter time.Duration) stream.Result {
	e := &stream.Error{Class: stream.ClassRateLimit, Status: 429, Code: "rate_limit_exceeded"}
	if retryAfter > 0 {
		e.Delay, e.DelaySource = retryAfter, stream.SourceRetryAfter
	}
	return stream.Result{Status: 429, Err: e}
}

func quota() stream.Result {
	return stream.Result{Status: 429, Err: &stream.Error{Class: stream.ClassQuota, Status: 429,
		Code: "insufficient_quota", Scope: stream.ScopeAccount}}
}

func half() func() float64 { return func() float64 { return 0.5 } }

// gaps returns the time between consecutive requests.
func gaps(ts []time.Time) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(ts); i++ {
		out = append(out, ts[i].Sub(ts[i-1]))
	}
	return out
}

func TestSDKDefault(t *testing.T) {
	cases := []struct {
		name     string
		answer   stream.Result
		requests int
		gaps     []time.Duration
		outcome  retry.Outcome
	}{
		{"429 retry-after 3s is honoured", rateLimited(3 * time.Second), 3,
			[]time.Duration{3 * time.Second, 3 * time.Second}, retry.OutcomeGaveUp},
		// 0.5s*2^0*(1-0.5*0.25) = 437.5ms, then 1s*0.875 = 875ms.
		{"429 without retry-after backs off", rateLimited(0), 3,
			[]time.Duration{437500 * time.Microsecond, 875 * time.Millisecond}, retry.OutcomeGaveUp},
		{"retry-after of 60s or more is ignored", rateLimited(90 * time.Second), 3,
			[]time.Duration{437500 * time.Microsecond, 875 * time.Millisecond}, retry.OutcomeGaveUp},
		{"a quota 429 is retried whatever its code", quota(), 3,
			[]time.Duration{437500 * time.Microsecond, 875 * time.Millisecond}, retry.OutcomeStopped},
		{"400 is not retried", stream.Result{Status: 400, Err: &stream.Error{Class: stream.ClassCaller, Status: 400}}, 1,
			nil, retry.OutcomeGaveUp},
		{"529 is retried (>= 500)", stream.Result{Status: 529, Err: &stream.Error{Class: stream.ClassOverload, Status: 529}}, 3,
			[]time.Duration{437500 * time.Microsecond, 875 * time.Millisecond}, retry.OutcomeGaveUp},
		{"409 is retried", stream.Result{Status: 409, Err: &stream.Error{Class: stream.ClassServer, Status: 409}}, 3,
			[]time.Duration{437500 * time.Microsecond, 875 * time.Millisecond}, retry.OutcomeGaveUp},
		{"no response is retried", stream.Result{Err: &stream.Error{Class: stream.ClassConnection}}, 3,
			[]time.Duration{437500 * time.Microsecond, 875 * time.Millisecond}, retry.OutcomeGaveUp},
		{"a mid-stream error is not retried", stream.Result{Status: 200, Err: &stream.Error{Class: stream.ClassOverload, Status: 200, MidStream: true}}, 1,
			nil, retry.OutcomeGaveUp},
		{"x-should-retry false is obeyed", stream.Result{Status: 500, Err: &stream.Error{Class: stream.ClassServer, Status: 500, NoRetry: true}}, 1,
			nil, retry.OutcomeGaveUp},
		{"success", ok(), 1, nil, retry.OutcomeOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := &fakeDoer{fn: always(c.answer)}
				l := loop{doer: d, clock: retry.WallClock{}, rand: half()}
				got := l.sdkDefault(t.Context(), stream.Request{Target: target})
				if got.outcome != c.outcome {
					t.Errorf("outcome %s, want %s", got.outcome, c.outcome)
				}
				if d.n != c.requests {
					t.Errorf("%d requests, want %d", d.n, c.requests)
				}
				if g := gaps(d.times); !equalDurations(g, c.gaps) {
					t.Errorf("gaps %v, want %v", g, c.gaps)
				}
			})
		})
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSDKDefaultRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &fakeDoer{fn: func(n int, _ stream.Request) stream.Result {
			if n == 1 {
				return rateLimited(2 * time.Second)
			}
			return ok()
		}}
		l := loop{doer: d, clock: retry.WallClock{}, rand: half()}
		if got := l.sdkDefault(t.Context(), stream.Request{Target: target}); got.outcome != retry.OutcomeOK || d.n != 2 {
			t.Fatalf("outcome %s after %d requests, want ok after 2", got.outcome, d.n)
		}
	})
}

func TestNaive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &fakeDoer{fn: always(quota())}
		l := loop{doer: d, clock: retry.WallClock{}, rand: half()}
		got := l.naive(t.Context(), stream.Request{Target: target})
		if got.outcome != retry.OutcomeStopped || d.n != 5 {
			t.Fatalf("outcome %s after %d requests, want stopped after 5", got.outcome, d.n)
		}
		for _, g := range gaps(d.times) {
			if g != time.Second {
				t.Fatalf("gap %s, want 1s", g)
			}
		}
	})
}

func TestNested(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &fakeDoer{fn: always(rateLimited(0))}
		l := loop{doer: d, clock: retry.WallClock{}, rand: half()}
		start := time.Now()
		got := l.nested(t.Context(), stream.Request{Target: target})
		if got.outcome != retry.OutcomeGaveUp || d.n != 9 {
			t.Fatalf("outcome %s after %d requests, want gave_up after 9", got.outcome, d.n)
		}
		// Three SDK calls of 1.3125 s each, and app waits of 1 s and 2 s.
		if el, want := time.Since(start), 3*1312500*time.Microsecond+3*time.Second; el != want {
			t.Fatalf("took %s, want %s", el, want)
		}
	})
}

func TestCancelledWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		d := &fakeDoer{fn: always(rateLimited(30 * time.Second))}
		l := loop{doer: d, clock: retry.WallClock{}, rand: half()}
		time.AfterFunc(time.Second, cancel)
		got := l.naive(ctx, stream.Request{Target: target})
		if got.outcome != retry.OutcomeCancelled || d.n != 2 {
			t.Fatalf("outcome %s after %d requests, want cancelled after 2", got.outcome, d.n)
		}
	})
}

func TestCounter(t *testing.T) {
	other := stream.Target{Provider: "anthropic", Model: "claude"}
	d := &fakeDoer{fn: func(n int, req stream.Request) stream.Result {
		switch {
		case req.Target == other:
			return ok()
		case n == 1:
			return stream.Result{Status: 200, Text: "x", Limits: &stream.Limits{At: time.Unix(10, 0),
				Requests: &stream.Window{Limit: 300, HasLimit: true, Remaining: 299, HasRemaining: true}}}
		case n == 2:
			return rateLimited(time.Second)
		case n == 3:
			return quota()
		}
		return ok()
	}}
	c := NewCounter(d)
	ctx := t.Context()
	for range 3 {
		c.Do(ctx, stream.Request{Target: target}, nil)
	}
	c.Do(ctx, stream.Request{Target: other}, nil)                                               // another account: not after quota
	c.Do(ctx, stream.Request{Target: stream.Target{Provider: "openai", Model: "gpt-5.5"}}, nil) // same account
	got := c.Counts()
	if got.Requests != 5 || got.Rejected != 2 || got.Wasted != 2 || got.RequestsAfterQuota != 1 {
		t.Fatalf("counts %+v, want 5 requests, 2 rejected, 2 wasted, 1 after quota", got)
	}
	if got.ByStatus[429] != 2 || got.ByStatus[200] != 3 {
		t.Fatalf("by status %v", got.ByStatus)
	}
	if l, ok := LimitPerSecond(got.Limits); !ok || l != 5 {
		t.Fatalf("limit per second %v %v, want 5", l, ok)
	}
}

func TestRecoveryWait(t *testing.T) {
	now := time.Unix(1000, 0)
	l := &stream.Limits{
		Requests: &stream.Window{Reset: now.Add(time.Hour), PerDay: true},
		Tokens:   &stream.Window{Reset: now.Add(7 * time.Second)},
	}
	if got := RecoveryWait(l, now); got != 7*time.Second {
		t.Fatalf("got %s, want 7s (per-day windows are not waited for)", got)
	}
	if got := RecoveryWait(nil, now); got != 0 {
		t.Fatalf("nil limits: %s", got)
	}
	synctest.Test(t, func(t *testing.T) {
		e := &RealEnv{Doer: &fakeDoer{fn: always(ok())}, MaxRecoveryWait: 5 * time.Second}
		start := time.Now()
		l := &stream.Limits{Requests: &stream.Window{Reset: start.Add(time.Minute)}}
		if _, _, err := e.Prepare(t.Context(), PolicyNaive, l); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el != 5*time.Second {
			t.Fatalf("waited %s, want the 5s cap", el)
		}
	})
}

func TestPercentiles(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if got := percentiles(ds); got != (Latency{P50: 50, P95: 95, P99: 99}) {
		t.Fatalf("got %+v", got)
	}
	if got := percentiles(nil); got != (Latency{}) {
		t.Fatalf("empty: %+v", got)
	}
}

// On a real account each policy after the first waits for the reset the
// previous run's last headers named.
func TestRunWaitsForRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &fakeDoer{fn: func(int, stream.Request) stream.Result {
			r := ok()
			r.Limits = &stream.Limits{At: time.Now(), Requests: &stream.Window{Limit: 60, Remaining: 0, HasLimit: true,
				HasRemaining: true, Reset: time.Now().Add(10 * time.Second)}}
			return r
		}}
		var waits []time.Duration
		env := &RealEnv{Doer: d, OnWait: func(_ string, w time.Duration) { waits = append(waits, w) }}
		_, err := Run(t.Context(), Config{Chain: []stream.Target{target}, Requests: 1, Concurrency: 1,
			Policies: []string{PolicySDKDefault, PolicyNaive}}, env)
		if err != nil {
			t.Fatal(err)
		}
		if len(waits) != 1 || waits[0] != 10*time.Second {
			t.Fatalf("waits %v, want one of 10s before the second policy", waits)
		}
		if g := gaps(d.times); len(g) != 1 || g[0] != 10*time.Second {
			t.Fatalf("gaps %v, want the second policy's request 10s after the first", g)
		}
	})
}
