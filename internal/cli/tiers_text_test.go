package cli

import (
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// TestServedTierWords checks what `history show` says of an attempt's
// served tier (nothing when the answer named none).
func TestServedTierWords(t *testing.T) {
	a := retry.Attempt{Target: stream.Target{Provider: "openai", Model: "m", Tier: "priority"}, ServedTier: "default", Downgraded: true}
	if got := servedTierWords(a); got != "  served default, downgraded from priority" {
		t.Errorf("words %q", got)
	}
	if got := servedTierWords(retry.Attempt{}); got != "" {
		t.Errorf("words without a served tier %q", got)
	}
}

// TestLimitsLinePriority checks `history show` names the priority tier's
// windows after the regular ones.
func TestLimitsLinePriority(t *testing.T) {
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	l := &stream.Limits{At: at,
		Requests:             &stream.Window{Limit: 50, Remaining: 49, HasLimit: true, HasRemaining: true},
		PriorityInputTokens:  &stream.Window{Limit: 400000, Remaining: 388000, HasLimit: true, HasRemaining: true, Reset: at.Add(9 * time.Second)},
		PriorityOutputTokens: &stream.Window{Limit: 80000, Remaining: 80000, HasLimit: true, HasRemaining: true},
	}
	want := "requests 49/50, priority input tokens 388000/400000 reset in 9s, priority output tokens 80000/80000"
	if got := limitsLine(l); got != want {
		t.Errorf("limits line\n%q, want\n%q", got, want)
	}
}
