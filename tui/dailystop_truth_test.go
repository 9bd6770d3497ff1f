package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// TestDailyStopSaysWhenItEnds: a quota stop with a known reset says when it
// ends and counts down, never "a person must act" or "needs a person"; the
// provider's long message takes at most two lines of the targets pane; the
// window that ran out has a gauge.
func TestDailyStopSaysWhenItEnds(t *testing.T) {
	o := simOpts()
	o.Chain = []stream.Target{gemini, anthropic}
	o.Targets = []TargetInfo{{Target: gemini, Available: true}, {Target: anthropic, Available: true}}
	h := newManualHarness(t, 120, 40, o, dailyQuotaScript)
	h.typeText("hi")
	h.press("enter")
	h.settle()
	s := h.screen()
	for _, bad := range []string{"a person must act", "needs a person"} {
		if strings.Contains(s, bad) {
			t.Errorf("a stop that resets by itself says %q:\n%s", bad, s)
		}
	}
	if !strings.Contains(s, "resets 14:34 (in 32m51s)") || !strings.Contains(s, "quota ░░░░░░░░ 0 left") {
		t.Fatalf("no reset countdown or no gauge of the spent window:\n%s", s)
	}
	lines := strings.Split(s, "\n")
	stopped, gauge := -1, -1
	for i, l := range lines {
		if strings.Contains(l, "STOPPED") && stopped < 0 {
			stopped = i
		}
		if strings.Contains(l, "quota ░") && gauge < 0 {
			gauge = i
		}
	}
	if n := gauge - stopped - 1; n > 2 {
		t.Errorf("the provider's message takes %d lines of the targets pane, want 2 at most:\n%s", n, s)
	}
	h.tick(time.Minute)
	if !strings.Contains(h.screen(), "resets 14:34 (in 31m51s)") {
		t.Errorf("the reset does not count down:\n%s", h.screen())
	}
}
