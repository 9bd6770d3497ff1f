package store

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

func TestCardsStoredByTargetOldestFirst(t *testing.T) {
	db := filepath.Join(t.TempDir(), "h.db")
	if got, err := Cards(db, "", 0); err != nil || len(got) != 0 {
		t.Fatalf("no file: %v %v", got, err)
	}
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for i, tg := range []string{"openai/m", "openai@team/m", "openai/m", "openai/m2"} {
		if err := SaveCard(db, tg, at.Add(time.Duration(i)*time.Minute), []byte(`{"n":`+string(rune('0'+i))+`}`)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Cards(db, "openai/m", 0)
	if err != nil || len(got) != 2 || string(got[0].JSON) != `{"n":0}` || string(got[1].JSON) != `{"n":2}` || !got[1].At.Equal(at.Add(2*time.Minute)) {
		t.Fatalf("openai/m: %+v %v", got, err)
	}
	if got, _ := Cards(db, "openai@team/m", 0); len(got) != 1 || got[0].Target != "openai@team/m" {
		t.Errorf("the account's cards: %+v", got)
	}
	if got, _ := Cards(db, "", 2); len(got) != 2 {
		t.Errorf("limit 2 of all: %d", len(got))
	}
	if err := SaveCard(db, "openai/m", at, make([]byte, MaxCardSize+1)); err == nil {
		t.Error("an oversized card was stored")
	}
}

// An attempt's first-text time, thinking and reasoning tokens, and the
// accounts of its chain's targets, survive the record; a served-by target
// keeps its account among two accounts of one provider.
func TestRecordsKeepThinkingAndAccounts(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a := stream.Target{Provider: "openai", Account: "a", Model: "m"}
	b := stream.Target{Provider: "openai", Account: "b", Model: "m"}
	chain := []stream.Target{a, b}
	at := retry.Attempt{N: 1, Target: b, Class: stream.ClassOK, StartedAt: start, TTFT: 300 * time.Millisecond,
		TTFText: 2 * time.Second, Thinking: true, ReasoningTokens: 150}
	got, err := decodeAttempt([]byte("k"), encodeAttempt(&at, start, chain), start, chain)
	if err != nil || got.TTFText != at.TTFText || !got.Thinking || got.ReasoningTokens != 150 || got.Target != b {
		t.Fatalf("attempt: %+v %v", got, err)
	}
	other := stream.Target{Provider: "openai", Account: "c", Model: "m"}
	got, err = decodeAttempt([]byte("k"), encodeAttempt(&retry.Attempt{N: 2, Target: other, StartedAt: start}, start, chain), start, chain)
	if err != nil || got.Target != other {
		t.Fatalf("a target outside the chain: %+v %v", got.Target, err)
	}
	c := &Call{ID: 1, CallID: "x", Started: start, Ended: start.Add(time.Second), Outcome: retry.OutcomeOK, Chain: chain, ServedBy: &b}
	k := make([]byte, 12)
	dc, err := decodeCall(k, encodeCall(c), false)
	if err != nil || len(dc.Chain) != 2 || dc.Chain[0] != a || dc.Chain[1] != b || dc.ServedBy == nil || *dc.ServedBy != b {
		t.Fatalf("call: %+v %v", dc, err)
	}
}
