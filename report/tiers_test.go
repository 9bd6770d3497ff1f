package report

import (
	"testing"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// A mark's title names the tier that served its attempt (nothing when the
// answer named none), and flex_capacity has its own CSS class.
func TestTierTitle(t *testing.T) {
	a := retry.Attempt{Target: stream.Target{Provider: "gemini", Model: "m", Tier: "priority"}, ServedTier: "standard", Downgraded: true}
	if got := tierTitle(&a); got != " · served standard, downgraded from priority" {
		t.Errorf("title %q", got)
	}
	if got := tierTitle(&retry.Attempt{}); got != "" {
		t.Errorf("title without a served tier %q", got)
	}
	if cssClass(&retry.Attempt{Class: stream.ClassFlexCapacity}) != "c-flex-capacity" {
		t.Errorf("flex_capacity css class")
	}
}
