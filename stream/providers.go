package stream

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// Dialect names a provider API's wire format.
type Dialect string

// The dialects.
const (
	DialectOpenAI       Dialect = "openai"       // Chat Completions and every OpenAI-compatible API
	DialectAnthropic    Dialect = "anthropic"    // Messages
	DialectGemini       Dialect = "gemini"       // generateContent
	DialectResponses    Dialect = "responses"    // OpenAI's Responses API
	DialectInteractions Dialect = "interactions" // the Gemini API's Interactions API
	DialectBedrock      Dialect = "bedrock"      // Amazon Bedrock ConverseStream
)

// VariantSep separates a provider from its API variant in a provider name:
// "openai:responses" is the openai account spoken to through the Responses
// API (a target "openai:responses/gpt-5.4-mini").
const VariantSep = ":"

// ProviderInfo is one row of the provider table: every fact limitscope
// knows about a provider, so that no code outside the table asks for a
// provider by name. What differs between wire formats lives in the dialect
// (dialect.go and one file per dialect); what differs between providers of
// one dialect is a column here. Adding an OpenAI-compatible provider is one
// row.
type ProviderInfo struct {
	Name           string
	Dialect        Dialect
	KeyEnv         []string // looked up in order; the first set wins
	BaseURLEnv     string
	DefaultBaseURL string
	DefaultModel   string   // the console's and the proxy's default for this provider
	ModelPrefixes  []string // a bare model name starting with one of these is this provider's (lower case)

	// Request quirks.

	// NoStreamOptions: the provider rejects stream_options (Mistral: a 422
	// extra_forbidden) and sends usage on its last chunk anyway.
	NoStreamOptions bool
	// MaxTokensField names the body's output-token cap ("" = max_tokens;
	// OpenAI wants max_completion_tokens). Gemini's is always
	// generationConfig.maxOutputTokens.
	MaxTokensField string

	// Response facts.

	// RequestsPerDay: the x-ratelimit-*-requests window is per day, not
	// per minute (Groq's RPD).
	RequestsPerDay bool
	// RequestIDHeader is the response header carrying the request id (""
	// = the dialect's: x-request-id, Anthropic's request-id).
	RequestIDHeader string

	// SigV4Service is the AWS SigV4 signing name ("": not an AWS API). Set,
	// the provider takes AWS credentials when no key in KeyEnv is set
	// (SigV4 with the AWS SDK's chain: Endpoint.AWS) and a default Region
	// (AWS_REGION: Endpoint.Region). Bedrock.
	SigV4Service string

	// GenAIName is the provider's gen_ai.provider.name in the OpenTelemetry
	// GenAI semantic conventions, where it is not Name ("gcp.gemini").
	GenAIName string

	// Tiers are the provider's service tiers: the names a target may ask
	// for, how they are sent, where the served one is read, and the flex
	// tier's failure and timeout (the zero value: none).
	Tiers Tiers

	// Account names the row whose account this row uses ("" = its own):
	// an API variant ("openai:responses") shares the provider's key, base
	// URL, limits and account-wide cooldowns.
	Account string

	// KeyExample is a made-up key in the shape the provider issues, as it
	// travels: bare where the shape is the provider's own (sk-, gsk_,
	// AIza...), after "Bearer " where it has none (Mistral's 32 letters and
	// digits). internal/sanitize's key shapes must redact it (a test
	// checks); "" on an API variant, whose keys are its account's.
	KeyExample string
}

// AccountName is the provider whose account the row's calls spend: Account,
// else the row's own name.
func (p ProviderInfo) AccountName() string {
	if p.Account != "" {
		return p.Account
	}
	return p.Name
}

// providers is the provider table; it is never written after init.
var providers = []ProviderInfo{
	{Name: "openai", Dialect: DialectOpenAI, KeyEnv: []string{"OPENAI_API_KEY"}, BaseURLEnv: "OPENAI_BASE_URL", DefaultBaseURL: "https://api.openai.com/v1",
		DefaultModel: "gpt-5.4-mini", ModelPrefixes: []string{"gpt-", "chatgpt-", "o1", "o2", "o3", "o4", "o5", "o6", "o7", "o8", "o9"},
		MaxTokensField: "max_completion_tokens", KeyExample: "sk-proj-EXAMPLEexampleEXAMPLE0123", Tiers: openaiTiers},
	{Name: "anthropic", Dialect: DialectAnthropic, KeyEnv: []string{"ANTHROPIC_API_KEY"}, BaseURLEnv: "ANTHROPIC_BASE_URL", DefaultBaseURL: "https://api.anthropic.com",
		DefaultModel: "claude-haiku-5-5", ModelPrefixes: []string{"claude-"}, KeyExample: "sk-ant-api03-EXAMPLEexampleEXAMPLE0123", Tiers: anthropicTiers},
	{Name: "gemini", Dialect: DialectGemini, KeyEnv: []string{"GOOGLE_API_KEY", "GEMINI_API_KEY"}, BaseURLEnv: "GOOGLE_GEMINI_BASE_URL", DefaultBaseURL: "https://generativelanguage.googleapis.com",
		DefaultModel: "gemini-3.8-flash", ModelPrefixes: []string{"gemini-"}, GenAIName: "gcp.gemini", KeyExample: "AIzaSyEXAMPLEexampleEXAMPLEexample012", Tiers: geminiTiers},
	{Name: "groq", Dialect: DialectOpenAI, KeyEnv: []string{"GROQ_API_KEY"}, BaseURLEnv: "GROQ_BASE_URL", DefaultBaseURL: "https://api.groq.com/openai/v1",
		DefaultModel: "llama-3.3-70b-versatile", RequestsPerDay: true, KeyExample: "gsk_EXAMPLEexampleEXAMPLE0123", Tiers: groqTiers},
	{Name: "deepseek", Dialect: DialectOpenAI, KeyEnv: []string{"DEEPSEEK_API_KEY"}, BaseURLEnv: "DEEPSEEK_BASE_URL", DefaultBaseURL: "https://api.deepseek.com",
		DefaultModel: "deepseek-chat", ModelPrefixes: []string{"deepseek-"}, KeyExample: "sk-EXAMPLEexampleEXAMPLE0123"},
	{Name: "mistral", Dialect: DialectOpenAI, KeyEnv: []string{"MISTRAL_API_KEY"}, BaseURLEnv: "MISTRAL_BASE_URL", DefaultBaseURL: "https://api.mistral.ai/v1",
		DefaultModel: "mistral-small-latest", ModelPrefixes: []string{"mistral-", "ministral-", "codestral-", "magistral-", "open-mistral-"},
		NoStreamOptions: true, GenAIName: "mistral_ai", KeyExample: "Bearer EXAMPLEexampleEXAMPLEexample012"},
	{Name: "xai", Dialect: DialectOpenAI, KeyEnv: []string{"XAI_API_KEY"}, BaseURLEnv: "XAI_BASE_URL", DefaultBaseURL: "https://api.x.ai/v1",
		DefaultModel: "grok-4-fast", ModelPrefixes: []string{"grok-"}, GenAIName: "x_ai", KeyExample: "xai-EXAMPLEexampleEXAMPLE0123"},
	// Bedrock: a Bedrock API key, else SigV4 with the AWS SDK's credential
	// chain (see bedrock.go); the Region is the model's leading segment,
	// else AWS_REGION. The base URL variable is the AWS SDKs' own.
	{Name: "bedrock", Dialect: DialectBedrock, KeyEnv: []string{"AWS_BEARER_TOKEN_BEDROCK"}, BaseURLEnv: "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
		DefaultBaseURL: "https://bedrock-runtime.{region}.amazonaws.com", DefaultModel: "anthropic.claude-haiku-5-5-v1:0",
		SigV4Service: "bedrock", GenAIName: "aws.bedrock", KeyExample: "ABSKEXAMPLEexampleEXAMPLE0123", Tiers: bedrockTiers},
	// API variants: last, so that the console's default chain (the first
	// three available rows) and bare model names keep their providers.
	{Name: "openai" + VariantSep + "responses", Dialect: DialectResponses, Account: "openai", KeyEnv: []string{"OPENAI_API_KEY"}, BaseURLEnv: "OPENAI_BASE_URL", DefaultBaseURL: "https://api.openai.com/v1",
		DefaultModel: "gpt-5.4-mini", GenAIName: "openai", Tiers: openaiTiers},
	{Name: "gemini" + VariantSep + "interactions", Dialect: DialectInteractions, Account: "gemini", KeyEnv: []string{"GOOGLE_API_KEY", "GEMINI_API_KEY"}, BaseURLEnv: "GOOGLE_GEMINI_BASE_URL", DefaultBaseURL: "https://generativelanguage.googleapis.com",
		DefaultModel: "gemini-3.8-flash", GenAIName: "gcp.gemini", Tiers: geminiTiers},
}

func lookupProvider(name string) (ProviderInfo, bool) {
	for _, p := range providers {
		if p.Name == name {
			return p, true
		}
	}
	return ProviderInfo{}, false
}

// providerRow returns the named provider's row, or for an unknown name an
// OpenAI-compatible row with no quirks.
func providerRow(name string) ProviderInfo {
	if p, ok := lookupProvider(name); ok {
		return p
	}
	return ProviderInfo{Name: name, Dialect: DialectOpenAI}
}

// ProviderForModel returns the provider a bare model name (no "provider/")
// obviously belongs to, by the table's model-name prefixes.
func ProviderForModel(model string) (ProviderInfo, bool) {
	m := strings.ToLower(strings.TrimSpace(model))
	for _, p := range providers {
		for _, pre := range p.ModelPrefixes {
			if strings.HasPrefix(m, pre) {
				return p, true
			}
		}
	}
	return ProviderInfo{}, false
}

// variantsOf lists the API variants of provider base ("openai:responses"),
// or "none".
func variantsOf(base string) []string {
	var out []string
	for _, p := range providers {
		if p.Account == base && strings.HasPrefix(p.Name, base+VariantSep) {
			out = append(out, p.Name)
		}
	}
	if len(out) == 0 {
		out = append(out, "none")
	}
	return out
}

// Providers returns every known provider, in a fixed order.
func Providers() []ProviderInfo {
	out := make([]ProviderInfo, len(providers))
	copy(out, providers)
	return out
}

// Provider returns the named provider's description.
func Provider(name string) (ProviderInfo, bool) { return lookupProvider(name) }

// ProviderNames returns the known provider names, sorted.
func ProviderNames() []string {
	names := make([]string, 0, len(providers))
	for _, p := range providers {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return names
}

// Secret holds a credential. It never prints, logs or marshals its value.
type Secret string

// String returns a fixed placeholder, never the value.
func (Secret) String() string { return "[redacted]" }

// GoString returns a fixed placeholder, never the value.
func (Secret) GoString() string { return "[redacted]" }

// MarshalJSON returns a fixed placeholder, never the value.
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }

// MarshalText returns a fixed placeholder, never the value.
func (Secret) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }

// Reveal returns the credential itself, for the one place that sends it.
func (s Secret) Reveal() string { return string(s) }

// Fingerprint returns a short, stable, non-reversible id of the key (the first
// 12 hex digits of its SHA-256), to name an account without the key.
func (s Secret) Fingerprint() string {
	if s == "" {
		return "nokey"
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// Endpoint is where and how to reach one provider.
type Endpoint struct {
	Provider string
	BaseURL  string
	Key      Secret
	// AWS signs requests with SigV4 when Key is empty (Bedrock); nil: none.
	AWS *AWSAuth
	// Region is the default AWS Region of a target that names none
	// ("": BedrockDefaultRegion).
	Region string
}

// MissingKeyError says which variable to set for a provider's key.
type MissingKeyError struct {
	Provider string
	Vars     []string
}

func (e *MissingKeyError) Error() string {
	v := e.Vars[0]
	if len(e.Vars) > 1 {
		v = e.Vars[0] + " (or " + e.Vars[1] + ")"
	}
	return fmt.Sprintf("no API key for %s: set %s, or use --sim to run on the built-in simulator", e.Provider, v)
}

// Resolve finds a provider's endpoint in the environment (read through
// getenv). A missing key is a *MissingKeyError naming the variable.
func Resolve(provider string, getenv func(string) string) (Endpoint, error) {
	p, ok := lookupProvider(provider)
	if !ok {
		return Endpoint{}, fmt.Errorf("unknown provider %q", provider)
	}
	ep := Endpoint{Provider: p.Name, BaseURL: p.DefaultBaseURL}
	if u := getenv(p.BaseURLEnv); u != "" {
		ep.BaseURL = u
	}
	for _, v := range p.KeyEnv {
		if k := getenv(v); k != "" {
			ep.Key = Secret(k)
			break
		}
	}
	if p.SigV4Service != "" {
		if resolveAWS(&ep, getenv) {
			return ep, nil
		}
		return ep, &MissingKeyError{Provider: p.Name, Vars: append(append([]string(nil), p.KeyEnv...), "AWS_ACCESS_KEY_ID or AWS_PROFILE")}
	}
	if ep.Key != "" {
		return ep, nil
	}
	return ep, &MissingKeyError{Provider: p.Name, Vars: p.KeyEnv}
}

// AllEnvVars lists every key and base-URL variable the providers read, so
// tests can clear them.
func AllEnvVars() []string {
	var out []string
	for _, p := range providers {
		out = append(out, p.KeyEnv...)
		out = append(out, p.BaseURLEnv)
		if p.SigV4Service != "" {
			out = append(out, awsCredentialEnv...)
			out = append(out, awsOtherEnv...)
		}
	}
	return out
}
