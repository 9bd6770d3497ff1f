package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/limitscope/limitscope/fleet/fleettest"
	"github.com/limitscope/limitscope/stream"
)

// A Reader made after the fleet has been at work reads the last minute's
// events at once (marked Backlog), then the new ones; Live names the
// processes open now, not one that has closed.
func TestReaderBacklogAndLive(t *testing.T) {
	r := fleettest.Start(t)
	ctx := context.Background()
	a, _ := openFleet(t, r.URL(), Options{Command: "proxy"})
	gone, err := Open(ctx, r.URL(), Options{Command: "proxy"})
	if err != nil {
		t.Fatal(err)
	}
	da := Doer{Next: &fakeDoer{results: []stream.Result{okReply}}, Fleet: a}
	dg := Doer{Next: &fakeDoer{results: []stream.Result{okReply}}, Fleet: gone}
	// Published through each Fleet's queue: each round trip of the
	// loop asks whether the stream holds them yet.
	for range 3 {
		da.Do(ctx, stream.Request{Target: target}, nil)
	}
	dg.Do(ctx, stream.Request{Target: target}, nil)
	for n := int64(0); n < 4; n = a.rdb.XLen(ctx, a.key("events")).Val() {
	}
	if err := gone.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := openFleet(t, r.URL(), Options{Command: "tui"})
	rd := b.NewReader()
	evs, err := rd.Next(ctx, time.Second)
	if err != nil || len(evs) != 4 {
		t.Fatalf("first read: %d events, %v; want the 4 of the last minute", len(evs), err)
	}
	for _, ev := range evs {
		if !ev.Backlog {
			t.Fatalf("event %+v not marked backlog", ev)
		}
	}
	live := rd.Live()
	if !live[a.ID()] || !live[b.ID()] || live[gone.ID()] || len(live) != 2 {
		t.Fatalf("live %v, want %s and %s, not the closed %s", live, a.ID(), b.ID(), gone.ID())
	}
	da.Do(ctx, stream.Request{Target: target}, nil)
	evs, err = rd.Next(ctx, 5*time.Second)
	if err != nil || len(evs) != 1 || evs[0].Backlog || evs[0].Proc != a.ID() {
		t.Fatalf("next read: %+v %v, want A's new event", evs, err)
	}
}

// Stream ids order by milliseconds, then by sequence, as numbers.
func TestIDAfter(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"1000-1", "1000-0", true}, {"1000-0", "1000-0", false}, {"999-5", "1000-0", false},
		{"1000-10", "1000-9", true}, {"10000-0", "9999-99", true},
	} {
		if got := idAfter(c.a, c.b); got != c.want {
			t.Errorf("idAfter(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
