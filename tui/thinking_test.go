package tui

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// thinkingScript: the model thinks (a reasoning delta, no text) until go
// is closed, then answers.
func thinkingScript(goOn, end chan struct{}) script {
	return func(ctx context.Context, e *emitter) retry.Result {
		a := e.start(anthropic)
		e.emit(retry.Event{Kind: retry.EventThinking})
		select {
		case <-goOn:
		case <-ctx.Done():
			a.Class, a.Decision = stream.ClassCancelled, retry.DecideCancel
			e.finish(a)
			return e.end(retry.OutcomeCancelled, nil, &stream.Error{Class: stream.ClassCancelled, Err: ctx.Err()})
		}
		e.say("Forty-two.")
		<-end
		a.Thinking = true
		e.finish(a)
		return e.end(retry.OutcomeOK, &anthropic, nil)
	}
}

// A reasoning stream shows "thinking" with its timer until the first text,
// and the answer's header then says how long the model thought.
func TestThinkingShown(t *testing.T) {
	goOn, end := make(chan struct{}), make(chan struct{})
	h := newHarness(t, 120, 40, simOpts(), thinkingScript(goOn, end))
	h.typeText("What is the answer?")
	h.press("enter")
	h.until("thinking", func() bool { return strings.Contains(h.screen(), "thinking 0s") })
	h.tick(3 * time.Second)
	h.checkFrame()
	s := h.screen()
	if !strings.Contains(s, "✻ anthropic/claude-haiku-5-5 · attempt 1: thinking 3s…") {
		t.Fatalf("no thinking timer:\n%s", s)
	}
	golden.RequireEqual(t, s)
	close(goOn)
	h.until("the text", func() bool { return strings.Contains(h.screen(), "Forty-two.") })
	if s := h.screen(); !strings.Contains(s, "anthropic/claude-haiku-5-5 · attempt 1 · thought 3s") || strings.Contains(s, "thinking 3s") ||
		!strings.Contains(s, "STREAMING") {
		t.Errorf("after the thinking:\n%s", s)
	}
	close(end)
	h.idle()
}

// The p key probes the target under the cursor and shows its card in the
// conversation: at once on the simulator; for a real provider only on a
// second press, the first saying what it spends.
func TestProbeKey(t *testing.T) {
	for _, simulated := range []bool{true, false} {
		var probed []stream.Target
		o := simOpts()
		o.Simulated = simulated
		o.Probe = func(_ context.Context, tg stream.Target) ([]string, error) {
			probed = append(probed, tg)
			return []string{"limits card  " + tg.String() + "  (simulator)", "limits       from the response headers"}, nil
		}
		o.ProbePlan = func(stream.Target) string { return "up to 12 requests, about 500 tokens" }
		h := newHarness(t, 120, 40, o)
		h.press("tab") // the targets pane
		for h.m.focus != focusTargets {
			h.press("tab")
		}
		h.press("p")
		if !simulated {
			if s := h.screen(); len(probed) != 0 || !strings.Contains(s, "p again probes openai/gpt-5.4-mini") || !strings.Contains(s, "up to 12 requests") {
				t.Fatalf("real: the first p probed (%v) or said nothing:\n%s", probed, s)
			}
			h.press("p")
		}
		h.until("the card", func() bool { return strings.Contains(h.screen(), "limits card  openai/gpt-5.4-mini") })
		if len(probed) != 1 || probed[0] != openai || !strings.Contains(h.screen(), "> probe openai/gpt-5.4-mini") {
			t.Errorf("simulated %v: probed %v\n%s", simulated, probed, h.screen())
		}
	}
}
