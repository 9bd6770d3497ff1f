package tui

import (
	"strings"
	"testing"

	"github.com/limitscope/limitscope/theme"
)

// TestEscCancelsAndLeavesTheInput: esc during a stream cancels the call and
// leaves the input, so letters typed after it are keys ("i" focuses the
// input again), never the start of a prompt.
func TestEscCancelsAndLeavesTheInput(t *testing.T) {
	h := newHarness(t, 120, 40, simOpts(), cancelMidStream)
	h.typeText("first")
	h.press("enter")
	h.until("streaming", func() bool { return strings.Contains(h.screen(), "Half an ans") })
	h.press("esc")
	h.idle()
	if h.m.focus == focusInput {
		t.Fatal("esc cancelled the call but left the focus in the input")
	}
	h.typeText("ilong two")
	if got := h.m.input.Value(); got != "long two" {
		t.Errorf("input holds %q after i then \"long two\", want \"long two\"", got)
	}
}

// TestCancelIsXEverywhere: a cancel that came after the first bytes is drawn
// X (cancelled), not B (broken stream), in the strips and the timeline, and
// the conversation says cancelled, not broken.
func TestCancelIsXEverywhere(t *testing.T) {
	if got := theme.MarkLetter("cancelled", true); got != "X" {
		t.Fatalf("a mid-stream cancel's mark is %q, want X", got)
	}
	h := newHarness(t, 120, 40, simOpts(), cancelMidStream)
	h.typeText("first")
	h.press("enter")
	h.until("streaming", func() bool { return strings.Contains(h.screen(), "Half an ans") })
	h.press("esc")
	h.idle()
	s := h.screen()
	if strings.Contains(s, "stream broke") {
		t.Errorf("a cancel is told as a broken stream:\n%s", s)
	}
	if !strings.Contains(strings.Join(strings.Fields(s), " "), "X cancelled") {
		t.Errorf("the strips' legend does not say what X is:\n%s", s)
	}
	x := h.m.tl.atts[len(h.m.tl.atts)-1]
	if got := markOf(&x.a); got != "X" {
		t.Errorf("timeline mark %q, want X", got)
	}
	h.press("t")
	if s := h.screen(); !strings.Contains(s, "attempt 1 of call 140200-1 · X") {
		t.Errorf("the timeline does not draw the cancel as X:\n%s", s)
	}
}
