package tui

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"go.uber.org/goleak"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/theme"
)

func paneText(p *targetsPane, now time.Time) string {
	st := theme.New(true, false)
	p.invalidate()
	return ansi.Strip(strings.Join(p.view(40, false, now, &st), "\n"))
}

func TestTargetStatesInWords(t *testing.T) {
	groq := stream.Target{Provider: "groq", Model: "llama-4"}
	p := newTargetsPane([]TargetInfo{{Target: openai, Available: true}, {Target: groq, Available: true}}, []stream.Target{openai, groq})
	now := t0
	if s := paneText(p, now); strings.Count(s, "READY") != 2 {
		t.Fatalf("fresh targets are not READY:\n%s", s)
	}
	// Overloaded, then ready again after a success.
	p.attemptEnd(&retry.Attempt{Target: openai, Status: 529, Class: stream.ClassOverload, Code: "overloaded_error", StartedAt: now}, now, "c")
	if s := paneText(p, now); !strings.Contains(s, "OVERLOADED") || !strings.Contains(s, "at capacity") {
		t.Errorf("overload:\n%s", s)
	}
	p.attemptEnd(&retry.Attempt{Target: openai, Status: 200, Class: stream.ClassOK, StartedAt: now}, now, "c")
	if s := paneText(p, now); strings.Contains(s, "OVERLOADED") {
		t.Errorf("still overloaded after a success:\n%s", s)
	}
	// Pacing until a reset is PAUSED, with a countdown.
	p.wait(&retry.Wait{Target: openai, Duration: 30 * time.Second, Source: stream.SourceReset, Pacing: true, Until: now.Add(30 * time.Second)}, now)
	if s := paneText(p, now.Add(10*time.Second)); !strings.Contains(s, "PAUSED") || !strings.Contains(s, "20s left") || !strings.Contains(s, "pacing until the limit resets") {
		t.Errorf("pacing:\n%s", s)
	}
	if s := paneText(p, now.Add(31*time.Second)); !strings.Contains(s, "READY") {
		t.Errorf("a finished pause is not READY:\n%s", s)
	}
	// Groq's per-day requests and Anthropic-style rounded tokens say so.
	p.attemptEnd(&retry.Attempt{Target: groq, Status: 200, Class: stream.ClassOK, StartedAt: now, Limits: &stream.Limits{
		Requests: &stream.Window{Limit: 14400, Remaining: 14370, HasLimit: true, HasRemaining: true, PerDay: true, Reset: now.Add(2 * time.Minute)},
		Tokens:   &stream.Window{Limit: 400000, Remaining: 396000, HasLimit: true, HasRemaining: true, Rounded: true},
	}}, now, "c")
	s := paneText(p, now)
	if !strings.Contains(s, "14k/14k per day") || !strings.Contains(s, "396k/400k") || strings.Count(s, "(rounded)") != 1 || !strings.Contains(s, "left of each limit (rounded)") || !strings.Contains(s, "reset 2m") {
		t.Errorf("gauges:\n%s", s)
	}
	// A quota stop names the provider's words.
	p.attemptEnd(&retry.Attempt{Target: groq, Status: 429, Class: stream.ClassQuota, Code: "rate_limit_exceeded",
		Message: "Limit 14400, Used 14400 on requests per day (RPD)", StartedAt: now}, now, "c")
	if s := paneText(p, now); !strings.Contains(s, "STOPPED") || !strings.Contains(s, "requests per day (RPD)") {
		t.Errorf("quota:\n%s", s)
	}
}

func TestFormatting(t *testing.T) {
	for d, want := range map[time.Duration]string{
		850 * time.Millisecond: "850ms", 1200 * time.Millisecond: "1.2s", 23 * time.Second: "23s",
		160 * time.Second: "2m40s", 2 * time.Minute: "2m", 6*time.Hour + 12*time.Minute: "6h12m",
	} {
		if got := fmtDur(d); got != want {
			t.Errorf("fmtDur(%v) = %q, want %q", d, got, want)
		}
	}
	if got := fmtCountdown(t0, t0.Add(1500*time.Millisecond)); got != "2s" {
		t.Errorf("a countdown with 1.5s left shows %q, want 2s (never 0s while time is left)", got)
	}
	if got := fmtCount(2000000); got != "2.0M" {
		t.Errorf("fmtCount = %q", got)
	}
}

func TestMouseToggleAndWheel(t *testing.T) {
	h := newHarness(t, 120, 40, Options{})
	if h.m.View().MouseMode != tea.MouseModeNone {
		t.Fatal("mouse capture is on by default")
	}
	h.press("tab")
	h.press("m")
	if h.m.View().MouseMode != tea.MouseModeCellMotion {
		t.Fatal("m did not turn the mouse on")
	}
	for i := 0; i < 5; i++ {
		h.m.conv.add("x", strings.Repeat("long prompt ", 50), openai, t0)
	}
	h.send(tea.MouseWheelMsg{Button: tea.MouseWheelUp})
	if h.m.conv.offset != 3 {
		t.Errorf("wheel up scrolled to %d", h.m.conv.offset)
	}
	if !strings.Contains(h.screen(), "scrolled up 3") {
		t.Errorf("the title does not say it is scrolled")
	}
	h.send(tea.MouseWheelMsg{Button: tea.MouseWheelDown})
	if h.m.conv.offset != 0 {
		t.Errorf("wheel down scrolled to %d", h.m.conv.offset)
	}
}

func TestNoGoroutineLeftAfterCancel(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t, 120, 40, Options{}, waitScript)
	h.typeText("hi")
	h.press("enter")
	h.until("the wait", h.m.waiting)
	h.press("esc")
	h.idle()
	if !h.m.drain(5 * time.Second) {
		t.Fatal("the cancelled run did not return")
	}
	h.close()
}

func TestTranscriptIsBounded(t *testing.T) {
	c := newTranscript()
	for i := 0; i < maxTurns+10; i++ {
		c.add("x", "p", openai, t0)
	}
	if len(c.turns) != maxTurns || c.dropped != 10 {
		t.Fatalf("turns %d dropped %d", len(c.turns), c.dropped)
	}
	st := theme.New(true, false)
	c.offset = 1 << 20 // scroll to the very top
	out := ansi.Strip(strings.Join(c.view(60, 10, &st, nil, nil), "\n"))
	if !strings.Contains(out, "10 older calls are in the history") {
		t.Errorf("the top of a bounded transcript does not say where the rest went:\n%s", out)
	}
}

func TestAttemptLogScrollsAndSelects(t *testing.T) {
	l := newAttemptLog()
	for i := 0; i < 50; i++ {
		l.add(&logRow{callID: "c", at: t0.Add(time.Duration(i) * time.Second), attempt: retry.Attempt{N: i + 1, Target: openai, Status: 429, Class: stream.ClassRateLimit, RequestID: "req_" + strings.Repeat("x", i%3)}})
	}
	st := theme.New(true, false)
	l.focused = true
	view := func() string { return ansi.Strip(strings.Join(l.view(100, 5, &st), "\n")) }
	if v := view(); !strings.Contains(v, "14:02:49") || strings.Contains(v, "14:02:44") {
		t.Fatalf("not following the newest:\n%s", v)
	}
	l.move(-10)
	if v := view(); !strings.Contains(v, "14:02:39") || strings.Contains(v, "14:02:49") {
		t.Errorf("scrolled up 10, view:\n%s", v)
	}
	if r := l.selected(); r == nil || r.attempt.N != 40 {
		t.Errorf("selected %+v", r)
	}
	l.move(100)
	if l.sel != -1 {
		t.Errorf("moving past the newest does not follow it again (sel %d)", l.sel)
	}
	for i := 0; i < maxLogRows; i++ {
		l.add(&logRow{at: t0, attempt: retry.Attempt{Target: openai}})
	}
	if len(l.rows) != maxLogRows {
		t.Errorf("the log holds %d rows", len(l.rows))
	}
}

func TestCooldownsShowAsStopped(t *testing.T) {
	cds := []retry.Cooldown{
		{Scope: "account:openai:3f2a9c", Target: "openai/gpt-5.4-mini", Code: "insufficient_quota", Message: "You exceeded your current quota", Since: t0.Add(-time.Hour)},
		{Scope: "target:gemini/gemini-3.8-flash", Target: "gemini/gemini-3.8-flash", Code: "RESOURCE_EXHAUSTED", Until: t0.Add(6 * time.Hour), Since: t0},
		{Scope: "target:anthropic/claude-haiku-5-5", Target: "anthropic/claude-haiku-5-5", Until: t0.Add(-time.Minute)}, // over
	}
	h := newHarness(t, 120, 40, Options{Cooldowns: cds, Chain: []stream.Target{openai, anthropic, gemini},
		Targets: []TargetInfo{{Target: openai, Available: true}, {Target: anthropic, Available: true}, {Target: gemini, Available: true}}})
	s := h.screen()
	if strings.Count(s, "STOPPED") != 2 || !strings.Contains(s, "quota: You exceeded your current") || !strings.Contains(s, "(in 6h00m)") {
		t.Errorf("cooldowns at start:\n%s", s)
	}
	if !strings.Contains(s, "READY") {
		t.Errorf("an ended cooldown still stops its target:\n%s", s)
	}
}

// TestRandomInputNeverPanics presses random keys at random sizes, with calls
// running, and checks every frame fits the terminal.
func TestRandomInputNeverPanics(t *testing.T) {
	keys := []string{"enter", "esc", "tab", "shift+tab", "space", "ctrl+f", "?", "h", "d", "a", "m", "y", "c",
		"i", "j", "k", "K", "J", "/", "1", "5", "x", "G", "y", "n", "pgup", "pgdown", "up", "down"}
	var scripts []script
	for i := 0; i < 40; i++ {
		scripts = append(scripts, okScript(openai, "a"), failoverScript, quotaScript, midStreamScript,
			okScript(anthropic, strings.Repeat("日本語のテキスト 🙂 wide\tcells ", 20)))
	}
	// A manual harness: every step settles (commands return, the feed's
	// messages are applied) before the next, so the run is the same on any
	// machine, however loaded.
	es := &fakeEngineState{cds: map[stream.Target]*retry.Cooldown{openai: quotaCooldown()}}
	h := newManualHarness(t, 120, 40, Options{Simulated: true, Faults: &fakeFaults{}, History: goldenHistory(),
		TargetState: es.state, ClearCooldown: es.clear, Armed: &fakeArmed{faults: []ArmedFault{{Provider: "openai", Kind: "overload", Left: 2}}}}, scripts...)
	h.do(h.m.Init())
	seed := uint32(7)
	next := func(n int) int {
		seed = seed*1664525 + 1013904223
		return int(seed>>8) % n
	}
	for i := 0; i < 600; i++ {
		if i%25 == 0 && h.m.mode == modeMain {
			h.press("i")
			h.typeText("go")
			h.press("enter")
		}
		switch r := next(20); {
		case r == 0:
			h.send(tea.WindowSizeMsg{Width: 40 + next(140), Height: 10 + next(50)})
		case r == 1:
			h.tick(time.Duration(next(5000)) * time.Millisecond)
		case r < 4:
			h.typeText("hi")
		default:
			k := keys[next(len(keys))]
			if k == "q" {
				continue
			}
			msg := keyMsg(k)
			switch k {
			case "pgup":
				msg = tea.KeyPressMsg{Code: tea.KeyPgUp}
			case "pgdown":
				msg = tea.KeyPressMsg{Code: tea.KeyPgDown}
			case "up":
				msg = tea.KeyPressMsg{Code: tea.KeyUp}
			case "down":
				msg = tea.KeyPressMsg{Code: tea.KeyDown}
			}
			h.send(msg)
		}
		h.settle()
		h.checkFrame()
	}
	// Every prompt the console took ran, and this seed sends at least 10.
	if n, sent := len(h.runner.Calls()), len(h.m.conv.turns)+h.m.conv.dropped; n != sent || n < 10 {
		t.Errorf("%d calls ran for %d prompts sent (want all, and at least 10)", n, sent)
	}
}

func TestScrolledUpViewStaysPut(t *testing.T) {
	h := newHarness(t, 120, 40, Options{}, streamUntilCancel)
	for i := 0; i < 10; i++ {
		tt := h.m.conv.add("old", fmt.Sprintf("old prompt %d", i), openai, t0)
		tt.blocks = append(tt.blocks, &block{kind: blockText, text: strings.Repeat("old answer line ", 20), dirty: true})
	}
	h.typeText("new")
	h.press("enter")
	h.until("streaming", func() bool { return strings.Contains(h.screen(), "Half an ans") })
	h.press("pgup")
	before := h.screen()
	off := h.m.conv.offset
	h.send(eventsMsg{events: []retry.Event{{Kind: retry.EventText, CallID: h.m.call.id, Text: "wer that grows\n\nand grows\nby lines"}}})
	body := func(s string) string { // the conversation's lines, without its title
		var out []string
		for _, l := range strings.Split(s, "\n")[2:30] {
			r := []rune(l)
			out = append(out, string(r[38:]))
		}
		return strings.Join(out, "\n")
	}
	if after := h.screen(); body(after) != body(before) {
		t.Errorf("the scrolled-up view moved while the answer grew:\nbefore\n%s\nafter\n%s", before, after)
	}
	if h.m.conv.offset <= off {
		t.Errorf("offset %d -> %d: the new lines did not move the anchor", off, h.m.conv.offset)
	}
	h.press("esc")
	h.idle()
}

// TestLogFollowsUntilScrolledUp: the attempt log follows new rows; once the
// user scrolls up it stays put and says how many rows are newer, and G
// returns to the newest.
func TestLogFollowsUntilScrolledUp(t *testing.T) {
	h := newHarness(t, 80, 24, Options{})
	row := func(i int) *logRow {
		a := retry.Attempt{Target: openai, Status: 200, Class: stream.ClassOK, RequestID: fmt.Sprintf("req_row%02d", i)}
		return &logRow{callID: "c", at: t0, attempt: a}
	}
	for i := 0; i < 10; i++ {
		h.m.log.add(row(i))
	}
	h.press("tab") // conversation
	h.press("tab") // attempts
	h.press("k")
	h.press("k")
	h.m.log.add(row(10))
	s := h.screen()
	if strings.Contains(s, "req_row10") || !strings.Contains(s, "newer below · G") {
		t.Fatalf("scrolled up: the newest row showed, or no hint of newer rows:\n%s", s)
	}
	h.press("G")
	h.m.log.add(row(11))
	s = h.screen()
	if !strings.Contains(s, "req_row11") || strings.Contains(s, "newer below") {
		t.Fatalf("G did not return to the newest:\n%s", s)
	}
}

// TestStatusWrapsNotCut: the transcript's raw error wraps whole instead of
// being cut mid-sentence; the targets pane shows the
// first two lines of the stop's words, marked "…" when it cuts them.
func TestStatusWrapsNotCut(t *testing.T) {
	long := "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors. Please try again in 20s."
	quota := func(ctx context.Context, e *emitter) retry.Result {
		a := e.start(openai)
		a.Status, a.Class, a.Code, a.Decision, a.Message = 429, stream.ClassQuota, "insufficient_quota", retry.DecideStop, long
		e.finish(a)
		return e.end(retry.OutcomeStopped, nil, &stream.Error{Class: stream.ClassQuota, Status: 429, Code: "insufficient_quota", Message: long})
	}
	for _, sz := range [][2]int{{120, 40}, {80, 24}} {
		h := newHarness(t, sz[0], sz[1], Options{}, quota)
		h.typeText("hi")
		h.press("enter")
		h.idle()
		flat := strings.Join(strings.Fields(strings.NewReplacer("│", " ", "┃", " ").Replace(h.screen())), " ")
		// The detail under the note ends whole.
		if !strings.Contains(flat, "Please try again in 20s.") {
			t.Errorf("%dx%d: a sentence is cut:\n%s", sz[0], sz[1], h.screen())
		}
	}
}

// TestFocusShowsWithoutColour: with NO_COLOR the focused pane still stands
// out: its frame is heavy.
func TestFocusShowsWithoutColour(t *testing.T) {
	h := newHarness(t, 120, 40, Options{NoColor: true})
	h.press("tab") // the conversation
	lines := strings.Split(h.screen(), "\n")
	if !strings.Contains(lines[1], "┏ conversation") || strings.Contains(lines[1], "┏ targets") {
		t.Errorf("the focused conversation is not marked: %q", lines[1])
	}
	if n := strings.Count(h.screen(), "┏"); n != 1 {
		t.Errorf("%d panes marked focused, want 1:\n%s", n, h.screen())
	}
}

// TestGaugesSayLeft: gauges have a legend, a nearly full window is not drawn
// full, an exhausted one is drawn empty in the warning colour, and
// "(rounded)" is said once per target.
func TestGaugesSayLeft(t *testing.T) {
	st := theme.New(true, false)
	l := &stream.Limits{
		Requests:     &stream.Window{Limit: 500, Remaining: 499, HasLimit: true, HasRemaining: true},
		Tokens:       &stream.Window{Limit: 150000, Remaining: 0, HasLimit: true, HasRemaining: true},
		InputTokens:  &stream.Window{Limit: 2000000, Remaining: 2000000, HasLimit: true, HasRemaining: true, Rounded: true},
		OutputTokens: &stream.Window{Limit: 400000, Remaining: 396000, HasLimit: true, HasRemaining: true, Rounded: true},
	}
	out := gauges(l, 34, t0, &st, "  ")
	plain := ansi.Strip(strings.Join(out, "\n"))
	if !strings.HasPrefix(plain, "  left of each limit (rounded)") || strings.Count(plain, "(rounded)") != 1 {
		t.Errorf("no legend, or (rounded) not once:\n%s", plain)
	}
	if !strings.Contains(plain, "req ███████░ 499/500") {
		t.Errorf("499/500 is not drawn short of full:\n%s", plain)
	}
	if !strings.Contains(plain, "tok ░░░░░░░░ 0/150k") || !strings.Contains(out[2], st.Warn.Render("░░░░░░░░")) {
		t.Errorf("an exhausted window is not drawn empty in the warning colour:\n%q", out[2])
	}
}

// TestNoLimitHeadersSaysWhy: a target whose answers carry no limit headers
// says so, and shows the rate the pacer learned from its 429s.
func TestNoLimitHeadersSaysWhy(t *testing.T) {
	es := &fakeEngineState{pace: map[stream.Target]retry.PaceState{gemini: {Rate: 0.5, RateLearned: true}}}
	gem := func(ctx context.Context, e *emitter) retry.Result {
		a := e.start(gemini)
		e.say("ok")
		a.Status = 200
		e.finish(a)
		return e.end(retry.OutcomeOK, &gemini, nil)
	}
	h := newHarness(t, 120, 40, Options{Chain: []stream.Target{gemini}, Targets: []TargetInfo{{Target: gemini, Available: true}}, TargetState: es.state}, gem)
	h.typeText("hi")
	h.press("enter")
	h.idle()
	h.until("the learned rate", func() bool { return strings.Contains(h.screen(), "30 req/min") })
	flat := strings.Join(strings.Fields(strings.ReplaceAll(h.screen(), "│", " ")), " ")
	if !strings.Contains(flat, "gemini sends no limit headers; learned from its 429s: 30 req/min") {
		t.Errorf("no reason for the missing gauges:\n%s", h.screen())
	}
}
