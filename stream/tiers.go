package stream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// TierSep separates a target's model from the service tier it asks for:
// "openai/gpt-5.4-mini+flex" is gpt-5.4-mini at OpenAI's flex tier.
const TierSep = "+"

// Tiers is the provider table's service-tier columns: which tiers a
// provider takes, how a request asks for one, where the answer says which
// tier served it, and how its flex tier fails when capacity is short.
// The zero value is a provider with no service tiers.
type Tiers struct {
	// Names are the tiers a request may ask for, as the provider spells
	// them (nil: the provider has none).
	Names []string
	// Object: the request carries the tier as an object with a type
	// (Bedrock's serviceTier {"type": ...}); otherwise a string.
	Object bool
	// Field is the request body's member ("service_tier"; Bedrock's
	// "serviceTier").
	Field string
	// ServedField is the answer's member naming the tier that served it,
	// looked for at any depth of a stream event (OpenAI's chunk
	// service_tier, Anthropic's usage.service_tier, Bedrock's metadata
	// serviceTier.type; "": the body says nothing).
	ServedField string
	// ServedHeader is the response header naming the tier that served it
	// (Gemini's x-gemini-service-tier; "": none).
	ServedHeader string
	// Premium are the tiers whose answer at another tier is a downgrade
	// (asked priority, served default or standard).
	Premium []string
	// Flex are the tiers whose requests may meet short flex capacity
	// (Groq's auto falls back to flex), answered with FlexStatus.
	Flex []string
	// FlexStatus is the status a flex request gets when flex capacity is
	// short (OpenAI 429, Gemini 503, Groq 498; 0: none documented).
	FlexStatus int
	// FlexStatusAlone: FlexStatus means short flex capacity whatever the
	// request asked (Groq's 498 capacity_exceeded exists for nothing else).
	FlexStatusAlone bool
	// FlexTimeout is the header and first-token timeout the provider
	// advises for flex requests (OpenAI: 15 minutes; 0: the usual ones).
	FlexTimeout time.Duration
	// SharedQuota are the tiers that draw on one quota, and so share one
	// pacing gate (Bedrock's priority, default and flex).
	SharedQuota []string
	// PriorityWindows: the answers carry the priority tier's own token
	// windows (Anthropic's anthropic-priority-* headers).
	PriorityWindows bool
}

// The tier columns of the providers that document service tiers (see the
// provider table).
var (
	openaiTiers = Tiers{Names: []string{"auto", "default", "flex", "priority"}, Field: "service_tier", ServedField: "service_tier",
		Premium: []string{"priority"}, Flex: []string{"flex"}, FlexStatus: 429, FlexTimeout: 15 * time.Minute}
	anthropicTiers = Tiers{Names: []string{"auto", "standard_only"}, Field: "service_tier", ServedField: "service_tier", PriorityWindows: true}
	geminiTiers    = Tiers{Names: []string{"standard", "priority", "flex"}, Field: "service_tier", ServedField: "service_tier",
		ServedHeader: "X-Gemini-Service-Tier", Premium: []string{"priority"}, Flex: []string{"flex"}, FlexStatus: 503}
	groqTiers = Tiers{Names: []string{"on_demand", "flex", "auto", "performance"}, Field: "service_tier", ServedField: "service_tier",
		Flex: []string{"flex", "auto"}, FlexStatus: 498, FlexStatusAlone: true}
	bedrockTiers = Tiers{Names: []string{"reserved", "priority", "default", "flex"}, Object: true, Field: "serviceTier", ServedField: "serviceTier",
		Premium: []string{"reserved", "priority"}, SharedQuota: []string{"priority", "default", "flex"}}
)

// validTier checks that tier is one of provider p's tiers, naming them when
// it is not.
func validTier(p ProviderInfo, tier string) error {
	if len(p.Tiers.Names) == 0 {
		return fmt.Errorf("%s documents no service tiers", p.Name)
	}
	if !slices.Contains(p.Tiers.Names, tier) {
		return fmt.Errorf("%s has no service tier %q (its tiers: %s)", p.Name, tier, strings.Join(p.Tiers.Names, ", "))
	}
	return nil
}

// ValidTier reports whether provider offers tier, with an error naming the
// provider's tiers when it does not.
func ValidTier(provider, tier string) error {
	p, ok := lookupProvider(provider)
	if !ok {
		return fmt.Errorf("unknown provider %q", provider)
	}
	return validTier(p, tier)
}

// WithTier returns t asking for tier ("": the provider's default). An
// unknown tier is an error naming the provider's.
func (t Target) WithTier(tier string) (Target, error) {
	if tier != "" {
		if err := ValidTier(t.Provider, tier); err != nil {
			return t, fmt.Errorf("target %s: %w", t, err)
		}
	}
	t.Tier = tier
	return t, nil
}

// QuotaKey is the key of the quota t draws on, for pacing: t's String, but
// without a tier that shares its quota with the default one (Bedrock's
// priority, default and flex draw on one on-demand quota, so they share
// one pacing gate).
func (t Target) QuotaKey() string {
	if t.Tier != "" && slices.Contains(providerRow(t.Provider).Tiers.SharedQuota, t.Tier) {
		t.Tier = ""
	}
	return t.String()
}

// IsFlex reports whether t asks for a tier that may meet short flex
// capacity.
func (t Target) IsFlex() bool {
	return t.Tier != "" && slices.Contains(providerRow(t.Provider).Tiers.Flex, t.Tier)
}

// Downgraded reports whether an answer served at tier served is a
// downgrade of what t asked for (asked priority, served default or
// standard). An unknown served tier is no downgrade.
func (t Target) Downgraded(served string) bool {
	return served != "" && t.Tier != "" && served != t.Tier && slices.Contains(providerRow(t.Provider).Tiers.Premium, t.Tier)
}

// FlexTimeout is the header and first-token timeout t's provider advises
// for its flex tier when t asks for it (OpenAI's 15 minutes); 0 when t
// asks no flex tier or its provider advises none.
func (t Target) FlexTimeout() time.Duration {
	p := providerRow(t.Provider)
	if t.Tier == "" || !slices.Contains(p.Tiers.Flex, t.Tier) {
		return 0
	}
	return p.Tiers.FlexTimeout
}

// addTier puts the tier req's target asks for into body, as provider p
// documents it.
func addTier(body map[string]any, p *ProviderInfo, tier string) {
	if tier == "" || p.Tiers.Field == "" {
		return
	}
	if p.Tiers.Object {
		body[p.Tiers.Field] = map[string]any{"type": tier}
		return
	}
	body[p.Tiers.Field] = tier
}

// tierOptions raises the header and first-token timeouts of an attempt at a
// flex tier to the provider's advised flex timeout (a disabled timeout
// stays disabled).
func tierOptions(o Options, p *ProviderInfo, t Target) Options {
	ft := p.Tiers.FlexTimeout
	if ft <= 0 || !slices.Contains(p.Tiers.Flex, t.Tier) {
		return o
	}
	if o.HeaderTimeout > 0 && o.HeaderTimeout < ft {
		o.HeaderTimeout = ft
	}
	if o.FirstTokenTimeout > 0 && o.FirstTokenTimeout < ft {
		o.FirstTokenTimeout = ft
	}
	return o
}

// flexCapacity reports whether an HTTP error answering a request for t is
// short flex capacity: the provider's flex status, on a request at a flex
// tier (or whatever was asked, where the status means nothing else), that
// the class table took for a transient error; a 429 must carry no sign of a
// rate limit (OpenAI documents no code or body for this 429: what tells it
// apart is that the request asked for flex).
func flexCapacity(p *ProviderInfo, t Target, status int, e *Error) bool {
	tc := p.Tiers
	if tc.FlexStatus == 0 || status != tc.FlexStatus {
		return false
	}
	if !tc.FlexStatusAlone && !slices.Contains(tc.Flex, t.Tier) {
		return false
	}
	switch e.Class {
	case ClassRateLimit, ClassOverload, ClassServer:
	default:
		return false
	}
	return status != 429 || !rateLimitSigns(e)
}

// rateLimitSigns reports whether a 429 says it is a rate limit: a
// rate-limit code, or a message naming a rate limit.
func rateLimitSigns(e *Error) bool {
	c := strings.ToLower(e.Code)
	m := strings.ToLower(e.Message)
	return strings.Contains(c, "rate_limit") || c == "requests" || c == "tokens" ||
		strings.Contains(m, "rate limit") || strings.Contains(m, "per minute")
}

// servedHeader reads the tier that served an answer from its headers ("":
// not said).
func servedHeader(p *ProviderInfo, h http.Header) string {
	if p.Tiers.ServedHeader == "" || h == nil {
		return ""
	}
	return cleanTier(h.Get(p.Tiers.ServedHeader))
}

// servedInEvent reads the tier that served an answer from one stream
// event: the first member named field, at any depth, whose value is a
// string or an object with a string type ("": none). Only events that
// mention field are decoded.
func servedInEvent(field, data string) string {
	if field == "" || !namesAValue(data, `"`+field+`"`) {
		return ""
	}
	var v any
	if json.Unmarshal(bytesOf(data), &v) != nil {
		return ""
	}
	return cleanTier(findTier(v, field, 0))
}

// namesAValue reports whether data holds the member key with a value other
// than null, so that an event naming the member as null (in every chunk of
// a stream) is not decoded on each token.
func namesAValue(data, key string) bool {
	for i := strings.Index(data, key); i >= 0; {
		rest := strings.TrimLeft(data[i+len(key):], " \t\r\n")
		if v, ok := strings.CutPrefix(rest, ":"); ok && !strings.HasPrefix(strings.TrimLeft(v, " \t\r\n"), "null") {
			return true
		}
		next := strings.Index(data[i+len(key):], key)
		if next < 0 {
			return false
		}
		i += len(key) + next
	}
	return false
}

// findTier walks v for the member field (depth-first, at most 8 levels).
func findTier(v any, field string, depth int) string {
	if depth > 8 {
		return ""
	}
	switch v := v.(type) {
	case map[string]any:
		if x, ok := v[field]; ok {
			switch x := x.(type) {
			case string:
				return x
			case map[string]any:
				if s, ok := x["type"].(string); ok {
					return s
				}
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if s := findTier(v[k], field, depth+1); s != "" {
				return s
			}
		}
	case []any:
		for _, x := range v {
			if s := findTier(x, field, depth+1); s != "" {
				return s
			}
		}
	}
	return ""
}

// cleanTier keeps a served tier's name printable and short: at most 32 of
// a-z, 0-9, '_' and '-' (lower-cased); anything else is dropped.
func cleanTier(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if len(s) > 32 {
		return ""
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return ""
		}
	}
	return s
}

// anthropicPriorityHeaders are the priority tier's input and output token
// windows (limit, remaining, reset), in canonical form.
var anthropicPriorityHeaders = [2][3]string{
	{"Anthropic-Priority-Input-Tokens-Limit", "Anthropic-Priority-Input-Tokens-Remaining", "Anthropic-Priority-Input-Tokens-Reset"},
	{"Anthropic-Priority-Output-Tokens-Limit", "Anthropic-Priority-Output-Tokens-Remaining", "Anthropic-Priority-Output-Tokens-Reset"},
}

// priorityWindows reads the priority tier's token windows into l, where
// provider p sends them.
func priorityWindows(p *ProviderInfo, h http.Header, now time.Time, l *Limits) {
	if !p.Tiers.PriorityWindows || h == nil || l == nil {
		return
	}
	l.PriorityInputTokens = anthropicWindow(h, &anthropicPriorityHeaders[0], now, true)
	l.PriorityOutputTokens = anthropicWindow(h, &anthropicPriorityHeaders[1], now, true)
}
