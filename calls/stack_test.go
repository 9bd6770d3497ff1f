package calls_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

// The call stack as the commands wire it (engine, router, stream client,
// simulator, history recorder), under load and under cancellation. Moved
// here from the root package, which now tests the binary as a whole.

// clearEnv removes every provider key and base URL from the test's
// environment, and points the history at a temporary file.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, v := range stream.AllEnvVars() {
		t.Setenv(v, "")
	}
	t.Setenv("LIMITSCOPE_SIM", "")
	t.Setenv("LIMITSCOPE_DB", filepath.Join(t.TempDir(), "history.db"))
	t.Setenv("XDG_STATE_HOME", t.TempDir())
}

// TestCancelThroughTheStackLeavesNothing cancels calls through the whole
// stack (engine, router, stream client, simulator, history recorder) at the
// worst moments: during a server-asked wait, in the middle of a stream, and
// while failing over to a fallback. Each call must end cancelled at once,
// be recorded as cancelled, and leave no goroutine behind.
func TestCancelThroughTheStackLeavesNothing(t *testing.T) {
	clearEnv(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	r, err := sim.Start(context.Background(), "127.0.0.1:0", sim.Options{Scenario: "calm", TokensPerSecond: 50})
	if err != nil {
		t.Fatal(err)
	}
	hc := stream.NewHTTPClient()
	endpoints := map[string]stream.Endpoint{}
	for _, p := range stream.Providers() {
		endpoints[p.Name] = r.Endpoint(p.Name)
	}
	db := filepath.Join(t.TempDir(), "history.db")
	rec := store.NewRecorder(db, store.SessionInfo{Version: "test", Mode: store.ModeSimulated, Command: "leak"}, store.Options{Retention: -1})
	engine := &retry.Engine{
		Doer:      &stream.Router{Client: &stream.Client{HTTP: hc}, Endpoints: endpoints},
		Cooldowns: rec.Cooldowns(),
		Pacer:     retry.NewPacer(),
	}
	// A target each, so that one case's limits do not pace the next.
	oa := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	gq := stream.Target{Provider: "groq", Model: "llama-3.3-70b-versatile"}
	ds := stream.Target{Provider: "deepseek", Model: "deepseek-chat"}
	an := stream.Target{Provider: "anthropic", Model: "claude-haiku-4-5"}
	cases := []struct {
		name   string
		fault  sim.Fault
		chain  []stream.Target
		cancel func(ev retry.Event) bool // cancel when this is true of an event
	}{
		{"mid-wait", sim.Fault{Provider: "openai", Kind: sim.FaultRateLimit, RetryAfter: 30 * time.Second}, []stream.Target{oa},
			func(ev retry.Event) bool { return ev.Kind == retry.EventWait }},
		{"mid-stream", sim.Fault{}, []stream.Target{gq},
			func(ev retry.Event) bool { return ev.Kind == retry.EventText }},
		{"mid-failover", sim.Fault{Provider: "deepseek", Kind: sim.FaultOverload, Count: 10}, []stream.Target{ds, an},
			func(ev retry.Event) bool {
				return ev.Kind == retry.EventText && ev.Attempt == nil // the fallback is streaming
			}},
	}
	for i, tc := range cases {
		if tc.fault.Kind != "" {
			if err := r.Server.Inject(tc.fault); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		var served []stream.Target
		call := retry.Call{ID: fmt.Sprintf("cancel-%d", i), Chain: tc.chain, Prompt: "a long answer please", MaxTokens: 4000}
		sink := rec.Sink(call, func(ev retry.Event) {
			if ev.Kind == retry.EventAttemptStart && ev.Attempt != nil {
				served = append(served, ev.Attempt.Target)
			}
			if tc.cancel(ev) {
				cancel()
			}
		})
		start := time.Now()
		res := engine.Run(ctx, call, sink)
		took := time.Since(start)
		cancel()
		if res.Outcome != retry.OutcomeCancelled || took > 5*time.Second {
			t.Errorf("%s: %s after %v, want cancelled at once", tc.name, res.Outcome, took)
		}
		if tc.name == "mid-failover" && (len(served) == 0 || served[len(served)-1] != an) {
			t.Errorf("mid-failover: cancelled before failing over (attempts on %v)", served)
		}
	}
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []store.Call
	if err := (&store.Reader{Path: db}).Each(context.Background(), store.Filter{}, true, func(c *store.Call) error {
		got = append(got, *c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(cases) {
		t.Errorf("%d calls recorded, want %d", len(got), len(cases))
	}
	for _, c := range got {
		if c.Outcome != retry.OutcomeCancelled {
			t.Errorf("%s recorded as %s, want cancelled", c.CallID, c.Outcome)
		}
	}
	hc.CloseIdleConnections()
	_ = r.Close()
}

// TestLoadFlakyEveryCallRecordedOnce sends 200 calls at once through the
// real engine, router and stream client to the simulator under the flaky
// scenario (resets, cut streams, 500s), recording them with a real
// store.Recorder, and checks that the history holds every call exactly
// once, as the engine ended it, with every attempt.
func TestLoadFlakyEveryCallRecordedOnce(t *testing.T) {
	clearEnv(t)
	const calls = 200
	clock := retrytest.NewFakeClock(time.Now())
	r, err := sim.Start(context.Background(), "127.0.0.1:0", sim.Options{Scenario: "flaky", Seed: 42, TokensPerSecond: 1e6, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	endpoints := map[string]stream.Endpoint{}
	for _, p := range stream.Providers() {
		endpoints[p.Name] = r.Endpoint(p.Name)
	}
	hc := stream.NewHTTPClient()
	defer hc.CloseIdleConnections()
	db := filepath.Join(t.TempDir(), "history.db")
	rec := store.NewRecorder(db, store.SessionInfo{Version: "test", Mode: store.ModeSimulated, Command: "load"}, store.Options{Retention: -1})
	engine := &retry.Engine{
		Doer:      &stream.Router{Client: &stream.Client{HTTP: hc, Options: stream.Options{HeaderTimeout: 5 * time.Second, StallTimeout: 5 * time.Second}}, Endpoints: endpoints},
		Clock:     clock,
		Cooldowns: rec.Cooldowns(),
		Pacer:     retry.NewPacer(),
	}
	targets := []stream.Target{
		{Provider: "openai", Model: "gpt-5.4-mini"}, {Provider: "anthropic", Model: "claude-haiku-4-5"},
		{Provider: "gemini", Model: "gemini-2.5-flash"}, {Provider: "groq", Model: "llama-3.3-70b-versatile"},
		{Provider: "deepseek", Model: "deepseek-chat"}, {Provider: "mistral", Model: "mistral-small-latest"},
		{Provider: "xai", Model: "grok-4"},
	}
	results := make([]retry.Result, calls)
	var wg sync.WaitGroup
	start := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			chain := []stream.Target{targets[i%len(targets)], targets[(i+1)%len(targets)]}
			call := retry.Call{ID: fmt.Sprintf("load-%03d", i), Chain: chain, Prompt: fmt.Sprintf("prompt %d", i), MaxTokens: 32}
			<-start
			results[i] = engine.Run(ctx, call, rec.Sink(call, nil))
		}()
	}
	close(start)
	wg.Wait()
	if err := rec.Close(ctx); err != nil {
		t.Fatalf("closing the recorder: %v", err)
	}

	var got []store.Call
	if err := (&store.Reader{Path: db}).Each(context.Background(), store.Filter{}, true, func(c *store.Call) error {
		got = append(got, *c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	byID := map[string]store.Call{}
	for _, c := range got {
		seen[c.CallID]++
		byID[c.CallID] = c
	}
	outcomes := map[retry.Outcome]int{}
	attempts, failedAttempts := 0, 0
	for i, res := range results {
		id := fmt.Sprintf("load-%03d", i)
		outcomes[res.Outcome]++
		attempts += len(res.Attempts)
		for _, a := range res.Attempts {
			if a.Class != stream.ClassOK {
				failedAttempts++
			}
		}
		switch n := seen[id]; {
		case n == 0:
			t.Errorf("%s (%s after %d attempts) is not in the history", id, res.Outcome, len(res.Attempts))
			continue
		case n > 1:
			t.Errorf("%s is in the history %d times", id, n)
		}
		c := byID[id]
		if c.Outcome != res.Outcome || c.Attempts != len(res.Attempts) {
			t.Errorf("%s: history says %s after %d attempts, the engine %s after %d", id, c.Outcome, c.Attempts, res.Outcome, len(res.Attempts))
		}
		if res.Outcome == retry.OutcomeOK && (c.ServedBy == nil || *c.ServedBy != *res.ServedBy) {
			t.Errorf("%s: served by %v in the history, %v by the engine", id, c.ServedBy, res.ServedBy)
		}
	}
	if len(got) != calls {
		t.Errorf("%d calls in the history, want %d", len(got), calls)
	}
	// The flaky scenario must actually have been flaky, or this tests little.
	if failedAttempts < calls/10 || outcomes[retry.OutcomeOK] == 0 {
		t.Errorf("only %d failed attempts of %d, outcomes %v", failedAttempts, attempts, outcomes)
	}
	t.Logf("%d calls, %d attempts (%d failed), outcomes %v", calls, attempts, failedAttempts, outcomes)
}
