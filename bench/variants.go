package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// A variant is the limitscope policy with some of its settings changed, so
// a chain can be tuned against an account (a learnt scenario) beside the
// comparison policies: "limitscope:failover-wait=2s",
// "limitscope:order=reverse:deadline=30s". Each setting is NAME=VALUE:
//
//	failover-wait=D  a longer server delay moves to the next target now
//	max-wait=D       a longer delay with no fallback left defers
//	deadline=D       the whole call's budget
//	tries=N          requests per target except the last
//	attempts=N       requests for the whole call
//	order=reverse    the chain in reverse (the last fallback first)
//	order=N,M,...    the chain's targets in this order, numbered from 1

// variantSep separates the settings in a variant's name.
const variantSep = ":"

// variant is a parsed variant: how it changes a configuration.
type variant struct {
	apply []func(*Config) error
}

// parseVariant reads a variant's name; ok is false when name is not one
// (no "limitscope:" prefix).
func parseVariant(name string) (v variant, ok bool, err error) {
	rest, ok := strings.CutPrefix(name, PolicyLimitscope+variantSep)
	if !ok {
		return v, false, nil
	}
	for _, kv := range strings.Split(rest, variantSep) {
		k, val, found := strings.Cut(kv, "=")
		if !found || val == "" {
			return v, true, fmt.Errorf("variant %q: setting %q: want NAME=VALUE", name, kv)
		}
		f, err := variantSetting(k, val)
		if err != nil {
			return v, true, fmt.Errorf("variant %q: %w", name, err)
		}
		v.apply = append(v.apply, f)
	}
	return v, true, nil
}

func variantSetting(k, val string) (func(*Config) error, error) {
	dur := func(set func(*retry.Policy, time.Duration)) (func(*Config) error, error) {
		d, err := time.ParseDuration(val)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%s=%s: want a duration above 0, e.g. 5s", k, val)
		}
		return func(c *Config) error { set(&c.Retry, d); return nil }, nil
	}
	count := func(set func(*retry.Policy, int)) (func(*Config) error, error) {
		n, err := strconv.Atoi(val)
		if err != nil || n < 1 || n > 100 {
			return nil, fmt.Errorf("%s=%s: want a whole number from 1 to 100", k, val)
		}
		return func(c *Config) error { set(&c.Retry, n); return nil }, nil
	}
	switch k {
	case "failover-wait":
		return dur(func(p *retry.Policy, d time.Duration) { p.FailoverWait = d })
	case "max-wait":
		return dur(func(p *retry.Policy, d time.Duration) { p.MaxWait = d })
	case "deadline":
		return dur(func(p *retry.Policy, d time.Duration) { p.Deadline = d })
	case "tries":
		return count(func(p *retry.Policy, n int) { p.TriesPerTarget = n })
	case "attempts":
		return count(func(p *retry.Policy, n int) { p.MaxAttempts = n })
	case "order":
		return orderSetting(val)
	}
	return nil, fmt.Errorf("unknown setting %q (known: failover-wait, max-wait, deadline, tries, attempts, order)", k)
}

// orderSetting reorders the chain: "reverse" or target numbers from 1.
func orderSetting(val string) (func(*Config) error, error) {
	if val == "reverse" {
		return func(c *Config) error {
			c.Chain = slices.Clone(c.Chain)
			slices.Reverse(c.Chain)
			return nil
		}, nil
	}
	var idx []int
	for _, f := range strings.Split(val, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("order=%s: want reverse or target numbers from 1, e.g. 2,1", val)
		}
		idx = append(idx, n-1)
	}
	return func(c *Config) error {
		if len(idx) != len(c.Chain) {
			return fmt.Errorf("order=%s names %d targets; the chain has %d", val, len(idx), len(c.Chain))
		}
		out := make([]stream.Target, len(idx))
		seen := map[int]bool{}
		for i, n := range idx {
			if n >= len(c.Chain) || seen[n] {
				return fmt.Errorf("order=%s: each of 1 to %d once", val, len(c.Chain))
			}
			seen[n] = true
			out[i] = c.Chain[n]
		}
		c.Chain = out
		return nil
	}, nil
}

// withVariant returns cfg as a variant policy runs it, and the policy it
// runs as (the limitscope policy); a plain policy is returned unchanged.
func withVariant(cfg Config, policy string) (Config, string, error) {
	v, ok, err := parseVariant(policy)
	if !ok {
		return cfg, policy, nil
	}
	if err != nil {
		return cfg, policy, err
	}
	for _, f := range v.apply {
		if err := f(&cfg); err != nil {
			return cfg, policy, fmt.Errorf("variant %q: %w", policy, err)
		}
	}
	return cfg, PolicyLimitscope, nil
}
