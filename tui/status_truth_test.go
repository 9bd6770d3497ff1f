package tui

import (
	"strings"
	"testing"

	"github.com/limitscope/limitscope/retry"
)

// TestInjectedStatusGoesWithTheCall: "Injected …: send a prompt to see it"
// is gone once the prompt is sent, before its few seconds are up.
func TestInjectedStatusGoesWithTheCall(t *testing.T) {
	h := newHarness(t, 120, 40, simOpts(), quotaScript)
	h.press("tab")
	h.press("d")
	h.press("1")
	h.until("the injection", func() bool { return strings.Contains(h.m.status, "Injected") })
	h.press("i")
	h.typeText("hi")
	h.press("enter")
	h.idle()
	if strings.Contains(h.screen(), "send a prompt to see it") {
		t.Errorf("the injection's status stayed after the prompt met it:\n%s", h.screen())
	}
}

// TestCancellingStatusGoesWhenCancelled: "Cancelling the call…" is gone once
// the call has ended.
func TestCancellingStatusGoesWhenCancelled(t *testing.T) {
	h := newHarness(t, 120, 40, simOpts(), cancelMidStream)
	h.typeText("hi")
	h.press("enter")
	h.until("streaming", func() bool { return strings.Contains(h.screen(), "Half an ans") })
	h.press("esc")
	h.idle()
	if strings.Contains(h.screen(), "Cancelling the call") {
		t.Errorf("the call ended but the status still says it is being cancelled:\n%s", h.screen())
	}
}

// TestCopyCurlSaysWhatItCopied: in a simulated session the curl holds the
// simulator's key and the status says so (no secret); an attempt with no
// curl copies nothing and says so.
func TestCopyCurlSaysWhatItCopied(t *testing.T) {
	o := simOpts()
	curl := "curl http://127.0.0.1:1/v1 -H 'Authorization: Bearer sim-key'"
	o.Curl = func(a retry.Attempt, prompt string) string { return curl }
	h := newHarness(t, 120, 40, o, okScript(openai, "answer"))
	h.typeText("hi")
	h.press("enter")
	h.idle()
	h.press("tab")
	h.press("c")
	if strings.Contains(h.m.status, "redacted") || !strings.Contains(h.m.status, "simulator's key: no secret") {
		t.Errorf("status = %q, want it to say the simulator's key is in it", h.m.status)
	}
	curl = ""
	h.press("c")
	if strings.Contains(h.m.status, "Copied") {
		t.Errorf("status = %q for an empty curl", h.m.status)
	}
}
