package tui

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// drainOK is one call openai answers, its requests limit left at left of 5
// and its tokens at left*2000 of 10000: the limit drains call by call.
func drainOK(left int64) script {
	return func(ctx context.Context, e *emitter) retry.Result {
		a := e.start(openai)
		e.clock.Advance(300 * time.Millisecond)
		e.say("Fine.")
		e.clock.Advance(900 * time.Millisecond)
		a.Status, a.TTFT, a.RequestID = 200, 300*time.Millisecond, "req_ok"
		a.Limits = &stream.Limits{Requests: &stream.Window{Limit: 5, Remaining: left, HasLimit: true, HasRemaining: true},
			Tokens: &stream.Window{Limit: 10000, Remaining: left * 2000, HasLimit: true, HasRemaining: true}}
		e.finish(a)
		return e.end(retry.OutcomeOK, &openai, nil)
	}
}

// drainFailover: openai answers 429 asking 2s, the engine waits it out, a
// second 429 asks 30s (longer than the call may wait): the call fails over
// to anthropic, which answers.
func drainFailover(ctx context.Context, e *emitter) retry.Result {
	a := e.start(openai)
	rateLimited(a, 2*time.Second, retry.DecideRetry)
	a.Limits = &stream.Limits{Requests: &stream.Window{Limit: 5, Remaining: 0, HasLimit: true, HasRemaining: true}}
	e.finish(a)
	e.wait(openai, 2*time.Second, 2*time.Second, stream.SourceRetryAfter, "openai asked 2s (retry-after)")
	e.clock.Advance(2 * time.Second)
	e.waitEnd(openai, 2*time.Second, 2*time.Second, retry.WaitElapsed)
	b := e.start(openai)
	rateLimited(b, 30*time.Second, retry.DecideFailover)
	e.finish(b)
	c := e.start(anthropic)
	e.clock.Advance(400 * time.Millisecond)
	e.say("The fallback answers.")
	e.clock.Advance(1600 * time.Millisecond)
	c.Status, c.TTFT, c.RequestID = 200, 400*time.Millisecond, "req_ant"
	c.Limits = &stream.Limits{Requests: &stream.Window{Limit: 50, Remaining: 49, HasLimit: true, HasRemaining: true}}
	e.finish(c)
	return e.end(retry.OutcomeOK, &anthropic, nil)
}

var drainScripts = []script{drainOK(4), drainOK(3), drainOK(1), drainFailover}

// drainSession sends the four calls of drainScripts, 5s apart.
func drainSession(h *harness) {
	for i := range drainScripts {
		if i > 0 {
			h.clock.Advance(5 * time.Second)
		}
		h.typeText("call")
		h.press("enter")
		h.idle()
	}
}

// sessionHistory is a history of one past session (drainScripts' calls as
// the store gives them back) and a call of another session.
type sessionHistory struct {
	mu    sync.Mutex
	shown []string
}

func (s *sessionHistory) calls() []CallDetail {
	ok := func(at time.Time, left int64) retry.Attempt {
		return retry.Attempt{N: 1, Target: openai, Status: 200, Class: stream.ClassOK, StartedAt: at, Duration: 1200 * time.Millisecond,
			TTFT: 300 * time.Millisecond, Limits: &stream.Limits{Requests: &stream.Window{Limit: 5, Remaining: left, HasLimit: true, HasRemaining: true}}}
	}
	r1 := retry.Attempt{N: 1, Target: openai, Status: 429, Class: stream.ClassRateLimit, Code: "rate_limit_exceeded", StartedAt: t0.Add(20 * time.Second),
		RetryAfter: dur(2 * time.Second), DelaySource: stream.SourceRetryAfter, Waited: 2 * time.Second, Decision: retry.DecideRetry}
	r2 := retry.Attempt{N: 2, Target: openai, Status: 429, Class: stream.ClassRateLimit, Code: "rate_limit_exceeded", StartedAt: t0.Add(22 * time.Second),
		RetryAfter: dur(30 * time.Second), DelaySource: stream.SourceRetryAfter, Decision: retry.DecideFailover, Message: "Rate limit reached."}
	a3 := retry.Attempt{N: 3, Target: anthropic, Status: 200, Class: stream.ClassOK, StartedAt: t0.Add(22 * time.Second), Duration: 2 * time.Second, TTFT: 400 * time.Millisecond,
		Paced: 200 * time.Microsecond} // the store's tiny pacing holds: no span
	mk := func(id, sess string, at time.Time, as ...retry.Attempt) CallDetail {
		return CallDetail{CallSummary: CallSummary{ID: id, Session: sess, Time: at, Outcome: retry.OutcomeOK, Attempts: len(as), PromptHead: "call " + id}, Attempts: as}
	}
	return []CallDetail{
		mk("4", "7", t0.Add(20*time.Second), r1, r2, a3),
		mk("3", "7", t0.Add(12*time.Second), ok(t0.Add(12*time.Second), 1)),
		mk("2", "7", t0.Add(6*time.Second), ok(t0.Add(6*time.Second), 3)),
		mk("1", "7", t0, ok(t0, 4)),
		mk("9", "6", t0.Add(-time.Hour), ok(t0.Add(-time.Hour), 5)),
	}
}

func (s *sessionHistory) List(ctx context.Context, f HistoryFilter) ([]CallSummary, error) {
	var out []CallSummary
	for _, c := range s.calls() {
		out = append(out, c.CallSummary)
	}
	return out, nil
}

func (s *sessionHistory) Show(ctx context.Context, id string) (CallDetail, error) {
	s.mu.Lock()
	s.shown = append(s.shown, id)
	s.mu.Unlock()
	for _, c := range s.calls() {
		if c.ID == id {
			return c, nil
		}
	}
	return CallDetail{}, errors.New("no such call")
}

func historyTimeline(h *harness) {
	h.press("tab")
	h.press("h")
	h.until("the list", func() bool { return len(h.m.hist.calls) > 0 })
	h.press("t")
	h.until("the session's timeline", func() bool { return h.m.hist.tl != nil })
}

// chartScreens are the goldens of the strips and the timeline.
var chartScreens = []struct {
	name string
	opts func() Options
	do   func(h *harness)
}{
	{"strips", simOpts, drainSession},
	{"timeline", simOpts, func(h *harness) {
		drainSession(h)
		h.press("tab")
		h.press("t")
	}},
	{"history_timeline", func() Options { o := simOpts(); o.History = &sessionHistory{}; return o }, historyTimeline},
}

// TestGoldenCharts pins the strips and the timeline at 120x40 and 80x24:
// colour stripped, NO_COLOR (bold and reverse only), and dark and light at
// 120x40.
func TestGoldenCharts(t *testing.T) {
	for _, sc := range chartScreens {
		for _, sz := range [][2]int{{120, 40}, {80, 24}} {
			for _, look := range []string{"plain", "nocolor", "dark", "light"} {
				if (look == "dark" || look == "light") && sz[0] != 120 {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/%dx%d", sc.name, look, sz[0], sz[1]), func(t *testing.T) {
					o := sc.opts()
					o.NoColor = look == "nocolor"
					h := newHarness(t, sz[0], sz[1], o, drainScripts...)
					if look == "light" {
						h.send(tea.BackgroundColorMsg{Color: lightGrey{}})
					}
					sc.do(h)
					h.checkFrame()
					v := h.m.View().Content
					if look == "plain" {
						v = ansi.Strip(v)
					}
					if look == "nocolor" && (strings.Contains(v, "\x1b[38") || strings.Contains(v, "\x1b[48")) {
						t.Fatalf("NO_COLOR frame has colour")
					}
					golden.RequireEqual(t, v)
				})
			}
		}
	}
}

// TestStripShowsDrainAndMarks: the primary's strip goes down call by call,
// then shows the 429s and the failover after them; the fallback's shows
// its answer.
func TestStripShowsDrainAndMarks(t *testing.T) {
	h := newHarness(t, 120, 40, simOpts(), drainScripts...)
	drainSession(h)
	d := stripOf(h.m.tl.of(openai), 40)
	var req []string
	for _, c := range d.cols {
		req = append(req, c.req.g)
	}
	if got, want := strings.Join(req, ""), level(0.8)+level(0.6)+level(0.2)+"RR→"; got != want {
		t.Errorf("openai's requests strip = %q, want %q", got, want)
	}
	if !d.hasReq || !d.hasTok || !d.hasTTFT || d.reqNow != "0/5" {
		t.Errorf("strip data: %+v", d)
	}
	scr := h.screen()
	for _, want := range []string{"req  " + level(0.8) + level(0.6) + level(0.2) + "RR→", "strips: a column a response"} {
		if !strings.Contains(scr, want) {
			t.Errorf("screen lacks %q:\n%s", want, scr)
		}
	}
	// Below 100 columns: one line a target.
	h.send(tea.WindowSizeMsg{Width: 80, Height: 30})
	scr = h.screen()
	if !strings.Contains(scr, "    req "+level(0.8)+level(0.6)+level(0.2)+"RR→") {
		t.Errorf("narrow screen lacks the one-line strip:\n%s", scr)
	}
}

// TestTimelineDrawsWaitsAndFailover: the timeline has a lane a target, the
// wait the call took with its source, the delay the server asked after
// the call moved on, and the failover's arrow into the fallback's lane.
func TestTimelineDrawsWaitsAndFailover(t *testing.T) {
	h := newHarness(t, 120, 40, simOpts(), drainScripts...)
	drainSession(h)
	h.press("tab")
	h.press("t")
	if h.m.mode != modeTimeline {
		t.Fatalf("t did not open the timeline")
	}
	scr := h.screen()
	lines := strings.Split(scr, "\n")
	var oa, an = -1, -1
	for i, l := range lines {
		if strings.Contains(l, "│openai/gpt-5.4-mini") {
			oa = i
		}
		if strings.Contains(l, "│anthropic/claude-haiku-5-5") {
			an = i
		}
	}
	if oa < 0 || an != oa+2 {
		t.Fatalf("lanes at %d and %d:\n%s", oa, an, scr)
	}
	for _, want := range []string{"R━R asked 30s retry-after ┄"} {
		if !strings.Contains(lines[oa], want) {
			t.Errorf("openai's lane lacks %q: %q", want, lines[oa])
		}
	}
	if !strings.Contains(lines[oa+1], "wait 2s retry-after") {
		t.Errorf("the 2s wait has no label under it: %q", lines[oa+1])
	}
	// The arrow sits in the column where anthropic's answer starts.
	col := strings.Index(lines[oa+1], "↓")
	if col < 0 || []rune(lines[an])[runeCol(lines[oa+1], col)] != '✓' {
		t.Errorf("no failover arrow into anthropic's answer:\n%s\n%s\n%s", lines[oa], lines[oa+1], lines[an])
	}
	// The cursor is on the newest attempt: anthropic's answer, in full.
	if !strings.Contains(scr, "anthropic/claude-haiku-5-5 · attempt 3 of call") || !strings.Contains(scr, "200 ok · ttft 400ms · took 2s") {
		t.Errorf("the newest attempt is not shown:\n%s", scr)
	}
	// ← goes to the 429 that failed over, with where the call went.
	h.press("left")
	scr = h.screen()
	if !strings.Contains(scr, "attempt 2 of call") || !strings.Contains(scr, "-> failed over to anthropic") {
		t.Errorf("← did not open the failover's attempt:\n%s", scr)
	}
	// ↓ goes to the lane below, to its attempt nearest in time.
	h.press("left")
	h.press("down")
	if i := h.m.tview.sel(h.m.tl); h.m.tl.atts[i].a.Target != anthropic {
		t.Errorf("↓ picked %v", h.m.tl.atts[i].a.Target)
	}
	h.press("esc")
	if h.m.mode != modeMain {
		t.Errorf("esc did not close the timeline")
	}
}

func runeCol(s string, byteIdx int) int { return len([]rune(s[:byteIdx])) }

// TestTimelineScrollsBack: at a fine scale the session's first call is off
// the window; pgup scrolls back to it, and G follows the newest again.
func TestTimelineScrollsBack(t *testing.T) {
	h := newHarness(t, 120, 40, simOpts(), drainScripts...)
	drainSession(h)
	h.press("tab")
	h.press("t")
	for range 3 {
		h.press("+") // 1s -> 100ms a column: ~9s on screen
	}
	if got := scales[h.m.tview.zoom]; got != 100*time.Millisecond {
		t.Fatalf("zoom = %v", got)
	}
	first := h.m.tl.atts[0].at
	inWindow := func() bool {
		start, end := h.m.tview.window(h.m.now)
		return !first.Before(start) && first.Before(end)
	}
	h.screen()
	if inWindow() {
		t.Fatalf("the first call is on the window before scrolling")
	}
	for i := 0; i < 20 && !inWindow(); i++ {
		h.press("pgup")
		h.screen()
	}
	if !inWindow() || h.m.tview.follow {
		t.Fatalf("pgup never reached the first call")
	}
	if !strings.Contains(h.screen(), "✓") {
		t.Errorf("the first call's mark is not drawn:\n%s", h.screen())
	}
	h.press("G")
	if !h.m.tview.follow || h.m.tview.cursor != -1 {
		t.Errorf("G did not follow the newest again")
	}
}

// TestHistoryTimelineReadsTheSession: t in the history reads every call of
// the session of the call under the cursor (not another session's) and
// draws them on one timeline.
func TestHistoryTimelineReadsTheSession(t *testing.T) {
	sh := &sessionHistory{}
	o := simOpts()
	o.History = sh
	h := newHarness(t, 120, 40, o)
	historyTimeline(h)
	sh.mu.Lock()
	shown := strings.Join(sh.shown, ",")
	sh.mu.Unlock()
	if shown != "4,3,2,1" {
		t.Errorf("read calls %s, want the session's 4,3,2,1", shown)
	}
	scr := h.screen()
	for _, want := range []string{"openai/gpt-5.4-mini", "anthropic/claude-haiku-5-5", "wait 2s retry-after", "asked 30s retry-after", "↓"} {
		if !strings.Contains(scr, want) {
			t.Errorf("history timeline lacks %q:\n%s", want, scr)
		}
	}
	if strings.Contains(scr, "paced") {
		t.Errorf("a hold under 100ms is drawn:\n%s", scr)
	}
	if !strings.Contains(scr, "←/→ attempt") {
		t.Errorf("the footer lacks the timeline's keys:\n%s", scr)
	}
	if got := len(h.m.hist.tl.atts); got != 6 {
		t.Errorf("%d attempts on the timeline, want 6", got)
	}
	h.press("esc")
	if h.m.hist.tl != nil || h.m.mode != modeHistory {
		t.Errorf("esc did not go back to the list")
	}
}

// TestChartsIgnoreTokens: text deltas change no chart data, so the strips
// and the timeline redraw on new attempts, waits or a tick, never per token.
func TestChartsIgnoreTokens(t *testing.T) {
	h := newHarness(t, 120, 40, simOpts(), streamUntilCancel)
	h.typeText("x")
	h.press("enter")
	h.until("streaming", func() bool { return strings.Contains(h.screen(), "Half an ans") })
	v := h.m.tl.ver
	h.m.View()
	key := h.m.targets.cacheKey
	for i := 0; i < 50; i++ {
		h.send(eventsMsg{events: []retry.Event{{Kind: retry.EventText, CallID: h.m.call.id, Text: "tok "}}})
		h.m.View()
	}
	if h.m.tl.ver != v || h.m.targets.cacheKey != key {
		t.Errorf("tokens redrew the charts: ver %d -> %d, key %q -> %q", v, h.m.tl.ver, key, h.m.targets.cacheKey)
	}
	h.press("esc")
	h.idle()
}

// TestKeysDoNotCollide: no key is bound twice among the keys that act at
// once in a view (enter and esc mean different things in different views,
// and in the history's list, filter and session timeline).
func TestKeysDoNotCollide(t *testing.T) {
	km := DefaultKeyMap()
	h := km.History
	active := map[string][]any{
		"input":            {km.Global, km.Input, km.Main.NextFocus, km.Main.PrevFocus},
		"conversation":     {km.Global, km.Main, km.Conversation},
		"attempts":         {km.Global, km.Main, km.Attempts},
		"targets":          {km.Global, km.Main, km.Targets},
		"faults":           {km.Global, km.Faults},
		"timeline":         {km.Global, km.Timeline},
		"history list":     {km.Global, h.Up, h.Down, h.Open, h.Filter, h.Timeline, h.Back, h.Close, h.Help, h.Quit},
		"history call":     {km.Global, h.Up, h.Down, h.Timeline, h.Back, h.Close, h.Help, h.Quit},
		"history filter":   {km.Global, h.Done, h.Erase},
		"history timeline": {km.Global, km.Timeline},
		"help":             {km.Global, km.Help},
		"confirm":          {km.Global, km.Confirm},
	}
	for name, groups := range active {
		seen := map[string]string{}
		for _, b := range namedBindings(groups...) {
			for _, k := range b.b.Keys() {
				if prev, ok := seen[k]; ok {
					t.Errorf("%s: %q is bound to %s and %s", name, k, prev, b.name)
				}
				seen[k] = b.name
			}
		}
	}
	if !slices.Equal(km.Main.Timeline.Keys(), []string{"t"}) {
		t.Errorf("t is not the timeline's key")
	}
}

// namedBinding is a binding and the field that holds it.
type namedBinding struct {
	name string
	b    key.Binding
}

// namedBindings lists the bindings of key maps (every key.Binding field)
// and of bindings given alone.
func namedBindings(xs ...any) []namedBinding {
	var out []namedBinding
	for _, x := range xs {
		if b, ok := x.(key.Binding); ok {
			out = append(out, namedBinding{b.Help().Key, b})
			continue
		}
		v := reflect.ValueOf(x)
		for i := 0; i < v.NumField(); i++ {
			if b, ok := v.Field(i).Interface().(key.Binding); ok {
				out = append(out, namedBinding{v.Type().Name() + "." + v.Type().Field(i).Name, b})
			}
		}
	}
	return out
}

// TestTlogBounded: the timeline keeps the newest maxTimeline attempts.
func TestTlogBounded(t *testing.T) {
	l := newTlog(nil)
	for i := 0; i < maxTimeline+10; i++ {
		l.attempt("c", &retry.Attempt{N: i, Target: openai, Class: stream.ClassOK, StartedAt: t0.Add(time.Duration(i) * time.Second)}, t0)
	}
	if len(l.atts) != maxTimeline || l.atts[0].a.N != 10 {
		t.Errorf("kept %d attempts from N=%d", len(l.atts), l.atts[0].a.N)
	}
}

// TestStripZoomsToTheDrain: a 500-a-minute limit drained by three calls
// still shows the drain (the heights zoom to the range seen), and a limit
// drained past a quarter is drawn on its whole height.
func TestStripZoomsToTheDrain(t *testing.T) {
	strip := func(left ...int64) string {
		l := newTlog(nil)
		for i, r := range left {
			l.attempt("c", &retry.Attempt{Target: openai, Status: 200, Class: stream.ClassOK, StartedAt: t0.Add(time.Duration(i) * time.Second),
				Limits: &stream.Limits{Requests: &stream.Window{Limit: 500, Remaining: r, HasLimit: true, HasRemaining: true}}}, t0)
		}
		var s string
		for _, c := range stripOf(l.of(openai), 20).cols {
			s += c.req.g
		}
		return s
	}
	got := []rune(strip(499, 498, 497))
	if len(got) != 3 || !(got[0] > got[1] && got[1] > got[2]) {
		t.Errorf("499, 498, 497 of 500 drew %q: no drain", string(got))
	}
	if got, want := strip(500, 250, 100), level(1)+level(0.5)+level(0.2); got != want {
		t.Errorf("500, 250, 100 of 500 drew %q, want %q", got, want)
	}
}
