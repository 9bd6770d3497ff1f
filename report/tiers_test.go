package report

import (
	"testing"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// A mark's title names the tier that served its attempt, and a downgrade.
func TestTierTitle(t *testing.T) {
	prio := stream.Target{Provider: "gemini", Model: "m", Tier: "priority"}
	for _, c := range []struct {
		a    retry.Attempt
		want string
	}{
		{retry.Attempt{Target: prio, ServedTier: "standard", Downgraded: true}, " · served standard, downgraded from priority"},
		{retry.Attempt{Target: prio, ServedTier: "priority"}, " · served priority"},
		{retry.Attempt{Target: prio}, ""},
	} {
		if got := tierTitle(&c.a); got != c.want {
			t.Errorf("%+v: %q, want %q", c.a, got, c.want)
		}
	}
	if cssClass(&retry.Attempt{Class: stream.ClassFlexCapacity}) != "c-flex-capacity" {
		t.Errorf("flex_capacity css class")
	}
}
