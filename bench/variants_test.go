package bench

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// overloadedDoer answers 503 on its overloaded provider, and a clean
// answer elsewhere; it counts the requests each provider got.
type overloadedDoer struct {
	overloaded string
	bad, good  atomic.Int64
}

func (d *overloadedDoer) Do(_ context.Context, req stream.Request, _ func(string)) stream.Result {
	if req.Target.Provider == d.overloaded {
		d.bad.Add(1)
		return stream.Result{Status: 503, Err: &stream.Error{Class: stream.ClassOverload, Status: 503}}
	}
	d.good.Add(1)
	return stream.Result{Status: 200, Text: "ok", FinishReason: "stop"}
}

func (*overloadedDoer) Scope(t stream.Target, s stream.Scope) string {
	return string(s) + ":" + t.Provider
}

var fallback = stream.Target{Provider: "anthropic", Model: "claude-haiku-4-5"}

// A variant runs the real core with its settings changed: reversing the
// chain sends nothing to the overloaded primary; one try per target fails
// over after one overload instead of two.
func TestVariantsChangeTheCoresSettings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		run := func(policy string) (*overloadedDoer, PolicyResult) {
			d := &overloadedDoer{overloaded: "openai"}
			cfg := Config{Chain: []stream.Target{target, fallback}, Requests: 20, Concurrency: 2, Rand: half()}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			r, _ := RunPolicy(t.Context(), cfg, policy, d)
			return d, r
		}
		d, r := run(PolicyLimitscope)
		if r.Completed != 20 || d.bad.Load() != 40 {
			t.Errorf("limitscope: completed %d, %d requests to the overloaded primary, want 20 and 40 (two tries each)", r.Completed, d.bad.Load())
		}
		d, r = run("limitscope:order=reverse")
		if r.Completed != 20 || d.bad.Load() != 0 || r.Policy != "limitscope:order=reverse" {
			t.Errorf("order=reverse: %s completed %d, %d requests to openai, want 20 and 0", r.Policy, r.Completed, d.bad.Load())
		}
		d, r = run("limitscope:tries=1")
		if r.Completed != 20 || d.bad.Load() != 20 {
			t.Errorf("tries=1: completed %d, %d requests to openai, want 20 and 20", r.Completed, d.bad.Load())
		}
		d, r = run("limitscope:order=2,1:attempts=1")
		if r.Completed != 20 || d.bad.Load() != 0 {
			t.Errorf("order=2,1: completed %d, %d to openai", r.Completed, d.bad.Load())
		}
	})
}

func TestParseVariants(t *testing.T) {
	for _, ok := range []string{"limitscope:failover-wait=2s", "limitscope:max-wait=1m:deadline=30s", "limitscope:tries=1:attempts=3", "limitscope:order=reverse"} {
		if !ValidPolicy(ok) {
			t.Errorf("%q is not valid", ok)
		}
	}
	for _, bad := range []string{"limitscope:", "limitscope:bogus=1", "limitscope:failover-wait=fast", "limitscope:tries=0", "limitscope:order=x", "limitscope:deadline=-1s", "naive:tries=1"} {
		if ValidPolicy(bad) {
			t.Errorf("%q is valid", bad)
		}
	}
	cfg := Config{Chain: []stream.Target{target, fallback}, Requests: 1, Concurrency: 1, Policies: []string{"limitscope:order=1,2,3"}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "the chain has 2") {
		t.Errorf("an order naming 3 targets of 2: %v", err)
	}
	cfg.Policies = []string{"limitscope:order=1,1"}
	if err := cfg.Validate(); err == nil {
		t.Error("an order naming a target twice is valid")
	}
	cfg.Policies = []string{"limitscope:speed=9"}
	if err := cfg.Validate(); !errors.Is(err, errUnknownPolicy) || !strings.Contains(err.Error(), "unknown setting") {
		t.Errorf("an unknown setting: %v", err)
	}
	c, kind, err := withVariant(Config{Chain: []stream.Target{target, fallback}}, "limitscope:failover-wait=3s:order=reverse")
	if err != nil || kind != PolicyLimitscope || c.Retry.FailoverWait != 3*time.Second || c.Chain[0] != fallback {
		t.Errorf("withVariant: %v %s %+v", err, kind, c)
	}
}
