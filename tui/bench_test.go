package tui

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	uv "github.com/charmbracelet/ultraviolet"

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

// frameRenderer is one frame of Bubble Tea's renderer as the program draws
// it (the cell buffer, then the terminal diff), to a discarded terminal.
type frameRenderer struct {
	buf uv.ScreenBuffer
	scr *uv.TerminalRenderer
}

func newFrameRenderer(w, h int) *frameRenderer {
	r := &frameRenderer{buf: uv.NewScreenBuffer(w, h), scr: uv.NewTerminalRenderer(io.Discard, []string{"TERM=xterm-256color"})}
	r.scr.Resize(w, h)
	return r
}

func (r *frameRenderer) frame(content string) {
	r.buf.Clear()
	uv.NewStyledString(content).Draw(r.buf, r.buf.Bounds())
	r.scr.Render(r.buf.RenderBuffer)
	_ = r.scr.Flush()
}

// answerTokens is a real answer's shape: prose in tokens of a few bytes, no
// blank lines (one paragraph), deterministic.
func answerTokens(n int) []string {
	words := []string{" the", " primary", " database", " failed", " over", " at", " 14:02;", " writes", " paused", " for", " 40", " s", " while", " replicas", " caught", " up.", " No", " data", " was", " lost,", " and", " on-call", " confirmed", " every", " replica", " was", " consistent", " before", " resum", "ed."}
	out := make([]string, n)
	seed := uint32(1)
	for i := range out {
		seed = seed*1664525 + 1013904223
		out[i] = words[int(seed>>8)%len(words)]
	}
	return out
}

// tokensPerFrame is 16 ms of tokens at 5,000 tokens/s.
const tokensPerFrame = 80

// benchStream streams an answer that is never reset: the call in flight is
// first given size bytes of one paragraph, then every op is one more token
// through Update and View, and every tokensPerFrame ops one renderer frame.
// ns/op (wall) and cpu-ns/op (the process's CPU time, steady on a loaded
// machine) are the console's cost per token at that answer length.
func benchStream(b *testing.B, w, h, history, size int) {
	benchStreamWith(b, w, h, history, size, nil)
}

// benchStreamWith is benchStream on a model setup has changed first (nil:
// none).
func benchStreamWith(b *testing.B, w, h, history, size int, setup func(*Model)) {
	m := benchModel(b, history)
	if setup != nil {
		setup(m)
	}
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	id := m.call.id
	toks := answerTokens(4096)
	var pre strings.Builder
	for i := 0; pre.Len() < size; i++ {
		pre.WriteString(toks[i%len(toks)])
	}
	m.Update(eventsMsg{events: []retry.Event{{Kind: retry.EventText, CallID: id, Text: pre.String()}}})
	r := newFrameRenderer(w, h)
	r.frame(m.View().Content)
	msgs := make([]eventsMsg, len(toks))
	for i, t := range toks {
		msgs[i] = eventsMsg{events: []retry.Event{{Kind: retry.EventText, CallID: id, Text: t}}}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		m.Update(msgs[i%len(msgs)])
		v := m.View()
		if i%tokensPerFrame == 0 {
			r.frame(v.Content)
		}
	}
	b.StopTimer()
	if cpu := processCPU() - cpu0; cpu > 0 {
		// CPU per token: what a loaded machine does not inflate.
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
	if got := len(m.turn.current.text); got < size {
		b.Fatalf("the answer shrank to %d bytes", got)
	}
}

// BenchmarkStreamToken is the console's cost per token of a streaming answer
// that grows (never reset), at 1 KB and 1 MB of one paragraph, with an
// empty transcript above it and with 10,000 lines of earlier calls: Update
// and View per token plus one renderer frame per 16 ms of tokens (5,000
// tokens/s). The goal: the 1 MB figure within 1.5x of the 1 KB one, and
// under 100 us, at 120x40.
func BenchmarkStreamToken(b *testing.B) {
	// benchModel's calls are about 10 lines each at 120x40.
	for _, hist := range []struct {
		name  string
		calls int
	}{{"empty", 0}, {"lines10000", 1000}} {
		for _, size := range []struct {
			name  string
			bytes int
		}{{"1KB", 1 << 10}, {"1MB", 1 << 20}} {
			for _, sz := range [][2]int{{120, 40}, {80, 24}} {
				b.Run(fmt.Sprintf("%s/%s/%dx%d", hist.name, size.name, sz[0], sz[1]), func(b *testing.B) {
					benchStream(b, sz[0], sz[1], hist.calls, size.bytes)
				})
			}
		}
	}
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
