package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// Config is the proxy's configuration file (JSON):
//
//	{
//	  "policy": {"max_attempts": 5, "failover_wait": "10s"},
//	  "max_tokens": 1024,
//	  "aliases": {
//	    "fast": {"chain": ["openai/gpt-5.4-mini", "anthropic/claude-haiku-5-5"],
//	             "policy": {"max_attempts": 3, "deadline": "30s"}},
//	    "smart": ["anthropic/claude-sonnet-4-5", "openai/gpt-5.4"],
//	    "whole": {"chain": ["openai/gpt-5.4-mini"], "buffered": true},
//	    "batch": {"chain": ["openai/gpt-5.4-mini"], "max_concurrency": 100}
//	  },
//	  "models": ["gemini/gemini-2.5-flash"],
//	  "allowed_hosts": ["devbox.local"],
//	  "replay_window": "10s",
//	  "max_in_flight": 2048, "max_concurrency": 1024,
//	  "targets": {"openai": {"max_concurrency": 500}, "anthropic/claude-haiku-5-5": {"max_concurrency": 50}},
//	  "write_timeout": "30s", "stream_buffer": 262144, "max_queued": 67108864, "max_answer": 33554432
//	}
//
// The limits (max_in_flight, max_concurrency, the targets' max_concurrency,
// an alias's max_in_flight and max_concurrency, write_timeout, stream_buffer, max_queued,
// max_answer) must be positive when named; the proxy's flags win over them.
//
// An alias is a chain (primary first, then fallbacks) with an optional
// policy; a bare list is a chain with the default policy. Unknown keys are
// errors, so a typo is not silently ignored.
//
// A route's policy is layered field by field (see RoutePolicy): what its
// alias's policy names wins, then the file's top-level policy, then the
// command's flags (Options.DefaultPolicy), then retry.DefaultPolicy.
type Config struct {
	Policy retry.Policy // the file's top-level policy (zero fields: not set)
	// FailoverOnQuota is the top-level policy's failover_on_quota when the
	// file names it (true or false), nil when it does not.
	FailoverOnQuota *bool
	MaxTokens       int              // sent when the request names none (0: stream.DefaultMaxTokens)
	Aliases         map[string]Alias // by name
	Models          []stream.Target  // extra provider/model entries listed by /v1/models
	AllowedHosts    []string         // Host names accepted besides IP literals and localhost
	// ReplayWindow is the file's replay_window (nil: not named; 0: off):
	// see Options.ReplayWindow, which wins when set.
	ReplayWindow *time.Duration
	// The limits below are 0 when the file does not name them; Options'
	// own, when set, win (see Options for each).
	MaxInFlight    int            // max_in_flight: Options.MaxInFlight
	MaxConcurrency int            // max_concurrency: the pacer's ceiling per target (retry.Pacer.MaxConcurrency)
	TargetMax      map[string]int // targets.*.max_concurrency by provider or provider/model (retry.Pacer.TargetMax)
	WriteTimeout   time.Duration  // write_timeout: Options.WriteTimeout
	StreamBuffer   int            // stream_buffer: Options.StreamBuffer
	MaxQueued      int64          // max_queued: Options.MaxQueued
	MaxAnswer      int64          // max_answer: Options.MaxAnswer
}

// Alias is a named route: a chain of targets and its policy.
type Alias struct {
	Name   string
	Chain  []stream.Target
	Policy *retry.Policy // nil: none of its own (zero fields: not set)
	// FailoverOnQuota is the alias's failover_on_quota when its policy names
	// it (true or false): it wins over the file's and the flag's. Nil: not
	// said (Policy.FailoverOnQuota true also counts as said).
	FailoverOnQuota *bool
	MaxTokens       int // 0: the request's, else Config.MaxTokens
	// Buffered holds a streamed answer until it is complete, so that every
	// failure stays retryable (HeaderBuffered on a request overrides it).
	Buffered bool
	// MaxInFlight caps the alias's calls served at once (0: only the
	// proxy's cap); past it a call is refused with 503 and retry-after.
	MaxInFlight int
	// MaxConcurrency is the alias's concurrency ceiling (0: none of its
	// own, only its targets'): past it a call waits for one of the alias's
	// calls to end, first come first served, within its deadline (the wait
	// counts toward it), counted with the calls queued at the targets'
	// gates, and recorded on the call's first attempt as paced.
	MaxConcurrency int
}

// RoutePolicy is the policy of a call routed to a (the zero Alias for a
// provider/model route), layered field by field: a's policy, then the
// file's top-level policy, then flags (the command's flag values), then
// retry.DefaultPolicy. A zero duration or count is "not set" at its layer;
// IgnoreCooldown is on when any layer turns it on; FailoverOnQuota is the
// first layer that says it (Alias.FailoverOnQuota, Config.FailoverOnQuota,
// or true in a layer's Policy), else off. c may be nil.
func (c *Config) RoutePolicy(a Alias, flags retry.Policy) retry.Policy {
	var layers []retry.Policy
	var said []*bool
	if a.Policy != nil {
		layers = append(layers, *a.Policy)
	}
	said = append(said, a.FailoverOnQuota)
	if a.Policy != nil && a.Policy.FailoverOnQuota {
		said = append(said, ptr(true))
	}
	if c != nil {
		layers = append(layers, c.Policy)
		said = append(said, c.FailoverOnQuota)
		if c.Policy.FailoverOnQuota {
			said = append(said, ptr(true))
		}
	}
	layers = append(layers, flags)
	if flags.FailoverOnQuota {
		said = append(said, ptr(true))
	}
	var p retry.Policy
	for i := len(layers) - 1; i >= 0; i-- { // lowest first, each higher one overwrites what it sets
		l := layers[i]
		setInt(&p.MaxAttempts, l.MaxAttempts)
		setInt(&p.TriesPerTarget, l.TriesPerTarget)
		setDur(&p.FailoverWait, l.FailoverWait)
		setDur(&p.MaxWait, l.MaxWait)
		setDur(&p.Deadline, l.Deadline)
		setDur(&p.BackoffBase, l.BackoffBase)
		setDur(&p.BackoffCap, l.BackoffCap)
		setDur(&p.Jitter, l.Jitter)
		p.IgnoreCooldown = p.IgnoreCooldown || l.IgnoreCooldown
		p.NoRetryAfterText = p.NoRetryAfterText || l.NoRetryAfterText
	}
	for _, s := range said {
		if s != nil {
			p.FailoverOnQuota = *s
			break
		}
	}
	return p.WithDefaults()
}

func ptr[T any](v T) *T { return &v }

func setInt(dst *int, v int) {
	if v > 0 {
		*dst = v
	}
}

func setDur(dst *time.Duration, v time.Duration) {
	if v > 0 {
		*dst = v
	}
}

// policyJSON is a Policy as written in the file.
type policyJSON struct {
	MaxAttempts    int      `json:"max_attempts"`
	TriesPerTarget int      `json:"tries_per_target"`
	FailoverWait   duration `json:"failover_wait"`
	MaxWait        duration `json:"max_wait"`
	Deadline       duration `json:"deadline"`
	IgnoreCooldown bool     `json:"ignore_cooldown"`
	// FailoverOnQuota is a pointer so that an alias's explicit false wins
	// over the flag.
	FailoverOnQuota *bool `json:"failover_on_quota"`
}

func (p policyJSON) policy() retry.Policy {
	return retry.Policy{
		MaxAttempts:     p.MaxAttempts,
		TriesPerTarget:  p.TriesPerTarget,
		FailoverWait:    time.Duration(p.FailoverWait),
		MaxWait:         time.Duration(p.MaxWait),
		Deadline:        time.Duration(p.Deadline),
		IgnoreCooldown:  p.IgnoreCooldown,
		FailoverOnQuota: p.FailoverOnQuota != nil && *p.FailoverOnQuota,
	}
}

// duration reads "10s" or a number of seconds.
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		v, err := time.ParseDuration(s)
		if err != nil || v < 0 {
			return fmt.Errorf("%q is not a duration like 10s or 2m", s)
		}
		*d = duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil || f < 0 || f > 1e9 {
		return fmt.Errorf("%s is not a duration (\"10s\") or a number of seconds", b)
	}
	*d = duration(f * float64(time.Second))
	return nil
}

type aliasJSON struct {
	Chain       []string    `json:"chain"`
	Policy      *policyJSON `json:"policy"`
	MaxTokens   int         `json:"max_tokens"`
	Buffered    bool        `json:"buffered"`
	MaxInFlight *int        `json:"max_in_flight"`
	MaxConc     *int        `json:"max_concurrency"`
}

// targetJSON is a target's (or a provider's) own limits.
type targetJSON struct {
	MaxConcurrency *int `json:"max_concurrency"`
}

func (a *aliasJSON) UnmarshalJSON(b []byte) error {
	var list []string
	if json.Unmarshal(b, &list) == nil {
		a.Chain = list
		return nil
	}
	type plain aliasJSON
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return err
	}
	*a = aliasJSON(p)
	return nil
}

type configJSON struct {
	Policy       *policyJSON          `json:"policy"`
	MaxTokens    int                  `json:"max_tokens"`
	Aliases      map[string]aliasJSON `json:"aliases"`
	Models       []string             `json:"models"`
	AllowedHosts []string             `json:"allowed_hosts"`
	ReplayWindow *duration            `json:"replay_window"`

	MaxInFlight    *int                  `json:"max_in_flight"`
	MaxConcurrency *int                  `json:"max_concurrency"`
	Targets        map[string]targetJSON `json:"targets"`
	WriteTimeout   *duration             `json:"write_timeout"`
	StreamBuffer   *int                  `json:"stream_buffer"`
	MaxQueued      *int64                `json:"max_queued"`
	MaxAnswer      *int64                `json:"max_answer"`
}

// positive checks a named limit: absent (nil) or above zero. The error is
// one line naming the knob.
func positive[T int | int64](knob string, v *T) (T, error) {
	if v == nil {
		return 0, nil
	}
	if *v <= 0 {
		return 0, fmt.Errorf("%s must be a positive number, not %d", knob, *v)
	}
	return *v, nil
}

// limits reads the file's limits into c.
func (cj *configJSON) limits(c *Config) error {
	var err error
	if c.MaxInFlight, err = positive("max_in_flight", cj.MaxInFlight); err != nil {
		return err
	}
	if c.MaxConcurrency, err = positive("max_concurrency", cj.MaxConcurrency); err != nil {
		return err
	}
	if c.StreamBuffer, err = positive("stream_buffer", cj.StreamBuffer); err != nil {
		return err
	}
	if c.MaxQueued, err = positive("max_queued", cj.MaxQueued); err != nil {
		return err
	}
	if c.MaxAnswer, err = positive("max_answer", cj.MaxAnswer); err != nil {
		return err
	}
	if cj.WriteTimeout != nil {
		if *cj.WriteTimeout <= 0 {
			return errors.New("write_timeout must be a positive duration like 30s")
		}
		c.WriteTimeout = time.Duration(*cj.WriteTimeout)
	}
	for name, tj := range cj.Targets {
		if !strings.Contains(name, "/") {
			if _, ok := stream.Provider(name); !ok {
				return fmt.Errorf("targets: %q is neither a provider nor provider/model", name)
			}
		} else if _, err := stream.ParseTarget(name); err != nil {
			return fmt.Errorf("targets: %w", err)
		}
		n, err := positive("targets."+name+".max_concurrency", tj.MaxConcurrency)
		if err != nil {
			return err
		}
		if n > 0 {
			if c.TargetMax == nil {
				c.TargetMax = map[string]int{}
			}
			c.TargetMax[name] = n
		}
	}
	return nil
}

// LoadConfig reads and checks a config file. Errors name the file.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("proxy config: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("proxy config %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses and checks a config document.
func ParseConfig(b []byte) (*Config, error) {
	var cj configJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cj); err != nil {
		return nil, err
	}
	c := &Config{MaxTokens: cj.MaxTokens, Aliases: map[string]Alias{}}
	if cj.MaxTokens < 0 {
		return nil, errors.New("max_tokens must not be negative")
	}
	if cj.ReplayWindow != nil {
		c.ReplayWindow = ptr(time.Duration(*cj.ReplayWindow))
	}
	if err := cj.limits(c); err != nil {
		return nil, err
	}
	if cj.Policy != nil {
		c.Policy = cj.Policy.policy()
		c.FailoverOnQuota = cj.Policy.FailoverOnQuota
	}
	names := make([]string, 0, len(cj.Aliases))
	for n := range cj.Aliases {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		aj := cj.Aliases[n]
		if strings.TrimSpace(n) == "" || strings.Contains(n, "/") {
			return nil, fmt.Errorf("alias %q: a name must be non-empty and have no slash (provider/model is already a route)", n)
		}
		if len(aj.Chain) == 0 {
			return nil, fmt.Errorf("alias %q: the chain is empty", n)
		}
		if aj.MaxTokens < 0 {
			return nil, fmt.Errorf("alias %q: max_tokens must not be negative", n)
		}
		a := Alias{Name: n, MaxTokens: aj.MaxTokens, Buffered: aj.Buffered}
		var err error
		if a.MaxInFlight, err = positive("aliases."+n+".max_in_flight", aj.MaxInFlight); err != nil {
			return nil, err
		}
		if a.MaxConcurrency, err = positive("aliases."+n+".max_concurrency", aj.MaxConc); err != nil {
			return nil, err
		}
		for _, s := range aj.Chain {
			t, err := stream.ParseTarget(s)
			if err != nil {
				return nil, fmt.Errorf("alias %q: %w", n, err)
			}
			a.Chain = append(a.Chain, t)
		}
		if aj.Policy != nil {
			p := aj.Policy.policy()
			a.Policy = &p
			a.FailoverOnQuota = aj.Policy.FailoverOnQuota
		}
		c.Aliases[n] = a
	}
	for _, s := range cj.Models {
		t, err := stream.ParseTarget(s)
		if err != nil {
			return nil, fmt.Errorf("models: %w", err)
		}
		c.Models = append(c.Models, t)
	}
	for _, h := range cj.AllowedHosts {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" {
			return nil, errors.New("allowed_hosts: an empty host")
		}
		c.AllowedHosts = append(c.AllowedHosts, h)
	}
	return c, nil
}
