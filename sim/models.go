package sim

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// ModelInfo is one model a simulated provider knows: what its models
// endpoints list and what its token counting and generation accept.
type ModelInfo struct {
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	Created     string `json:"created"` // a date, 2006-01-02
	// ContextWindow and MaxOutput are the input and output token limits
	// the listings show (Gemini's inputTokenLimit and outputTokenLimit).
	ContextWindow int64 `json:"context_window"`
	MaxOutput     int64 `json:"max_output"`
	// Added is true for a model a scenario file added (models = ...).
	Added bool `json:"added,omitempty"`
}

// ProviderModels is one provider's catalogue, for sim --list.
type ProviderModels struct {
	Provider string      `json:"provider"`
	Models   []ModelInfo `json:"models"`
}

// catalogue is the models each simulated provider knows, by provider name:
// every model named in limitscope's docs, tests, scenarios and fixtures is
// here (models_test.go checks). It is data, never written after init.
var catalogue = map[string][]ModelInfo{
	"openai": {
		{ID: "gpt-5.4-mini", DisplayName: "GPT-5.4 mini", Created: "2026-03-17", ContextWindow: 400000, MaxOutput: 128000},
		{ID: "gpt-5.4-mini-2026-03-17", DisplayName: "GPT-5.4 mini", Created: "2026-03-17", ContextWindow: 400000, MaxOutput: 128000},
		{ID: "gpt-5.4-mini-2026-03-01", DisplayName: "GPT-5.4 mini", Created: "2026-03-01", ContextWindow: 400000, MaxOutput: 128000},
		{ID: "gpt-5.4", DisplayName: "GPT-5.4", Created: "2026-03-05", ContextWindow: 1050000, MaxOutput: 128000},
		{ID: "gpt-5.5", DisplayName: "GPT-5.5", Created: "2026-06-01", ContextWindow: 1050000, MaxOutput: 128000},
		{ID: "gpt-5-nano", DisplayName: "GPT-5 nano", Created: "2025-08-07", ContextWindow: 400000, MaxOutput: 128000},
		{ID: "gpt-5-nano-2025-08-07", DisplayName: "GPT-5 nano", Created: "2025-08-07", ContextWindow: 400000, MaxOutput: 128000},
		{ID: "gpt-4.1", DisplayName: "GPT-4.1", Created: "2025-04-14", ContextWindow: 1047576, MaxOutput: 32768},
		{ID: "gpt-4o", DisplayName: "GPT-4o", Created: "2024-05-13", ContextWindow: 128000, MaxOutput: 16384},
		{ID: "gpt-4o-2024-08-06", DisplayName: "GPT-4o", Created: "2024-08-06", ContextWindow: 128000, MaxOutput: 16384},
		{ID: "gpt-4o-mini", DisplayName: "GPT-4o mini", Created: "2024-07-18", ContextWindow: 128000, MaxOutput: 16384},
		{ID: "gpt-4o-mini-2024-07-18", DisplayName: "GPT-4o mini", Created: "2024-07-18", ContextWindow: 128000, MaxOutput: 16384},
		{ID: "o1", DisplayName: "o1", Created: "2024-12-17", ContextWindow: 200000, MaxOutput: 100000},
		{ID: "o3", DisplayName: "o3", Created: "2025-04-16", ContextWindow: 200000, MaxOutput: 100000},
		{ID: "o4-mini", DisplayName: "o4-mini", Created: "2025-04-16", ContextWindow: 200000, MaxOutput: 100000},
	},
	"anthropic": {
		{ID: "claude-haiku-5-5", DisplayName: "Claude Haiku 5.5", Created: "2026-10-01", ContextWindow: 200000, MaxOutput: 64000},
		{ID: "claude-haiku-5-5-20261001", DisplayName: "Claude Haiku 5.5", Created: "2026-10-01", ContextWindow: 200000, MaxOutput: 64000},
		{ID: "claude-haiku-5-5-20260101", DisplayName: "Claude Haiku 5.5", Created: "2026-01-01", ContextWindow: 200000, MaxOutput: 64000},
		{ID: "claude-sonnet-5-5", DisplayName: "Claude Sonnet 5.5", Created: "2026-10-01", ContextWindow: 1000000, MaxOutput: 64000},
		{ID: "claude-haiku-4-5", DisplayName: "Claude Haiku 4.5", Created: "2025-10-15", ContextWindow: 200000, MaxOutput: 64000},
		{ID: "claude-sonnet-4-5", DisplayName: "Claude Sonnet 4.5", Created: "2025-09-29", ContextWindow: 200000, MaxOutput: 64000},
		{ID: "claude-sonnet-4-5-20250929", DisplayName: "Claude Sonnet 4.5", Created: "2025-09-29", ContextWindow: 200000, MaxOutput: 64000},
		{ID: "claude-3-7-sonnet-20250219", DisplayName: "Claude Sonnet 3.7", Created: "2025-02-19", ContextWindow: 200000, MaxOutput: 64000},
	},
	"gemini": {
		{ID: "gemini-3.8-flash", DisplayName: "Gemini 3.8 Flash", Created: "2026-09-01", ContextWindow: 1048576, MaxOutput: 65536},
		{ID: "gemini-3-flash-preview", DisplayName: "Gemini 3 Flash Preview", Created: "2025-12-17", ContextWindow: 1048576, MaxOutput: 65536},
		{ID: "gemini-2.5-flash", DisplayName: "Gemini 2.5 Flash", Created: "2025-06-17", ContextWindow: 1048576, MaxOutput: 65536},
		{ID: "gemini-2.5-pro", DisplayName: "Gemini 2.5 Pro", Created: "2025-06-17", ContextWindow: 1048576, MaxOutput: 65536},
		{ID: "gemini-2.0-flash", DisplayName: "Gemini 2.0 Flash", Created: "2025-02-05", ContextWindow: 1048576, MaxOutput: 8192},
	},
	"groq": {
		{ID: "llama-3.3-70b-versatile", DisplayName: "Llama 3.3 70B Versatile", Created: "2024-12-06", ContextWindow: 131072, MaxOutput: 32768},
		{ID: "llama-3.1-8b-instant", DisplayName: "Llama 3.1 8B Instant", Created: "2024-07-23", ContextWindow: 131072, MaxOutput: 131072},
		{ID: "meta-llama/llama-4", DisplayName: "Llama 4", Created: "2025-04-05", ContextWindow: 131072, MaxOutput: 8192},
		{ID: "meta-llama/llama-4-scout-17b-16e-instruct", DisplayName: "Llama 4 Scout", Created: "2025-04-05", ContextWindow: 131072, MaxOutput: 8192},
		{ID: "llama-4", DisplayName: "Llama 4", Created: "2025-04-05", ContextWindow: 131072, MaxOutput: 8192},
		{ID: "llama3-70b-8192", DisplayName: "Llama 3 70B", Created: "2024-04-18", ContextWindow: 8192, MaxOutput: 8192},
		{ID: "openai/gpt-oss-20b", DisplayName: "GPT OSS 20B", Created: "2025-08-05", ContextWindow: 131072, MaxOutput: 65536},
		{ID: "openai/gpt-oss-120b", DisplayName: "GPT OSS 120B", Created: "2025-08-05", ContextWindow: 131072, MaxOutput: 65536},
	},
	"deepseek": {
		{ID: "deepseek-chat", DisplayName: "DeepSeek-V3.2 (non-thinking)", Created: "2025-09-29", ContextWindow: 128000, MaxOutput: 8192},
		{ID: "deepseek-reasoner", DisplayName: "DeepSeek-V3.2 (thinking)", Created: "2025-09-29", ContextWindow: 128000, MaxOutput: 65536},
	},
	"mistral": {
		{ID: "mistral-small-latest", DisplayName: "Mistral Small", Created: "2025-06-20", ContextWindow: 131072, MaxOutput: 131072},
		{ID: "mistral-small", DisplayName: "Mistral Small", Created: "2025-06-20", ContextWindow: 131072, MaxOutput: 131072},
		{ID: "mistral-medium-latest", DisplayName: "Mistral Medium", Created: "2025-08-12", ContextWindow: 131072, MaxOutput: 131072},
		{ID: "mistral-large-latest", DisplayName: "Mistral Large", Created: "2025-12-02", ContextWindow: 262144, MaxOutput: 262144},
		{ID: "codestral-latest", DisplayName: "Codestral", Created: "2025-07-30", ContextWindow: 262144, MaxOutput: 262144},
	},
	"xai": {
		{ID: "grok-4", DisplayName: "Grok 4", Created: "2025-07-09", ContextWindow: 256000, MaxOutput: 256000},
		{ID: "grok-4-0709", DisplayName: "Grok 4", Created: "2025-07-09", ContextWindow: 256000, MaxOutput: 256000},
		{ID: "grok-4-fast", DisplayName: "Grok 4 Fast", Created: "2025-09-19", ContextWindow: 2000000, MaxOutput: 30000},
	},
	"bedrock": {
		{ID: "anthropic.claude-haiku-5-5-v1:0", DisplayName: "Claude Haiku 5.5", Created: "2026-10-01", ContextWindow: 200000, MaxOutput: 64000},
		{ID: "anthropic.claude-haiku-5-5", DisplayName: "Claude Haiku 5.5", Created: "2026-10-01", ContextWindow: 200000, MaxOutput: 64000},
		{ID: "anthropic.claude-sonnet-4-5-20250929-v1:0", DisplayName: "Claude Sonnet 4.5", Created: "2025-09-29", ContextWindow: 200000, MaxOutput: 64000},
		{ID: "anthropic.claude-opus-4-6-v1", DisplayName: "Claude Opus 4.6", Created: "2026-02-05", ContextWindow: 200000, MaxOutput: 128000},
		{ID: "anthropic.claude-sim-v1", DisplayName: "Claude (simulated)", Created: "2026-01-01", ContextWindow: 200000, MaxOutput: 64000},
		{ID: "amazon.nova-pro-v1:0", DisplayName: "Nova Pro", Created: "2024-12-03", ContextWindow: 300000, MaxOutput: 10000},
		{ID: "amazon.nova-lite-v1:0", DisplayName: "Nova Lite", Created: "2024-12-03", ContextWindow: 300000, MaxOutput: 10000},
		{ID: "meta.llama3-70b-instruct-v1:0", DisplayName: "Llama 3 70B Instruct", Created: "2024-04-23", ContextWindow: 8192, MaxOutput: 2048},
		{ID: "meta.llama3-2-90b-instruct-v1:0", DisplayName: "Llama 3.2 90B Instruct", Created: "2024-09-25", ContextWindow: 128000, MaxOutput: 8192},
	},
}

// AnyModelSwitch is the sim command's switch that accepts every model name
// (Options.AnyModel); the not-found messages name it.
const AnyModelSwitch = "--any-model"

// modelNameRE is the shape of a model name a scenario file may add: what
// the providers' own ids use (letters, digits, . _ - : / @ +).
var modelNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+\-]{0,199}$`)

// bedrockProfileRE is a cross-Region inference profile's prefix
// ("us.", "eu.", "apac.", "global.", ...).
var bedrockProfileRE = regexp.MustCompile(`^(?:us|eu|apac|global|jp|au|ca|us-gov)\.`)

// canonicalModel is the catalogue id a request's model stands for: on
// Bedrock an inference profile ARN's id, and a cross-Region profile's
// model; elsewhere the name as given.
func canonicalModel(provider, model string) string {
	if p := providerOf(provider); p == nil || !p.profileModels {
		return model
	}
	if strings.HasPrefix(model, "arn:") {
		if i := strings.LastIndexByte(model, '/'); i >= 0 {
			model = model[i+1:]
		}
	}
	return bedrockProfileRE.ReplaceAllString(model, "")
}

// catalogueHas reports whether the built-in catalogue names model for the
// provider.
func catalogueHas(provider, model string) bool {
	model = canonicalModel(provider, model)
	return slices.ContainsFunc(catalogue[provider], func(m ModelInfo) bool { return m.ID == model })
}

// NeedsModelLine reports whether a scenario file must name model under
// [provider] (a `models` line) for the simulator to answer it: a
// well-formed model name that the provider's built-in catalogue lacks and
// no other provider's catalogue claims. The learner writes such lines for
// the models a recorded history used.
func NeedsModelLine(provider, model string) bool {
	if !modelNameRE.MatchString(model) || catalogueHas(provider, model) {
		return false
	}
	_, err := parseModels(provider, model)
	return err == nil
}

// catalogueOwner is the provider whose built-in catalogue names model, or
// "".
func catalogueOwner(model string) string {
	for _, p := range providerNames {
		if catalogueHas(p, model) {
			return p
		}
	}
	return ""
}

// models is the provider's catalogue under the scenario in effect: the
// built-in models, then those the scenario file added.
func (s *Server) models(provider string) []ModelInfo {
	out := slices.Clone(catalogue[provider])
	s.mu.Lock()
	var added []string
	if st := s.state[provider]; st != nil {
		added = st.cfg.Models
	}
	s.mu.Unlock()
	for _, id := range added {
		if !catalogueHas(provider, id) {
			out = append(out, ModelInfo{ID: id, DisplayName: id, Created: "2026-01-01", ContextWindow: 128000, MaxOutput: 8192, Added: true})
		}
	}
	return out
}

// model looks a model up in the provider's catalogue (the scenario's
// additions included); with Options.AnyModel every name is found.
func (s *Server) model(provider, id string) (ModelInfo, bool) {
	id = canonicalModel(provider, id)
	for _, m := range s.models(provider) {
		if m.ID == id {
			return m, true
		}
	}
	if s.opts.AnyModel && id != "" {
		return ModelInfo{ID: id, DisplayName: id, Created: "2026-01-01", ContextWindow: 128000, MaxOutput: 8192}, true
	}
	return ModelInfo{}, false
}

// Models lists each provider's catalogue under the scenario in effect, in
// display order.
func (s *Server) Models() []ProviderModels {
	out := make([]ProviderModels, 0, len(providerNames))
	for _, p := range providerNames {
		out = append(out, ProviderModels{Provider: p, Models: s.models(p)})
	}
	return out
}

// Catalogue lists each provider's built-in models, in display order (for
// sim --list).
func Catalogue() []ProviderModels {
	out := make([]ProviderModels, 0, len(providerNames))
	for _, p := range providerNames {
		out = append(out, ProviderModels{Provider: p, Models: slices.Clone(catalogue[p])})
	}
	return out
}

// unknownModelHint is the simulator's addition to a not-found message: how
// to make the model known.
func unknownModelHint(provider, model string) string {
	return fmt.Sprintf(" (limitscope sim: %q is not in the simulated %s catalogue, which `limitscope sim --list` lists. Add the line `models = %s` under [%s] in a scenario file, or start the simulator with %s to accept any model.)",
		model, provider, model, provider, AnyModelSwitch)
}

// parseModels reads a scenario file's `models = NAME ...` value: model
// names separated by spaces or commas, each shaped as a provider's model
// id and not one of another provider's built-in models.
func parseModels(provider, value string) ([]string, error) {
	names := strings.FieldsFunc(value, func(r rune) bool { return r == ' ' || r == '\t' || r == ',' })
	if len(names) == 0 {
		return nil, fmt.Errorf("no model named: want models = NAME [NAME...]")
	}
	for _, n := range names {
		if !modelNameRE.MatchString(n) {
			return nil, fmt.Errorf("%q is not a model name (letters, digits and . _ - : / @ +, at most 200)", n)
		}
		if owner := catalogueOwner(n); owner != "" && owner != provider && !catalogueHas(provider, n) {
			return nil, fmt.Errorf("%q is a %s model, unknown to %s: put it under [%s], or name a %s model", n, owner, provider, owner, provider)
		}
	}
	return names, nil
}

// createdUnix is a catalogue date as Unix seconds.
func (m ModelInfo) createdUnix() int64 {
	t, err := time.Parse(time.DateOnly, m.Created)
	if err != nil {
		return 0
	}
	return t.Unix()
}

// createdRFC3339 is a catalogue date as RFC 3339.
func (m ModelInfo) createdRFC3339() string {
	return time.Unix(m.createdUnix(), 0).UTC().Format(time.RFC3339)
}

// addModels applies a scenario file's `models = NAME ...` line to the
// section's one provider.
func (s *scenario) addModels(section []string, sectionName, value string) error {
	if len(section) != 1 {
		return fmt.Errorf("models: a model is one provider's: put the line under [provider], not [%s]", sectionName)
	}
	names, err := parseModels(section[0], value)
	if err != nil {
		return fmt.Errorf("models: %w", err)
	}
	c := s.Providers[section[0]]
	for _, n := range names {
		if !slices.Contains(c.Models, n) {
			c.Models = append(c.Models, n)
		}
	}
	return nil
}
