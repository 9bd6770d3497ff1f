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

// TestSendInteractionsWorkedCases runs the worked cases of the Gemini
// Interactions API through `send --json` against the
// simulator, whose gemini provider serves it; the engine and the simulator
// share the fake clock, so the requests counted and the waits are exact.
func TestSendInteractionsWorkedCases(t *testing.T) {
	const I, B = "gemini:interactions/gemini-3.8-flash", "anthropic/claude-haiku-5-5"
	const r = "gemini:interactions"
	cases := []struct {
		name     string
		faults   []sim.Fault
		args     []string
		requests string
		outcome  string
		exit     int
		served   string
		first    string // the first attempt's class
		code     string // and its code
		midFirst bool   // the first attempt failed after HTTP 200
		minWait  time.Duration
		maxWait  time.Duration
	}{
		{"429 rate_limit_exceeded, retry-after 1 honoured, then 200", []sim.Fault{{Provider: "gemini", Kind: sim.FaultRateLimit, RetryAfter: time.Second}},
			[]string{"--model", I}, r + " " + r, "ok", 0, r, "rate_limit", "rate_limit_exceeded", false, time.Second, 1250 * time.Millisecond},
		{"429 too_many_requests, retry-after honoured", []sim.Fault{{Provider: "gemini", Kind: sim.FaultRateLimit, Code: "too_many_requests", RetryAfter: 2 * time.Second}},
			[]string{"--model", I}, r + " " + r, "ok", 0, r, "rate_limit", "too_many_requests", false, 2 * time.Second, 2250 * time.Millisecond},
		{"402 payment_required stops, no retry, no failover", []sim.Fault{{Provider: "gemini", Kind: sim.FaultSpendCap}},
			[]string{"--model", I, "--fallback", B}, r, "stopped", 3, "", "quota", "payment_required", false, 0, 0},
		{"failed_precondition for billing stops", []sim.Fault{{Provider: "gemini", Kind: sim.FaultSpendCap, Code: "billing"}},
			[]string{"--model", I, "--fallback", B}, r, "stopped", 3, "", "quota", "failed_precondition", false, 0, 0},
		{"503 service_unavailable twice fails over", []sim.Fault{{Provider: "gemini", Kind: sim.FaultOverload, Count: 2}},
			[]string{"--model", I, "--fallback", B}, r + " " + r + " anthropic", "ok", 0, "anthropic", "overload", "service_unavailable", false, 0, 20 * time.Second},
		{"error event after 200, retried", []sim.Fault{{Provider: "gemini", Kind: sim.FaultMidStream}},
			[]string{"--model", I}, r + " " + r, "ok", 0, r, "overload", "service_unavailable", true, 0, 20 * time.Second},
		{"in-stream rate limit keeps its meaning", []sim.Fault{{Provider: "gemini", Kind: sim.FaultMidStream, Code: "rate_limit"}},
			[]string{"--model", I}, r + " " + r, "ok", 0, r, "rate_limit", "rate_limit_exceeded", true, 0, 20 * time.Second},
		{"in-stream quota_exceeded is a per-day quota", []sim.Fault{{Provider: "gemini", Kind: sim.FaultMidStream, Code: "quota"}},
			[]string{"--model", I, "--fallback", B}, r, "stopped", 3, "", "quota", "quota_exceeded", true, 0, 0},
		{"in-stream gateway_timeout, retried", []sim.Fault{{Provider: "gemini", Kind: sim.FaultMidStream, Code: "gateway_timeout"}},
			[]string{"--model", I}, r + " " + r, "ok", 0, r, "server", "gateway_timeout", true, 0, 20 * time.Second},
		{"status failed after 200, retried", []sim.Fault{{Provider: "gemini", Kind: sim.FaultMidStream, Code: "failed"}},
			[]string{"--model", I}, r + " " + r, "ok", 0, r, "server", "api_error", true, 0, 20 * time.Second},
		{"cut stream, retried", []sim.Fault{{Provider: "gemini", Kind: sim.FaultCut}},
			[]string{"--model", I}, r + " " + r, "ok", 0, r, "connection", "", true, 0, 20 * time.Second},
		{"clean EOF without interaction.completed is a cut", []sim.Fault{{Provider: "gemini", Kind: sim.FaultCut, Code: "clean"}},
			[]string{"--model", I}, r + " " + r, "ok", 0, r, "connection", "", true, 0, 20 * time.Second},
		// A daily limit is a quota stop (of the target, until midnight
		// Pacific), not a rate limit to wait out: no retry, no failover.
		{"daily limit is a per-day quota, not a rate limit", []sim.Fault{{Provider: "gemini", Kind: sim.FaultDailyQuota}},
			[]string{"--model", I, "--fallback", B}, r, "stopped", 3, "", "quota", "quota_exceeded", false, 0, 0},
		{"daily limit in the generateContent shape too", []sim.Fault{{Provider: "gemini", Kind: sim.FaultDailyQuota, Code: "rpc"}},
			[]string{"--model", I, "--fallback", B}, r, "stopped", 3, "", "quota", "RESOURCE_EXHAUSTED", false, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := runWorkedCase(t, workedCase{tc.faults, tc.args, tc.requests, tc.outcome, tc.exit, tc.served, tc.minWait, tc.maxWait})
			if len(d.Attempts) == 0 {
				t.Fatal("no attempt")
			}
			a := d.Attempts[0]
			if string(a.Class) != tc.first || a.Code != tc.code || a.MidStream != tc.midFirst || tc.midFirst && a.Status != 200 {
				t.Errorf("first attempt %+v, want class %s code %s, mid-stream %v", a, tc.first, tc.code, tc.midFirst)
			}
			if tc.code == "quota_exceeded" && !strings.Contains(a.Message, "daily quota") {
				t.Errorf("message %q does not name the day", a.Message)
			}
		})
	}
}

// TestInteractionsSharesTheGeminiAccount: an account stop met through the
// Interactions API (payment_required) binds generateContent calls on the
// same key in the same session, and the other way round.
func TestInteractionsSharesTheGeminiAccount(t *testing.T) {
	gen := stream.Target{Provider: "gemini", Model: "gemini-3.8-flash"}
	ix := stream.Target{Provider: "gemini:interactions", Model: "gemini-3.8-flash"}
	for _, order := range [][2]stream.Target{{ix, gen}, {gen, ix}} {
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
			if err := r.Server.Inject(sim.Fault{Provider: "gemini", Kind: sim.FaultSpendCap}); err != nil {
				t.Fatal(err)
			}
			res := e.Run(t.Context(), retry.Call{Chain: []stream.Target{order[0]}, Prompt: "hi"}, nil)
			if res.Outcome != retry.OutcomeStopped || len(res.Attempts) != 1 {
				t.Fatalf("the quota call: %s after %d attempts", res.Outcome, len(res.Attempts))
			}
			r.Server.ClearFaults("")
			res = e.Run(t.Context(), retry.Call{Chain: []stream.Target{order[1]}, Prompt: "hi"}, nil)
			if res.Outcome != retry.OutcomeStopped || len(res.Attempts) != 0 {
				t.Fatalf("after the account's stop: %s after %d attempts, want stopped without a request", res.Outcome, len(res.Attempts))
			}
		})
	}
}
