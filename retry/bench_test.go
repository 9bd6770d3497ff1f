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
