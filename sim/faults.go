package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// The fault kinds, for Fault.Kind, scenario files and the admin endpoint.
const (
	FaultRateLimit       = "rate_limit"        // 429 with the provider's retry signal (retry-after, RetryInfo)
	FaultOverload        = "overload"          // 529 (Anthropic), 503 (the others)
	FaultSpendCap        = "spend_cap"         // the provider's spend / credit / billing stop
	FaultMidStream       = "mid_stream"        // HTTP 200, some text, then an error event in the stream
	FaultDailyQuota      = "daily_quota"       // Gemini PerDay QuotaFailure, Groq RPD/TPD (others: spend_cap)
	FaultSlowDown        = "slow_down"         // the acceleration limit: 429 slow_down on a sudden ramp
	FaultServerError     = "server_error"      // 500 (Code "502" or "504" for those)
	FaultReset           = "reset"             // the connection is reset before any response
	FaultCut             = "cut"               // HTTP 200, some text, then the stream ends without its end event
	FaultHang            = "hang"              // no response until the client gives up (Code "stall": silence after the first text)
	FaultFailoverDemo    = "failover-demo"     // the provider (default the scenario's primary) degrades for RetryAfter (default 60s)
	FaultContextLength   = "context_length"    // 400 context length exceeded (model-specific)
	FaultRequestTooLarge = "request_too_large" // one request above the whole per-minute limit (model-specific)
	// FaultFlexCapacity hits only requests at a flex tier: OpenAI's 429
	// "Resource Unavailable" (its body assumed), Gemini's 503 UNAVAILABLE,
	// Groq's 498 capacity_exceeded (its body assumed).
	FaultFlexCapacity = "flex_capacity"
	// FaultTierDowngrade hits only requests at a premium tier (priority,
	// reserved): answered, but at the standard or default tier, which the
	// answer names.
	FaultTierDowngrade = "tier_downgrade"
)

// Fault is one injected failure. Injected faults are served before anything
// the scenario would do, oldest first.
type Fault struct {
	Provider   string        // "openai", "anthropic", ... or "" for every provider
	Kind       string        // one of the Fault* constants
	RetryAfter time.Duration // rate_limit, slow_down, daily_quota: the delay the server names; failover-demo: how long
	Count      int           // how many requests it hits (0 = 1)
	Code       string        // optional variant, e.g. OpenAI's "credit_balance_exhausted" for spend_cap; see README.md
	// For bounds the fault in time: it disarms For after its first hit
	// (0: no time bound). With Count 0 it hits every request until then
	// (an overload episode that cannot leak into a later call).
	For time.Duration
}

// FaultInfo describes one fault kind.
type FaultInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// faultInfos is a constant table; it is never written.
var faultInfos = []FaultInfo{
	{FaultRateLimit, "429 rate limit with the provider's retry signal (retry-after header, or Gemini RetryInfo)"},
	{FaultOverload, "overloaded: Anthropic 529, 503 elsewhere"},
	{FaultSpendCap, "spend cap / credits exhausted: OpenAI insufficient_quota, Anthropic enforced_spend_limit_reached, 402s"},
	{FaultMidStream, "HTTP 200, some text, then an error event inside the stream"},
	{FaultDailyQuota, "per-day quota: Gemini QuotaFailure PerDay, Groq requests/tokens per day"},
	{FaultSlowDown, "acceleration limit: 429 slow_down, traffic grew too quickly"},
	{FaultServerError, "500 internal server error"},
	{FaultReset, "connection reset before any response"},
	{FaultCut, "the stream is cut part-way, without its end event"},
	{FaultHang, "no response at all until the client times out"},
	{FaultFailoverDemo, "the primary provider degrades (overloaded) for a minute; fallbacks stay healthy"},
	{FaultContextLength, "400 context length exceeded (another model may take it)"},
	{FaultRequestTooLarge, "one request larger than the whole per-minute token limit"},
	{FaultFlexCapacity, "flex capacity short (requests at a flex tier only): OpenAI 429, Gemini 503, Groq 498 capacity_exceeded"},
	{FaultTierDowngrade, "a priority (or reserved) request served at the standard or default tier, which the answer names"},
}

// Faults lists the fault kinds with a one-line description each, in a fixed
// order (for the TUI's demo keys and the admin endpoint).
func Faults() []FaultInfo {
	out := make([]FaultInfo, len(faultInfos))
	copy(out, faultInfos)
	return out
}

func knownFault(kind string) bool {
	for _, f := range faultInfos {
		if f.Name == kind {
			return true
		}
	}
	return false
}

func knownProvider(name string) bool { return providerOf(accountName(name)) != nil }

// validate checks a fault before it is queued.
func (f Fault) validate() error {
	if !knownFault(f.Kind) {
		return fmt.Errorf("unknown fault kind %q", f.Kind)
	}
	if base, acct, ok := strings.Cut(f.Provider, "@"); ok && (!knownProvider(base) || !stream.ValidAccount(acct)) {
		return fmt.Errorf("unknown provider account %q", f.Provider)
	} else if !ok && f.Provider != "" && !knownProvider(f.Provider) {
		return fmt.Errorf("unknown provider %q", f.Provider)
	}
	if f.Count < 0 {
		return fmt.Errorf("fault count %d is negative", f.Count)
	}
	if f.RetryAfter < 0 {
		return fmt.Errorf("fault retry-after %v is negative", f.RetryAfter)
	}
	if f.For < 0 {
		return fmt.Errorf("fault duration %v is negative", f.For)
	}
	return nil
}
