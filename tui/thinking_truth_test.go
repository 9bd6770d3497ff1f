package tui

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
)

// TestThoughtStaysAfterTheAnswer: the "thought 6s" of a reasoning model's
// answer stays in its header once the call ends (served by … · thought 6s),
// and the attempt log shows the first token and the first text.
func TestThoughtStaysAfterTheAnswer(t *testing.T) {
	script := func(ctx context.Context, e *emitter) retry.Result {
		a := e.start(anthropic)
		e.emit(retry.Event{Kind: retry.EventThinking})
		e.clock.Advance(6 * time.Second)
		e.say("Forty-two.")
		a.Status, a.Thinking, a.TTFT, a.TTFText = 200, true, 616*time.Millisecond, 7300*time.Millisecond
		e.finish(a)
		return e.end(retry.OutcomeOK, &anthropic, nil)
	}
	o := simOpts()
	for _, size := range [][2]int{{120, 40}, {80, 24}} {
		h := newManualHarness(t, size[0], size[1], o, script)
		h.typeText("What is the answer?")
		h.press("enter")
		h.settle()
		s := h.screen()
		if !strings.Contains(s, "served by anthropic/claude-haiku-5-5 · thought 6s") {
			t.Errorf("%dx%d: the thinking time left the answer's header:\n%s", size[0], size[1], s)
		}
		if want := map[int]string{120: "ttft 616ms text 7.3s", 80: "text 7.3s"}[size[0]]; !strings.Contains(s, want) {
			t.Errorf("%dx%d: the attempt log hides the first text's time:\n%s", size[0], size[1], s)
		}
	}
}
