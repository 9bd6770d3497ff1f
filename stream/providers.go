package stream

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
)

// Dialect names a provider API's wire format.
type Dialect string

// The dialects.
const (
	DialectOpenAI    Dialect = "openai"    // Chat Completions and every OpenAI-compatible API
	DialectAnthropic Dialect = "anthropic" // Messages
	DialectGemini    Dialect = "gemini"    // generateContent
)

// ProviderInfo describes one provider: its dialect, where its key and base URL
// come from, and its default base URL.
type ProviderInfo struct {
	Name           string
	Dialect        Dialect
	KeyEnv         []string // looked up in order; the first set wins
	BaseURLEnv     string
	DefaultBaseURL string
}

// providers is a constant table; it is never written after init.
var providers = []ProviderInfo{
	{"openai", DialectOpenAI, []string{"OPENAI_API_KEY"}, "OPENAI_BASE_URL", "https://api.openai.com/v1"},
	{"anthropic", DialectAnthropic, []string{"ANTHROPIC_API_KEY"}, "ANTHROPIC_BASE_URL", "https://api.anthropic.com"},
	{"gemini", DialectGemini, []string{"GOOGLE_API_KEY", "GEMINI_API_KEY"}, "GOOGLE_GEMINI_BASE_URL", "https://generativelanguage.googleapis.com"},
	{"groq", DialectOpenAI, []string{"GROQ_API_KEY"}, "GROQ_BASE_URL", "https://api.groq.com/openai/v1"},
	{"deepseek", DialectOpenAI, []string{"DEEPSEEK_API_KEY"}, "DEEPSEEK_BASE_URL", "https://api.deepseek.com"},
	{"mistral", DialectOpenAI, []string{"MISTRAL_API_KEY"}, "MISTRAL_BASE_URL", "https://api.mistral.ai/v1"},
	{"xai", DialectOpenAI, []string{"XAI_API_KEY"}, "XAI_BASE_URL", "https://api.x.ai/v1"},
}

func lookupProvider(name string) (ProviderInfo, bool) {
	for _, p := range providers {
		if p.Name == name {
			return p, true
		}
	}
	return ProviderInfo{}, false
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
			return ep, nil
		}
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
	}
	return out
}
