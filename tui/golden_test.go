package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// screens are the key screens, each reached from a fresh harness.
var screens = []struct {
	name string
	opts func() Options
	do   func(h *harness)
}{
	{"first_start_simulated", simOpts, func(h *harness) {}},
	{"stream_in_progress", simOpts, func(h *harness) {
		h.typeText("Summarize the incident in two lines.")
		h.press("enter")
		h.until("streaming", func() bool { return strings.Contains(h.screen(), "Half an ans") })
	}},
	{"retry_after_countdown", simOpts, func(h *harness) {
		h.typeText("Summarize the incident in two lines.")
		h.press("enter")
		h.until("the wait", h.m.waiting)
		h.tick(7 * time.Second)
	}},
	{"failover", simOpts, func(h *harness) {
		h.typeText("Summarize the incident in two lines.")
		h.press("enter")
		h.idle()
		h.tick(8 * time.Second)
	}},
	{"quota_stop", simOpts, func(h *harness) {
		h.typeText("Summarize the incident in two lines.")
		h.press("enter")
		h.idle()
	}},
	{"daily_quota_stop", func() Options {
		o := simOpts()
		o.Chain = []stream.Target{gemini, anthropic}
		o.Targets = []TargetInfo{{Target: gemini, Available: true}, {Target: anthropic, Available: true}, {Target: openai, Available: true}}
		return o
	}, func(h *harness) {
		h.typeText("Summarize the incident in two lines.")
		h.press("enter")
		h.idle()
	}},
	{"cancelled_mid_stream", simOpts, func(h *harness) {
		h.typeText("Summarize the incident in two lines.")
		h.press("enter")
		h.until("streaming", func() bool { return strings.Contains(h.screen(), "Half an ans") })
		h.press("esc")
		h.idle()
		h.press("t") // esc left the input: t is the timeline
		h.press("t")
	}},
	{"history", func() Options { o := simOpts(); o.History = goldenHistory(); return o }, func(h *harness) {
		h.press("tab")
		h.press("h")
		h.until("the list", func() bool { return len(h.m.hist.calls) > 0 })
	}},
	{"help", simOpts, func(h *harness) {
		h.press("tab")
		h.press("?")
	}},
	// The help of each other view (help_honesty_test.go checks that each
	// shows every binding of its view).
	{"help_attempts", helpOpts, helpOpeners[1].open},
	{"help_targets", helpOpts, helpOpeners[2].open},
	{"help_faults", helpOpts, helpOpeners[3].open},
	{"help_timeline", helpOpts, helpOpeners[4].open},
	{"help_history", helpOpts, helpOpeners[5].open},
}

func simOpts() Options {
	return Options{Simulated: true, Scenario: "steady", Faults: &fakeFaults{}}
}

func goldenHistory() *fakeHistory {
	return &fakeHistory{calls: []CallSummary{
		{ID: "140200-1", Time: t0, PromptHead: "Summarize the incident in two lines.", Outcome: retry.OutcomeOK, ServedBy: "anthropic/claude-haiku-5-5", Attempts: 2, Duration: 2100 * time.Millisecond},
		{ID: "140130-2", Time: t0.Add(-30 * time.Second), PromptHead: "What is our p95?", Outcome: retry.OutcomeStopped, Target: "openai/gpt-5.4-mini", Attempts: 1, Duration: 310 * time.Millisecond},
		{ID: "140101-3", Time: t0.Add(-59 * time.Second), PromptHead: "Write a haiku about rate limits.", Outcome: retry.OutcomeCancelled, Target: "openai/gpt-5.4-mini", Attempts: 3, Duration: 24 * time.Second},
	}}
}

func scriptFor(name string) []script {
	switch name {
	case "stream_in_progress":
		return []script{streamUntilCancel}
	case "retry_after_countdown":
		return []script{waitScript}
	case "failover":
		return []script{failoverScript}
	case "quota_stop":
		return []script{quotaScript}
	case "cancelled_mid_stream":
		return []script{cancelMidStream}
	case "daily_quota_stop":
		return []script{dailyQuotaScript}
	}
	return nil
}

// TestGolden pins the key screens at 120x40 and 80x24 with colour stripped,
// the narrow one being 80x24 (targets collapsed).
func TestGolden(t *testing.T) {
	for _, sc := range screens {
		for _, sz := range [][2]int{{120, 40}, {80, 24}} {
			t.Run(fmt.Sprintf("%s/%dx%d", sc.name, sz[0], sz[1]), func(t *testing.T) {
				h := newHarness(t, sz[0], sz[1], sc.opts(), scriptFor(sc.name)...)
				sc.do(h)
				h.checkFrame()
				golden.RequireEqual(t, h.screen())
			})
		}
	}
}

// TestGoldenColour pins colours for light and dark terminals on two screens.
func TestGoldenColour(t *testing.T) {
	for _, name := range []string{"first_start_simulated", "failover"} {
		for _, dark := range []bool{true, false} {
			mode := "light"
			if dark {
				mode = "dark"
			}
			t.Run(name+"/"+mode, func(t *testing.T) {
				var sc = screens[0]
				for _, s := range screens {
					if s.name == name {
						sc = s
					}
				}
				h := newHarness(t, 120, 40, sc.opts(), scriptFor(name)...)
				if !dark {
					h.send(tea.BackgroundColorMsg{Color: lightGrey{}})
				}
				sc.do(h)
				golden.RequireEqual(t, h.m.View().Content)
			})
		}
	}
}

func TestGoldenNoColourIsPlain(t *testing.T) {
	o := simOpts()
	o.NoColor = true
	h := newHarness(t, 120, 40, o, failoverScript)
	h.typeText("x")
	h.press("enter")
	h.idle()
	v := h.m.View().Content
	if strings.Contains(v, "\x1b[38") || strings.Contains(v, "\x1b[48") {
		t.Errorf("NO_COLOR frame has colour")
	}
	if !strings.Contains(ansi.Strip(v), "WAITING") || !strings.Contains(ansi.Strip(v), "served by anthropic") {
		t.Errorf("NO_COLOR frame lost words")
	}
}
