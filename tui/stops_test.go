package tui

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// fakeEngineState is the engine's TargetState and the cooldown store's
// Clear, as the wiring passes them in.
type fakeEngineState struct {
	mu      sync.Mutex
	cds     map[stream.Target]*retry.Cooldown
	pace    map[stream.Target]retry.PaceState
	cleared []string
}

func (f *fakeEngineState) state(t stream.Target) retry.TargetState {
	f.mu.Lock()
	defer f.mu.Unlock()
	ts := retry.TargetState{Cooldown: f.cds[t], HasPacer: true}
	ts.Pace = f.pace[t]
	return ts
}

func (f *fakeEngineState) clear(_ context.Context, scope string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleared = append(f.cleared, scope)
	for t, cd := range f.cds {
		if cd.Scope == scope {
			delete(f.cds, t)
		}
	}
	return nil
}

func quotaCooldown() *retry.Cooldown {
	return &retry.Cooldown{Scope: "openai:acct-9c1", Since: t0, Target: "openai/gpt-5.4-mini", Code: "insufficient_quota",
		Message: "You exceeded your current quota, please check your plan and billing details."}
}

// TestStoppedFromEngineStateAndCleared: a cooldown the engine reports at
// start shows STOPPED without any message being parsed; x on it shows what
// stopped it and, after y, clears it through Options.ClearCooldown.
func TestStoppedFromEngineStateAndCleared(t *testing.T) {
	es := &fakeEngineState{cds: map[stream.Target]*retry.Cooldown{openai: quotaCooldown()}}
	h := newHarness(t, 120, 40, Options{TargetState: es.state, ClearCooldown: es.clear})
	h.do(h.m.Init())
	h.until("the state", func() bool { return strings.Contains(h.screen(), "STOPPED") })
	h.press("shift+tab") // the targets pane, cursor on openai
	h.press("x")
	if h.m.mode != modeConfirm {
		t.Fatalf("x on a STOPPED target did not ask (mode %v, status %q)", h.m.mode, h.m.status)
	}
	s := h.screen()
	for _, want := range []string{"insufficient_quota", "You exceeded your current quota", "openai:acct-9c1", "y clears it"} {
		if !strings.Contains(s, want) {
			t.Errorf("the confirmation lacks %q:\n%s", want, s)
		}
	}
	h.press("y")
	h.until("cleared", func() bool { return !strings.Contains(h.screen(), "STOPPED") })
	if len(es.cleared) != 1 || es.cleared[0] != "openai:acct-9c1" {
		t.Errorf("cleared %v", es.cleared)
	}
	if !strings.Contains(h.m.status, "Cleared the stop") {
		t.Errorf("status = %q", h.m.status)
	}
}

// TestRealStopKeptOnNo: n keeps a real stop; nothing is cleared.
func TestRealStopKeptOnNo(t *testing.T) {
	es := &fakeEngineState{cds: map[stream.Target]*retry.Cooldown{openai: quotaCooldown()}}
	h := newHarness(t, 120, 40, Options{TargetState: es.state, ClearCooldown: es.clear})
	h.do(h.m.Init())
	h.until("the state", func() bool { return strings.Contains(h.screen(), "STOPPED") })
	h.press("shift+tab")
	h.press("x")
	h.press("n")
	if h.m.mode != modeMain || len(es.cleared) != 0 || !strings.Contains(h.screen(), "STOPPED") {
		t.Errorf("n did not keep the stop: mode %v cleared %v", h.m.mode, es.cleared)
	}
}

// TestSimulatedStopClearsAtOnce: in a simulated session x clears without a
// confirmation and says what stopped it.
func TestSimulatedStopClearsAtOnce(t *testing.T) {
	es := &fakeEngineState{cds: map[stream.Target]*retry.Cooldown{}}
	quota := func(ctx context.Context, e *emitter) retry.Result {
		a := e.start(openai)
		a.Status, a.Class, a.Code, a.Decision = 429, stream.ClassQuota, "insufficient_quota", retry.DecideStop
		a.Message = "Quota exceeded."
		a.Cooldown = quotaCooldown()
		es.mu.Lock()
		es.cds[openai] = a.Cooldown
		es.mu.Unlock()
		e.finish(a)
		r := e.end(retry.OutcomeStopped, nil, &stream.Error{Class: stream.ClassQuota, Message: "Kontingent erschöpft"})
		return r
	}
	h := newHarness(t, 120, 40, Options{Simulated: true, Faults: &fakeFaults{}, TargetState: es.state, ClearCooldown: es.clear}, quota)
	h.typeText("hi")
	h.press("enter")
	h.idle()
	if !strings.Contains(h.screen(), "STOPPED") {
		t.Fatalf("no STOPPED:\n%s", h.screen())
	}
	h.press("esc")
	h.press("shift+tab")
	h.press("shift+tab")
	if h.m.focus != focusTargets {
		t.Fatalf("focus %v", h.m.focus)
	}
	h.press("x")
	if h.m.mode == modeConfirm {
		t.Fatal("a simulated stop asked for a confirmation")
	}
	h.until("cleared", func() bool { return len(h.m.status) > 0 && !strings.Contains(h.screen(), "STOPPED") })
	if !strings.Contains(h.m.status, "Cleared the simulated stop; the next prompt is sent (insufficient_quota on openai/gpt-5.4-mini") {
		t.Errorf("status = %q", h.m.status)
	}
}

// TestPausedFromPacer: the pacer's hold, read through TargetState, shows
// PAUSED with its countdown (not rebuilt from attempts).
func TestPausedFromPacer(t *testing.T) {
	es := &fakeEngineState{pace: map[stream.Target]retry.PaceState{anthropic: {HoldUntil: t0.Add(30 * time.Second), Known: true}}}
	h := newHarness(t, 120, 40, Options{TargetState: es.state})
	h.do(h.m.Init())
	h.until("the state", func() bool { return strings.Contains(h.screen(), "PAUSED") })
	if s := h.screen(); !strings.Contains(s, "30s left") {
		t.Errorf("no countdown on the paused target:\n%s", s)
	}
}

// A hold that is the server's own delay (a Retry-After heard by another
// call) is WAITING with its source, not PAUSED for a limit reset.
func TestServerHoldIsWaiting(t *testing.T) {
	es := &fakeEngineState{pace: map[stream.Target]retry.PaceState{anthropic: {HoldUntil: t0.Add(30 * time.Second), Known: true,
		HoldSource: stream.SourceRetryAfter, HoldAsked: time.Minute}}}
	h := newHarness(t, 120, 40, Options{TargetState: es.state})
	h.do(h.m.Init())
	h.until("the state", func() bool { return strings.Contains(h.screen(), "WAITING") })
	s := h.screen()
	if strings.Contains(s, "PAUSED") || !strings.Contains(s, "the server asked to wait") {
		t.Errorf("a server's hold shown as a limit pause, or without its source:\n%s", s)
	}
	// Half of a 60s wait is left: the bar is not full.
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "30s left") && !strings.Contains(l, "░") {
			t.Errorf("the countdown bar is full with half the server's wait gone: %q", l)
		}
	}
}

// fakeArmed is the simulator's armed-fault API.
type fakeArmed struct {
	mu      sync.Mutex
	faults  []ArmedFault
	cleared int
}

func (f *fakeArmed) Armed(context.Context) ([]ArmedFault, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ArmedFault(nil), f.faults...), nil
}

func (f *fakeArmed) ClearFaults(context.Context, string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = nil
	f.cleared++
	return nil
}

// TestDemoMenuSaysWhatAndShowsArmed: each entry says what it injects, on
// which target and for how long; the menu lists the faults still armed and
// x clears them.
func TestDemoMenuSaysWhatAndShowsArmed(t *testing.T) {
	fa := &fakeArmed{faults: []ArmedFault{{Provider: "openai", Kind: "overload", Left: 2}}}
	h := newHarness(t, 120, 40, Options{Simulated: true, Faults: &fakeFaults{}, Armed: fa})
	h.press("tab")
	h.press("d")
	h.until("the armed list", func() bool { return strings.Contains(h.screen(), "Armed now") })
	s := h.screen()
	for _, want := range []string{"on the primary, openai/gpt-5.4-mini", "rate_limit    refuses for 20s", "overload      next 3 in 15s",
		"spend_cap     until cleared", "failover-demo 1 minute", "overload on openai · 2 requests left", "x clears them all"} {
		if !strings.Contains(s, want) {
			t.Errorf("the menu lacks %q:\n%s", want, s)
		}
	}
	h.press("x")
	h.until("cleared", func() bool { return strings.Contains(h.screen(), "Nothing is armed now.") })
	if fa.cleared != 1 {
		t.Errorf("ClearFaults called %d times", fa.cleared)
	}
}

// TestFallbackNoteNamesTheMove: the fallback note names the error of the
// attempt that moved the call (the 429), not the 503 retried before it.
func TestFallbackNoteNamesTheMove(t *testing.T) {
	s := func(ctx context.Context, e *emitter) retry.Result {
		a := e.start(openai)
		a.Status, a.Class, a.Code, a.Decision = 503, stream.ClassServer, "server_error", retry.DecideRetry
		e.finish(a)
		b := e.start(openai)
		rateLimited(b, 20*time.Second, retry.DecideFailover)
		e.finish(b)
		c := e.start(anthropic)
		e.say("answer")
		c.Status = 200
		e.finish(c)
		return e.end(retry.OutcomeOK, &anthropic, nil)
	}
	h := newHarness(t, 120, 40, Options{}, s)
	h.typeText("hi")
	h.press("enter")
	h.idle()
	sc := h.screen()
	if !strings.Contains(sc, "(fallback: primary openai/gpt-5.4-mini 429 rate_limit, asked 20s)") {
		t.Errorf("the fallback note does not name the 429 that moved the call:\n%s", sc)
	}
}

// TestCancelDuringWaitSaysWhatWasWaited: esc during a wait: the log and the
// transcript say what was really waited (EventWaitEnd), not the planned
// wait.
func TestCancelDuringWaitSaysWhatWasWaited(t *testing.T) {
	s := func(ctx context.Context, e *emitter) retry.Result {
		a := e.start(openai)
		rateLimited(a, 20*time.Second, retry.DecideRetry)
		a.Waited = 20 * time.Second // what an engine may put on the attempt at its end: the plan
		e.finish(a)
		e.wait(openai, 20*time.Second, 20*time.Second, stream.SourceRetryAfter, "openai asked 20s (retry-after)")
		from := e.clock.Now()
		<-ctx.Done()
		e.waitEnd(openai, 20*time.Second, e.clock.Now().Sub(from), retry.WaitCancelled)
		return e.end(retry.OutcomeCancelled, nil, &stream.Error{Class: stream.ClassCancelled, Err: ctx.Err()})
	}
	h := newHarness(t, 120, 40, Options{}, s)
	h.typeText("hi")
	h.press("enter")
	h.until("the wait", h.m.waiting)
	h.tick(4 * time.Second)
	h.press("esc")
	h.idle()
	sc := h.screen()
	for _, want := range []string{"Waited 4s of 20s, then cancelled.", "wait 20s -> cancelled after 4s of a 20s wait", "waited 4s"} {
		if !strings.Contains(sc, want) {
			t.Errorf("screen lacks %q:\n%s", want, sc)
		}
	}
	if strings.Contains(sc, "waited 20s") {
		t.Errorf("the log reports a wait that did not happen:\n%s", sc)
	}
}

// TestDemoMenuFitsAt80: at 80x24 no entry of the demo menu is cut.
func TestDemoMenuFitsAt80(t *testing.T) {
	fa := &fakeArmed{faults: []ArmedFault{{Provider: "openai", Kind: "overload", Left: 2}}}
	h := newHarness(t, 80, 24, Options{Simulated: true, Faults: &fakeFaults{}, Armed: fa})
	h.press("tab")
	h.press("d")
	h.until("the armed list", func() bool { return strings.Contains(h.screen(), "Armed now") })
	if s := h.screen(); strings.Contains(s, "…") || !strings.Contains(s, "slow_down") {
		t.Errorf("the demo menu is cut at 80x24:\n%s", s)
	}
}

// TestFailOverDuringStream: ctrl+f while an answer streams: the engine ends
// the stream (the attempt says the user moved it) and the fallback answers,
// in the same call.
func TestFailOverDuringStream(t *testing.T) {
	s := func(ctx context.Context, e *emitter) retry.Result {
		a := e.start(openai)
		e.say("A slow answ")
		select {
		case <-e.ctl.moved:
		case <-ctx.Done():
		}
		a.Status, a.Class, a.FailedOverByUser, a.Decision = 200, stream.ClassCancelled, true, retry.DecideFailover
		e.finish(a)
		b := e.start(anthropic)
		e.say("A fast answer.")
		b.Status = 200
		e.finish(b)
		return e.end(retry.OutcomeOK, &anthropic, nil)
	}
	h := newHarness(t, 120, 40, Options{}, s)
	h.typeText("hi")
	h.press("enter")
	h.until("streaming", func() bool { return strings.Contains(h.screen(), "A slow answ") })
	if !strings.Contains(h.screen(), "ctrl+f fail over now") {
		t.Errorf("no ctrl+f hint while streaming with a fallback:\n%s", h.screen())
	}
	h.press("ctrl+f")
	h.idle()
	sc := h.screen()
	for _, want := range []string{"You failed over during openai/gpt-5.4-mini's answer; trying",
		"A fast answer.", "-> failed over by you", "(fallback: primary openai/gpt-5.4-mini you failed over during its answer)"} {
		if !strings.Contains(sc, want) {
			t.Errorf("screen lacks %q:\n%s", want, sc)
		}
	}
	if len(h.runner.Calls()) != 1 {
		t.Errorf("%d calls", len(h.runner.Calls()))
	}
}

// An account stop met through an API variant (openai:responses) stops the
// provider's other targets too: they share the key.
func TestAccountStopThroughAVariant(t *testing.T) {
	cd := retry.Cooldown{Scope: "account:openai:abc", Target: "openai:responses/gpt-5.4-mini", Since: t0, Code: "insufficient_quota",
		Message: "You exceeded your current quota"}
	h := newHarness(t, 120, 40, Options{Cooldowns: []retry.Cooldown{cd}})
	h.do(h.m.Init())
	h.until("the stop", func() bool {
		for _, l := range strings.Split(h.screen(), "\n") {
			if strings.Contains(l, "1 openai/gpt-5.4-mini") {
				return strings.Contains(l, "STOPPED")
			}
		}
		return false
	})
}
