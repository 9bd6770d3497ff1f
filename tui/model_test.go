package tui

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

func TestKeyStrings(t *testing.T) {
	for _, k := range []string{"enter", "esc", "tab", "shift+tab", "space", "ctrl+c", "ctrl+f", "q", "?"} {
		if got := keyMsg(k).String(); got != k {
			t.Errorf("key %q reads as %q", k, got)
		}
	}
}

func TestSendStreamsAnswerWithBadge(t *testing.T) {
	h := newHarness(t, 120, 40, Options{}, okScript(openai, "Hello, ", "world."))
	h.typeText("Say hello")
	if got := h.m.input.Value(); got != "Say hello" {
		t.Fatalf("input = %q", got)
	}
	h.press("enter")
	if h.m.input.Value() != "" {
		t.Errorf("input not cleared after send")
	}
	if !h.m.inFlight() {
		t.Fatalf("no call in flight after enter")
	}
	h.idle()
	calls := h.runner.Calls()
	if len(calls) != 1 || calls[0].Prompt != "Say hello" || len(calls[0].Chain) != 2 || calls[0].Chain[0] != openai {
		t.Fatalf("calls = %+v", calls)
	}
	s := h.screen()
	for _, want := range []string{"> Say hello", "served by openai/gpt-5.4-mini", "Hello, world.", "calls 1", "req ██"} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "fallback") {
		t.Errorf("a primary answer is marked as a fallback:\n%s", s)
	}
	if h.m.lastAnswer != "Hello, world." {
		t.Errorf("last answer = %q", h.m.lastAnswer)
	}
	if h.m.stats.calls != 1 || h.m.stats.requests != 1 || h.m.stats.retried != 0 {
		t.Errorf("stats = %+v", h.m.stats)
	}
	h.checkFrame()
}

func TestEmptyPromptSendsNothing(t *testing.T) {
	h := newHarness(t, 120, 40, Options{})
	h.typeText("   ")
	h.press("enter")
	if h.m.inFlight() || len(h.runner.Calls()) != 0 {
		t.Fatal("an empty prompt was sent")
	}
}

func TestSecondSendWhileInFlightIsRefused(t *testing.T) {
	h := newHarness(t, 120, 40, Options{}, waitScript)
	h.typeText("one")
	h.press("enter")
	h.until("the wait", h.m.waiting)
	h.typeText("two")
	h.press("enter")
	if n := len(h.runner.Calls()); n != 1 {
		t.Fatalf("%d calls, want 1", n)
	}
	if !strings.Contains(h.m.status, "in flight") {
		t.Errorf("status = %q", h.m.status)
	}
	if h.m.input.Value() != "two" {
		t.Errorf("the refused prompt was lost: %q", h.m.input.Value())
	}
}

func TestFailoverShowsFallbackBadge(t *testing.T) {
	h := newHarness(t, 120, 40, Options{}, failoverScript)
	h.typeText("Summarize the incident")
	h.press("enter")
	h.idle()
	s := h.screen()
	for _, want := range []string{
		"served by anthropic/claude-haiku-5-5-20260101",
		"fallback: primary openai/gpt-5.4-mini 429 rate_limit, asked 20s",
		"openai is rate limiting this key. Failing over to anthropic/claude-haiku-5-5.",
		"WAITING", // openai's retry-after still runs in the targets pane
		"(rounded)",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q:\n%s", want, s)
		}
	}
	if h.m.stats.requests != 2 || h.m.stats.wasted != 1 || h.m.stats.retried != 1 {
		t.Errorf("stats = %+v", h.m.stats)
	}
	h.checkFrame()
}

func TestCountdownDrainsOnOneTick(t *testing.T) {
	h := newHarness(t, 120, 40, Options{}, waitScript)
	h.typeText("hi")
	h.press("enter")
	h.until("the wait", h.m.waiting)
	s := h.screen()
	for _, want := range []string{"openai says 20s (retry-after) · 20s left; deadline in 3m", "WAITING", "20s left"} {
		if !strings.Contains(s, want) {
			t.Fatalf("screen lacks %q:\n%s", want, s)
		}
	}
	if !h.m.ticking || h.m.tickEvery() != 250*time.Millisecond {
		t.Fatalf("the clock does not tick fast during a wait (ticking %v every %v)", h.m.ticking, h.m.tickEvery())
	}
	gen := h.m.tickGen
	h.tick(5 * time.Second)
	if !strings.Contains(h.screen(), "15s left") {
		t.Fatalf("countdown did not drain:\n%s", h.screen())
	}
	if h.m.tickGen != gen+1 {
		t.Errorf("one tick should schedule exactly one next tick (gen %d -> %d)", gen, h.m.tickGen)
	}
	// A stale tick (an old generation) changes nothing and schedules nothing.
	before := h.m.tickGen
	h.send(tickMsg{gen: gen})
	if h.m.tickGen != before {
		t.Errorf("a stale tick scheduled another")
	}
	h.press("esc")
	h.idle()
	if !strings.Contains(h.screen(), "Cancelled by you.") {
		t.Errorf("no cancel note:\n%s", h.screen())
	}
}

func TestClockStopsWhenIdle(t *testing.T) {
	h := newHarness(t, 120, 40, Options{}, okScript(openai, "hi"))
	if h.m.ticking {
		t.Fatal("the clock ticks at start")
	}
	h.typeText("x")
	h.press("enter")
	h.idle()
	// A limit reset 41s away still counts down, once a second.
	if got := h.m.tickEvery(); got != time.Second {
		t.Fatalf("tickEvery = %v, want 1s while a reset counts down", got)
	}
	h.tick(42 * time.Second)
	if h.m.ticking {
		t.Fatalf("the clock still ticks with nothing counting down")
	}
	n := len(h.ticks)
	h.send(tickMsg{gen: h.m.tickGen})
	if len(h.ticks) != n {
		t.Errorf("an idle tick scheduled another")
	}
}

// TestFailOverNowIsOneCall: ctrl+f asks the engine to move the call on
// (Call.Control), instead of cancelling it and running a second call; the
// log and the transcript say what was really waited.
func TestFailOverNowIsOneCall(t *testing.T) {
	h := newHarness(t, 120, 40, Options{}, moveScript)
	h.typeText("hi")
	h.press("enter")
	h.until("the wait", h.m.waiting)
	if !strings.Contains(h.screen(), "ctrl+f fails over now") {
		t.Errorf("no ctrl+f hint during a wait with a fallback:\n%s", h.screen())
	}
	h.tick(7 * time.Second)
	h.press("ctrl+f")
	h.idle()
	calls := h.runner.Calls()
	if len(calls) != 1 || calls[0].Control == nil {
		t.Fatalf("ctrl+f ran %d calls (want one, steered by its Control)", len(calls))
	}
	if fc := h.runner.controls[calls[0].Control]; fc == nil || fc.asked != 1 {
		t.Fatalf("Control.FailOver was not called once: %+v", fc)
	}
	s := h.screen()
	for _, want := range []string{
		"You failed over after 7s of a 20s wait on openai/gpt-5.4-mini; trying",
		"wait 20s -> failed over by you after 7s of a 20s wait",
		"waited 7s",
		"-> failed over by you",
		"served by anthropic/claude-haiku-5-5",
		"Served by the fallback.",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "waited 20s") || strings.Contains(s, "Cancelled by you") {
		t.Errorf("the screen reports a wait that did not happen, or a cancel:\n%s", s)
	}
	if h.m.stats.calls != 1 || h.m.stats.requests != 2 {
		t.Errorf("stats = %+v (one call of two requests)", h.m.stats)
	}
}

// TestFailOverHintOnlyWithFallback: no ctrl+f hint, and ctrl+f does
// nothing but say so, when the engine says no target is left.
func TestFailOverHintOnlyWithFallback(t *testing.T) {
	h := newHarness(t, 120, 40, Options{Chain: []stream.Target{openai}}, waitScript)
	h.runner.noMove = true
	h.press("ctrl+f")
	if !strings.Contains(h.m.status, "while your call runs") {
		t.Errorf("status = %q", h.m.status)
	}
	h.typeText("hi")
	h.press("enter")
	h.until("the wait", h.m.waiting)
	h.send(statusClearMsg{gen: h.m.statusGen})
	if s := h.screen(); strings.Contains(s, "ctrl+f") {
		t.Errorf("ctrl+f offered with no fallback:\n%s", s)
	}
	h.press("ctrl+f")
	if !strings.Contains(h.m.status, "No fallback left") || !h.m.waiting() {
		t.Errorf("status = %q, waiting %v", h.m.status, h.m.waiting())
	}
	if n := len(h.runner.Calls()); n != 1 {
		t.Errorf("%d calls ran", n)
	}
}

func TestCtrlCCancelsThenQuits(t *testing.T) {
	h := newHarness(t, 120, 40, Options{}, streamUntilCancel)
	h.typeText("hi")
	h.press("enter")
	h.until("streaming", func() bool { return strings.Contains(h.screen(), "Half an ans") })
	_, cmd := h.m.Update(keyMsg("ctrl+c"))
	if isQuit(cmd) {
		t.Fatal("ctrl+c with a call in flight quit")
	}
	h.do(cmd)
	h.idle()
	s := h.screen()
	if !strings.Contains(s, "Cancelled by you.") || !strings.Contains(s, "Half an ans") {
		t.Errorf("cancel not shown with the partial text kept:\n%s", s)
	}
	_, cmd = h.m.Update(keyMsg("ctrl+c"))
	if !isQuit(cmd) {
		t.Fatal("ctrl+c when idle did not quit")
	}
}

// isQuit runs cmd (and a batch's commands) looking for tea.QuitMsg; it must
// only be used on commands that do not block.
func isQuit(cmd tea.Cmd) bool {
	if cmd == nil {
		return false
	}
	switch msg := cmd().(type) {
	case tea.QuitMsg:
		return true
	case tea.BatchMsg:
		for _, c := range msg {
			if isQuit(c) {
				return true
			}
		}
	}
	return false
}

func TestFocusRules(t *testing.T) {
	h := newHarness(t, 120, 40, Options{Simulated: true, Faults: &fakeFaults{}})
	// In the input, single letters type.
	h.typeText("q?hd")
	if h.m.input.Value() != "q?hd" || h.m.mode != modeMain {
		t.Fatalf("letters acted in the input: value %q mode %v", h.m.input.Value(), h.m.mode)
	}
	// Esc leaves the input when nothing is in flight; i comes back.
	h.press("esc")
	if h.m.focus != focusConversation || h.m.input.Focused() {
		t.Fatalf("esc did not leave the input (focus %v)", h.m.focus)
	}
	h.press("?")
	if h.m.mode != modeHelp {
		t.Fatalf("? did not open help")
	}
	if s := h.screen(); !strings.Contains(s, "fail over now") || !strings.Contains(s, "copy the attempt as curl") {
		t.Errorf("help lacks keys:\n%s", s)
	}
	h.press("esc")
	h.press("i")
	if h.m.focus != focusInput || !h.m.input.Focused() {
		t.Fatalf("i did not focus the input")
	}
	// Tab cycles every pane back to the input.
	seen := map[focus]bool{}
	for i := 0; i < int(focusCount); i++ {
		h.press("tab")
		seen[h.m.focus] = true
	}
	if len(seen) != int(focusCount) || h.m.focus != focusInput {
		t.Errorf("tab visited %v, ended on %v", seen, h.m.focus)
	}
	h.press("shift+tab")
	if h.m.focus != focusTargets {
		t.Errorf("shift+tab from the input went to %v", h.m.focus)
	}
	// Outside the input, q quits.
	_, cmd := h.m.Update(keyMsg("q"))
	if !isQuit(cmd) {
		t.Errorf("q outside the input did not quit")
	}
}

func TestResizeReflows(t *testing.T) {
	h := newHarness(t, 120, 40, Options{}, failoverScript)
	h.typeText("Summarize the incident in two lines, please, with every detail you have.")
	h.press("enter")
	h.idle()
	for _, sz := range [][2]int{{120, 40}, {100, 30}, {99, 30}, {80, 24}, {80, 23}, {60, 16}, {200, 60}} {
		h.send(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
		h.checkFrame()
		s := h.screen()
		if !strings.Contains(s, "served by anthropic") {
			t.Errorf("%dx%d: the answer's badge is gone:\n%s", sz[0], sz[1], s)
		}
		if got, want := strings.Contains(s, "┌ attempts"), sz[1] >= 24; got != want {
			t.Errorf("%dx%d: attempt log shown = %v, want %v", sz[0], sz[1], got, want)
		}
	}
	// Below 24 rows the log hides behind a key.
	h.send(tea.WindowSizeMsg{Width: 80, Height: 20})
	h.press("tab")
	h.press("a")
	if !strings.Contains(h.screen(), "┌ attempts") {
		t.Errorf("a did not show the attempt log at 80x20")
	}
	h.checkFrame()
	h.send(tea.WindowSizeMsg{Width: 50, Height: 10})
	if s := h.screen(); !strings.Contains(s, "needs a terminal of at least 60x16") {
		t.Errorf("too small a terminal does not say what it needs:\n%s", s)
	}
	h.checkFrame()
}

func TestQuotaStopShowsProviderWords(t *testing.T) {
	h := newHarness(t, 120, 40, Options{}, quotaScript)
	h.typeText("hi")
	h.press("enter")
	h.idle()
	s := h.screen()
	for _, want := range []string{"STOPPED", "quota: You exceeded your current quota", "The call stopped", "needs a person"} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q:\n%s", want, s)
		}
	}
	if h.m.stats.calls != 1 || h.m.stats.wasted != 1 {
		t.Errorf("stats = %+v", h.m.stats)
	}
}

func TestMidStreamBreakShowsWhereItBroke(t *testing.T) {
	h := newHarness(t, 120, 40, Options{}, midStreamScript)
	h.typeText("hi")
	h.press("enter")
	h.idle()
	s := h.screen()
	i := strings.Index(s, "The primary database failed over at\n")
	if i < 0 {
		i = strings.Index(s, "The primary database failed over at ")
	}
	j := strings.Index(s, "The stream broke here: openai is overloaded. Retrying openai after a wait.")
	k := strings.Index(s, "served by openai/gpt-5.4-mini")
	if i < 0 || j < 0 || k < 0 || !(i < j && j < k) {
		t.Fatalf("want the partial text, then the break, then the served answer (%d %d %d):\n%s", i, j, k, s)
	}
	if !strings.Contains(s, "HTTP 200 overload overloaded_error: Overloaded") {
		t.Errorf("no raw detail under the break:\n%s", s)
	}
}

func TestLateEventsOfAnOldRunAreDropped(t *testing.T) {
	h := newHarness(t, 120, 40, Options{}, waitScript)
	h.typeText("hi")
	h.press("enter")
	h.until("the wait", h.m.waiting)
	before := len(h.m.log.rows)
	h.send(eventsMsg{events: []retry.Event{{Kind: retry.EventAttemptEnd, CallID: "someone-else", Attempt: &retry.Attempt{Target: openai, Class: stream.ClassOK}}}})
	if len(h.m.log.rows) != before {
		t.Errorf("an event of another call landed")
	}
	h.send(runDoneMsg{runID: "someone-else"})
	if !h.m.inFlight() {
		t.Errorf("another run's end ended this call")
	}
}

func TestUnavailableTargetsNameTheirVariable(t *testing.T) {
	h := newHarness(t, 120, 40, Options{Chain: []stream.Target{gemini, openai}}, okScript(openai, "ok"))
	s := h.screen()
	if !strings.Contains(s, "NO KEY") || !strings.Contains(s, "set GEMINI_API_KEY") {
		t.Fatalf("an unavailable target is not listed with its variable:\n%s", s)
	}
	h.typeText("hi")
	h.press("enter")
	h.idle()
	if c := h.runner.Calls(); len(c) != 1 || len(c[0].Chain) != 1 || c[0].Chain[0] != openai {
		t.Errorf("the call went to targets without a key: %+v", c)
	}
}

func TestTargetsPickAndReorder(t *testing.T) {
	h := newHarness(t, 120, 40, Options{Targets: []TargetInfo{{Target: openai, Available: true}, {Target: anthropic, Available: true}, {Target: gemini, Available: true}}})
	h.press("shift+tab") // to targets
	if h.m.focus != focusTargets {
		t.Fatalf("focus = %v", h.m.focus)
	}
	h.press("j")
	h.send(tea.KeyPressMsg{Code: 'K', Text: "K"}) // anthropic up
	if h.m.chain[0] != anthropic || h.m.chain[1] != openai {
		t.Fatalf("chain = %v", h.m.chain)
	}
	h.press("j")
	h.press("j") // gemini, not in the chain
	h.press("space")
	if len(h.m.chain) != 3 || h.m.chain[2] != gemini {
		t.Fatalf("chain = %v", h.m.chain)
	}
	h.press("k")
	h.press("space") // openai out
	if len(h.m.chain) != 2 || h.m.chain[0] != anthropic || h.m.chain[1] != gemini {
		t.Fatalf("chain = %v", h.m.chain)
	}
	h.checkFrame()
}

type fakeFaults struct {
	mu     sync.Mutex
	got    []FaultRequest
	failIt bool
}

func (f *fakeFaults) Inject(ctx context.Context, r FaultRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failIt {
		return errors.New("simulator not reachable")
	}
	f.got = append(f.got, r)
	return nil
}

func (f *fakeFaults) SetScenario(ctx context.Context, name string) error { return nil }

func TestDemoFaultKeys(t *testing.T) {
	ff := &fakeFaults{}
	h := newHarness(t, 120, 40, Options{Simulated: true, Scenario: "steady", Faults: ff})
	if !strings.Contains(h.screen(), "SIMULATED (scenario: steady)") {
		t.Fatalf("no SIMULATED badge:\n%s", h.screen())
	}
	h.press("tab")
	h.press("d")
	if h.m.mode != modeFaults || !strings.Contains(h.screen(), "rate_limit") {
		t.Fatalf("d did not open the fault menu:\n%s", h.screen())
	}
	h.press("1")
	h.until("the injection", func() bool { return strings.Contains(h.m.status, "Injected") })
	if len(ff.got) != 1 || ff.got[0] != (FaultRequest{Provider: "openai", Kind: "rate_limit", RetryAfter: 20 * time.Second}) {
		t.Errorf("injected %+v", ff.got)
	}
	ff.failIt = true
	h.press("d")
	h.press("5")
	h.until("the failure", func() bool { return strings.Contains(h.m.status, "Could not inject failover-demo") })

	// A real session has no demo faults.
	r := newHarness(t, 120, 40, Options{})
	r.press("tab")
	r.press("d")
	if r.m.mode != modeMain || !strings.Contains(r.m.status, "simulated session only") {
		t.Errorf("d in a real session: mode %v status %q", r.m.mode, r.m.status)
	}
	if !strings.Contains(r.screen(), "LIVE") || strings.Contains(r.screen(), "SIMULATED") {
		t.Errorf("a real session's badge is wrong")
	}
}

type fakeHistory struct {
	calls []CallSummary
	err   error
}

func (f *fakeHistory) List(ctx context.Context, flt HistoryFilter) ([]CallSummary, error) {
	var out []CallSummary
	for _, c := range f.calls {
		if flt.Text == "" || strings.Contains(c.PromptHead, flt.Text) {
			out = append(out, c)
		}
	}
	return out, f.err
}

func (f *fakeHistory) Show(ctx context.Context, id string) (CallDetail, error) {
	for _, c := range f.calls {
		if c.ID == id {
			return CallDetail{CallSummary: c, Prompt: c.PromptHead, Text: "the answer text",
				Attempts: []retry.Attempt{{N: 1, Target: openai, Status: 200, Class: stream.ClassOK, StartedAt: c.Time, RequestID: "req_1"}}}, nil
		}
	}
	return CallDetail{}, errors.New("no such call")
}

func TestHistoryView(t *testing.T) {
	fh := &fakeHistory{calls: []CallSummary{
		{ID: "c1", Time: t0, PromptHead: "first prompt", Outcome: retry.OutcomeOK, ServedBy: "openai/gpt-5.4-mini", Attempts: 1, Duration: time.Second},
		{ID: "c2", Time: t0.Add(time.Minute), PromptHead: "second prompt", Outcome: retry.OutcomeStopped, Attempts: 1, Duration: 300 * time.Millisecond},
	}}
	h := newHarness(t, 120, 40, Options{History: fh})
	h.press("tab")
	h.press("h")
	h.until("the list", func() bool { return len(h.m.hist.calls) == 2 })
	s := h.screen()
	if !strings.Contains(s, "first prompt") || !strings.Contains(s, "stopped") {
		t.Fatalf("history list:\n%s", s)
	}
	h.press("/")
	h.typeText("second")
	h.press("enter")
	h.until("the filtered list", func() bool { return len(h.m.hist.calls) == 1 })
	h.press("enter")
	h.until("the detail", func() bool { return h.m.hist.detail != nil })
	if s := h.screen(); !strings.Contains(s, "the answer text") || !strings.Contains(s, "call c2") {
		t.Fatalf("detail:\n%s", s)
	}
	h.press("esc")
	h.press("esc")
	if h.m.mode != modeMain {
		t.Errorf("esc did not leave the history")
	}
	h.checkFrame()

	// A store that fails is a sentence, not a crash.
	bad := newHarness(t, 120, 40, Options{History: &fakeHistory{err: errors.New("timeout: history.db is locked by another limitscope")}})
	bad.press("tab")
	bad.press("h")
	bad.until("the error", func() bool { return bad.m.hist.err != nil })
	if s := bad.screen(); !strings.Contains(s, "The history is not available.") || !strings.Contains(s, "locked by another") {
		t.Errorf("history error:\n%s", s)
	}
}

func TestNoColorKeepsWordsAndDropsColour(t *testing.T) {
	h := newHarness(t, 120, 40, Options{NoColor: true}, quotaScript)
	h.typeText("hi")
	h.press("enter")
	h.idle()
	v := h.m.View().Content
	if strings.Contains(v, "38;2;") || strings.Contains(v, "48;2;") || strings.Contains(v, "38;5;") {
		t.Errorf("NO_COLOR frame holds colour sequences")
	}
	if !strings.Contains(h.screen(), "STOPPED") {
		t.Errorf("NO_COLOR frame lost the state word")
	}
}

func TestBackgroundColourPicksTheme(t *testing.T) {
	h := newHarness(t, 120, 40, Options{})
	if !h.m.st.Dark {
		t.Fatal("default is not dark")
	}
	h.send(tea.BackgroundColorMsg{Color: lightGrey{}})
	if h.m.st.Dark {
		t.Errorf("a light background kept the dark theme")
	}
}

type lightGrey struct{}

func (lightGrey) RGBA() (r, g, b, a uint32) { return 0xeeee, 0xeeee, 0xeeee, 0xffff }

func TestCopyKeys(t *testing.T) {
	h := newHarness(t, 120, 40, Options{Curl: func(a retry.Attempt, prompt string) string {
		return "curl https://api.example/" + a.Target.Provider + " -H 'Authorization: Bearer [redacted]' -d " + prompt
	}}, okScript(openai, "answer"))
	h.press("tab")
	h.press("y")
	if !strings.Contains(h.m.status, "No answer") {
		t.Errorf("status = %q", h.m.status)
	}
	h.press("i")
	h.typeText("hi")
	h.press("enter")
	h.idle()
	h.press("tab")
	h.press("y")
	if !strings.Contains(h.m.status, "Copied the last answer") {
		t.Errorf("status = %q", h.m.status)
	}
	h.press("c")
	if !strings.Contains(h.m.status, "a reference to its variable, not its value") {
		t.Errorf("status = %q", h.m.status)
	}
}

func TestRecorderGetsEveryEvent(t *testing.T) {
	rec := &recorder{}
	h := newHarness(t, 120, 40, Options{Recorder: rec}, failoverScript)
	h.typeText("hi")
	h.press("enter")
	h.idle()
	kinds := rec.kinds()
	want := "call_start attempt_start attempt_end attempt_start text text attempt_end call_end"
	if kinds != want {
		t.Errorf("recorded %q, want %q", kinds, want)
	}
	if len(rec.calls) != 1 || rec.calls[0].Prompt != "hi" || rec.calls[0].ID != rec.evs[0].CallID {
		t.Errorf("RecordCall got %+v", rec.calls)
	}
}

type recorder struct {
	mu    sync.Mutex
	evs   []retry.Event
	calls []retry.Call
}

func (r *recorder) RecordCall(c retry.Call) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

func (r *recorder) Record(ev retry.Event) {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	r.mu.Unlock()
}

func (r *recorder) kinds() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var k []string
	for _, e := range r.evs {
		k = append(k, string(e.Kind))
	}
	return strings.Join(k, " ")
}

func TestOutcomesAreSentences(t *testing.T) {
	deferred := func(ctx context.Context, e *emitter) retry.Result {
		a := e.start(openai)
		rateLimited(a, 10*time.Minute, retry.DecideDefer)
		e.finish(a)
		res := e.end(retry.OutcomeDeferred, nil, &stream.Error{Class: stream.ClassRateLimit, Status: 429})
		return res
	}
	gaveUp := func(ctx context.Context, e *emitter) retry.Result {
		for i := 0; i < 2; i++ {
			a := e.start(openai)
			a.Status, a.Class, a.Decision = 503, stream.ClassServer, retry.DecideRetry
			e.finish(a)
		}
		return e.end(retry.OutcomeGaveUp, nil, &stream.Error{Class: stream.ClassServer, Status: 503})
	}
	failed := func(ctx context.Context, e *emitter) retry.Result {
		a := e.start(openai)
		a.Status, a.Class, a.Code, a.Decision = 400, stream.ClassCaller, "invalid_request_error", retry.DecideFail
		e.finish(a)
		return e.end(retry.OutcomeFailed, nil, &stream.Error{Class: stream.ClassCaller, Status: 400})
	}
	cooldown := func(ctx context.Context, e *emitter) retry.Result {
		r := retry.Result{CallID: e.c.ID, Outcome: retry.OutcomeStopped, CooldownHit: true, CooldownUntil: t0.Add(time.Hour),
			Err:      &stream.Error{Class: stream.ClassQuota, Message: "openai account is cooling down until 2026-11-29T15:02:00Z after a quota stop on openai/gpt-5.4-mini"},
			Cooldown: &retry.Cooldown{Scope: "openai:acct-1f2e", Until: t0.Add(time.Hour), Since: t0, Target: "openai/gpt-5.4-mini", Code: "insufficient_quota", Message: "You exceeded your current quota."}}
		e.emit(retry.Event{Kind: retry.EventCallEnd, Result: &r})
		return r
	}
	for _, tc := range []struct {
		name string
		s    script
		want []string
	}{
		{"deferred", deferred, []string{"Deferring: the wait is longer than max-wait.", "Deferred: the server asked for a wait longer than max-wait"}},
		{"gave_up", gaveUp, []string{"openai had a server error. Retrying openai after a wait.", "Gave up after 2 requests"}},
		{"failed", failed, []string{"openai rejected the request. Not retrying: fix the request.", "Failed: the request itself is wrong"}},
		{"cooldown", cooldown, []string{"Not sent: a quota stop on openai/gpt-5.4-mini (insufficient_quota) blocks it", "openai account is cooling down", "STOPPED"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 120, 40, Options{}, tc.s)
			h.typeText("hi")
			h.press("enter")
			h.idle()
			s := h.screen()
			for _, w := range tc.want {
				if !strings.Contains(s, w) {
					t.Errorf("screen lacks %q:\n%s", w, s)
				}
			}
			h.checkFrame()
		})
	}
}
