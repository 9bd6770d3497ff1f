package cli

import "github.com/limitscope/limitscope/retry"

// servedTierWords is what `history show` says of the service tier that
// served an attempt: "  served standard, downgraded from priority", or ""
// when the answer named none.
func servedTierWords(at retry.Attempt) string {
	if n := at.TierNote(); n != "" {
		return "  " + n
	}
	return ""
}
