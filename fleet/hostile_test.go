package fleet

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limitscope/limitscope/fleet/fleettest"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// Values anyone who can write to Redis left under limitscope's keys (too
// large, not limitscope's JSON, another type, in the events stream): each
// is skipped with one warning per key, the state stays up (no flapping),
// the good values around them are read, and the large ones never cross
// the wire.
func TestHostileValuesSkipped(t *testing.T) {
	r := fleettest.Start(t)
	ctx := context.Background()
	raw := redis.NewClient(&redis.Options{Addr: strings.TrimSuffix(strings.TrimPrefix(r.URL(), "redis://"), "/0")})
	defer func() { _ = raw.Close() }()
	big := strings.Repeat("A", 2<<20)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(raw.Set(ctx, "limitscope:cd:account:big", big, 0).Err())
	must(raw.Set(ctx, "limitscope:cd:account:junk", "\x1b]0;PWNED\x07", 0).Err())
	must(raw.HSet(ctx, "limitscope:cd:account:hash", "a", "b").Err())
	must(raw.Set(ctx, "limitscope:cd:account:good", `{"scope":"account:good","code":"billing"}`, 0).Err())

	var read atomic.Int64
	var mu sync.Mutex
	var warns []string
	f, err := Open(ctx, r.URL(), Options{MaxReply: 256 << 10, readBytes: &read, Timeout: 5 * time.Second,
		Warn: func(m string) { mu.Lock(); warns = append(warns, m); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	c := NewCooldowns(f, nil)
	rd := f.NewReader()
	if _, err := rd.Next(ctx, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	must(raw.XAdd(ctx, &redis.XAddArgs{Stream: "limitscope:events", Values: []any{"e", big}}).Err())
	must(raw.XAdd(ctx, &redis.XAddArgs{Stream: "limitscope:events", Values: []any{"e", "not json"}}).Err())
	d := Doer{Next: &fakeDoer{results: []stream.Result{okReply}}, Fleet: f}
	d.Do(ctx, stream.Request{Target: target}, nil)

	for range 3 {
		for _, scope := range []string{"account:big", "account:junk", "account:hash"} {
			if cd, ok, err := c.Get(scope); ok || err != nil {
				t.Fatalf("Get(%s): %+v %v %v, want none", scope, cd, ok, err)
			}
		}
		if cd, ok, _ := c.Get("account:good"); !ok || cd.Code != "billing" {
			t.Fatalf("the good stop: %+v %v", cd, ok)
		}
		list, err := c.List()
		if err != nil || len(list) != 1 || list[0].Scope != "account:good" {
			t.Fatalf("List: %+v %v, want the good stop alone", list, err)
		}
	}
	var got []Event
	for len(got) == 0 {
		evs, err := rd.Next(ctx, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, evs...)
	}
	if len(got) != 1 || !got[0].Mine {
		t.Fatalf("events %+v, want this process's one attempt past the bad entries", got)
	}
	if !f.Up() {
		t.Fatal("down: hostile values must not take the shared state down")
	}
	if n := read.Load(); n > 256<<10 {
		t.Fatalf("%d bytes read from Redis, want the 2 MiB values never sent", n)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"cd:account:big", "cd:account:junk", "cd:account:hash", "limitscope:events"}
	if len(warns) != len(want) {
		t.Fatalf("warnings %q, want one for each of %q", warns, want)
	}
	all := strings.Join(warns, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Fatalf("no warning for %s in %q", w, warns)
		}
	}
	if strings.ContainsAny(all, "\x1b\x07") || strings.Contains(all, "PWNED") {
		t.Fatalf("warnings carry the value: %q", all)
	}
}

// A fleet that starts together: before any answer is in the shared state,
// one request of the whole fleet passes the start gate (the stub would see
// one request before the first headers, within any burst); the answer's
// rate opens it, and the others are spread by the shared bucket with the
// gate's request charged to it.
func TestStartGate(t *testing.T) {
	r := fleettest.Start(t)
	ctx := context.Background()
	const procs, clients = 3, 16
	var pacings []*Pacing
	var waited atomic.Int32
	for range procs {
		f, _ := openFleet(t, r.URL(), Options{Timeout: 5 * time.Second, StartHold: time.Hour, StartPoll: time.Millisecond})
		pacings = append(pacings, NewPacing(f, &retry.Pacer{MaxConcurrency: 64, SlowStart: 64}, nil))
	}
	var firstWait sync.WaitGroup
	firstWait.Add(procs*clients - 1)
	var counted sync.Map // each waiting request counted once
	for _, p := range pacings {
		p.gateWait = func(s *slot) {
			if _, seen := counted.LoadOrStore(s, true); !seen {
				waited.Add(1)
				firstWait.Done()
			}
		}
	}
	type got struct {
		pm *retry.Permit
		p  *Pacing
	}
	passed := make(chan got, procs*clients)
	var wg sync.WaitGroup
	for i := range procs * clients {
		p := pacings[i%procs]
		wg.Add(1)
		go func() {
			defer wg.Done()
			pm, err := p.Acquire(ctx, target)
			if err != nil {
				t.Error(err)
				return
			}
			passed <- got{pm, p}
		}()
	}
	first := <-passed
	firstWait.Wait() // every other request is at the gate
	if n := len(passed); n != 0 {
		t.Fatalf("%d more requests passed the gate before the first answer, want none", n)
	}
	now := time.Now()
	if pc := first.pm.Reserve(now); pc.Delay > 0 {
		t.Fatalf("the gate's request waits %s", pc.Delay)
	}
	// The first answer: 600 requests a minute (10/s), a burst of 9 after
	// the cushion.
	first.pm.Done(limitsAt(now, 600, 599), now)
	// The shared bucket runs at the rate less its margin (3%).
	if rate := first.p.f.rdb.HGet(ctx, first.p.key(target), "rate").Val(); rate != "9.7" {
		t.Fatalf("the shared rate is %q, want 9.7 (10/s less the 3%% margin)", rate)
	}
	wg.Wait()
	var zero int
	var last time.Duration
	for range procs*clients - 1 {
		g := <-passed
		pc := g.pm.Reserve(time.Now())
		if pc.Delay <= 0 {
			zero++
		}
		last = max(last, pc.Delay)
		defer g.pm.Cancel(time.Now())
	}
	// 47 requests at 9.7/s with 8 of the burst left after the gate's one:
	// 8 at once, the last about 4 s out.
	if zero > 9 {
		t.Fatalf("%d requests may go at once after the first answer, want at most the burst left (8)", zero)
	}
	if last < 3*time.Second || last > 6*time.Second {
		t.Fatalf("the last request waits %s, want about 4s (47 at 9.7/s, burst 9, one charged)", last)
	}
	if waited.Load() != procs*clients-1 {
		t.Fatalf("%d requests waited at the gate", waited.Load())
	}
}
