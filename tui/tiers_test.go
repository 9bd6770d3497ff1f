package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// A tier's rows say which tier was asked, a flex capacity failure its
// class, and a downgrade is named on the row and on the target's line.
func TestTierRowsAndLine(t *testing.T) {
	prio := stream.Target{Provider: "gemini", Model: "gemini-3.8-flash", Tier: "priority"}
	flex := stream.Target{Provider: "openai", Model: "gpt-5.4-mini", Tier: "flex"}
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	down := &logRow{at: at, attempt: retry.Attempt{Target: prio, Status: 200, Class: stream.ClassOK, ServedTier: "standard", Downgraded: true}}
	short := &logRow{at: at, attempt: retry.Attempt{Target: flex, Status: 429, Class: stream.ClassFlexCapacity, Decision: retry.DecideFailover}}
	for _, narrow := range []bool{false, true} {
		if s := rowText(down, narrow, 16); !strings.Contains(s, "gemini+priority") || !strings.Contains(s, "DOWNGRADED to standard") {
			t.Errorf("downgraded row (narrow %v): %q", narrow, s)
		}
		if s := rowText(short, narrow, 16); !strings.Contains(s, "openai+flex") || !strings.Contains(s, "flex_capacity") || !strings.Contains(s, "fail over") {
			t.Errorf("flex row (narrow %v): %q", narrow, s)
		}
	}
	if b := tierBrief(prio, tierState{served: "standard", downgraded: true}); b != "DOWNGRADED: served standard, asked priority" {
		t.Errorf("brief %q", b)
	}
	if b := tierBrief(prio, tierState{served: "priority"}); b != "served priority" {
		t.Errorf("brief %q", b)
	}
	if b := tierBrief(stream.Target{Provider: "openai", Model: "m"}, tierState{served: "default"}); b != "" {
		t.Errorf("a target asking no tier: brief %q", b)
	}
	if e := errSentence(&short.attempt); e != "openai's flex capacity is short" {
		t.Errorf("sentence %q", e)
	}
}

// The conversation's served-by badge says a downgrade.
func TestServedBadgeDowngrade(t *testing.T) {
	prio := stream.Target{Provider: "gemini", Model: "gemini-3.8-flash", Tier: "priority"}
	tr := &turn{primary: prio, blocks: []*block{{kind: blockText}}}
	res := &retry.Result{ServedBy: &prio, Attempts: []retry.Attempt{{Target: prio, Class: stream.ClassOK, ServedTier: "standard", Downgraded: true}}}
	served(tr, res)
	if h := tr.blocks[0].header; h != "served by gemini/gemini-3.8-flash+priority · served standard, downgraded from priority" {
		t.Errorf("badge %q", h)
	}
}
