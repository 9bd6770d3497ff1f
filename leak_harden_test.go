package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

// TestMain fails the run if any goroutine outlives the tests: every command
// must stop what it started (simulators, recorders, streams, engines),
// whether it ended well, failed or was cancelled.
func TestMain(m *testing.M) {
	if db := os.Getenv(fullDiskEnv); db != "" {
		fullDiskSendChild(db)
		os.Exit(0)
	}
	code := m.Run()
	// Keep-alive connections of the HTTP client shared by every
	// stream.Client without its own are idle, not leaked.
	stream.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
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
