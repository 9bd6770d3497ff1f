package tui

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// hostile is what a hostile server puts in its text to take over a
// terminal: a title, a screen clear, a cursor report request, a hyperlink,
// C1 CSI, a bidi override, a carriage return and a bell.
const hostile = "\x1b]0;pwned\x07\x1b[2J\x1b[6n\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\\u009b1m\u202eok\r\a"

// checkScreen fails if the rendered frame carries any part of hostile that
// a terminal would obey. The frame's own styling (SGR) is allowed.
func checkScreen(t *testing.T, what, frame string) {
	t.Helper()
	for _, bad := range []string{"\x1b]", "\x1b[2J", "\x1b[6n", "\u009b", "\u202e", "\r", "\a", "pwned"} {
		if strings.Contains(frame, bad) {
			t.Errorf("%s: the frame carries %q", what, bad)
		}
	}
}

func TestHostileTextNeverReachesTheScreen(t *testing.T) {
	clock := &fakeClock{t: t0}
	m := New(Options{
		Runner:  &fakeRunner{clock: clock},
		Chain:   []stream.Target{openai, anthropic},
		Targets: []TargetInfo{{Target: openai, Available: true}, {Target: anthropic, Available: true}},
		Now:     clock.Now,
	})
	m.after = func(time.Duration, func(time.Time) tea.Msg) tea.Cmd { return nil }
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	id := "c1"
	m.turn = m.conv.add(id, "hello", openai, clock.Now())
	m.call = &run{id: id, chain: []stream.Target{openai, anthropic}, cancel: func() {}}
	a := &retry.Attempt{N: 1, Target: openai, StartedAt: clock.Now()}
	failed := *a
	failed.Status, failed.Class, failed.MidStream = 200, stream.ClassOverload, true
	failed.Code, failed.Message, failed.RequestID, failed.PartialText = "c"+hostile, "overloaded "+hostile, "req"+hostile, hostile
	served := stream.Target{Provider: "anthropic", Model: "m" + hostile}
	b := &retry.Attempt{N: 2, Target: anthropic, StartedAt: clock.Now()}
	ok := *b
	ok.Status, ok.Class = 200, stream.ClassOK
	events := []retry.Event{
		{Kind: retry.EventCallStart, CallID: id},
		{Kind: retry.EventAttemptStart, CallID: id, Attempt: a},
	}
	// The text arrives split so that sequences straddle deltas.
	for i := 0; i < len(hostile); i += 2 {
		events = append(events, retry.Event{Kind: retry.EventText, CallID: id, Text: hostile[i:min(i+2, len(hostile))]})
	}
	events = append(events,
		retry.Event{Kind: retry.EventAttemptEnd, CallID: id, Attempt: &failed},
		retry.Event{Kind: retry.EventWait, CallID: id, Wait: &retry.Wait{Target: anthropic, Duration: time.Second, Reason: "because " + hostile}},
		retry.Event{Kind: retry.EventAttemptStart, CallID: id, Attempt: b},
		retry.Event{Kind: retry.EventText, CallID: id, Text: "fine " + hostile},
	)
	m.Update(eventsMsg{events: events})
	checkScreen(t, "streaming", m.View().Content)
	m.Update(eventsMsg{events: []retry.Event{
		{Kind: retry.EventAttemptEnd, CallID: id, Attempt: &ok},
		{Kind: retry.EventCallEnd, CallID: id, Result: &retry.Result{Outcome: retry.OutcomeGaveUp, Text: hostile, ServedBy: &served,
			Attempts: []retry.Attempt{failed, ok}, Err: &stream.Error{Class: stream.ClassServer, Code: hostile, Err: errors.New("wrapped " + hostile)}}},
	}})
	m.Update(runDoneMsg{runID: id})
	frame := m.View().Content
	checkScreen(t, "after the call", frame)
	if !strings.Contains(frame, "link") {
		t.Errorf("the text itself should survive:\n%s", frame)
	}
	if failed.Message != "overloaded "+hostile {
		t.Error("the engine's attempt was changed in place")
	}

	// The history's stored copies.
	m.hist.listed(historyListMsg{gen: m.hist.gen, calls: []CallSummary{{ID: "h1", Time: t0, PromptHead: hostile, ServedBy: hostile}}})
	checkScreen(t, "history list", strings.Join(m.hist.view(120, 30, &m.st), "\n"))
	m.hist.shown(historyShowMsg{gen: m.hist.gen, detail: CallDetail{CallSummary: CallSummary{ID: "h1"}, Prompt: hostile, Text: hostile,
		Attempts: []retry.Attempt{failed}, Waits: []retry.Wait{{Reason: hostile}}}})
	checkScreen(t, "history detail", strings.Join(m.hist.view(120, 30, &m.st), "\n"))
}

func TestCleanErrorKeepsTheChain(t *testing.T) {
	e := cleanError(&stream.Error{Class: stream.ClassConnection, Err: io.ErrUnexpectedEOF})
	if !errors.Is(e, io.ErrUnexpectedEOF) {
		t.Error("errors.Is lost the underlying error")
	}
}
