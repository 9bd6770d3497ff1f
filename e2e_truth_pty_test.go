//go:build linux

package main

import (
	"strings"
	"testing"
)

// TestE2ECancelIsXAndLeavesTheInput: in the real console, esc during a long
// stream cancels it, the strip draws the cancel as X (not B, a broken
// stream), and the letters typed next are keys: "i" opens the input and
// only "long two" is the prompt.
func TestE2ECancelIsXAndLeavesTheInput(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eEnv(t, t.TempDir()), "--answer", "paragraph:1MB")
	e.waitText("SIMULATED", "READY", "Type a prompt")
	e.send("Write a long essay.")
	e.waitText("Write a long essay.")
	e.send("\r")
	e.waitText("attempt 1")
	e.send("\x1b")
	s := e.waitText("Cancelled by you")
	if !strings.Contains(s, "resp X") || strings.Contains(s, "resp B") {
		t.Errorf("the cancel is not drawn X in the strip:\n%s", s)
	}
	e.send("i")
	e.waitText("Type a prompt")
	e.send("long two")
	s = e.waitText("> long two")
	if strings.Contains(s, "ilong two") {
		t.Errorf("the letter after the cancel went into the prompt:\n%s", s)
	}
}

// TestE2EClearedStopIsCleared: the demo's spend cap stops the primary; x on
// the STOPPED target clears the stop and the fault still armed, so the next
// prompt is answered by the primary instead of meeting the stop again.
func TestE2EClearedStopIsCleared(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eEnv(t, t.TempDir()), "--model", "openai/gpt-5.4-mini")
	e.waitText("SIMULATED", "READY", "Type a prompt")
	before := e.screen()
	e.send("\t")
	e.waitScreen("the input left", func(s string) bool { return s != before })
	e.send("d")
	e.waitText("spend_cap")
	e.send("3")
	e.waitText("Injected spend_cap")
	e.send("i")
	e.send("first")
	e.waitText("> first")
	e.send("\r")
	e.waitText("STOPPED")
	e.send("\x1b") // leave the input (alone: esc and a key at once read as alt+key)
	e.waitText("i type a prompt")
	e.send("\t")
	e.send("\t") // the targets pane; its cursor is on the primary
	e.send("x")
	e.waitText("Cleared the simulated stop", "armed on openai")
	e.send("i")
	e.send("second")
	e.waitText("> second")
	e.send("\r")
	s := e.waitText("served by")
	if strings.Contains(s, "STOPPED") {
		t.Errorf("the primary is STOPPED again after x:\n%s", s)
	}
}

// TestE2EDailyStopSaysWhenItEnds: the demo's per-day quota on Gemini stops
// it with a known reset: the console says when it ends and counts down,
// never that a person must act, and the spent window has a gauge.
func TestE2EDailyStopSaysWhenItEnds(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eEnv(t, t.TempDir()), "--model", "gemini/gemini-3.8-flash")
	e.waitText("SIMULATED", "READY", "Type a prompt")
	before := e.screen()
	e.send("\t")
	e.waitScreen("the input left", func(s string) bool { return s != before })
	e.send("d")
	e.waitText("daily_quota")
	e.send("6")
	e.waitText("Injected daily_quota")
	e.send("i")
	e.send("hello")
	e.waitText("> hello")
	e.send("\r")
	s := e.waitText("STOPPED", "quota ░░░░░░░░ 0 left", "resets")
	for _, bad := range []string{"a person must act", "needs a person"} {
		if strings.Contains(s, bad) {
			t.Errorf("a per-day stop with a known reset says %q:\n%s", bad, s)
		}
	}
}
