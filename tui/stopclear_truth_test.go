package tui

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// providerArmed records which provider's faults were cleared.
type providerArmed struct {
	mu      sync.Mutex
	cleared []string
}

func (f *providerArmed) Armed(context.Context) ([]ArmedFault, error) { return nil, nil }

func (f *providerArmed) ClearFaults(_ context.Context, provider string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleared = append(f.cleared, provider)
	return nil
}

func (f *providerArmed) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.cleared...)
}

// TestSimulatedStopClearIncludesTheArmedFault: x on a simulated STOPPED
// target clears the stop and the demo fault still armed on its provider
// (the spend cap that made it), and says so: the next prompt does not meet
// the same stop.
func TestSimulatedStopClearIncludesTheArmedFault(t *testing.T) {
	es := &fakeEngineState{cds: map[stream.Target]*retry.Cooldown{}}
	quota := func(ctx context.Context, e *emitter) retry.Result {
		a := e.start(openai)
		a.Status, a.Class, a.Code, a.Decision = 429, stream.ClassQuota, "insufficient_quota", retry.DecideStop
		a.Cooldown = quotaCooldown()
		es.mu.Lock()
		es.cds[openai] = a.Cooldown
		es.mu.Unlock()
		e.finish(a)
		return e.end(retry.OutcomeStopped, nil, &stream.Error{Class: stream.ClassQuota})
	}
	fa := &providerArmed{}
	h := newHarness(t, 120, 40, Options{Simulated: true, Faults: &fakeFaults{}, Armed: fa, TargetState: es.state, ClearCooldown: es.clear}, quota)
	h.typeText("hi")
	h.press("enter")
	h.idle()
	h.press("esc")
	for h.m.focus != focusTargets {
		h.press("tab")
	}
	h.press("x")
	h.until("cleared", func() bool { return strings.Contains(h.m.status, "Cleared") })
	if got := fa.got(); len(got) != 1 || got[0] != "openai" {
		t.Errorf("faults cleared on %v, want openai's", got)
	}
	if !strings.Contains(h.m.status, "and the demo faults armed on openai") {
		t.Errorf("status = %q: it does not say the armed fault went too", h.m.status)
	}
}
