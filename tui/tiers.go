package tui

import (
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// Service tiers in the console: a target asks for its tier in its name
// ("openai/gpt-5.4-mini+flex"); the tier that served its last answer, and a
// downgrade, are said on its line and on each attempt's row.

// tierState is what a target's last answer said of its tier.
type tierState struct {
	served     string // the tier the answer named ("": none)
	downgraded bool   // a premium tier was asked and another served
}

// noteTier keeps what an attempt's answer said of its tier.
func (s *targetState) noteTier(a *retry.Attempt) {
	if a.Class == stream.ClassOK {
		s.tier = tierState{served: a.ServedTier, downgraded: a.Downgraded}
	}
}

// tierBrief is the target line's word on its tier: "DOWNGRADED: served
// standard, asked priority", "served flex", or "" when nothing was said.
func tierBrief(t stream.Target, ts tierState) string {
	switch {
	case ts.downgraded:
		return "DOWNGRADED: served " + ts.served + ", asked " + t.Tier
	case ts.served != "" && t.Tier != "":
		return "served " + ts.served
	}
	return ""
}

// tierCode is an attempt row's word on its tier: "served default" or
// "DOWNGRADED to standard" ("" when the answer named none, or no tier was
// asked and none downgraded).
func tierCode(a *retry.Attempt) string {
	switch {
	case a.Downgraded:
		return "DOWNGRADED to " + a.ServedTier
	case a.ServedTier != "" && a.Target.Tier != "":
		return "served " + a.ServedTier
	}
	return ""
}
