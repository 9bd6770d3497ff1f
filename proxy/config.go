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
//	    "smart": ["anthropic/claude-sonnet-4-5", "openai/gpt-5.4"]
//	  },
//	  "models": ["gemini/gemini-2.5-flash"],
//	  "allowed_hosts": ["devbox.local"]
//	}
//
// An alias is a chain (primary first, then fallbacks) with an optional
// policy; a bare list is a chain with the default policy. Unknown keys are
// errors, so a typo is not silently ignored.
type Config struct {
	Policy       retry.Policy     // every route's policy unless its alias sets one (zero fields: the defaults)
	MaxTokens    int              // sent when the request names none (0: stream.DefaultMaxTokens)
	Aliases      map[string]Alias // by name
	Models       []stream.Target  // extra provider/model entries listed by /v1/models
	AllowedHosts []string         // Host names accepted besides IP literals and localhost
}

// Alias is a named route: a chain of targets and its policy.
type Alias struct {
	Name      string
	Chain     []stream.Target
	Policy    *retry.Policy // nil: Config.Policy
	MaxTokens int           // 0: the request's, else Config.MaxTokens
}

// policyJSON is a Policy as written in the file.
type policyJSON struct {
	MaxAttempts    int      `json:"max_attempts"`
	TriesPerTarget int      `json:"tries_per_target"`
	FailoverWait   duration `json:"failover_wait"`
	MaxWait        duration `json:"max_wait"`
	Deadline       duration `json:"deadline"`
	IgnoreCooldown bool     `json:"ignore_cooldown"`
}

func (p policyJSON) policy() retry.Policy {
	return retry.Policy{
		MaxAttempts:    p.MaxAttempts,
		TriesPerTarget: p.TriesPerTarget,
		FailoverWait:   time.Duration(p.FailoverWait),
		MaxWait:        time.Duration(p.MaxWait),
		Deadline:       time.Duration(p.Deadline),
		IgnoreCooldown: p.IgnoreCooldown,
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
	Chain     []string    `json:"chain"`
	Policy    *policyJSON `json:"policy"`
	MaxTokens int         `json:"max_tokens"`
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
	if cj.Policy != nil {
		c.Policy = cj.Policy.policy()
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
		a := Alias{Name: n, MaxTokens: aj.MaxTokens}
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
