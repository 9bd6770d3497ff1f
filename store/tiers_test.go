package store

import (
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// A chain's tiers, an attempt's served tier and its downgrade survive the
// records; a model whose "+" suffix is no tier of its provider stays the
// model's name.
func TestRecordsKeepTiers(t *testing.T) {
	start := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	flex := stream.Target{Provider: "openai", Model: "gpt-5.4-mini", Tier: "flex"}
	def := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	prio := stream.Target{Provider: "gemini", Account: "team", Model: "gemini-3.8-flash", Tier: "priority"}
	odd := stream.Target{Provider: "deepseek", Model: "odd+name"}
	chain := []stream.Target{flex, def}
	c := &Call{ID: 1, CallID: "x", Started: start, Ended: start.Add(time.Second), Outcome: retry.OutcomeOK, Chain: append(chain, odd), ServedBy: &def}
	dc, err := decodeCall(make([]byte, 12), encodeCall(c), false)
	if err != nil || len(dc.Chain) != 3 || dc.Chain[0] != flex || dc.Chain[1] != def || dc.Chain[2] != odd || *dc.ServedBy != def {
		t.Fatalf("call: %+v %v", dc.Chain, err)
	}
	at := retry.Attempt{N: 1, Target: prio, Class: stream.ClassOK, StartedAt: start, ServedTier: "standard", Downgraded: true}
	got, err := decodeAttempt([]byte("k"), encodeAttempt(&at, start, chain), start, chain)
	if err != nil || got.Target != prio || got.ServedTier != "standard" || !got.Downgraded {
		t.Fatalf("attempt: %+v %v", got, err)
	}
	j := AttemptToJSON(&got)
	if j.Tier != "priority" || j.ServedTier != "standard" || !j.Downgraded {
		t.Errorf("json: %+v", j)
	}
	fc := retry.Attempt{N: 1, Target: flex, Class: stream.ClassFlexCapacity, Status: 429, StartedAt: start}
	got, err = decodeAttempt([]byte("k"), encodeAttempt(&fc, start, chain), start, chain)
	if err != nil || got.Class != stream.ClassFlexCapacity || got.Target != flex || got.ServedTier != "" {
		t.Fatalf("flex attempt: %+v %v", got, err)
	}
	if classBit(stream.ClassFlexCapacity) == classOther {
		t.Errorf("flex_capacity has no class bit of its own")
	}
}
