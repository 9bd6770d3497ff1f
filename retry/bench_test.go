package retry_test

import (
	"context"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// okDoer answers every request at once, with a limits snapshot.
type okDoer struct{ lim *stream.Limits }

func (d okDoer) Do(context.Context, stream.Request, func(string)) stream.Result {
	return stream.Result{Status: 200, Text: "ok", Limits: d.lim}
}
func (okDoer) Scope(t stream.Target, s stream.Scope) string { return string(s) + ":" + t.String() }

type constClock struct{ t time.Time }

func (c constClock) Now() time.Time                           { return c.t }
func (constClock) Sleep(context.Context, time.Duration) error { return nil }

// BenchmarkRun is the whole retry core per call (cooldown checks, one
// attempt, events) without pacing.
func BenchmarkRun(b *testing.B) {
	e := &retry.Engine{Doer: okDoer{}, Clock: constClock{t0}}
	c := call(A)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if e.Run(ctx, c, nil).Outcome != retry.OutcomeOK {
			b.Fatal("not ok")
		}
	}
}

// BenchmarkRunPaced adds the pacing gate, fed a snapshot every answer.
func BenchmarkRunPaced(b *testing.B) {
	lim := reqWindow(1_000_000_000, 999_999_999, t0.Add(time.Minute))
	e := &retry.Engine{Doer: okDoer{lim: lim}, Clock: constClock{t0}, Pacer: retry.NewPacer()}
	c := call(A)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if e.Run(ctx, c, nil).Outcome != retry.OutcomeOK {
			b.Fatal("not ok")
		}
	}
}

// BenchmarkPermit is the pacing gate alone: acquire, reserve, done.
func BenchmarkPermit(b *testing.B) {
	p := retry.NewPacer()
	r := stream.Result{Status: 200, Limits: reqWindow(1_000_000_000, 999_999_999, t0.Add(time.Minute))}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		pm, err := p.Acquire(ctx, A)
		if err != nil {
			b.Fatal(err)
		}
		pm.Reserve(t0)
		pm.Done(&r, t0)
	}
}

// flipDoer answers a 429 with retry-after, then a success, in turn.
type flipDoer struct {
	n   *int
	err stream.Result
}

func (d flipDoer) Do(context.Context, stream.Request, func(string)) stream.Result {
	*d.n++
	if *d.n%2 == 1 {
		return d.err
	}
	return stream.Result{Status: 200, Text: "ok"}
}
func (flipDoer) Scope(t stream.Target, s stream.Scope) string { return string(s) + ":" + t.String() }

// BenchmarkRunRetry is a call whose first attempt is a 429 with a
// retry-after: one retry decision (classify, wait from the server's delay,
// cooldown bookkeeping, events) on top of BenchmarkRun; the difference of the
// two is the decision's cost. The clock's sleep returns at once.
func BenchmarkRunRetry(b *testing.B) {
	n := 0
	e := &retry.Engine{Doer: flipDoer{n: &n, err: rateLimited429()}, Clock: constClock{t0}}
	c := call(A)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := e.Run(ctx, c, nil); r.Outcome != retry.OutcomeOK || len(r.Attempts) != 2 {
			b.Fatalf("outcome %v after %d attempts", r.Outcome, len(r.Attempts))
		}
	}
}

func rateLimited429() stream.Result {
	return stream.Result{Status: 429, Err: &stream.Error{Status: 429, Class: stream.ClassRateLimit,
		Delay: time.Second, DelaySource: stream.SourceRetryAfter, Message: "rate limited"}}
}
