package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/theme"
)

// Calls waiting at a target's gate (the proxy's too) show on its line:
// how many wait, and the slots busy of its limit; none waiting, nothing.
func TestTargetLineShowsQueuedCalls(t *testing.T) {
	p := newTargetsPane([]TargetInfo{{Target: openai, Available: true}}, []stream.Target{openai})
	st := theme.New(true, false)
	p.states(map[stream.Target]retry.TargetState{openai: {HasPacer: true, Pace: retry.PaceState{Concurrency: 4, InFlight: 4, Queued: 7}}}, t0)
	if s := ansi.Strip(strings.Join(p.view(120, true, t0, &st), "\n")); !strings.Contains(s, "7 queued, 4/4 slots busy") {
		t.Fatalf("queued calls not shown:\n%s", s)
	}
	p.states(map[stream.Target]retry.TargetState{openai: {HasPacer: true, Pace: retry.PaceState{Concurrency: 4, InFlight: 1}}}, t0)
	p.invalidate()
	if s := ansi.Strip(strings.Join(p.view(120, true, t0, &st), "\n")); strings.Contains(s, "queued") {
		t.Fatalf("nothing queued, yet:\n%s", s)
	}
}
