package bench

import (
	"bytes"
	"strings"
	"testing"
)

// The table fits 100 columns with wide figures, and its last line is the
// verdict: most answered first, then fewest wasted.
func TestTableWidthAndVerdict(t *testing.T) {
	lim, ratio := 5.0, 3.68
	rep := &Report{Chain: []string{"anthropic/claude-haiku-4-5"}, Requests: 1200, Concurrency: 64, Simulated: true, Scenario: "bench",
		Policies: []PolicyResult{
			{Policy: "limitscope", Requests: 1200, Completed: 1200, HTTPRequests: 1205, Rejected: 5, Wasted: 5, ElapsedMs: 1234567, GoodputPerS: 5.01, LimitPerS: &lim, GoodputRatio: &ratio,
				LatencyMs: Latency{P50: 12800, P99: 13000}},
			{Policy: "sdk-default", Requests: 1200, Completed: 1200, Stopped: 0, GaveUp: 0, HTTPRequests: 12345, Rejected: 11145, Wasted: 11145, RequestsAfterQuota: 1234,
				ElapsedMs: 5283000, GoodputPerS: 0.11, LimitPerS: &lim, GoodputRatio: &ratio, LatencyMs: Latency{P50: 80, P99: 144000}},
		}}
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	for _, l := range lines {
		if n := len([]rune(l)); n > 100 {
			t.Errorf("%d columns: %q", n, l)
		}
	}
	want := "Winner: limitscope, by 11140 fewer wasted than sdk-default (5 vs 11145); p99 13.0s vs 144s."
	if got := lines[len(lines)-1]; got != want {
		t.Errorf("verdict\n got %q\nwant %q", got, want)
	}
	rep.Policies[1].Completed, rep.Policies[1].GaveUp = 1100, 100
	if got := rep.Verdict(); got != "Winner: limitscope, by 100 more calls answered than sdk-default (1200 vs 1100); p99 13.0s vs 144s." {
		t.Errorf("verdict %q", got)
	}
}
