package cli

import (
	"testing"

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
