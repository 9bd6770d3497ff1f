package bench

import (
	"testing"
	"testing/synctest"

	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// The bench scenario (300 requests a minute, burst 5) against providers whose
// answers carry no per-minute request window: Gemini (no rate-limit headers;
// the 429 body carries RetryInfo), Mistral and xAI (no headers) and Groq
// (its request headers are per day). The pacer learns a request rate from
// the 429s themselves and spreads requests at it, so few are rejected.
// Before it (concurrency AIMD only; answers take 20 ms, so it never limited
// the rate) the same runs gave: gemini 118/120 completed, 114 of 232
// requests rejected; mistral 88/120, 352 of 440; xai 85/120, 328 of 413;
// groq 116/120, 58 of 174. With it each completes 120/120 with 6 to 8 of
// about 128 requests rejected, at about 90% of the limit.
func TestSimBenchNoRequestHeaders(t *testing.T) {
	clearEnv(t)
	for _, tgt := range []stream.Target{
		{Provider: "gemini", Model: "gemini-2.5-flash"},
		{Provider: "mistral", Model: "mistral-small-latest"},
		{Provider: "xai", Model: "grok-4"},
		{Provider: "groq", Model: "llama-3.1-8b-instant"},
	} {
		t.Run(tgt.Provider, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				env := &SimEnv{InMemory: true, Options: sim.Options{Scenario: "bench", Seed: 1}}
				cfg := Config{Chain: []stream.Target{tgt}, Requests: 120, Concurrency: 16, Prompt: "Say hello in five words.", MaxTokens: 64,
					Policies: []string{PolicyLimitscope}, LimitPerSecond: 5}
				rep, err := Run(t.Context(), cfg, env)
				if err != nil {
					t.Fatal(err)
				}
				ls := rep.Policies[0]
				checkSums(t, ls)
				t.Logf("%-8s %-11s completed %3d http %3d rejected %3d wasted %3d elapsed %6dms goodput %.2f/s limit %v ratio %v outcomes %v",
					tgt.Provider, ls.Policy, ls.Completed, ls.HTTPRequests, ls.Rejected, ls.Wasted, ls.ElapsedMs, ls.GoodputPerS, deref(ls.LimitPerS), deref(ls.GoodputRatio), ls.Outcomes)
				if ls.Completed != 120 {
					t.Errorf("completed %d of 120 (outcomes %v)", ls.Completed, ls.Outcomes)
				}
				if float64(ls.Rejected) > 0.10*float64(ls.HTTPRequests) {
					t.Errorf("%d of %d requests rejected, want at most 10%%", ls.Rejected, ls.HTTPRequests)
				}
				if ls.GoodputRatio == nil || *ls.GoodputRatio < 0.8 {
					t.Errorf("goodput ratio %v, want at least 0.8", deref(ls.GoodputRatio))
				}
			})
		})
	}
}
