package bench

import (
	"testing"
	"testing/synctest"

	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// TestPacingFairLatency: on the simulator's bench
// scenario (5 requests/s), N closed-loop workers served first come, first
// served each wait about N/5 s per call; the p99 latency must stay within
// 1.3x of that FIFO ideal at 16 and 64 workers, with throughput unchanged
// (at least 95% of the limit, at most 2% rejected: goroutine scheduling in
// the bubble varies, and a run may draw one 429). With the old wake-every-
// waiter gate it was 12-17 s at 16 workers and 23 s at 64 (ideal 3.2 and
// 12.8 s). In virtual time: a few seconds of real time.
func TestPacingFairLatency(t *testing.T) {
	clearEnv(t)
	for _, workers := range []int{1, 16, 64} {
		synctest.Test(t, func(t *testing.T) {
			env := &SimEnv{InMemory: true, Options: sim.Options{Scenario: "bench", Seed: 1}}
			requests := max(120, workers*8)
			cfg := Config{Chain: []stream.Target{{Provider: "openai", Model: "gpt-5.4-mini"}}, Requests: requests, Concurrency: workers,
				Prompt: "Say hello in five words.", MaxTokens: 64, Policies: []string{PolicyLimitscope}, LimitPerSecond: 5}
			rep, err := Run(t.Context(), cfg, env)
			if err != nil {
				t.Fatal(err)
			}
			ls := rep.Policies[0]
			checkSums(t, ls)
			ideal := int64(float64(workers) / 5 * 1000) // ms
			ratio := float64(ls.LatencyMs.P99) / float64(max(ideal, 200))
			t.Logf("workers %2d: p50 %6dms p99 %6dms ideal %6dms p99/ideal %.2f goodput %.2f/s (%.0f%% of the limit) rejected %d of %d",
				workers, ls.LatencyMs.P50, ls.LatencyMs.P99, ideal, ratio, ls.GoodputPerS, 100*derefF(ls.GoodputRatio), ls.Rejected, ls.HTTPRequests)
			if ls.Completed != requests {
				t.Errorf("completed %d of %d", ls.Completed, requests)
			}
			if workers > 1 && ratio > 1.3 {
				t.Errorf("p99 %dms is %.2fx the FIFO ideal %dms, want at most 1.3x", ls.LatencyMs.P99, ratio, ideal)
			}
			if g := derefF(ls.GoodputRatio); workers > 1 && g < 0.95 {
				t.Errorf("goodput %.0f%% of the limit, want at least 95%%", 100*g)
			}
			if float64(ls.Rejected) > 0.02*float64(ls.HTTPRequests) {
				t.Errorf("%d of %d rejected, want at most 2%%", ls.Rejected, ls.HTTPRequests)
			}
		})
	}
}

func derefF(f *float64) float64 {
	if f == nil {
		return 0
	}
	return *f
}
