package tui

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"go.uber.org/goleak"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

func TestMain(m *testing.M) {
	time.Local = time.UTC // timestamps on screen are local; pin them for goldens
	for _, v := range stream.AllEnvVars() {
		os.Unsetenv(v)
	}
	code := m.Run()
	// No run or feed may outlive its test (harden). Ignored: teatest's
	// interrupt watcher, which lives as long as the process by design, and
	// a tea.Tick command of a finished program, which bubbletea leaves to
	// its timer (it ends when the timer fires).
	if err := goleak.Find(
		goleak.IgnoreTopFunction("github.com/charmbracelet/x/exp/teatest/v2.NewTestModel.func2"),
		goleak.IgnoreTopFunction("charm.land/bubbletea/v2.Tick.func1"),
	); code == 0 && err != nil {
		fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

var (
	t0        = time.Date(2026, 11, 29, 14, 2, 0, 0, time.UTC)
	openai    = stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	anthropic = stream.Target{Provider: "anthropic", Model: "claude-haiku-5-5"}
	gemini    = stream.Target{Provider: "gemini", Model: "gemini-3.8-flash"}
)

// fakeClock is the test's time; the model reads it through Options.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// script is one call's scripted run.
type script func(ctx context.Context, e *emitter) retry.Result

// fakeRunner runs scripted calls in order, recording each call.
type fakeRunner struct {
	clock    *fakeClock
	mu       sync.Mutex
	scripts  []script
	calls    []retry.Call
	controls map[*retry.Control]*fakeControl
	noMove   bool // controls report no target left
}

// fakeControl stands in for the engine's side of a retry.Control: it says
// whether a target is left and counts FailOver requests, which a script
// sees on moved.
type fakeControl struct {
	mu    sync.Mutex
	can   bool
	asked int
	moved chan struct{}
}

func (c *fakeControl) FailOver() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.can {
		return false
	}
	c.asked++
	if c.asked == 1 {
		close(c.moved)
	}
	return true
}

func (c *fakeControl) CanFailOver() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.can
}

// control is the model's control hook: one fakeControl per call, reachable
// from the script through the call's *retry.Control.
func (r *fakeRunner) control(c *retry.Control) controller {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.controls == nil {
		r.controls = map[*retry.Control]*fakeControl{}
	}
	fc := &fakeControl{can: !r.noMove, moved: make(chan struct{})}
	r.controls[c] = fc
	return fc
}

func (r *fakeRunner) Run(ctx context.Context, c retry.Call, sink func(retry.Event)) retry.Result {
	r.mu.Lock()
	n := len(r.calls)
	r.calls = append(r.calls, c)
	var s script
	if n < len(r.scripts) {
		s = r.scripts[n]
	}
	r.mu.Unlock()
	r.mu.Lock()
	fc := r.controls[c.Control]
	r.mu.Unlock()
	if fc == nil {
		fc = &fakeControl{moved: make(chan struct{})}
	}
	e := &emitter{c: c, sink: sink, clock: r.clock, ctl: fc}
	e.emit(retry.Event{Kind: retry.EventCallStart, Chain: c.Chain})
	if s == nil {
		return e.end(retry.OutcomeFailed, nil, &stream.Error{Class: stream.ClassCaller, Message: "nothing scripted"})
	}
	return s(ctx, e)
}

func (r *fakeRunner) Calls() []retry.Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]retry.Call(nil), r.calls...)
}

// emitter emits a call's events the way the engine does.
type emitter struct {
	c        retry.Call
	sink     func(retry.Event)
	clock    *fakeClock
	attempts []retry.Attempt
	text     string
	ctl      *fakeControl
}

func (e *emitter) emit(ev retry.Event) {
	ev.CallID = e.c.ID
	if ev.Time.IsZero() {
		ev.Time = e.clock.Now()
	}
	e.sink(ev)
}

func (e *emitter) start(t stream.Target) *retry.Attempt {
	a := &retry.Attempt{N: len(e.attempts) + 1, Target: t, StartedAt: e.clock.Now()}
	cp := *a
	e.emit(retry.Event{Kind: retry.EventAttemptStart, Attempt: &cp})
	e.text = ""
	return a
}

func (e *emitter) say(parts ...string) {
	for _, p := range parts {
		e.text += p
		e.emit(retry.Event{Kind: retry.EventText, Text: p})
	}
}

func (e *emitter) finish(a *retry.Attempt) {
	if a.Class == "" {
		a.Class = stream.ClassOK
	}
	if a.Class != stream.ClassOK {
		a.PartialText = e.text
	}
	a.Duration = e.clock.Now().Sub(a.StartedAt)
	e.attempts = append(e.attempts, *a)
	cp := *a
	e.emit(retry.Event{Kind: retry.EventAttemptEnd, Attempt: &cp})
}

func (e *emitter) wait(t stream.Target, d, asked time.Duration, src stream.DelaySource, reason string) {
	now := e.clock.Now()
	e.emit(retry.Event{Kind: retry.EventWait, Wait: &retry.Wait{Target: t, Duration: d, Asked: asked, Source: src,
		Reason: reason, Until: now.Add(d), Deadline: t0.Add(3 * time.Minute)}})
}

// waitEnd emits the end of a wait, with the time actually waited.
func (e *emitter) waitEnd(t stream.Target, d, waited time.Duration, by retry.WaitEnd) {
	e.emit(retry.Event{Kind: retry.EventWaitEnd, Wait: &retry.Wait{Target: t, Duration: d, Waited: waited, EndedBy: by}})
}

func (e *emitter) end(o retry.Outcome, served *stream.Target, err *stream.Error) retry.Result {
	res := retry.Result{CallID: e.c.ID, Outcome: o, ServedBy: served, Attempts: e.attempts, Err: err, Ended: e.clock.Now()}
	if o == retry.OutcomeOK {
		res.Text = e.text
	}
	cp := res
	e.emit(retry.Event{Kind: retry.EventCallEnd, Result: &cp})
	return res
}

func dur(d time.Duration) *time.Duration { return &d }

// harness drives a Model the way a Program does: commands run on their own
// goroutines, the feed delivers engine events, and Update applies every
// message on the test goroutine.
type harness struct {
	t      *testing.T
	m      *Model
	clock  *fakeClock
	runner *fakeRunner
	msgs   chan tea.Msg
	cancel context.CancelFunc
	wg     sync.WaitGroup // the feed goroutine
	cmds   sync.WaitGroup // command goroutines (do)
	manual bool           // no feed goroutine: settle takes the feed's messages itself
	ticks  []time.Duration
}

func newHarness(t *testing.T, w, h int, opts Options, scripts ...script) *harness {
	t.Helper()
	return buildHarness(t, false, w, h, opts, scripts...)
}

// newManualHarness is newHarness without the feed goroutine and its 16 ms
// timer: settle delivers everything queued, so what a test sees does not
// depend on scheduling.
func newManualHarness(t *testing.T, w, h int, opts Options, scripts ...script) *harness {
	t.Helper()
	return buildHarness(t, true, w, h, opts, scripts...)
}

func buildHarness(t *testing.T, manual bool, w, h int, opts Options, scripts ...script) *harness {
	t.Helper()
	clock := &fakeClock{t: t0}
	r := &fakeRunner{clock: clock, scripts: scripts}
	if opts.Runner == nil {
		opts.Runner = r
	}
	if opts.Chain == nil {
		opts.Chain = []stream.Target{openai, anthropic}
	}
	if opts.Targets == nil {
		opts.Targets = []TargetInfo{{Target: openai, Available: true}, {Target: anthropic, Available: true},
			{Target: gemini, Missing: "GEMINI_API_KEY"}}
	}
	opts.Now = clock.Now
	hs := &harness{t: t, clock: clock, runner: r, msgs: make(chan tea.Msg, 4096), manual: manual}
	m := New(opts)
	m.control = r.control
	m.after = func(d time.Duration, fn func(time.Time) tea.Msg) tea.Cmd {
		hs.ticks = append(hs.ticks, d)
		return nil // the test sends ticks itself
	}
	hs.m = m
	ctx, cancel := context.WithCancel(context.Background())
	hs.cancel = cancel
	if !manual {
		hs.wg.Add(1)
		go func() {
			defer hs.wg.Done()
			m.feed.run(ctx, func(msg tea.Msg) { hs.msgs <- msg })
		}()
	}
	t.Cleanup(hs.close)
	hs.send(tea.WindowSizeMsg{Width: w, Height: h})
	return hs
}

func (h *harness) close() {
	h.m.stop()
	h.cancel()
	h.wg.Wait()
	h.cmds.Wait()
}

// settle runs the model until nothing is left to do: every command goroutine
// has returned and every message they and the feed queued is applied. Only
// for a manual harness with scripts that end by themselves.
func (h *harness) settle() {
	h.t.Helper()
	for {
		h.cmds.Wait()
		progressed := false
		for _, msg := range h.m.feed.take() {
			h.send(msg)
			progressed = true
		}
		for len(h.msgs) > 0 {
			h.send(<-h.msgs)
			progressed = true
		}
		if !progressed {
			return
		}
	}
}

func (h *harness) send(msg tea.Msg) {
	_, cmd := h.m.Update(msg)
	h.do(cmd)
}

// do runs a command like the program does, on its own goroutine.
func (h *harness) do(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	h.cmds.Add(1)
	go func() {
		defer h.cmds.Done()
		msg := cmd()
		if b, ok := msg.(tea.BatchMsg); ok {
			for _, c := range b {
				h.do(c)
			}
			return
		}
		if msg != nil {
			h.msgs <- msg
		}
	}()
}

// until applies messages until cond holds.
func (h *harness) until(what string, cond func() bool) {
	h.t.Helper()
	if h.manual {
		h.settle()
		if !cond() {
			h.t.Fatalf("settled without %s; screen:\n%s", what, h.screen())
		}
		return
	}
	deadline := time.After(5 * time.Second)
	for !cond() {
		select {
		case msg := <-h.msgs:
			h.send(msg)
		case <-deadline:
			h.t.Fatalf("timed out waiting for %s; screen:\n%s", what, h.screen())
		}
	}
}

func (h *harness) typeText(s string) {
	for _, r := range s {
		h.send(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
}

func (h *harness) press(k string) {
	h.send(keyMsg(k))
}

func keyMsg(k string) tea.KeyPressMsg {
	switch k {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "shift+tab":
		return tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift}
	case "space":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	case "ctrl+c":
		return tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	case "ctrl+f":
		return tea.KeyPressMsg{Code: 'f', Mod: tea.ModCtrl}
	}
	r := []rune(k)
	return tea.KeyPressMsg{Code: r[0], Text: k}
}

// tick advances the clock and delivers the clock tick.
func (h *harness) tick(d time.Duration) {
	h.clock.Advance(d)
	h.send(tickMsg{gen: h.m.tickGen})
}

// idle waits until the call in flight is over.
func (h *harness) idle() {
	h.t.Helper()
	h.until("the call to end", func() bool { return h.m.call == nil })
}

func (h *harness) screen() string {
	return ansi.Strip(h.m.View().Content)
}

// checkFrame asserts the frame is exactly the terminal's size.
func (h *harness) checkFrame() {
	h.t.Helper()
	lines := strings.Split(h.m.View().Content, "\n")
	if len(lines) != h.m.height {
		h.t.Fatalf("frame has %d lines, want %d", len(lines), h.m.height)
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w != h.m.width {
			h.t.Fatalf("line %d is %d cells, want %d: %q", i, w, h.m.width, ansi.Strip(l))
		}
	}
}

// Scripts.

func okScript(t stream.Target, parts ...string) script {
	return func(ctx context.Context, e *emitter) retry.Result {
		a := e.start(t)
		e.say(parts...)
		a.Status, a.RequestID = 200, "req_011"
		a.Limits = &stream.Limits{At: t0, Requests: &stream.Window{Limit: 60, Remaining: 58, HasLimit: true, HasRemaining: true, Reset: e.clock.Now().Add(41 * time.Second)}}
		e.finish(a)
		return e.end(retry.OutcomeOK, &t, nil)
	}
}

func rateLimited(a *retry.Attempt, after time.Duration, d retry.Decision) {
	a.Status, a.Class, a.Code, a.RequestID = 429, stream.ClassRateLimit, "rate_limit_exceeded", "req_8f2"
	a.Message = "Rate limit reached for gpt-5.4-mini on requests per min (RPM): Limit 60, Used 60."
	a.RetryAfter, a.DelaySource, a.Decision = dur(after), stream.SourceRetryAfter, d
}

// failoverScript: openai answers 429 retry-after 20s, the engine fails over,
// anthropic answers.
func failoverScript(ctx context.Context, e *emitter) retry.Result {
	a := e.start(openai)
	rateLimited(a, 20*time.Second, retry.DecideFailover)
	e.finish(a)
	b := e.start(anthropic)
	e.say("The primary database failed over at 14:02; ", "writes paused for 40 s. No data was lost.")
	b.Status, b.RequestID = 200, "req_ant"
	b.Limits = &stream.Limits{Requests: &stream.Window{Limit: 50, Remaining: 49, HasLimit: true, HasRemaining: true},
		InputTokens: &stream.Window{Limit: 2000000, Remaining: 2000000, HasLimit: true, HasRemaining: true, Rounded: true}}
	e.finish(b)
	served := stream.Target{Provider: "anthropic", Model: "claude-haiku-5-5-20260101"}
	return e.end(retry.OutcomeOK, &served, nil)
}

// moveScript: openai answers 429 retry-after 20s, the engine waits, the user
// fails over (ctrl+f) during the wait, and anthropic answers: one call.
func moveScript(ctx context.Context, e *emitter) retry.Result {
	a := e.start(openai)
	rateLimited(a, 20*time.Second, retry.DecideRetry)
	e.finish(a)
	e.wait(openai, 20*time.Second, 20*time.Second, stream.SourceRetryAfter, "openai asked 20s (retry-after)")
	from := e.clock.Now()
	select {
	case <-ctx.Done():
		return e.end(retry.OutcomeCancelled, nil, &stream.Error{Class: stream.ClassCancelled, Err: ctx.Err()})
	case <-e.ctl.moved:
	}
	waited := e.clock.Now().Sub(from)
	e.attempts[len(e.attempts)-1].Waited = waited
	e.attempts[len(e.attempts)-1].FailedOverByUser = true
	e.attempts[len(e.attempts)-1].Decision = retry.DecideFailover
	e.waitEnd(openai, 20*time.Second, waited, retry.WaitFailover)
	b := e.start(anthropic)
	e.say("Served by the fallback.")
	b.Status = 200
	e.finish(b)
	return e.end(retry.OutcomeOK, &anthropic, nil)
}

// waitScript: openai answers 429 retry-after 20s and the engine waits for it
// (until cancelled).
func waitScript(ctx context.Context, e *emitter) retry.Result {
	a := e.start(openai)
	rateLimited(a, 20*time.Second, retry.DecideRetry)
	e.finish(a)
	e.wait(openai, 20*time.Second, 20*time.Second, stream.SourceRetryAfter, "openai asked 20s (retry-after)")
	<-ctx.Done()
	return e.end(retry.OutcomeCancelled, nil, &stream.Error{Class: stream.ClassCancelled, Err: ctx.Err()})
}

func quotaScript(ctx context.Context, e *emitter) retry.Result {
	a := e.start(openai)
	a.Status, a.Class, a.Code, a.Decision = 429, stream.ClassQuota, "insufficient_quota", retry.DecideStop
	a.Message = "You exceeded your current quota, please check your plan and billing details."
	e.finish(a)
	return e.end(retry.OutcomeStopped, nil, &stream.Error{Class: stream.ClassQuota, Status: 429, Code: "insufficient_quota", Message: a.Message})
}

func midStreamScript(ctx context.Context, e *emitter) retry.Result {
	a := e.start(openai)
	e.say("The primary database ", "failed over at")
	a.Status, a.Class, a.Code, a.MidStream, a.Decision = 200, stream.ClassOverload, "overloaded_error", true, retry.DecideRetry
	a.Message = "Overloaded"
	e.finish(a)
	e.wait(openai, 1200*time.Millisecond, 0, stream.SourceBackoff, "backoff after an overload")
	e.clock.Advance(1200 * time.Millisecond)
	b := e.start(openai)
	e.say("The primary database failed over at 14:02.")
	b.Status = 200
	e.finish(b)
	return e.end(retry.OutcomeOK, &openai, nil)
}

// streamUntilCancel streams a little, then blocks until cancelled.
func streamUntilCancel(ctx context.Context, e *emitter) retry.Result {
	a := e.start(openai)
	e.say("Half an ans")
	<-ctx.Done()
	a.Class, a.Decision = stream.ClassCancelled, retry.DecideCancel
	e.finish(a)
	return e.end(retry.OutcomeCancelled, nil, &stream.Error{Class: stream.ClassCancelled, Err: ctx.Err()})
}

// cancelMidStream streams a little after HTTP 200, then blocks until
// cancelled: the attempt ends cancelled mid-stream, as the engine reports a
// cancel that came after the first bytes.
func cancelMidStream(ctx context.Context, e *emitter) retry.Result {
	a := e.start(openai)
	e.say("Half an ans")
	<-ctx.Done()
	e.clock.Advance(800 * time.Millisecond)
	a.Status, a.Class, a.MidStream, a.Decision, a.RequestID = 200, stream.ClassCancelled, true, retry.DecideCancel, "req_cx1"
	a.Message = "cancelled"
	e.finish(a)
	return e.end(retry.OutcomeCancelled, nil, &stream.Error{Class: stream.ClassCancelled, Err: ctx.Err()})
}

// dailyQuotaScript: Gemini's per-day quota is spent; the stop resets at
// 08:00 (a cooldown with its end), and the provider's message is long.
func dailyQuotaScript(ctx context.Context, e *emitter) retry.Result {
	a := e.start(gemini)
	a.Status, a.Class, a.Code, a.Decision = 429, stream.ClassQuota, "RESOURCE_EXHAUSTED", retry.DecideStop
	a.QuotaID = "GenerateRequestsPerDayPerProjectPerModel-FreeTier"
	a.Message = "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. * Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 250, model: gemini-3.8-flash Please retry in 22s."
	a.Cooldown = &retry.Cooldown{Scope: "gemini:acct-1", Since: t0, Until: time.Date(2026, 11, 29, 14, 34, 51, 0, time.UTC), Target: "gemini/gemini-3.8-flash",
		Code: a.Code, Message: a.Message}
	e.finish(a)
	res := retry.Result{CallID: e.c.ID, Outcome: retry.OutcomeStopped, Attempts: e.attempts, Cooldown: a.Cooldown,
		Err: &stream.Error{Class: stream.ClassQuota, Status: 429, Code: a.Code, Message: a.Message}, Ended: e.clock.Now()}
	cp := res
	e.emit(retry.Event{Kind: retry.EventCallEnd, Result: &cp})
	return res
}
