package sim

import (
	"context"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/stream"
)

// The engine issue's worked cases, run through the real retry engine and
// stream client against the simulator instead of handwritten stubs. The
// engine's fake clock is also the simulator's, so waits are virtual.
func TestEngineWorkedCasesAgainstSim(t *testing.T) {
	A := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	B := stream.Target{Provider: "anthropic", Model: "claude-sonnet-4-5"}
	cases := []struct {
		name      string
		chain     []stream.Target
		faults    []Fault
		policy    retry.Policy
		requestsA int64
		requestsB int64
		outcome   retry.Outcome
		servedBy  string
		minSlept  time.Duration
	}{
		{"429 retry-after 1 then 200", []stream.Target{A}, []Fault{{Provider: "openai", Kind: FaultRateLimit, RetryAfter: time.Second}},
			retry.Policy{}, 2, 0, retry.OutcomeOK, "openai", time.Second},
		{"429 retry-after 600, no fallback", []stream.Target{A}, []Fault{{Provider: "openai", Kind: FaultRateLimit, RetryAfter: 600 * time.Second}},
			retry.Policy{}, 1, 0, retry.OutcomeDeferred, "", 0},
		{"429 retry-after 600, fallback ok", []stream.Target{A, B}, []Fault{{Provider: "openai", Kind: FaultRateLimit, RetryAfter: 600 * time.Second}},
			retry.Policy{}, 1, 1, retry.OutcomeOK, "anthropic", 0},
		{"503 503, fallback ok", []stream.Target{A, B}, []Fault{{Provider: "openai", Kind: FaultOverload, Count: 2}},
			retry.Policy{}, 2, 1, retry.OutcomeOK, "anthropic", 0},
		{"500 then 200", []stream.Target{A, B}, []Fault{{Provider: "openai", Kind: FaultServerError}},
			retry.Policy{}, 2, 0, retry.OutcomeOK, "openai", 0},
		{"credit_balance_exhausted", []stream.Target{A, B}, []Fault{{Provider: "openai", Kind: FaultSpendCap, Code: "credit_balance_exhausted"}},
			retry.Policy{}, 1, 0, retry.OutcomeStopped, "", 0},
		{"429 600 then spend cap", []stream.Target{A, B}, []Fault{{Provider: "openai", Kind: FaultRateLimit, RetryAfter: 600 * time.Second}, {Provider: "anthropic", Kind: FaultSpendCap}},
			retry.Policy{}, 1, 1, retry.OutcomeStopped, "", 0},
		{"503 x5, max-attempts 3", []stream.Target{A}, []Fault{{Provider: "openai", Kind: FaultOverload, Count: 5}},
			retry.Policy{MaxAttempts: 3}, 3, 0, retry.OutcomeGaveUp, "", 0},
		{"context_length_exceeded, fallback ok", []stream.Target{A, B}, []Fault{{Provider: "openai", Kind: FaultContextLength}},
			retry.Policy{}, 1, 1, retry.OutcomeOK, "anthropic", 0},
		{"mid-stream overload, then 200", []stream.Target{A}, []Fault{{Provider: "openai", Kind: FaultMidStream}},
			retry.Policy{}, 2, 0, retry.OutcomeOK, "openai", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := retrytest.NewFakeClock(t0)
			s, ts, _ := newTestSim(t, Options{Clock: clk})
			for _, f := range c.faults {
				if err := s.Inject(f); err != nil {
					t.Fatal(err)
				}
			}
			eps := map[string]stream.Endpoint{}
			for _, p := range providerNames {
				eps[p] = stream.Endpoint{Provider: p, BaseURL: BaseURL(ts.URL, p), Key: stream.Secret(FakeKey)}
			}
			eng := &retry.Engine{Doer: stream.Router{Endpoints: eps}, Clock: clk, Rand: func() float64 { return 0.5 }}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res := eng.Run(ctx, retry.Call{Chain: c.chain, Prompt: "hello", MaxTokens: 64, Policy: c.policy}, nil)
			st := s.Status()
			if st.Providers[0].Requests != c.requestsA || st.Providers[1].Requests != c.requestsB {
				t.Errorf("requests A%d B%d, want A%d B%d", st.Providers[0].Requests, st.Providers[1].Requests, c.requestsA, c.requestsB)
			}
			if res.Outcome != c.outcome {
				t.Fatalf("outcome %s (%v), want %s", res.Outcome, res.Err, c.outcome)
			}
			if c.servedBy != "" && (res.ServedBy == nil || res.ServedBy.Provider != c.servedBy || res.Text == "") {
				t.Errorf("served by %+v text %q, want %s", res.ServedBy, res.Text, c.servedBy)
			}
			if got := clk.Slept(); got < c.minSlept {
				t.Errorf("slept %v, want at least %v", got, c.minSlept)
			}
			if c.outcome == retry.OutcomeDeferred && res.RetryAt.Sub(t0) < 600*time.Second {
				t.Errorf("retry at %v, want about now+600s", res.RetryAt)
			}
		})
	}
}

// A real per-minute limit, not an injected fault: the engine waits out the
// simulator's retry-after on the shared virtual clock and is served.
func TestEngineWaitsOutNaturalLimit(t *testing.T) {
	clk := retrytest.NewFakeClock(t0)
	f := scenarioFile(t, "[openai]\nlimit_kind = window\nrpm = 1\n")
	s, ts, _ := newTestSim(t, Options{Clock: clk, ScenarioFile: f})
	eng := &retry.Engine{Doer: stream.Router{Endpoints: map[string]stream.Endpoint{
		"openai": {Provider: "openai", BaseURL: BaseURL(ts.URL, "openai"), Key: stream.Secret(FakeKey)}}},
		Clock: clk, Rand: func() float64 { return 0.5 }}
	call := retry.Call{Chain: []stream.Target{{Provider: "openai", Model: "gpt-5.4-mini"}}, Prompt: "hi", MaxTokens: 32}
	if res := eng.Run(t.Context(), call, nil); res.Outcome != retry.OutcomeOK {
		t.Fatalf("first call %s (%v)", res.Outcome, res.Err)
	}
	clk.Advance(20 * time.Second)
	res := eng.Run(t.Context(), call, nil)
	if res.Outcome != retry.OutcomeOK || len(res.Attempts) != 2 {
		t.Fatalf("second call %s after %d attempts (%v)", res.Outcome, len(res.Attempts), res.Err)
	}
	a := res.Attempts[0]
	if a.Status != 429 || a.RetryAfter == nil || *a.RetryAfter != 40*time.Second || a.Waited < 40*time.Second {
		t.Errorf("first attempt %+v, want a 429 asking 40s and a wait of at least that", a)
	}
	if s.Status().Providers[0].Requests != 3 {
		t.Errorf("requests %d, want 3", s.Status().Providers[0].Requests)
	}
}
