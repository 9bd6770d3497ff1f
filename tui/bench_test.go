package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// benchModel builds a 120x40 model with n answered calls in its transcript
// and a call streaming now, without goroutines: events go straight to Update.
func benchModel(b *testing.B, n int) *Model {
	b.Helper()
	clock := &fakeClock{t: t0}
	m := New(Options{
		Runner:  &fakeRunner{clock: clock},
		Chain:   []stream.Target{openai, anthropic},
		Targets: []TargetInfo{{Target: openai, Available: true}, {Target: anthropic, Available: true}},
		Now:     clock.Now,
	})
	m.after = func(time.Duration, func(time.Time) tea.Msg) tea.Cmd { return nil }
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	answer := strings.Repeat("The primary database failed over at 14:02; writes paused for 40 s. ", 4)
	for i := 0; i <= n; i++ {
		id := fmt.Sprintf("c%d", i)
		m.turn = m.conv.add(id, fmt.Sprintf("Prompt number %d: summarize the incident.", i), openai, clock.Now())
		m.call = &run{id: id, chain: []stream.Target{openai, anthropic}, cancel: func() {}}
		a := &retry.Attempt{N: 1, Target: openai, StartedAt: clock.Now()}
		evs := []retry.Event{{Kind: retry.EventCallStart, CallID: id}, {Kind: retry.EventAttemptStart, CallID: id, Attempt: a}}
		if i == n {
			m.Update(eventsMsg{events: evs}) // the call streaming now
			break
		}
		done := *a
		done.Status, done.Class = 200, stream.ClassOK
		evs = append(evs,
			retry.Event{Kind: retry.EventText, CallID: id, Text: answer},
			retry.Event{Kind: retry.EventAttemptEnd, CallID: id, Attempt: &done},
			retry.Event{Kind: retry.EventCallEnd, CallID: id, Result: &retry.Result{Outcome: retry.OutcomeOK, Text: answer, ServedBy: &openai, Attempts: []retry.Attempt{done}}})
		m.Update(eventsMsg{events: evs})
		m.Update(runDoneMsg{runID: id})
	}
	m.View()
	return m
}

func benchToken(b *testing.B, n int) {
	m := benchModel(b, n)
	id := m.call.id
	msg := eventsMsg{events: []retry.Event{{Kind: retry.EventText, CallID: id, Text: "token "}}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%400 == 399 { // keep the streaming answer to a realistic length
			m.turn.current.text = ""
		}
		m.Update(msg)
		_ = m.View()
	}
}

// BenchmarkTokenUpdateView is Update+View for one text message at 120x40.
func BenchmarkTokenUpdateView(b *testing.B) {
	b.Run("after1", func(b *testing.B) { benchToken(b, 1) })
	b.Run("after10000", func(b *testing.B) { benchToken(b, 10000) })
}

// BenchmarkFrameView is View alone (a frame with nothing new) at 120x40.
func BenchmarkFrameView(b *testing.B) {
	for _, n := range []int{1, 10000} {
		b.Run(fmt.Sprintf("after%d", n), func(b *testing.B) {
			m := benchModel(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_ = m.View()
			}
		})
	}
}
