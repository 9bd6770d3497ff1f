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
