package tui

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/theme"
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
	if e := errSentence(&short.attempt); e != "openai+flex's flex capacity is short" {
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

// The priority tier's windows are drawn as gauges of their own, under a
// heading, after the regular ones; a snapshot without them draws none.
func TestPriorityGauges(t *testing.T) {
	st := theme.New(true, false)
	l := &stream.Limits{
		InputTokens:          &stream.Window{Limit: 30000, Remaining: 29000, HasLimit: true, HasRemaining: true, Rounded: true},
		PriorityInputTokens:  &stream.Window{Limit: 400000, Remaining: 200000, HasLimit: true, HasRemaining: true, Rounded: true},
		PriorityOutputTokens: &stream.Window{Limit: 80000, Remaining: 0, HasLimit: true, HasRemaining: true, Rounded: true},
	}
	out := gauges(l, 40, t0, &st, "  ")
	plain := strings.Split(ansi.Strip(strings.Join(out, "\n")), "\n")
	want := []string{"  left of each limit (rounded)", "  in  ███████░ 29k/30k", "  priority tier", "  in  ████░░░░ 200k/400k", "  out ░░░░░░░░ 0/80k"}
	if len(plain) != len(want) {
		t.Fatalf("gauges:\n%s", strings.Join(plain, "\n"))
	}
	for i := range want {
		if strings.TrimRight(plain[i], " ") != want[i] {
			t.Errorf("line %d: %q, want %q", i, plain[i], want[i])
		}
	}
	if !strings.Contains(out[4], st.Warn.Render("░░░░░░░░")) {
		t.Errorf("an exhausted priority window is not drawn in the warning colour: %q", out[4])
	}
	l.PriorityInputTokens, l.PriorityOutputTokens = nil, nil
	if g := ansi.Strip(strings.Join(gauges(l, 40, t0, &st, "  "), "\n")); strings.Contains(g, "priority") {
		t.Errorf("no priority windows, yet:\n%s", g)
	}
}

// An Anthropic answer served at priority shows its priority windows on the
// target's card, beside the served tier.
func TestPriorityGaugesOnCard(t *testing.T) {
	claude := stream.Target{Provider: "anthropic", Model: "claude-sonnet-4-5", Tier: "auto"}
	script := func(ctx context.Context, e *emitter) retry.Result {
		a := e.start(claude)
		e.say("ok")
		a.Status, a.Class, a.ServedTier = 200, stream.ClassOK, "priority"
		a.Limits = &stream.Limits{At: t0,
			Requests:             &stream.Window{Limit: 50, Remaining: 49, HasLimit: true, HasRemaining: true},
			PriorityInputTokens:  &stream.Window{Limit: 400000, Remaining: 399000, HasLimit: true, HasRemaining: true, Rounded: true},
			PriorityOutputTokens: &stream.Window{Limit: 80000, Remaining: 79000, HasLimit: true, HasRemaining: true, Rounded: true},
		}
		e.finish(a)
		return e.end(retry.OutcomeOK, &claude, nil)
	}
	h := newHarness(t, 120, 40, Options{Chain: []stream.Target{claude}, Targets: []TargetInfo{{Target: claude, Available: true}}}, script)
	h.typeText("hi")
	h.press("enter")
	h.idle()
	h.until("the priority gauges", func() bool { return strings.Contains(h.screen(), "priority tier") })
	scr := h.screen()
	for _, s := range []string{"served priority", "req ", "49/50", "priority tier", "399k/400k", "79k/80k"} {
		if !strings.Contains(scr, s) {
			t.Errorf("the card lacks %q:\n%s", s, scr)
		}
	}
	if strings.Index(scr, "49/50") > strings.Index(scr, "priority tier") {
		t.Errorf("the priority windows come before the regular ones:\n%s", scr)
	}
}

// In a chain of one model's tiers the conversation's sentences say which
// tier retried, waited and failed over, and to which.
func TestSentencesNameTheTier(t *testing.T) {
	flex := stream.Target{Provider: "openai", Model: "gpt-5.4-mini", Tier: "flex"}
	def := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	other := stream.Target{Provider: "anthropic", Model: "claude-sonnet-4-5"}
	chain := []stream.Target{flex, def, other}
	a := retry.Attempt{Target: flex, Status: 429, Class: stream.ClassFlexCapacity, Decision: retry.DecideRetry}
	if s := decisionWords(&a, chain); s != "Retrying openai+flex after a wait." {
		t.Errorf("retry: %q", s)
	}
	a.Decision = retry.DecideFailover
	if s := decisionWords(&a, chain); s != "Failing over from openai/gpt-5.4-mini+flex to openai/gpt-5.4-mini." {
		t.Errorf("failover to the default tier: %q", s)
	}
	b := retry.Attempt{Target: def, Status: 529, Class: stream.ClassOverload, Decision: retry.DecideFailover}
	if s := decisionWords(&b, chain); s != "Failing over to anthropic/claude-sonnet-4-5." {
		t.Errorf("failover to another provider: %q", s)
	}
	if s := errSentence(&b); s != "openai is overloaded" {
		t.Errorf("a target asking no tier: %q", s)
	}
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		w    retry.Wait
		want string
	}{
		{retry.Wait{Target: flex, Duration: 2 * time.Second}, "⏳ backing off 2s before retrying openai+flex"},
		{retry.Wait{Target: flex, Duration: 2 * time.Second, Asked: 2 * time.Second, Source: stream.DelaySource("retry-after")}, "⏳ openai+flex says 2s"},
		{retry.Wait{Target: flex, Duration: time.Second, Pacing: true}, "⏳ pacing openai+flex:"},
	} {
		if s := waitHead(&c.w, now.Add(c.w.Duration), now); !strings.HasPrefix(s, c.want) {
			t.Errorf("wait: %q, want it to begin %q", s, c.want)
		}
	}
}
