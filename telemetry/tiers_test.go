package telemetry

import (
	"testing"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// An attempt's span names the tier asked and served, and a downgrade.
func TestTierAttrs(t *testing.T) {
	a := retry.Attempt{Target: stream.Target{Provider: "gemini", Model: "m", Tier: "priority"}, ServedTier: "standard", Downgraded: true}
	got := map[string]string{}
	for _, kv := range tierAttrs(&a) {
		got[string(kv.Key)] = kv.Value.String()
	}
	if got["limitscope.tier"] != "priority" || got["limitscope.tier.served"] != "standard" || got["limitscope.tier.downgraded"] != "true" || len(got) != 3 {
		t.Errorf("attrs %v", got)
	}
	if n := len(tierAttrs(&retry.Attempt{Target: stream.Target{Provider: "openai", Model: "m"}})); n != 0 {
		t.Errorf("%d tier attributes on an attempt without a tier", n)
	}
}
