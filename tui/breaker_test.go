package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/theme"
)

// A target whose circuit the engine opened (retry.TargetState.Breaker) is
// OVERLOADED with the time left to its probe, in the long and the collapsed
// form; once the circuit is no longer open it is READY again.
func TestTargetCircuitOpenIsOverloadedWithTimeLeft(t *testing.T) {
	p := newTargetsPane([]TargetInfo{{Target: openai, Available: true}}, []stream.Target{openai})
	now := t0
	p.states(map[stream.Target]retry.TargetState{openai: {HasBreaker: true,
		Breaker: retry.BreakerState{State: retry.CircuitOpen, Failures: 3, OpenUntil: now.Add(15 * time.Second)}}}, now)
	later := now.Add(3 * time.Second)
	if s := paneText(p, later); !strings.Contains(s, "OVERLOADED") || !strings.Contains(s, "12s left, then one probe") || !strings.Contains(s, "circuit open after 3") {
		t.Fatalf("long form:\n%s", s)
	}
	st := theme.New(true, false)
	p.invalidate()
	if s := ansi.Strip(strings.Join(p.view(100, true, later, &st), "\n")); !strings.Contains(s, "OVERLOADED 12s") {
		t.Fatalf("collapsed:\n%s", s)
	}
	if s := paneText(p, now.Add(16*time.Second)); !strings.Contains(s, "READY") {
		t.Fatalf("after the cool-off:\n%s", s)
	}
	p.states(map[stream.Target]retry.TargetState{openai: {HasBreaker: true, Breaker: retry.BreakerState{State: retry.CircuitClosed}}}, now)
	if s := paneText(p, now); !strings.Contains(s, "READY") {
		t.Fatalf("closed:\n%s", s)
	}
}
