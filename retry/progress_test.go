package retry

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// Slow start opens a slot when a request's answer begins, not only when it
// ends: with two requests streaming, a third gets its slot as soon as one
// of them reports progress, and a second Progress of the same request
// opens none.
func TestSlowStartOpensASlotOnProgress(t *testing.T) {
	synctest.Test(t, slowStartOnProgress)
}

func slowStartOnProgress(t *testing.T) {
	p := NewPacer()
	tg := stream.Target{Provider: "openai", Model: "m"}
	ctx := context.Background()
	now := time.Unix(1000, 0)
	a, _ := p.Acquire(ctx, tg)
	b, _ := p.Acquire(ctx, tg)
	got := make(chan *Permit, 2)
	for range 2 {
		go func() {
			pm, err := p.Acquire(ctx, tg)
			if err != nil {
				t.Error(err)
			}
			got <- pm
		}()
	}
	synctest.Wait()
	if q := p.State(tg).Queued; q != 2 {
		t.Fatalf("%d queued, want 2", q)
	}
	a.Progress(now, nil)
	<-got
	a.Progress(now, nil) // the same request again: no second slot
	if st := p.State(tg); st.Concurrency != 3 || st.Queued != 1 || st.InFlight != 3 {
		t.Fatalf("after one request's progress: %+v, want limit 3, 3 in flight, 1 queued", st)
	}
	b.Progress(now, nil)
	<-got
	// A request that progressed and then succeeds adds no second slot.
	a.Done(&stream.Result{Text: "ok"}, now)
	if st := p.State(tg); st.Concurrency != 4 {
		t.Fatalf("a success after its progress: limit %d, want 4", st.Concurrency)
	}
}

// A per-target or per-provider ceiling bounds the limit below the pacer's.
func TestTargetMaxCapsTheLimit(t *testing.T) {
	p := &Pacer{SlowStart: 8, TargetMax: map[string]int{"openai": 3, "anthropic/claude": 5}}
	for tg, want := range map[stream.Target]int{
		{Provider: "openai", Model: "m"}:         3,
		{Provider: "anthropic", Model: "claude"}: 5,
		{Provider: "anthropic", Model: "other"}:  8,
	} {
		if got := p.State(tg).Concurrency; got != want {
			t.Errorf("%s: limit %d, want %d", tg, got, want)
		}
	}
	if got := NewPacer().maxConc(); got != DefaultMaxConcurrency || DefaultMaxConcurrency < 1000 {
		t.Errorf("default ceiling %v: want %d, room for 1,000 streams", got, DefaultMaxConcurrency)
	}
}

// A request whose success headers tell the request window ends slow start
// at its first byte, as the answer's end would: the limit becomes the
// window's remaining requests, and answers that begin fast no longer open
// a slot each (a fresh target is not flooded before the first answer ends).
func TestProgressWithHeadersEndsSlowStart(t *testing.T) {
	p := NewPacer()
	tg := stream.Target{Provider: "openai", Model: "m"}
	ctx := context.Background()
	now := time.Unix(1000, 0)
	a, _ := p.Acquire(ctx, tg)
	b, _ := p.Acquire(ctx, tg)
	lim := &stream.Limits{Requests: &stream.Window{Limit: 5, Remaining: 3, HasRemaining: true, Reset: now.Add(time.Second)}}
	a.Progress(now, lim)
	if st := p.State(tg); st.Concurrency != 3 {
		t.Fatalf("after headers telling 3 requests left: limit %d, want 3", st.Concurrency)
	}
	b.Progress(now, lim) // slow start is over: no blind slot
	if st := p.State(tg); st.Concurrency != 3 {
		t.Fatalf("a second answer beginning after slow start: limit %d, want 3 still", st.Concurrency)
	}
	// A per-day window tells nothing of the concurrency: slow start goes
	// on, and the slot opens at the first text, not at the headers.
	q := NewPacer()
	c, _ := q.Acquire(ctx, tg)
	c.Progress(now, &stream.Limits{Requests: &stream.Window{Limit: 1000, Remaining: 900, HasRemaining: true, PerDay: true}})
	if st := q.State(tg); st.Concurrency != 2 {
		t.Fatalf("headers with only a per-day window: limit %d, want slow start's 2 until the first text", st.Concurrency)
	}
	c.Progress(now, nil)
	if st := q.State(tg); st.Concurrency != 3 {
		t.Fatalf("the first text after headers without a request window: limit %d, want 2+1", st.Concurrency)
	}
}
