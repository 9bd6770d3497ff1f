package retrytest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/stream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func TestFakeClockAdvancesAtOnce(t *testing.T) {
	c := retrytest.NewFakeClock(t0)
	if err := c.Sleep(context.Background(), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	_ = c.Sleep(context.Background(), 2*time.Second)
	if !c.Now().Equal(t0.Add(5*time.Second)) || c.Slept() != 5*time.Second || len(c.Sleeps()) != 2 {
		t.Fatalf("now %v sleeps %v", c.Now(), c.Sleeps())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Second); !errors.Is(err, context.Canceled) || !c.Now().Equal(t0.Add(5*time.Second)) {
		t.Fatalf("cancelled sleep: %v", err)
	}
}

func TestBlockingClock(t *testing.T) {
	c := retrytest.NewBlockingClock(t0)
	done := make(chan error)
	go func() { done <- c.Sleep(context.Background(), 2*time.Second) }()
	if err := c.WaitSleepers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	if c.Sleepers() != 1 {
		t.Fatal("woke early")
	}
	c.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Cancelling a blocked sleep returns at once.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- c.Sleep(ctx, time.Hour) }()
	_ = c.WaitSleepers(context.Background(), 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || c.Sleepers() != 0 {
		t.Fatalf("%v, %d sleepers", err, c.Sleepers())
	}
}

func TestDoerScript(t *testing.T) {
	d := retrytest.NewDoer().
		Script("a/x", retrytest.RateLimited(time.Second), retrytest.OK("one two")).
		Always("b/y", retrytest.Fail(503, stream.ClassOverload, "overloaded"))
	ax := stream.Target{Provider: "a", Model: "x"}
	by := stream.Target{Provider: "b", Model: "y"}
	ctx := context.Background()
	r := d.Do(ctx, stream.Request{Target: ax}, nil)
	if r.Err == nil || r.Err.Delay != time.Second || r.Err.DelaySource != stream.SourceRetryAfter || r.Status != 429 {
		t.Fatalf("%+v", r)
	}
	var text []string
	r = d.Do(ctx, stream.Request{Target: ax}, func(s string) { text = append(text, s) })
	if r.Err != nil || len(text) != 2 || text[0] != "one " || text[1] != "two" {
		t.Fatalf("%+v %q", r, text)
	}
	if r = d.Do(ctx, stream.Request{Target: ax}, nil); r.Err == nil || r.Err.Class != stream.ClassConnection {
		t.Fatalf("unscripted: %+v", r)
	}
	for i := 0; i < 3; i++ {
		if r = d.Do(ctx, stream.Request{Target: by}, nil); r.Class() != stream.ClassOverload {
			t.Fatalf("always: %+v", r)
		}
	}
	if d.Count("a/x") != 3 || d.Count("b/y") != 3 || d.Total() != 6 || len(d.Requests()) != 6 {
		t.Fatalf("counts %d %d %d", d.Count("a/x"), d.Count("b/y"), d.Total())
	}
	if d.Scope(ax, stream.ScopeAccount) != "account:a" || d.Scope(ax, stream.ScopeTarget) != "target:a/x" {
		t.Fatal("scopes")
	}
}
