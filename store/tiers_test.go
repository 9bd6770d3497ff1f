package store

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"
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

// oldAnthropicAttempt is an attempt record written by the encoder that
// kept four limit windows (before the priority tier's windows): served
// at priority, with requests and input-token windows.
const oldAnthropicAttempt = "02480100c8010100000000000000000180a8d6b90780bcc1960b010180a8d6b9070513646280a8d6b9071be0d40390c50380d0acf30e087072696f72697479"

// A record written before the priority windows reads as it did, and
// salvage still takes it as whole.
func TestOldAttemptRecordReadsUnchanged(t *testing.T) {
	start := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	tg := stream.Target{Provider: "anthropic", Model: "claude-sonnet-4-5", Tier: "auto"}
	v, err := hex.DecodeString(oldAnthropicAttempt)
	if err != nil {
		t.Fatal(err)
	}
	got, rest, err := decodeAttemptRest([]byte("k"), v, start, []stream.Target{tg})
	if err != nil || rest != 0 {
		t.Fatalf("decode: %v, %d bytes left", err, rest)
	}
	l := got.Limits
	if got.Target != tg || got.ServedTier != "priority" || got.Status != 200 || got.Duration != 1500*time.Millisecond || l == nil {
		t.Fatalf("attempt: %+v", got)
	}
	if !l.At.Equal(start.Add(2*time.Second)) || l.Tokens != nil || l.OutputTokens != nil || l.PriorityInputTokens != nil || l.PriorityOutputTokens != nil {
		t.Fatalf("limits: %+v", l)
	}
	if r := l.Requests; r.Limit != 50 || r.Remaining != 49 || !r.Reset.Equal(start.Add(3*time.Second)) {
		t.Errorf("requests: %+v", r)
	}
	if in := l.InputTokens; in.Limit != 30000 || in.Remaining != 29000 || !in.Rounded || !in.Reset.Equal(start.Add(4*time.Second)) {
		t.Errorf("input tokens: %+v", in)
	}
	// Re-encoded by today's encoder, the record is byte for byte the same:
	// an attempt without priority windows adds nothing.
	if again := hex.EncodeToString(encodeAttempt(&got, start, []stream.Target{tg})); again != oldAnthropicAttempt {
		t.Errorf("re-encoded:\n%s\nwant\n%s", again, oldAnthropicAttempt)
	}
}

// The priority tier's windows survive the records, beside the regular
// ones, and in the JSON export.
func TestRecordsKeepPriorityWindows(t *testing.T) {
	start := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	tg := stream.Target{Provider: "anthropic", Model: "claude-sonnet-4-5"}
	at0 := start.Add(time.Second)
	l := &stream.Limits{At: at0,
		InputTokens:          &stream.Window{Limit: 30000, Remaining: 29000, HasLimit: true, HasRemaining: true, Rounded: true},
		PriorityInputTokens:  &stream.Window{Limit: 400000, Remaining: 388000, HasLimit: true, HasRemaining: true, Rounded: true, Reset: at0.Add(9 * time.Second)},
		PriorityOutputTokens: &stream.Window{Limit: 80000, Remaining: 0, HasLimit: true, HasRemaining: true, Reset: at0.Add(42 * time.Second)},
	}
	at := retry.Attempt{N: 1, Target: tg, Class: stream.ClassOK, Status: 200, StartedAt: at0, ServedTier: "priority", Limits: l}
	got, rest, err := decodeAttemptRest([]byte("k"), encodeAttempt(&at, start, nil), start, nil)
	if err != nil || rest != 0 || got.Limits == nil {
		t.Fatalf("decode: %+v %v, %d bytes left", got, err, rest)
	}
	g := got.Limits
	if g.InputTokens == nil || g.InputTokens.Remaining != 29000 || g.Requests != nil {
		t.Errorf("regular windows: %+v", g)
	}
	for _, c := range []struct{ got, want *stream.Window }{{g.PriorityInputTokens, l.PriorityInputTokens}, {g.PriorityOutputTokens, l.PriorityOutputTokens}} {
		if c.got == nil || c.got.Limit != c.want.Limit || c.got.Remaining != c.want.Remaining || c.got.Rounded != c.want.Rounded ||
			c.got.HasRemaining != c.want.HasRemaining || !c.got.Reset.Equal(c.want.Reset) {
			t.Errorf("priority window: %+v, want %+v", c.got, c.want)
		}
	}
	b, err := json.Marshal(AttemptToJSON(&got))
	if err != nil || !strings.Contains(string(b), `"priority_input_tokens":{"limit":400000,"remaining":388000`) ||
		!strings.Contains(string(b), `"priority_output_tokens":{"limit":80000,"remaining":0`) {
		t.Errorf("export: %s %v", b, err)
	}
}

// A call over a flex chain with the default deadline is recorded with the
// deadline it ran under (the flex timeout on top); a chosen one as chosen.
func TestRecordsFlexChainDeadline(t *testing.T) {
	clearEnv(t)
	path := tempDB(t)
	flex := stream.Target{Provider: "openai", Model: "gpt-5.4-mini", Tier: "flex"}
	def := okSpec("c0", t0, flex)
	def.policy = &retry.Policy{Deadline: 3 * time.Minute, DeadlineIsDefault: true}
	chosen := okSpec("c1", t0.Add(time.Minute), flex)
	chosen.policy = &retry.Policy{Deadline: time.Minute}
	recordAll(t, path, SessionInfo{Mode: ModeSimulated, Command: "send"}, def, chosen)
	rd := &Reader{Path: path}
	for id, want := range map[string]time.Duration{"1": 18 * time.Minute, "2": time.Minute} {
		got, err := rd.Show(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Policy.Deadline != want {
			t.Errorf("call %s: deadline %v, want %v", id, got.Policy.Deadline, want)
		}
	}
}
