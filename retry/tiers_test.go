package retry_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/stream"
)

// TestFlexCapacityFailsOverToDefaultTier checks a flex target whose
// capacity is short gets short jittered retries (FlexTries requests, the
// backoff under FlexBackoffCap), then the call moves on to the same model
// at the default tier, which serves it.
func TestFlexCapacityFailsOverToDefaultTier(t *testing.T) {
	flex := stream.Target{Provider: "openai", Model: "gpt-5.4-mini", Tier: "flex"}
	def := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	short := retrytest.Fail(429, stream.ClassFlexCapacity, "")
	d := retrytest.NewDoer().Always(flex.String(), short).Script(def.String(), retrytest.OK("served"))
	e, clk := newEngine(t, d)
	e.Rand = func() float64 { return 0.99 }
	c := call(flex, def)
	c.Policy = retry.Policy{TriesPerTarget: 2, FlexTries: 3, FlexBackoffCap: time.Second, BackoffCap: 20 * time.Second, BackoffBase: 500 * time.Millisecond}
	res, _ := runCall(e, c)
	if res.Outcome != retry.OutcomeOK || servedBy(res) != def.String() {
		t.Fatalf("outcome %s served by %q, want ok by %s", res.Outcome, servedBy(res), def)
	}
	if n := d.Count(flex.String()); n != 3 {
		t.Errorf("flex requests = %d, want 3 (FlexTries, past TriesPerTarget 2)", n)
	}
	// Two retries: full jitter of 500ms then 1s (the cap), at rand 0.99.
	if got, want := clk.Slept(), time.Duration(0.99*float64(500*time.Millisecond))+time.Duration(0.99*float64(time.Second)); got != want {
		t.Errorf("slept %v, want %v", got, want)
	}
	for _, a := range res.Attempts[:3] {
		if a.Class != stream.ClassFlexCapacity {
			t.Errorf("attempt %d class %s, want flex_capacity", a.N, a.Class)
		}
	}
}

// TestServedTierOnAttempt checks the served tier reaches the attempt, and
// a priority request served at the default tier is a downgrade.
func TestServedTierOnAttempt(t *testing.T) {
	prio := stream.Target{Provider: "openai", Model: "gpt-5.4-mini", Tier: "priority"}
	ok := retrytest.OK("hi")
	ok.ServedTier = "default"
	d := retrytest.NewDoer().Script(prio.String(), ok)
	e, _ := newEngine(t, d)
	res, _ := runCall(e, call(prio))
	if a := res.Attempts[0]; a.ServedTier != "default" || !a.Downgraded {
		t.Fatalf("attempt served %q downgraded %v", a.ServedTier, a.Downgraded)
	}
}

// TestBedrockTiersShareOneGate checks, on the fake clock, that Bedrock's
// priority, default and flex targets of one model wait at one pacing
// gate: a window spent by the default tier paces the flex and priority
// requests, while a reserved target (its own capacity) is not held.
func TestBedrockTiersShareOneGate(t *testing.T) {
	m := "anthropic.claude-haiku-5-5-v1:0"
	def := stream.Target{Provider: "bedrock", Model: m}
	flex, prio, res := def, def, def
	flex.Tier, prio.Tier, res.Tier = "flex", "priority", "reserved"
	// 60 a minute, none left: the next request fits in 1s.
	first := retrytest.WithLimits(retrytest.OK("a"), reqWindow(60, 0, t0.Add(time.Minute)))
	d := retrytest.NewDoer().Script(def.String(), first).
		Always(flex.String(), retrytest.OK("f")).Always(prio.String(), retrytest.OK("p")).Always(res.String(), retrytest.OK("r"))
	e, clk := pacedEngine(t, d)
	if r, _ := runCall(e, call(def)); r.Outcome != retry.OutcomeOK {
		t.Fatal(r.Outcome)
	}
	if r, _ := runCall(e, call(res)); r.Outcome != retry.OutcomeOK || clk.Slept() != 0 {
		t.Fatalf("reserved: %s after %v of pacing, want none", r.Outcome, clk.Slept())
	}
	if r, _ := runCall(e, call(flex)); r.Outcome != retry.OutcomeOK || clk.Slept() != time.Second {
		t.Fatalf("flex: %s after %v of pacing, want 1s (the default tier's window)", r.Outcome, clk.Slept())
	}
	if s, s2 := e.Pacer.State(prio), e.Pacer.State(def); s != s2 {
		t.Errorf("priority and default gates differ: %+v %+v", s, s2)
	}
}

// TestTierNote checks the sentence of an attempt's served tier.
func TestTierNote(t *testing.T) {
	prio := stream.Target{Provider: "gemini", Model: "m", Tier: "priority"}
	for _, c := range []struct {
		a    retry.Attempt
		want string
	}{
		{retry.Attempt{Target: prio, ServedTier: "standard", Downgraded: true}, "served standard, downgraded from priority"},
		{retry.Attempt{Target: prio, ServedTier: "priority"}, "served priority"},
		{retry.Attempt{Target: prio}, ""},
	} {
		if got := c.a.TierNote(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.a, got, c.want)
		}
	}
}

// TestFlexChainDeadline checks, in a synctest bubble, that a chain with a
// flex target and no chosen deadline gets the flex timeout on top of the
// default deadline (a slow flex answer still leaves the usual budget),
// while a chosen deadline, or a chain without flex, keeps its own.
func TestFlexChainDeadline(t *testing.T) {
	clearEnv(t)
	flex := stream.Target{Provider: "openai", Model: "gpt-5.4-mini", Tier: "flex"}
	def := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	if got := flex.FlexTimeout(); got != 15*time.Minute {
		t.Fatalf("openai's flex timeout %v, want 15m", got)
	}
	for _, c := range []struct {
		name  string
		chain []stream.Target
		pol   retry.Policy
		want  time.Duration
	}{
		{"default deadline, flex chain", []stream.Target{flex}, retry.Policy{Deadline: 3 * time.Minute, DeadlineIsDefault: true}, 18 * time.Minute},
		{"chosen deadline, flex chain", []stream.Target{flex}, retry.Policy{Deadline: 3 * time.Minute}, 3 * time.Minute},
		{"default deadline, no flex", []stream.Target{def}, retry.Policy{Deadline: 3 * time.Minute, DeadlineIsDefault: true}, 3 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := retry.CallDeadline(c.pol, c.chain); got != c.want {
				t.Errorf("CallDeadline %v, want %v", got, c.want)
			}
			synctest.Test(t, func(t *testing.T) {
				d := retrytest.NewDoer().ScriptFunc(c.chain[0].String(), hang)
				e := &retry.Engine{Doer: d, Clock: retry.WallClock{}}
				start := time.Now()
				res := e.Run(t.Context(), retry.Call{Chain: c.chain, Prompt: "x", Policy: c.pol}, nil)
				if took := time.Since(start); res.Outcome != retry.OutcomeGaveUp || took != c.want || d.Total() != 1 {
					t.Fatalf("%s after %v, %d requests; want gave_up after %v", res.Outcome, took, d.Total(), c.want)
				}
				if res.Err == nil || !strings.Contains(res.Err.Message, "the call's deadline ("+c.want.String()+")") {
					t.Errorf("the deadline's words: %v", res.Err)
				}
			})
		})
	}
}
