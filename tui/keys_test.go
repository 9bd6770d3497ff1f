package tui

import (
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// TestKeyOfAnotherPaneSaysWhere: x in the conversation does not clear
// anything there; it says where it acts.
func TestKeyOfAnotherPaneSaysWhere(t *testing.T) {
	h := newHarness(t, 120, 40, simOpts())
	h.press("tab") // the conversation
	h.press("x")
	if h.m.mode != modeMain || !strings.Contains(h.m.status, "x acts in the targets pane") {
		t.Errorf("x in the conversation: mode %v, status %q", h.m.mode, h.m.status)
	}
	h.press("tab") // the attempt log: same
	h.press("p")
	if !strings.Contains(h.m.status, "p acts in the targets pane: probe") {
		t.Errorf("p in the attempt log: status %q", h.m.status)
	}
	// A key no view binds does nothing.
	h.m.status = ""
	h.press("z")
	if h.m.status != "" {
		t.Errorf("z said %q", h.m.status)
	}
}

// TestHelpGoesBackToItsView: ? in an overlay shows that overlay's keys, and
// esc goes back to it.
func TestHelpGoesBackToItsView(t *testing.T) {
	h := newHarness(t, 120, 40, helpOpts())
	h.press("tab")
	h.press("t")
	h.press("?")
	if h.m.mode != modeHelp || !strings.Contains(h.screen(), "keys · timeline") {
		t.Fatalf("? in the timeline:\n%s", h.screen())
	}
	h.press("esc")
	if h.m.mode != modeTimeline {
		t.Errorf("esc from the timeline's help went to mode %v", h.m.mode)
	}
	h.press("esc")
	h.press("?")
	h.press("?") // ? closes the help too
	if h.m.mode != modeMain || h.m.focus != focusConversation {
		t.Errorf("? twice: mode %v focus %v", h.m.mode, h.m.focus)
	}
}

// TestFaultsAsData: each default fault is injected with its row's
// parameters (the numbers that used to live in a switch).
func TestFaultsAsData(t *testing.T) {
	want := map[string]FaultRequest{
		"rate_limit":    {Provider: "openai", Kind: "rate_limit", RetryAfter: 20 * time.Second},
		"overload":      {Provider: "openai", Kind: "overload", Count: 3, For: 15 * time.Second},
		"failover-demo": {Provider: "openai", Kind: "failover-demo", RetryAfter: time.Minute},
	}
	for i, fk := range DefaultFaultKinds() {
		ff := &fakeFaults{}
		h := newHarness(t, 120, 40, Options{Simulated: true, Faults: ff})
		h.press("tab")
		h.press("d")
		if s := h.screen(); !strings.Contains(s, fk.Name) || !strings.Contains(s, fk.Description) || !strings.Contains(s, fk.Lasts) {
			t.Errorf("the menu lacks %s's row:\n%s", fk.Name, s)
		}
		h.press(faultDigits[i : i+1])
		h.until("the injection", func() bool { return strings.Contains(h.m.status, "Injected") })
		w, ok := want[fk.Name]
		if !ok {
			w = FaultRequest{Provider: "openai", Kind: fk.Name}
		}
		if len(ff.got) != 1 || ff.got[0] != w {
			t.Errorf("key %d injected %+v, want %+v", i+1, ff.got, w)
		}
	}
}

// TestMoreThanNineFaults: the tenth fault is on 0, every fault after it is
// reached with the cursor, and a digit with no row says so.
func TestMoreThanNineFaults(t *testing.T) {
	kinds := DefaultFaultKinds()
	for _, n := range []string{"reset", "hang", "context_length"} {
		kinds = append(kinds, FaultInfo{Name: n, Description: "the simulator's " + n, Lasts: "next request"})
	}
	ff := &fakeFaults{}
	h := newHarness(t, 80, 24, Options{Simulated: true, Faults: ff, FaultKinds: kinds})
	h.press("tab")
	h.press("d")
	h.press("0")
	h.until("the tenth", func() bool { return len(ff.requests()) == 1 })
	if got := ff.requests(); got[0].Kind != "reset" {
		t.Errorf("0 armed %q, want the tenth, reset", got[0].Kind)
	}
	h.press("d")
	for range kinds {
		h.send(tea.KeyPressMsg{Code: tea.KeyDown})
	}
	if s := h.screen(); !strings.Contains(s, "context_length") {
		t.Errorf("the cursor on the last fault does not show it:\n%s", s)
	}
	h.press("enter")
	h.until("the last", func() bool { return len(ff.requests()) == 2 })
	if got := ff.requests(); got[1].Kind != "context_length" {
		t.Errorf("enter on the last row armed %q", got[1].Kind)
	}

	few := newHarness(t, 120, 40, Options{Simulated: true, Faults: &fakeFaults{}, FaultKinds: kinds[:3]})
	few.press("tab")
	few.press("d")
	few.press("7")
	if few.m.mode != modeFaults || !strings.Contains(few.m.status, "No fault on 7: the menu lists 3.") {
		t.Errorf("7 on a menu of 3: mode %v, status %q", few.m.mode, few.m.status)
	}
}

// TestOneCurrentWait: the conversation's countdown and the targets pane's
// read the target's one current wait: when the pacer's hold extends it, or
// the engine ends it early, both say the same.
func TestOneCurrentWait(t *testing.T) {
	h := newHarness(t, 120, 40, Options{}, waitScript)
	h.typeText("hi")
	h.press("enter")
	h.until("the wait", h.m.waiting)
	h.tick(2 * time.Second)
	left := func() (conv, target string) {
		for _, l := range strings.Split(h.screen(), "\n") {
			if i := strings.Index(l, "⏳ openai says"); i >= 0 {
				conv = l[i:]
			}
			if strings.Contains(l, "████") || strings.Contains(l, "░░░░") {
				target = l
			}
		}
		return conv, target
	}
	if c, tg := left(); !strings.Contains(c, "18s left") || !strings.Contains(tg, "18s left") {
		t.Fatalf("after 2s of a 20s wait: conversation %q, target %q", c, tg)
	}
	now := h.clock.Now()
	h.send(targetStatesMsg{states: map[stream.Target]retry.TargetState{openai: {HasPacer: true,
		Pace: retry.PaceState{HoldUntil: now.Add(25 * time.Second), HoldSource: stream.SourceRetryAfter}}}})
	if c, tg := left(); !strings.Contains(c, "25s left") || !strings.Contains(tg, "25s left") {
		t.Errorf("the pacer's hold extended the wait: conversation %q, target %q", c, tg)
	}
	h.m.targets.waitEnd(&retry.Wait{Target: openai}, now)
	if h.m.targets.get(openai).wait.on(now) || h.m.targets.waitEnds(openai) != now {
		t.Errorf("the ended wait still runs until %v", h.m.targets.waitEnds(openai))
	}
	h.press("esc")
	h.idle()
}

// requests is what was injected so far.
func (f *fakeFaults) requests() []FaultRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]FaultRequest(nil), f.got...)
}
