package sim

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/limitscope/limitscope/internal/sanitize"
)

// ScenarioInfo describes one named scenario.
type ScenarioInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// faultRule is a fault drawn with a probability on every request, or, when
// it has a window, only inside that window of scenario time.
type faultRule struct {
	Kind       string
	Prob       float64 // 0..1
	RetryAfter time.Duration
	Code       string
	HasWindow  bool
	Start, End time.Duration // [Start, End) since the scenario started; End 0 = open
	Every      time.Duration // the window repeats with this period (0: once)
	Phase      time.Duration // the window's shift in each period
	PhaseRand  bool          // phase=random: a seeded shift per provider, so providers' windows are independent
	Line       int           // where it was written, for messages
}

// active reports whether the rule's window covers elapsed.
func (r faultRule) active(elapsed time.Duration) bool {
	if !r.HasWindow {
		return true
	}
	if r.Every > 0 {
		elapsed = (elapsed + r.Every - r.Phase%r.Every) % r.Every
	}
	return elapsed >= r.Start && (r.End == 0 || elapsed < r.End)
}

// providerConfig is one simulated provider's limits, budget, pacing and
// fault schedule. Zero limits are unlimited.
type providerConfig struct {
	LimitKind  string // "bucket" or "window" for the per-minute limits
	RPM, TPM   int64  // requests and tokens (input + max output) per minute
	Burst      int64  // most requests at once: the RPM bucket's capacity (0: the RPM)
	ITPM, OTPM int64  // input and output tokens per minute (Anthropic)
	// PriorityITPM and PriorityOTPM are the account's Priority Tier
	// capacity, input and output tokens per minute (Anthropic; 0: none).
	PriorityITPM, PriorityOTPM int64
	RPD, TPD                   int64 // requests and tokens per day
	BudgetUSD                  float64
	BudgetPeriod               time.Duration // 0: the calendar month (UTC)
	PriceIn                    float64       // USD per million input tokens
	PriceOut                   float64       // USD per million output tokens
	SpendCode                  string        // the spend_cap variant the budget produces
	RampFactor                 float64       // acceleration limit: recent rate above factor x the earlier rate ...
	RampFloor                  int           // ... and at least this many requests in RampWindow (0: off)
	RampWindow                 time.Duration
	TokensPerSecond            float64
	FirstTokenDelay            time.Duration
	QueueDelay                 time.Duration // DeepSeek-style: keep-alive comments before the first token
	ContextWindow              int64         // input tokens above this: context length exceeded
	Faults                     []faultRule
	Models                     []string // models added to the provider's catalogue (models = ...)
	// Learnt from a history (learnt.go): distributions drawn per answer,
	// and the limits that were estimated rather than read from headers.
	FirstTokenDist *dist
	TPSDist        *dist
	Estimated      []string
	Trace          []traceStep // trace.go: the recorded outcomes, in order
}

// scenario is a parsed scenario: a name, a description and a config per
// provider.
type scenario struct {
	Name        string
	Description string
	Primary     string // the provider failover-demo degrades by default
	Mode        string // "" or "statistical"; "trace" replays each provider's trace (trace.go)
	Providers   map[string]*providerConfig
}

// defaultProvider is the named provider's config in every scenario: the
// base values, with its row's limits, prices and pace (provider.limits).
func defaultProvider(name string) *providerConfig {
	c := &providerConfig{LimitKind: "window", RampWindow: 10 * time.Second, TokensPerSecond: 60,
		FirstTokenDelay: 400 * time.Millisecond, ContextWindow: 128000, PriceIn: 1, PriceOut: 4}
	p := providerOf(name)
	if p == nil {
		return c
	}
	d := p.limits
	c.RPM, c.TPM, c.ITPM, c.OTPM, c.RPD, c.TPD = d.RPM, d.TPM, d.ITPM, d.OTPM, d.RPD, d.TPD
	if d.LimitKind != "" {
		c.LimitKind = d.LimitKind
	}
	if d.PriceIn != 0 || d.PriceOut != 0 {
		c.PriceIn, c.PriceOut = d.PriceIn, d.PriceOut
	}
	if d.TokensPerSecond != 0 {
		c.TokensPerSecond = d.TokensPerSecond
	}
	if d.FirstTokenDelay != 0 {
		c.FirstTokenDelay = d.FirstTokenDelay
	}
	if d.ContextWindow != 0 {
		c.ContextWindow = d.ContextWindow
	}
	return c
}

func newScenario(name string) *scenario {
	// The first row of the table is the provider failover-demo degrades.
	s := &scenario{Name: name, Primary: providerNames[0], Providers: map[string]*providerConfig{}}
	for _, p := range providerNames {
		s.Providers[p] = defaultProvider(p)
	}
	return s
}

// presets are the named scenarios, written in the scenario-file format (so
// they double as examples of it). They are constants, never written.
var presets = []struct{ name, text string }{
	{"calm", `
description = every provider healthy, documented default limits, no faults
`},
	{"bench", `
description = for limitscope bench: 300 requests per minute with a burst of 5 (a bucket refilling 5 a second), generous token limits, short fast answers, no faults
# every provider but DeepSeek, which documents no rate limit
[*]
rpm = 300
burst = 5
limit_kind = bucket
tpm = 1000000
tokens_per_second = 2000
first_token_delay = 20ms
[anthropic]
itpm = 1000000
otpm = 1000000
[groq]
tpd = 0
[deepseek]
rpm = 0
`},
	{"busy", `
description = near the limits: low per-minute limits, the acceleration limit on, occasional 429s with retry-after
[*]
ramp = 3 6 10s
fault = rate_limit 0.08 retry_after=2s
[openai]
rpm = 20
tpm = 40000
[anthropic]
rpm = 10
itpm = 10000
otpm = 4000
[gemini]
rpm = 5
[groq]
rpm = 10
tpm = 6000
[mistral]
rpm = 12
[xai]
rpm = 12
`},
	{"overloaded", `
description = capacity trouble: each provider has its own bursts of 529/503 (Groq 498), 10 s in every 30 s at its own phase, scattered ones between
[*]
window = 0s-10s overload p=0.9 every=30s phase=random
fault = overload 0.15
`},
	{"outage", `
description = every provider overloaded at once: 529/503 (Groq 498) on every request for 10 s in every 30 s, so failover cannot help then
[*]
window = 0s-10s overload every=30s
`},
	{"spend-cap", `
description = tiny spend budgets: after a few requests each provider returns its quota error (Anthropic enforced_spend_limit_reached, OpenAI insufficient_quota, 402s) until the month ends
[*]
budget_usd = 0.0005
`},
	{"daily-quota", `
description = per-day limits of 3 requests on Gemini (QuotaFailure PerDay) and Groq (requests per day); other providers unchanged
[gemini]
rpd = 3
[groq]
rpd = 3
`},
	{"mid-stream", `
description = half of the streams fail after HTTP 200 with an error event part-way through
[*]
fault = mid_stream 0.5
`},
	{"flaky", `
description = an unreliable network and servers: connection resets, streams cut without their end, 500s
[*]
fault = reset 0.1
fault = cut 0.1
fault = server_error 0.1
`},
	{"failover-demo", `
description = OpenAI (the primary) is degraded from the first request: 529/503 overloads and 429s with a 30 s retry-after; every other provider stays healthy
primary = openai
[openai]
window = 0s- overload p=0.6
window = 0s- rate_limit retry_after=30s
`},
}

// Scenarios lists the named scenarios with a description each, in a fixed
// order (for sim --list).
func Scenarios() []ScenarioInfo {
	out := make([]ScenarioInfo, 0, len(presets))
	for _, p := range presets {
		desc := ""
		if s, err := parseScenario(p.name, strings.NewReader(p.text), p.name); err == nil {
			desc = s.Description
		}
		out = append(out, ScenarioInfo{Name: p.name, Description: desc})
	}
	return out
}

// preset returns the named preset scenario.
func preset(name string) (*scenario, error) {
	for _, p := range presets {
		if p.name == name {
			return parseScenario(p.name, strings.NewReader(p.text), "preset "+p.name)
		}
	}
	names := make([]string, 0, len(presets))
	for _, p := range presets {
		names = append(names, p.name)
	}
	return nil, fmt.Errorf("unknown scenario %q (known: %s)", name, strings.Join(names, ", "))
}

// loadScenarioFile reads and parses a scenario file. Its name is the file's
// `name =` line, else the file name without its extension.
func loadScenarioFile(path string) (*scenario, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("scenario file: %w", err)
	}
	defer f.Close()
	base := sanitize.Text(strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)))
	return parseScenario(base, f, path)
}

// parseScenario parses the scenario-file format (see README.md). Errors
// name the source and the line: "busy.ini:7: ...".
func parseScenario(name string, r io.Reader, source string) (*scenario, error) {
	s := newScenario(name)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	var section []string // the providers the current section sets; nil: top level
	sectionName := ""
	lineNo := 0
	errf := func(format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", source, lineNo, fmt.Sprintf(format, args...))
	}
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		if strings.HasPrefix(line, "[") {
			if !strings.HasSuffix(line, "]") {
				return nil, errf("section header %q: want [provider] or [*]", line)
			}
			sectionName = strings.ToLower(strings.TrimSpace(line[1 : len(line)-1]))
			switch {
			case sectionName == "*" || sectionName == "all":
				section = providerNames
			case knownProvider(sectionName):
				section = []string{sectionName}
			default:
				return nil, errf("unknown provider section [%s] (known: %s, or * for all)", sectionName, strings.Join(providerNames, ", "))
			}
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, errf("%q: want key = value", line)
		}
		key = strings.ToLower(strings.TrimSpace(key))
		value = strings.TrimSpace(value)
		if section == nil {
			switch key {
			case "name":
				// Names and descriptions reach terminals (sim, send --sim):
				// escape sequences and control characters are dropped.
				value = sanitize.Text(value)
				if value == "" {
					return nil, errf("name is empty")
				}
				s.Name = value
			case "description":
				s.Description = sanitize.Text(value)
			case "primary":
				if !knownProvider(value) {
					return nil, errf("primary: unknown provider %q", value)
				}
				s.Primary = value
			case "mode":
				m, err := parseMode(value)
				if err != nil {
					return nil, errf("%v", err)
				}
				s.Mode = m
			default:
				// Provider settings at top level are an error: say where they go.
				if _, err := (&providerConfig{}).set(key, value, lineNo); err == nil {
					return nil, errf("%q is a provider setting: put it under [*] or [provider]", key)
				}
				return nil, errf("unknown key %q (top level takes name, description, primary, mode)", key)
			}
			continue
		}
		if key == "models" {
			if err := s.addModels(section, sectionName, value); err != nil {
				return nil, errf("%v", err)
			}
			continue
		}
		for _, p := range section {
			known, err := s.Providers[p].set(key, value, lineNo)
			if !known {
				return nil, errf("unknown key %q in [%s]", key, sectionName)
			}
			if err != nil {
				return nil, errf("%s: %v", key, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return s, nil
}

// set applies one key = value to c. known is false for an unknown key.
func (c *providerConfig) set(key, value string, line int) (known bool, err error) {
	intp := map[string]*int64{"rpm": &c.RPM, "tpm": &c.TPM, "itpm": &c.ITPM, "otpm": &c.OTPM,
		"rpd": &c.RPD, "tpd": &c.TPD, "context_window": &c.ContextWindow, "burst": &c.Burst,
		"priority_itpm": &c.PriorityITPM, "priority_otpm": &c.PriorityOTPM}
	floatp := map[string]*float64{"budget_usd": &c.BudgetUSD, "price_in": &c.PriceIn, "price_out": &c.PriceOut,
		"tokens_per_second": &c.TokensPerSecond}
	durp := map[string]*time.Duration{"first_token_delay": &c.FirstTokenDelay, "queue_delay": &c.QueueDelay}
	if p, ok := intp[key]; ok {
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || n < 0 {
			return true, fmt.Errorf("%q is not a whole number >= 0", value)
		}
		*p = n
		return true, nil
	}
	if p, ok := floatp[key]; ok {
		f, err := strconv.ParseFloat(value, 64)
		if err != nil || f < 0 || f != f {
			return true, fmt.Errorf("%q is not a number >= 0", value)
		}
		*p = f
		return true, nil
	}
	if p, ok := durp[key]; ok {
		d, err := parseDuration(value)
		if err != nil {
			return true, err
		}
		*p = d
		return true, nil
	}
	switch key {
	case "limit_kind":
		if value != "bucket" && value != "window" {
			return true, fmt.Errorf("%q: want bucket or window", value)
		}
		c.LimitKind = value
	case "budget_period":
		if value == "month" {
			c.BudgetPeriod = 0
			return true, nil
		}
		d, err := parseDuration(value)
		if err != nil {
			return true, err
		}
		if d == 0 {
			return true, fmt.Errorf("budget_period must be month or a positive duration")
		}
		c.BudgetPeriod = d
	case "spend_code":
		c.SpendCode = value
	case "ramp":
		f := strings.Fields(value)
		if len(f) < 2 || len(f) > 3 {
			return true, fmt.Errorf("%q: want FACTOR FLOOR [WINDOW], e.g. 3 6 10s (or 0 0 for off)", value)
		}
		factor, err := strconv.ParseFloat(f[0], 64)
		if err != nil || factor < 0 {
			return true, fmt.Errorf("factor %q is not a number >= 0", f[0])
		}
		floor, err := strconv.Atoi(f[1])
		if err != nil || floor < 0 {
			return true, fmt.Errorf("floor %q is not a whole number >= 0", f[1])
		}
		c.RampFactor, c.RampFloor = factor, floor
		if len(f) == 3 {
			w, err := parseDuration(f[2])
			if err != nil || w <= 0 || w >= time.Minute {
				return true, fmt.Errorf("window %q: want a duration between 0 and 1m", f[2])
			}
			c.RampWindow = w
		}
	case "fault":
		r, err := parseFaultRule(value, false)
		if err != nil {
			return true, err
		}
		r.Line = line
		c.Faults = append(c.Faults, r)
	case "window":
		r, err := parseFaultRule(value, true)
		if err != nil {
			return true, err
		}
		r.Line = line
		c.Faults = append(c.Faults, r)
	default:
		return c.setLearnt(key, value)
	}
	return true, nil
}

// parseFaultRule parses "KIND PROB [opts]" (fault) or "START-END KIND [opts]"
// (window), opts being p=PROB, retry_after=D, code=C, every=D.
func parseFaultRule(value string, windowed bool) (faultRule, error) {
	f := strings.Fields(value)
	r := faultRule{Prob: 1}
	if windowed {
		if len(f) < 2 {
			return r, fmt.Errorf("%q: want START-END KIND [p=PROB] [retry_after=D] [code=C] [every=D]", value)
		}
		a, b, ok := strings.Cut(f[0], "-")
		if !ok {
			return r, fmt.Errorf("window %q: want START-END, e.g. 10s-40s or 5s- (open-ended)", f[0])
		}
		var err error
		if r.Start, err = parseDuration(a); err != nil {
			return r, fmt.Errorf("window start: %v", err)
		}
		if b != "" {
			if r.End, err = parseDuration(b); err != nil {
				return r, fmt.Errorf("window end: %v", err)
			}
			if r.End <= r.Start {
				return r, fmt.Errorf("window %q ends before it starts", f[0])
			}
		}
		r.HasWindow = true
		r.Kind = f[1]
		f = f[2:]
	} else {
		if len(f) < 2 {
			return r, fmt.Errorf("%q: want KIND PROBABILITY [retry_after=D] [code=C], e.g. rate_limit 0.1 retry_after=2s", value)
		}
		r.Kind = f[0]
		p, err := parseProb(f[1])
		if err != nil {
			return r, err
		}
		r.Prob = p
		f = f[2:]
	}
	if !knownFault(r.Kind) {
		names := make([]string, 0, len(faultInfos))
		for _, fi := range faultInfos {
			names = append(names, fi.Name)
		}
		sort.Strings(names)
		return r, fmt.Errorf("unknown fault kind %q (known: %s)", r.Kind, strings.Join(names, ", "))
	}
	if r.Kind == FaultFailoverDemo {
		return r, fmt.Errorf("failover-demo is a live action (POST /_sim/fault); in a file, script the degradation with a window, e.g. window = 5s- overload")
	}
	for _, opt := range f {
		k, v, ok := strings.Cut(opt, "=")
		if !ok {
			return r, fmt.Errorf("option %q: want name=value", opt)
		}
		var err error
		switch k {
		case "p", "prob":
			r.Prob, err = parseProb(v)
		case "retry_after":
			r.RetryAfter, err = parseDuration(v)
		case "code":
			r.Code = v
		case "phase":
			if !windowed {
				return r, fmt.Errorf("phase= only applies to window lines")
			}
			if v == "random" {
				r.PhaseRand = true
			} else {
				r.Phase, err = parseDuration(v)
			}
		case "every":
			if !windowed {
				return r, fmt.Errorf("every= only applies to window lines")
			}
			r.Every, err = parseDuration(v)
			if err == nil && r.End == 0 {
				err = fmt.Errorf("every= needs a window with an end")
			}
			if err == nil && r.Every < r.End {
				err = fmt.Errorf("every=%s is shorter than the window", v)
			}
		default:
			return r, fmt.Errorf("unknown option %q (known: p, retry_after, code, every, phase)", k)
		}
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

func parseProb(s string) (float64, error) {
	pct := strings.HasSuffix(s, "%")
	p, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if pct {
		p /= 100
	}
	if err != nil || p < 0 || p > 1 || p != p {
		return 0, fmt.Errorf("probability %q: want a number from 0 to 1 (or 0%%..100%%)", s)
	}
	return p, nil
}

func parseDuration(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration >= 0 like 500ms, 2s or 1m30s", s)
	}
	return d, nil
}

// Limits are a provider's rate limits in a scenario (0: none).
type Limits struct {
	RPM, TPM   int64 // requests and tokens per minute
	ITPM, OTPM int64 // input and output tokens per minute
	RPD, TPD   int64 // requests and tokens per day
	// Headers: the simulator announces the limits in response headers.
	Headers bool
}

// ScenarioLimits returns the limits of every provider in the named preset
// scenario, by provider name: the provider's defaults with the scenario's
// changes.
func ScenarioLimits(name string) (map[string]Limits, error) {
	s, err := preset(name)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Limits, len(s.Providers))
	for n, c := range s.Providers {
		p := providerOf(n)
		out[n] = Limits{RPM: c.RPM, TPM: c.TPM, ITPM: c.ITPM, OTPM: c.OTPM, RPD: c.RPD, TPD: c.TPD,
			Headers: p != nil && p.limitHeaders}
	}
	return out, nil
}
