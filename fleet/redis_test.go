package fleet

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitscope/limitscope/fleet/fleettest"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// openFleet opens a Fleet on url for t, closed at the end; warnings go to
// the returned channel.
func openFleet(t *testing.T, url string, o Options) (*Fleet, chan string) {
	t.Helper()
	warns := make(chan string, 16)
	if o.Warn == nil {
		o.Warn = func(m string) { warns <- m }
	}
	f, err := Open(context.Background(), url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f, warns
}

// fakeDoer answers every request with its next result (the last repeats)
// and counts the requests.
type fakeDoer struct {
	mu      sync.Mutex
	results []stream.Result
	n       int
}

func (d *fakeDoer) Do(_ context.Context, _ stream.Request, _ func(string)) stream.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := min(d.n, len(d.results)-1)
	d.n++
	return d.results[i]
}

func (d *fakeDoer) Scope(t stream.Target, s stream.Scope) string {
	if s == stream.ScopeAccount {
		return "account:" + t.Provider + ":fp"
	}
	return "target:" + t.String()
}

func (d *fakeDoer) requests() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

var (
	target  = stream.Target{Provider: "openai", Model: "gpt-x"}
	okReply = stream.Result{Status: 200, Text: "hi"}
)

func quotaReply(reset time.Time) stream.Result {
	return stream.Result{Status: 429, Err: &stream.Error{Class: stream.ClassQuota, Status: 429, Code: "insufficient_quota",
		Message: "You exceeded your current quota", Scope: stream.ScopeAccount, ResetAt: reset}}
}

// process is one limitscope process's engine on the shared state.
type process struct {
	f    *Fleet
	doer *fakeDoer
	eng  *retry.Engine
	cds  *Cooldowns
}

func newProcess(t *testing.T, url string, o Options, results ...stream.Result) *process {
	t.Helper()
	f, _ := openFleet(t, url, o)
	d := &fakeDoer{results: results}
	p := &process{f: f, doer: d, cds: NewCooldowns(f, nil)}
	p.eng = &retry.Engine{Doer: Doer{Next: d, Fleet: f}, Cooldowns: p.cds, Pacer: NewPacing(f, nil, nil)}
	return p
}

func (p *process) call(t *testing.T) retry.Result {
	t.Helper()
	pol := retry.DefaultPolicy()
	pol.MaxAttempts = 1
	return p.eng.Run(context.Background(), retry.Call{Chain: []stream.Target{target}, Prompt: "p", Policy: pol}, nil)
}

// A quota stop recorded by process A stops process B's next call before it
// sends anything; clearing it from B frees A too.
func TestQuotaStopSharedAcrossProcesses(t *testing.T) {
	r := fleettest.Start(t)
	a := newProcess(t, r.URL(), Options{}, quotaReply(time.Time{}))
	b := newProcess(t, r.URL(), Options{}, okReply)

	if res := b.call(t); res.Outcome != retry.OutcomeOK || b.doer.requests() != 1 {
		t.Fatalf("B before the stop: outcome %s after %d requests, want ok after 1", res.Outcome, b.doer.requests())
	}
	if res := a.call(t); res.Outcome != retry.OutcomeStopped || a.doer.requests() != 1 {
		t.Fatalf("A: outcome %s after %d requests, want stopped after 1", res.Outcome, a.doer.requests())
	}
	res := b.call(t)
	if res.Outcome != retry.OutcomeStopped || !res.CooldownHit {
		t.Fatalf("B after A's stop: outcome %s, cooldown hit %v; want stopped by the cooldown", res.Outcome, res.CooldownHit)
	}
	if n := b.doer.requests(); n != 1 {
		t.Fatalf("B sent %d requests, want 1 (none after A's stop)", n)
	}
	if err := b.cds.Clear("account:openai:fp"); err != nil {
		t.Fatal(err)
	}
	a.doer.results = []stream.Result{okReply}
	if res := a.call(t); res.Outcome != retry.OutcomeOK {
		t.Fatalf("A after B cleared the stop: %s, want ok", res.Outcome)
	}
}

// A stop with a known reset carries the same reset to every process, read
// through Redis's expiry; one that needs a person has none.
func TestCooldownResetShared(t *testing.T) {
	r := fleettest.Start(t)
	base := time.Now()
	// B's clock runs 10 minutes behind A's: it must still read the same
	// time left.
	a, _ := openFleet(t, r.URL(), Options{})
	b, _ := openFleet(t, r.URL(), Options{Now: func() time.Time { return time.Now().Add(-10 * time.Minute) }})
	ca, cb := NewCooldowns(a, nil), NewCooldowns(b, nil)
	until := base.Add(90 * time.Second)
	if err := ca.Set(retry.Cooldown{Scope: "account:x", Until: until, Since: base, Code: "c"}); err != nil {
		t.Fatal(err)
	}
	if err := ca.Set(retry.Cooldown{Scope: "account:y", Since: base, Code: "billing"}); err != nil {
		t.Fatal(err)
	}
	cd, ok, err := cb.Get("account:x")
	if err != nil || !ok {
		t.Fatalf("B's Get: %v %v", ok, err)
	}
	left := cd.Until.Sub(time.Now().Add(-10 * time.Minute))
	if left < 80*time.Second || left > 90*time.Second {
		t.Fatalf("B reads %s left, want about 90s (its own clock is 10 minutes behind)", left)
	}
	cd, ok, _ = cb.Get("account:y")
	if !ok || !cd.Until.IsZero() || !cd.Active(time.Now().Add(24*time.Hour)) {
		t.Fatalf("an until-cleared stop: %+v %v, want it active with no end", cd, ok)
	}
	list, err := cb.List()
	if err != nil || len(list) != 2 || list[0].Scope != "account:x" || list[1].Scope != "account:y" {
		t.Fatalf("List: %+v %v", list, err)
	}
}

// A server's delay one process hears holds every process on that target.
func TestRetryAfterHoldsTheFleet(t *testing.T) {
	r := fleettest.Start(t)
	// B's clock runs 5 minutes ahead: the hold is on Redis's clock, so B
	// still waits what A was asked.
	skew := 5 * time.Minute
	bNow := func() time.Time { return time.Now().Add(skew) }
	a, _ := openFleet(t, r.URL(), Options{})
	b, _ := openFleet(t, r.URL(), Options{Now: bNow})
	pa, pb := NewPacing(a, nil, nil), NewPacing(b, nil, nil)
	ctx := context.Background()
	pm, err := pa.Acquire(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	pm.Reserve(now)
	pm.Done(&stream.Result{Status: 429, Err: &stream.Error{Class: stream.ClassRateLimit, Delay: 20 * time.Second, DelaySource: stream.SourceRetryAfter}}, now)

	pmb, err := pb.Acquire(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	pc := pmb.Reserve(bNow())
	pmb.Cancel(bNow())
	// Each process reads Redis's clock once, to within half a round trip
	// (ping): A's error and B's can put the hold a few milliseconds past
	// 20 s on B's clock, so the bound above is 20 s and a second (a hold
	// on B's own skewed clock would be five minutes off).
	const most = 21 * time.Second
	if pc.Delay < 18*time.Second || pc.Delay > most || pc.Source != stream.SourceRetryAfter || pc.Asked != 20*time.Second {
		t.Fatalf("B's pace after A's retry-after 20s: %+v", pc)
	}
	if st := pb.State(target); st.HoldSource != stream.SourceRetryAfter || st.HoldUntil.Sub(bNow()) < 18*time.Second || st.HoldUntil.Sub(bNow()) > most {
		t.Fatalf("B's state: %+v, want the fleet's hold", st)
	}
}

// limitsAt is an answer whose headers say limit requests per minute, with
// remaining left.
func limitsAt(now time.Time, limit, remaining int64) *stream.Result {
	return &stream.Result{Status: 200, Limits: &stream.Limits{At: now, Requests: &stream.Window{
		Limit: limit, Remaining: remaining, Reset: now.Add(time.Second), HasLimit: true, HasRemaining: true}}}
}

// Two processes draw on one shared bucket: together they are spread at the
// rate the headers tell, not each at it.
func TestSharedBucket(t *testing.T) {
	r := fleettest.Start(t)
	a, _ := openFleet(t, r.URL(), Options{})
	b, _ := openFleet(t, r.URL(), Options{})
	pa, pb := NewPacing(a, &retry.Pacer{MaxConcurrency: 64, SlowStart: 64}, nil), NewPacing(b, &retry.Pacer{MaxConcurrency: 64, SlowStart: 64}, nil)
	ctx := context.Background()
	// Both learn 120 requests a minute (2/s, a burst of 1 after the
	// cushion) from a full window.
	for _, p := range []*Pacing{pa, pb} {
		pm, _ := p.Acquire(ctx, target)
		now := time.Now()
		pm.Reserve(now)
		pm.Done(limitsAt(now, 120, 120), now)
	}
	var ready []time.Time // when each may be sent
	var permits []*retry.Permit
	for i := 0; i < 6; i++ {
		p := pa
		if i%2 == 1 {
			p = pb
		}
		pm, err := p.Acquire(ctx, target)
		if err != nil {
			t.Fatal(err)
		}
		permits = append(permits, pm)
		now := time.Now()
		ready = append(ready, now.Add(pm.Reserve(now).Delay))
	}
	for _, pm := range permits {
		pm.Cancel(time.Now())
	}
	// Six requests at 2/s, alternating between the processes: one bucket
	// spreads them 0.5s apart, 2.5s from the first to the last, however
	// long the reservations took; each process alone would let its third
	// go 1s after its first.
	if span := ready[5].Sub(ready[0]); span < 2200*time.Millisecond || span > 2800*time.Millisecond {
		t.Fatalf("the sixth request may go %s after the first, want about 2.5s (one bucket for both)", span)
	}
	for i := 1; i < len(ready); i++ {
		if gap := ready[i].Sub(ready[i-1]); gap < 300*time.Millisecond {
			t.Fatalf("requests %d and %d only %s apart, want about 0.5s", i, i+1, gap)
		}
	}
}

// The stream carries what happened, never what was said: no prompt, no
// answer, no key.
func TestEventsCarryNoText(t *testing.T) {
	r := fleettest.Start(t)
	f, _ := openFleet(t, r.URL(), Options{Command: "send"})
	rd := f.NewReader()
	if _, err := rd.Next(context.Background(), 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	d := Doer{Next: &fakeDoer{results: []stream.Result{{Status: 200, Text: "the answer text"}}}, Fleet: f}
	d.Do(context.Background(), stream.Request{Target: target, Prompt: "the prompt words", System: "the system words"}, nil)
	evs, err := rd.Next(context.Background(), 5*time.Second)
	if err != nil || len(evs) != 1 {
		t.Fatalf("events %+v, %v; want the one attempt", evs, err)
	}
	if ev := evs[0]; ev.Target != target.String() || ev.Status != 200 || !ev.Mine || ev.Command != "send" || ev.Proc != f.ID() {
		t.Fatalf("event %+v", ev)
	}
	raw, err := f.rdb.XRange(context.Background(), f.key("events"), "-", "+").Result()
	if err != nil || len(raw) != 1 {
		t.Fatalf("XRANGE: %v %v", raw, err)
	}
	s := fmt.Sprint(raw[0].Values)
	for _, word := range []string{"prompt words", "system words", "answer text", "sk-"} {
		if strings.Contains(s, word) {
			t.Fatalf("the stream entry carries %q: %s", word, s)
		}
	}
}
