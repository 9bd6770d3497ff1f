package stream

import (
	"fmt"
	"strings"
	"time"
)

// Class is the provider-neutral meaning of an attempt's outcome. The retry
// policy decides on classes alone.
type Class string

// The classes. The class table in classes.go maps each provider's statuses
// and codes to them; the first matching row wins.
const (
	ClassOK        Class = "ok"         // the stream completed
	ClassQuota     Class = "quota"      // a person must act: spend, billing, credit, per-day quota
	ClassCaller    Class = "caller"     // fix the request (Error.ModelSpecific: another model may take it)
	ClassRateLimit Class = "rate_limit" // transient, the account's per-minute budget
	ClassOverload  Class = "overload"   // transient, the provider's capacity
	// ClassFlexCapacity is short capacity at a flex service tier (OpenAI's
	// 429 to a flex request, Gemini's flex 503, Groq's 498
	// capacity_exceeded): transient, retried briefly, then failed over
	// (to the same model at the default tier, where the chain names it).
	ClassFlexCapacity Class = "flex_capacity"
	ClassServer       Class = "server"     // 5xx, 408, 409, a 200 that is not the expected stream
	ClassConnection   Class = "connection" // no response, a reset, a stream cut before its end
	ClassTimeout      Class = "timeout"    // header, first-token or stall timeout
	ClassCancelled    Class = "cancelled"  // the caller's context ended
)

// DelaySource names where a wait's length came from.
type DelaySource string

// Delay sources, in the order the server's own are looked for; Reset and
// Backoff are the client's.
const (
	SourceNone         DelaySource = ""
	SourceRetryAfterMs DelaySource = "retry-after-ms"
	SourceRetryAfter   DelaySource = "retry-after"
	SourceRetryInfo    DelaySource = "retry-info"
	SourceMessage      DelaySource = "message"
	SourceReset        DelaySource = "reset"   // pacing from a limits snapshot
	SourceBackoff      DelaySource = "backoff" // the client's own exponential backoff
)

// Scope says what a quota stop covers, for cooldowns.
type Scope string

// Cooldown scopes.
const (
	ScopeNone    Scope = ""
	ScopeAccount Scope = "account" // spend, billing, credit: the whole provider account (key)
	ScopeTarget  Scope = "target"  // a per-model daily quota
)

// Target is one provider and model, written
// "provider[:api][@account]/model[+tier]".
// Account names one of several accounts (keys) of the provider ("" = the
// provider's default key): "openai@team/gpt-5.4-mini" reads its key from
// OPENAI_API_KEY_TEAM (see AccountKeyEnv), and its cooldowns, pacing and
// gauges are its own. Tier names the service tier the target asks for
// ("" = the provider's default): "openai/gpt-5.4-mini+flex" (see TierSep
// and the provider table's Tiers).
type Target struct {
	Provider string `json:"provider"`
	Account  string `json:"account,omitempty"`
	Model    string `json:"model"`
	Tier     string `json:"tier,omitempty"`
}

// AccountSep separates a provider (and its API variant) from an account
// name in a target: "openai:responses@team/gpt-5.4-mini".
const AccountSep = "@"

// String returns "provider/model", or "provider@account/model", with
// "+tier" after the model when the target asks for a tier.
func (t Target) String() string {
	s := t.Provider + "/" + t.Model
	if t.Account != "" {
		s = t.Provider + AccountSep + t.Account + "/" + t.Model
	}
	if t.Tier != "" {
		s += TierSep + t.Tier
	}
	return s
}

// EndpointKey is the key of the target's endpoint in a Router: the
// provider, or "provider@account".
func (t Target) EndpointKey() string { return EndpointKey(t.Provider, t.Account) }

// EndpointKey is a Router's endpoint key for provider's account ("" = the
// default account): "openai", "openai@team".
func EndpointKey(provider, account string) string {
	if account == "" {
		return provider
	}
	return provider + AccountSep + account
}

// ValidAccount reports whether name is a usable account name: 1 to 32
// lower-case letters, digits, '-' or '_', starting with a letter or digit
// (so it maps onto an environment variable's suffix).
func ValidAccount(name string) bool {
	if name == "" || len(name) > 32 {
		return false
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case (r == '-' || r == '_') && i > 0:
		default:
			return false
		}
	}
	return true
}

// ParseTarget parses "provider[:api][@account]/model". The model may itself
// contain slashes (e.g. "groq/meta-llama/llama-4"). The provider must be a
// known one; a provider's second API is a variant after a colon, itself a
// row of the provider table ("openai:responses/gpt-5.4-mini"); an account
// after "@" names another key of the provider ("openai@team/gpt-5.4-mini");
// a service tier after "+" must be one the provider documents
// ("openai/gpt-5.4-mini+flex").
func ParseTarget(s string) (Target, error) {
	p, m, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok || p == "" || m == "" {
		return Target{}, fmt.Errorf("target %q: want provider/model, e.g. openai/gpt-5.4-mini", s)
	}
	p = strings.ToLower(p)
	p, acct, hasAcct := strings.Cut(p, AccountSep)
	if hasAcct && !ValidAccount(acct) {
		return Target{}, fmt.Errorf("target %q: account %q: want 1 to 32 of a-z, 0-9, '-' and '_' (e.g. openai@team/gpt-5.4-mini)", s, acct)
	}
	if _, ok := lookupProvider(p); !ok {
		if base, variant, ok := strings.Cut(p, VariantSep); ok {
			return Target{}, fmt.Errorf("target %q: %s has no API %q (known variants: %s)", s, base, variant, strings.Join(variantsOf(base), ", "))
		}
		return Target{}, fmt.Errorf("target %q: unknown provider %q (known: %s)", s, p, strings.Join(ProviderNames(), ", "))
	}
	t := Target{Provider: p, Account: acct, Model: m}
	if i := strings.LastIndex(m, TierSep); i >= 0 {
		t.Model, t.Tier = m[:i], strings.ToLower(m[i+len(TierSep):])
		if t.Model == "" || t.Tier == "" {
			return Target{}, fmt.Errorf("target %q: want provider/model+tier, e.g. openai/gpt-5.4-mini+flex", s)
		}
		if err := ValidTier(p, t.Tier); err != nil {
			return Target{}, fmt.Errorf("target %q: %w", s, err)
		}
	}
	return t, nil
}

// Request is one prompt to one target.
type Request struct {
	Target    Target
	Prompt    string
	MaxTokens int
	// System and Messages, when Messages is set, replace Prompt: a system
	// prompt and a conversation of user and assistant turns (the proxy's
	// requests). Every dialect sends them in its own format.
	System   string
	Messages []Message
	Sampling Sampling // temperature, top_p, stop: sent when set
	// OnThinking, when set, is called (on the stream's goroutine, like
	// onText) with each reasoning delta as it arrives: Anthropic thinking,
	// OpenAI reasoning, Gemini thoughts. Their text is never the answer's.
	OnThinking func()
	// OnUsage, when set, is called (on the stream's goroutine, like
	// OnThinking) once, with the usage the stream reported before any of
	// its text, where the provider reports it that early: Anthropic's
	// message_start, Gemini's usageMetadata (on the chunk with the first
	// text, before that text), a Responses response.created that carries
	// usage. Streams that report usage only at their end (Chat
	// Completions, Bedrock's metadata event) never call it.
	OnUsage func(Usage)
	// OnHeaders, when set, is called (on the attempt's goroutine) once a
	// response with a success status arrives, before its body is read,
	// with the limits its headers tell (nil where they tell none): the
	// answer has begun.
	OnHeaders func(*Limits)
}

// Usage is token usage as the provider reported it.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Window is one rate-limit window from the response headers. Fields a
// provider did not send are left at their zero value with the Has flag false.
type Window struct {
	Limit        int64     `json:"limit"`
	Remaining    int64     `json:"remaining"`
	Reset        time.Time `json:"reset,omitempty"` // when the window is fully replenished
	HasLimit     bool      `json:"has_limit"`
	HasRemaining bool      `json:"has_remaining"`
	PerDay       bool      `json:"per_day,omitempty"` // Groq's request headers are per day
	Rounded      bool      `json:"rounded,omitempty"` // Anthropic rounds token remaining to thousands
}

// Limits is a snapshot of a target's rate limits from one response's headers.
// Nil windows were not sent.
type Limits struct {
	At           time.Time `json:"at"`
	Requests     *Window   `json:"requests,omitempty"`
	Tokens       *Window   `json:"tokens,omitempty"`
	InputTokens  *Window   `json:"input_tokens,omitempty"`
	OutputTokens *Window   `json:"output_tokens,omitempty"`
	// PriorityInputTokens and PriorityOutputTokens are the priority
	// tier's own token windows (Anthropic's anthropic-priority-*
	// headers), gauges of their own: they never pace.
	PriorityInputTokens  *Window `json:"priority_input_tokens,omitempty"`
	PriorityOutputTokens *Window `json:"priority_output_tokens,omitempty"`
}

// Empty reports whether the snapshot holds no window.
func (l *Limits) Empty() bool {
	return l == nil || (l.Requests == nil && l.Tokens == nil && l.InputTokens == nil && l.OutputTokens == nil)
}

// Error is a classified failure of one attempt. Its text never contains a
// credential.
type Error struct {
	Class         Class
	ModelSpecific bool   // a caller error another model may not have (context length, request too large)
	Status        int    // HTTP status; 200 for a mid-stream error; 0 when no response
	Code          string // the provider's most specific code
	Message       string
	QuotaID       string // Gemini's QuotaFailure quotaId
	RequestID     string
	Delay         time.Duration // the server's delay; meaningful when DelaySource != ""
	DelaySource   DelaySource
	NoRetry       bool // the server sent x-should-retry: false
	MidStream     bool // the error came after HTTP 200, inside the stream
	// Oversize: the stream passed a size cap (MaxStreamSize, MaxEventSize).
	// The same target would send the same again: do not retry it there.
	Oversize bool
	Scope    Scope
	ResetAt  time.Time // when a quota stop ends, when the provider said (zero: unknown)
	Snippet  string    // the first bytes of an unexpected body, redacted
	Err      error     // the underlying error, if any
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(string(e.Class))
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d", e.Status)
		if e.MidStream {
			b.WriteString(", mid-stream")
		}
		b.WriteString(")")
	}
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	} else if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Result is what one attempt produced: a completed stream, or an Error with
// whatever text arrived before it.
type Result struct {
	Status    int     // HTTP status, 0 when no response
	RequestID string  // from x-request-id, request-id, or the body
	Limits    *Limits // nil when the response carried no rate-limit headers
	Text      string  // the text received, as the caller saw it (partial when Err != nil; at most Options.MaxPartialText bytes)
	// TextTruncated: more text streamed to onText than Text keeps.
	TextTruncated bool
	FinishReason  string        // as the provider reported it
	Usage         *Usage        // nil when not reported
	Model         string        // the model as the serving provider reported it
	ResponseID    string        // the provider's id of its response (chatcmpl-..., msg_...), "" when none
	TTFT          time.Duration // time to first content (reasoning too); 0 when none arrived
	// TTFText is the time to the first visible text of the answer (after
	// any thinking); 0 when no text arrived.
	TTFText time.Duration
	// Thinking: reasoning deltas arrived (the model thought before, or
	// while, answering).
	Thinking bool
	// ReasoningTokens are the output tokens spent thinking, where the
	// provider reports them (OpenAI's reasoning_tokens, Gemini's
	// thoughtsTokenCount); 0 when not reported.
	ReasoningTokens int
	// ServedTier is the service tier that served the answer, as the
	// provider named it (its body, a stream event or a header); "" when
	// it named none.
	ServedTier string
	Err        *Error // nil on success
}

// Class returns ClassOK on success, else the error's class.
func (r *Result) Class() Class {
	if r.Err == nil {
		return ClassOK
	}
	return r.Err.Class
}
