package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// TestSendResponsesWorkedCases runs the worked cases of the Responses API
// through `send --json` against the simulator, whose
// openai provider serves it; the engine and the simulator share the fake
// clock, so the requests counted and the waits are exact.
func TestSendResponsesWorkedCases(t *testing.T) {
	const R, B = "openai:responses/gpt-5.4-mini", "anthropic/claude-haiku-5-5"
	const r = "openai:responses"
	cases := []struct {
		name     string
		faults   []sim.Fault
		args     []string
		requests string
		outcome  string
		exit     int
		served   string
		first    string // the first attempt's class
		midFirst bool   // the first attempt failed after HTTP 200
		minWait  time.Duration
		maxWait  time.Duration
	}{
		{"429 retry-after 1 honoured, then 200", []sim.Fault{{Provider: "openai", Kind: sim.FaultRateLimit, RetryAfter: time.Second}},
			[]string{"--model", R}, r + " " + r, "ok", 0, r, "rate_limit", false, time.Second, 1250 * time.Millisecond},
		{"insufficient_quota stops, no retry, no failover", []sim.Fault{{Provider: "openai", Kind: sim.FaultSpendCap}},
			[]string{"--model", R, "--fallback", B}, r, "stopped", 3, "", "quota", false, 0, 0},
		{"503 503 fails over", []sim.Fault{{Provider: "openai", Kind: sim.FaultOverload, Count: 2}},
			[]string{"--model", R, "--fallback", B}, r + " " + r + " anthropic", "ok", 0, "anthropic", "overload", false, 0, 20 * time.Second},
		{"in-stream error event after 200, retried", []sim.Fault{{Provider: "openai", Kind: sim.FaultMidStream}},
			[]string{"--model", R}, r + " " + r, "ok", 0, r, "overload", true, 0, 20 * time.Second},
		{"response.failed server_error after 200, retried", []sim.Fault{{Provider: "openai", Kind: sim.FaultMidStream, Code: "server_error"}},
			[]string{"--model", R}, r + " " + r, "ok", 0, r, "server", true, 0, 20 * time.Second},
		{"in-stream rate limit keeps its meaning and its 1s", []sim.Fault{{Provider: "openai", Kind: sim.FaultMidStream, Code: "rate_limit"}},
			[]string{"--model", R}, r + " " + r, "ok", 0, r, "rate_limit", true, time.Second, 1250 * time.Millisecond},
		{"in-stream insufficient_quota keeps its meaning", []sim.Fault{{Provider: "openai", Kind: sim.FaultMidStream, Code: "insufficient_quota"}},
			[]string{"--model", R, "--fallback", B}, r, "stopped", 3, "", "quota", true, 0, 0},
		{"cut stream, retried", []sim.Fault{{Provider: "openai", Kind: sim.FaultCut}},
			[]string{"--model", R}, r + " " + r, "ok", 0, r, "connection", true, 0, 20 * time.Second},
		{"clean EOF without response.completed is a cut", []sim.Fault{{Provider: "openai", Kind: sim.FaultCut, Code: "clean"}},
			[]string{"--model", R}, r + " " + r, "ok", 0, r, "connection", true, 0, 20 * time.Second},
		// A per-day quota is a quota stop (of the target), not a rate limit
		// to wait out: no retry, and by default no failover either.
		{"daily limit is a per-day quota, not a rate limit", []sim.Fault{{Provider: "openai", Kind: sim.FaultDailyQuota}},
			[]string{"--model", R, "--fallback", B}, r, "stopped", 3, "", "quota", false, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := runWorkedCase(t, workedCase{tc.faults, tc.args, tc.requests, tc.outcome, tc.exit, tc.served, tc.minWait, tc.maxWait})
			if len(d.Attempts) > 0 {
				a := d.Attempts[0]
				if tc.name == "daily limit is a per-day quota, not a rate limit" && !strings.Contains(a.Message, "per day") {
					t.Errorf("message %q does not name the day", a.Message)
				}
				if string(a.Class) != tc.first || a.MidStream != tc.midFirst || tc.midFirst && a.Status != 200 {
					t.Errorf("first attempt %+v, want class %s, mid-stream %v", a, tc.first, tc.midFirst)
				}
			}
		})
	}
}

// TestResponsesSharesTheOpenAIAccount: a quota stop met through the
// Responses API is the openai account's: in the same session (one engine,
// its cooldowns and router, as the console and the proxy run them) the
// next Chat Completions call on the same key stops on the cooldown
// without a request, and the other way round.
func TestResponsesSharesTheOpenAIAccount(t *testing.T) {
	chat := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	resp := stream.Target{Provider: "openai:responses", Model: "gpt-5.4-mini"}
	for _, order := range [][2]stream.Target{{resp, chat}, {chat, resp}} {
		t.Run(order[0].String(), func(t *testing.T) {
			r, err := sim.Start(t.Context(), "127.0.0.1:0", sim.Options{Scenario: "calm", TokensPerSecond: 1e6})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			eps := map[string]stream.Endpoint{}
			for _, p := range stream.Providers() {
				eps[p.Name] = r.Endpoint(p.Name)
			}
			e := &retry.Engine{Doer: &stream.Router{Client: &stream.Client{}, Endpoints: eps},
				Cooldowns: retry.NewMemoryCooldowns(), Clock: retrytest.NewFakeClock(time.Now())}
			if err := r.Server.Inject(sim.Fault{Provider: "openai", Kind: sim.FaultSpendCap}); err != nil {
				t.Fatal(err)
			}
			res := e.Run(t.Context(), retry.Call{Chain: []stream.Target{order[0]}, Prompt: "hi"}, nil)
			if res.Outcome != retry.OutcomeStopped || len(res.Attempts) != 1 {
				t.Fatalf("the quota call: %s after %d attempts", res.Outcome, len(res.Attempts))
			}
			r.Server.ClearFaults("") // the provider would answer now: only the cooldown stops the call
			res = e.Run(t.Context(), retry.Call{Chain: []stream.Target{order[1]}, Prompt: "hi"}, nil)
			if res.Outcome != retry.OutcomeStopped || len(res.Attempts) != 0 {
				t.Fatalf("after the account's stop: %s after %d attempts, want stopped without a request", res.Outcome, len(res.Attempts))
			}
		})
	}
}
