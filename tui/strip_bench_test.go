package tui

import (
	"fmt"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// withSession fills the model's timeline with n attempts on its two
// targets, as a long session leaves it: limits draining, 429s, failovers,
// latencies; strips on or off.
func withSession(n int, on bool) func(*Model) {
	return func(m *Model) {
		at := m.now.Add(-time.Duration(n) * 3 * time.Second)
		for i := 0; i < n; i++ {
			a := retry.Attempt{N: 1, Target: openai, Status: 200, Class: stream.ClassOK, StartedAt: at,
				TTFT: time.Duration(200+i%7*50) * time.Millisecond, Duration: time.Duration(900+i%11*100) * time.Millisecond,
				Limits: &stream.Limits{Requests: &stream.Window{Limit: 500, Remaining: int64(500 - i%500), HasLimit: true, HasRemaining: true},
					Tokens: &stream.Window{Limit: 200000, Remaining: int64(200000 - i%500*300), HasLimit: true, HasRemaining: true}}}
			if i%10 == 9 {
				a.Status, a.Class, a.RetryAfter, a.Decision, a.TTFT, a.Duration = 429, stream.ClassRateLimit, dur(30*time.Second), retry.DecideFailover, 0, 50*time.Millisecond
			}
			m.tl.attempt(fmt.Sprint("s", i), &a, at)
			if a.Class != stream.ClassOK {
				b := a
				b.Target, b.Status, b.Class, b.RetryAfter, b.Decision, b.StartedAt = anthropic, 200, stream.ClassOK, nil, retry.DecideDone, at.Add(a.Duration)
				m.tl.attempt(fmt.Sprint("s", i), &b, at)
			}
			at = at.Add(3 * time.Second)
		}
		m.targets.noStrips = !on
		m.targets.invalidate()
	}
}

// BenchmarkStripsStreamToken is BenchmarkStreamToken's real path (Update
// and View per token, a renderer frame per 16 ms of tokens) after a
// session of 1,000 attempts, with the targets' strips on and off: strips
// redraw on new data or a tick, never per token, so both cost the same.
func BenchmarkStripsStreamToken(b *testing.B) {
	for _, on := range []bool{false, true} {
		for _, sz := range [][2]int{{120, 40}, {80, 24}} {
			b.Run(fmt.Sprintf("strips=%v/%dx%d", on, sz[0], sz[1]), func(b *testing.B) {
				benchStreamWith(b, sz[0], sz[1], 0, 1<<10, withSession(1000, on))
			})
		}
	}
}

// BenchmarkStripsTick is the cost of a clock tick during a wait (every
// 250 ms): the tick through Update, which redraws the targets pane and
// with it the strips, then View; strips on and off.
func BenchmarkStripsTick(b *testing.B) {
	for _, on := range []bool{false, true} {
		for _, sz := range [][2]int{{120, 40}, {80, 24}} {
			b.Run(fmt.Sprintf("strips=%v/%dx%d", on, sz[0], sz[1]), func(b *testing.B) {
				m := benchModel(b, 0)
				withSession(1000, on)(m)
				m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
				clock := m.opts.Now
				now := clock()
				m.opts.Now = func() time.Time { return now }
				m.View()
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := processCPU()
				for i := 0; i < b.N; i++ {
					now = now.Add(250 * time.Millisecond)
					m.ticking = true
					m.Update(tickMsg{gen: m.tickGen})
					_ = m.View()
				}
				b.StopTimer()
				if cpu := processCPU() - cpu0; cpu > 0 {
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
				}
			})
		}
	}
}

// BenchmarkTimelineView is a frame of the timeline view (t) after 1,000
// attempts: a tick that moves the window, then View.
func BenchmarkTimelineView(b *testing.B) {
	m := benchModel(b, 0)
	withSession(1000, true)(m)
	m.mode = modeTimeline
	now := m.opts.Now()
	m.opts.Now = func() time.Time { return now }
	m.View()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		now = now.Add(time.Second)
		m.Update(tickMsg{gen: m.tickGen})
		_ = m.View()
	}
	b.StopTimer()
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}
