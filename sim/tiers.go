package sim

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// simTiers is what a simulated provider documents of service tiers: the
// names a request may ask for (in the body's service_tier, or Bedrock's
// serviceTier object), the tier an answer names when none or "auto" was
// asked, the requests a flex_capacity fault and a tier_downgrade fault
// hit, and where the answer names its tier. The zero value: no tiers (a
// tier asked is refused as invalid).
type simTiers struct {
	names []string
	// served maps an asked tier to the tier the answer names (OpenAI's
	// auto is served at default); a tier not in it is served as asked.
	served map[string]string
	// standard is the tier an answer without an asked tier names.
	standard string
	// flex are the tiers a flex_capacity fault hits; premium those a
	// tier_downgrade hits, served at downgradeTo instead.
	flex, premium []string
	downgradeTo   string
	// header is the response header naming the served tier (Gemini's).
	header string
	// invalid is the provider's 400 to a tier it does not take.
	invalid func(tier string) reply
	// priority is the tier an organization's priority capacity serves a
	// request at when it asks for one of auto (or none): Anthropic's
	// Priority Tier, with its own token windows in the answer's headers.
	// "": the provider has no such capacity.
	priority string
	auto     []string
}

// The tier rows of the providers that document tiers.
var (
	openAISimTiers = simTiers{names: []string{"auto", "default", "flex", "priority"}, served: map[string]string{"auto": "default"},
		standard: "default", flex: []string{"flex"}, premium: []string{"priority"}, downgradeTo: "default",
		invalid: func(string) reply {
			return jsonReply(400, mustJSON(obj{"error", obj{"message", "Invalid service_tier argument", "type", "invalid_request_error", "param", "service_tier", "code", nil}}))
		}}
	anthropicSimTiers = simTiers{names: []string{"auto", "standard_only"}, served: map[string]string{"auto": "standard", "standard_only": "standard"},
		standard: "standard", priority: "priority", auto: []string{"", "auto"},
		invalid: func(tier string) reply {
			return anthropicError(400, "invalid_request_error", "service_tier: Input should be 'auto' or 'standard_only'", "")
		}}
	geminiSimTiers = simTiers{names: []string{"standard", "priority", "flex"}, standard: "standard",
		flex: []string{"flex"}, premium: []string{"priority"}, downgradeTo: "standard", header: "x-gemini-service-tier",
		invalid: func(tier string) reply {
			return geminiError(400, "INVALID_ARGUMENT", fmt.Sprintf("Invalid value at 'service_tier' (type.googleapis.com/google.ai.generativelanguage.v1beta.ServiceTier), %q", tier))
		}}
	groqSimTiers = simTiers{names: []string{"on_demand", "flex", "auto", "performance"}, flex: []string{"flex", "auto"},
		invalid: func(string) reply {
			return jsonReply(400, groqCompat.body("service_tier: must be one of on_demand, flex, auto, performance", "invalid_request_error", nil))
		}}
	bedrockSimTiers = simTiers{names: []string{"reserved", "priority", "default", "flex"}, premium: []string{"reserved", "priority"}, downgradeTo: "default",
		invalid: func(tier string) reply {
			return validationError(fmt.Sprintf("1 validation error detected: Value '%s' at 'serviceTier.type' failed to satisfy constraint: Member must satisfy enum value set: [reserved, priority, default, flex]", tier))
		}}
)

// readTier reads the tier a request body asks for: service_tier (or the
// SDKs' serviceTier), a string or an object with a type. ok is false when
// the member is there but neither.
func readTier(body []byte) (tier string, ok bool) {
	var in map[string]json.RawMessage
	if json.Unmarshal(body, &in) != nil {
		return "", true // the dialect's parse judged the body
	}
	raw, found := in["service_tier"]
	if !found {
		raw, found = in["serviceTier"]
	}
	if !found || string(raw) == "null" {
		return "", true
	}
	if json.Unmarshal(raw, &tier) == nil {
		return tier, true
	}
	var o struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Type != "" {
		return o.Type, true
	}
	return "", false
}

// admitTier checks the tier req's body asks for against p's tiers: nil
// when it is one (or none is asked), else the provider's 400.
func admitTier(p *provider, body []byte, req *simRequest) *reply {
	tier, ok := readTier(body)
	if ok && tier == "" {
		return nil
	}
	if !ok || !slices.Contains(p.tiers.names, tier) {
		inv := p.tiers.invalid
		if inv == nil {
			inv = openAISimTiers.invalid
		}
		rp := inv(tier)
		return &rp
	}
	req.tier = tier
	return nil
}

// tierFaultApplies says whether a fault of kind hits req: a flex_capacity
// fault only a request at a flex tier, a tier_downgrade only one at a
// premium tier; every other kind any request.
func tierFaultApplies(kind string, req *simRequest) bool {
	p := providerOf(req.provider)
	switch kind {
	case FaultFlexCapacity:
		return p != nil && req.tier != "" && slices.Contains(p.tiers.flex, req.tier)
	case FaultTierDowngrade:
		return p != nil && req.tier != "" && slices.Contains(p.tiers.premium, req.tier)
	}
	return true
}

// servedTier is the tier the answer to req names: the downgrade's when the
// decision downgraded it, else the asked one (as the provider resolves
// it), else the provider's standard ("" when it names none).
func servedTier(p *provider, req *simRequest, downgraded bool) string {
	t := p.tiers
	switch {
	case downgraded:
		return t.downgradeTo
	case req.tier == "":
		return t.standard
	}
	if s, ok := t.served[req.tier]; ok {
		return s
	}
	return req.tier
}

// servedOr is the tier the answer names, or def when the plan has none.
func (a *answerPlan) servedOr(def string) string {
	if a.d.served != "" {
		return a.d.served
	}
	return def
}

// tierHeader sets the provider's served-tier header on an answer (not an
// error), where the provider has one.
func tierHeader(p *provider, d *decision) {
	if p.tiers.header != "" && d.served != "" && d.reply == nil {
		d.header.Set(p.tiers.header, strings.ToLower(d.served))
	}
}

// priorityTier serves the request at the provider's priority tier when it
// asks for auto (or nothing), the scenario gives the account priority
// capacity (priority_itpm, priority_otpm), and that capacity holds the
// request's input and output tokens; else it stays as decided. Called
// with s.mu held.
func (ad *admission) priorityTier() {
	t, st := ad.p.tiers, ad.st
	if t.priority == "" || !slices.Contains(t.auto, ad.req.tier) || (st.pitpm == nil && st.potpm == nil) {
		return
	}
	for _, c := range []struct {
		l limiter
		n float64
	}{{st.pitpm, ad.in}, {st.potpm, float64(ad.maxOut)}} {
		if c.l != nil && c.l.Remaining(ad.now) < c.n {
			return // over the priority windows: served at standard
		}
	}
	ad.d.served = t.priority
}

// priorityAnswer spends a priority answer's tokens from the priority
// windows and names them in its headers; an error spends nothing. Called
// with s.mu held, when the decision is made.
func (ad *admission) priorityAnswer() {
	d, st, now := &ad.d, ad.st, ad.now
	if ad.p.tiers.priority == "" || d.served != ad.p.tiers.priority || d.reply != nil {
		return
	}
	if st.pitpm != nil {
		st.pitpm.Take(now, ad.in)
	}
	if st.potpm != nil {
		st.potpm.Take(now, float64(ad.outTokens))
	}
	anthropicPriorityHeaders(limitView{st: st, now: now}, d.header)
}
