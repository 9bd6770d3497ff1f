package main

import "github.com/limitscope/limitscope/retry"

// servedTierWords is what `history show` says of the service tier that
// served an attempt: "  served standard, DOWNGRADED from priority",
// "  served flex", or "" when the answer named none.
func servedTierWords(at retry.Attempt) string {
	switch {
	case at.ServedTier == "":
		return ""
	case at.Downgraded:
		return "  served " + at.ServedTier + ", DOWNGRADED from " + at.Target.Tier
	}
	return "  served " + at.ServedTier
}
