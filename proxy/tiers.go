package proxy

import (
	"encoding/json"
	"slices"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// A caller's own service_tier is passed on to each target of its chain in
// the target provider's words, unless the target (the configuration's
// provider/model+tier) names one itself; the tier that served the answer
// is returned in the caller's words (OpenAI's service_tier, Anthropic's
// usage.service_tier).

// callerTiers are the tiers each caller dialect may ask for.
var callerTiers = map[stream.Dialect][]string{
	stream.DialectOpenAI:    {"auto", "default", "flex", "priority"},
	stream.DialectAnthropic: {"auto", "standard_only"},
	stream.DialectResponses: {"auto", "default", "flex", "priority"},
}

// readTier reads the caller's service_tier into in: a caller error for a
// value its dialect does not document (the provider's own 400, "Invalid
// service_tier argument").
func readTier(m map[string]json.RawMessage, in *inbound) *apiError {
	if _, e := field(m, "service_tier", &in.tier); e != nil {
		return e
	}
	if in.tier != "" && !slices.Contains(callerTiers[in.dialect], in.tier) {
		return invalid("service_tier", "Invalid service_tier argument: %q is not one of %v", in.tier, callerTiers[in.dialect])
	}
	return nil
}

// targetTier is the tier a caller's tier asks of provider p's target: the
// same tier where p has it, else its nearest (default: p's standard tier;
// standard_only likewise; priority: Anthropic's auto, which uses priority
// capacity when the organization has it), else none (p's default).
func targetTier(caller string, p stream.ProviderInfo) string {
	has := func(t string) bool { return slices.Contains(p.Tiers.Names, t) }
	switch caller {
	case "":
		return ""
	case "default", "standard_only":
		for _, t := range []string{"default", "standard", "on_demand", "standard_only"} {
			if has(t) {
				return t
			}
		}
		return ""
	case "priority":
		if has("priority") {
			return "priority"
		}
		if has("auto") && p.Dialect == stream.DialectAnthropic {
			return "auto"
		}
		return ""
	}
	if has(caller) {
		return caller
	}
	return ""
}

// withCallerTier is chain with the caller's tier asked of each target that
// names none (a new slice: the route's chain is shared).
func withCallerTier(chain []stream.Target, tier string) []stream.Target {
	if tier == "" {
		return chain
	}
	out := make([]stream.Target, len(chain))
	for i, t := range chain {
		if t.Tier == "" {
			if p, ok := stream.Provider(t.Provider); ok {
				t.Tier = targetTier(tier, p)
			}
		}
		out[i] = t
	}
	return out
}

// servedTier is the tier that served res in the caller's words ("": the
// answer named none): OpenAI's default for another provider's standard,
// Anthropic's standard for anything but priority.
func servedTier(res retry.Result, d stream.Dialect) string {
	if res.Outcome != retry.OutcomeOK || len(res.Attempts) == 0 {
		return ""
	}
	s := res.Attempts[len(res.Attempts)-1].ServedTier
	switch {
	case s == "":
		return ""
	case d == stream.DialectAnthropic && s != "priority":
		return "standard"
	case (d == stream.DialectOpenAI || d == stream.DialectResponses) && (s == "standard" || s == "on_demand" || s == "standard_only"):
		return "default"
	}
	return s
}

// anthropicUsage is a Messages answer's usage, with the served tier when
// known.
func anthropicUsage(u stream.Usage, tier string) map[string]any {
	m := map[string]any{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens}
	if tier != "" {
		m["service_tier"] = tier
	}
	return m
}

// withServedTier names the tier that served res on a Responses API
// response object (its service_tier), when known.
func withServedTier(obj map[string]any, res retry.Result) map[string]any {
	if t := servedTier(res, stream.DialectResponses); t != "" {
		obj["service_tier"] = t
	}
	return obj
}
