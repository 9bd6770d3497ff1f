package tui

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// turnOf finds the turn of a call id (tagged for proxied calls).
func turnOf(m *Model, id string) *turn {
	for _, t := range m.conv.turns {
		if t.callID == id {
			return t
		}
	}
	return nil
}

// answerOf is a turn's streamed text, every attempt's.
func answerOf(t *turn) string {
	var b strings.Builder
	for _, bl := range t.blocks {
		if bl.kind == blockText {
			b.WriteString(bl.text)
		}
	}
	return b.String()
}

// proxied emits a call's events the way the proxy hands them to the inbox.
func proxied(in *Inbox, clock *fakeClock, c retry.Call) *emitter {
	e := &emitter{c: c, clock: clock, sink: func(ev retry.Event) { in.Event(c, ev) }}
	e.emit(retry.Event{Kind: retry.EventCallStart, Chain: c.Chain})
	return e
}

// TestProxiedCallsBesideATypedCall runs a typed call and two proxied calls at
// once: one proxied call streams many deltas from its own goroutine, the
// other waits on a 429 (its countdown drains) and fails over; its raw id is
// even the typed call's id. Nothing crosses: each answer lands in its own
// turn, each row in the attempt log names its call, and the session counts
// all three.
func TestProxiedCallsBesideATypedCall(t *testing.T) {
	in := NewInbox()
	typedGate := make(chan struct{})
	typed := func(ctx context.Context, e *emitter) retry.Result {
		a := e.start(openai)
		e.say("typed ")
		<-typedGate
		e.say("answer.")
		a.Status = 200
		e.finish(a)
		return e.end(retry.OutcomeOK, &openai, nil)
	}
	h := newHarness(t, 120, 40, Options{Inbox: in, ProxyAddr: "127.0.0.1:4999"}, typed)
	h.typeText("typed prompt")
	h.press("enter")
	typedID := h.m.call.id
	h.until("the typed call streams", func() bool { return answerOf(h.m.turn) == "typed " })

	idA := "aaaaaaaaaaaaaaaaaaaaaaaa"
	callA := retry.Call{ID: idA, Chain: []stream.Target{openai}, Prompt: "proxied A", Route: "fast", Client: "curl/8.5.0"}
	callB := retry.Call{ID: typedID, Chain: []stream.Target{openai, anthropic}, Prompt: "proxied B", Route: "openai/gpt-5.4-mini", Client: "OpenAI/Python 2.1.0"}
	var wantA strings.Builder
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&wantA, "a%d ", i)
	}
	bGate := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		e := proxied(in, h.clock, callA)
		a := e.start(openai)
		for i := 0; i < 200; i++ {
			e.say(fmt.Sprintf("a%d ", i))
		}
		a.Status = 200
		e.finish(a)
		e.end(retry.OutcomeOK, &openai, nil)
	}()
	go func() {
		defer wg.Done()
		e := proxied(in, h.clock, callB)
		a := e.start(openai)
		rateLimited(a, 20*time.Second, retry.DecideRetry)
		e.finish(a)
		e.wait(openai, 20*time.Second, 20*time.Second, stream.SourceRetryAfter, "openai asked 20s (retry-after)")
		<-bGate
		b := e.start(openai)
		e.say("bra", "vo.")
		b.Status = 200
		e.finish(b)
		e.end(retry.OutcomeOK, &openai, nil)
	}()

	tagA, tagB := extPrefix+idA, extPrefix+typedID
	h.until("A's answer and B's wait", func() bool {
		b := turnOf(h.m, tagB)
		return turnOf(h.m, tagA) != nil && turnOf(h.m, tagA).done && b != nil && h.m.ext[tagB] != nil && h.m.ext[tagB].run.wait != nil
	})
	s := h.screen()
	for _, want := range []string{"PROXY http://127.0.0.1:4999 · token: limitscope info", "via proxy · client curl/8.5.0 · model fast · id aaaaaaaa",
		"via proxy · client OpenAI/Python 2.1.0 · model openai/gpt-5.4-mini", "⏳ openai says 20s (retry-after) · 20s left", "● in flight (+1 proxied)"} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q:\n%s", want, s)
		}
	}
	if h.m.tickEvery() != 250*time.Millisecond {
		t.Errorf("a proxied wait ticks every %v", h.m.tickEvery())
	}
	h.tick(5 * time.Second)
	if s := h.screen(); !strings.Contains(s, "⏳ openai says 20s (retry-after) · 15s left") {
		t.Errorf("the proxied countdown did not drain:\n%s", s)
	}

	h.clock.Advance(15 * time.Second) // the engine's wait is over
	close(bGate)
	h.until("B's answer", func() bool { return turnOf(h.m, tagB).done })
	close(typedGate)
	h.idle()
	wg.Wait()

	typedTurn := turnOf(h.m, typedID)
	if got := answerOf(typedTurn); got != "typed answer." {
		t.Errorf("typed turn = %q", got)
	}
	if got := answerOf(turnOf(h.m, tagA)); got != wantA.String() {
		t.Errorf("A's turn = %q", got)
	}
	if got := answerOf(turnOf(h.m, tagB)); got != "bravo." {
		t.Errorf("B's turn = %q", got)
	}
	if typedTurn.origin != "" || turnOf(h.m, tagA).origin == "" {
		t.Errorf("origins: typed %q, A %q", typedTurn.origin, turnOf(h.m, tagA).origin)
	}
	rows := map[string]int{}
	for _, r := range h.m.log.rows {
		rows[r.callID]++
	}
	if rows[typedID] != 1 || rows[tagA] != 1 || rows[tagB] != 3 || len(rows) != 3 {
		t.Errorf("attempt log rows by call = %v", rows)
	}
	if h.m.stats.calls != 3 || h.m.stats.proxied != 2 || h.m.stats.requests != 4 {
		t.Errorf("stats = %+v", h.m.stats)
	}
	if len(h.m.ext) != 0 || h.m.call != nil {
		t.Errorf("calls left in flight: ext %d, typed %v", len(h.m.ext), h.m.call)
	}
	for _, ts := range h.m.targets.list {
		if ts.busy() != "" {
			t.Errorf("%s still %s", ts.info.Target, ts.busy())
		}
	}
	s = h.screen()
	for _, want := range []string{"calls 3 (2 proxied)", "PROXY http://127.0.0.1:4999 · token: limitscope info", "⏳ waited 20s for openai (it asked 20s, retry-after)",
		"Retrying openai after a wait.", "served by openai/gpt-5.4-mini", "proxy aaaaaaaa -", "proxy 140200-1"} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q:\n%s", want, s)
		}
	}
	h.checkFrame()
}

// TestProxiedCallCannotBeCancelledFromTheConsole: esc cancels the typed call
// only; a proxied call belongs to its client.
func TestProxiedCallCannotBeCancelledFromTheConsole(t *testing.T) {
	in := NewInbox()
	h := newHarness(t, 120, 40, Options{Inbox: in, ProxyAddr: "127.0.0.1:4999", Simulated: true, Scenario: "calm"})
	c := retry.Call{ID: "p1", Chain: []stream.Target{openai}, Prompt: "hi"}
	e := proxied(in, h.clock, c)
	e.start(openai)
	e.say("part")
	h.until("the proxied call streams", func() bool { t := turnOf(h.m, extPrefix+"p1"); return t != nil && answerOf(t) == "part" })
	h.press("esc")
	if h.m.ext[extPrefix+"p1"] == nil {
		t.Fatal("esc ended a proxied call")
	}
	if s := h.screen(); !strings.Contains(s, "● 1 proxied") || !strings.Contains(s, "STREAMING") {
		t.Errorf("screen:\n%s", s)
	}
	for _, size := range [][2]int{{80, 24}, {60, 16}, {200, 50}} {
		h.send(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		h.checkFrame()
		if s := h.screen(); !strings.Contains(s, "via proxy") || !strings.Contains(s, "PROXY ") {
			t.Errorf("%dx%d: the proxied call is not shown:\n%s", size[0], size[1], s)
		}
	}
}

// TestInboxEventsBeforeTheConsole: a proxied call that began before the
// console was built still shows (the inbox queues).
func TestInboxEventsBeforeTheConsole(t *testing.T) {
	in := NewInbox()
	clock := &fakeClock{t: t0}
	e := proxied(in, clock, retry.Call{ID: "early", Chain: []stream.Target{anthropic}, Prompt: "early bird", Route: "claude-haiku-5-5"})
	a := e.start(anthropic)
	e.say("first")
	a.Status = 200
	e.finish(a)
	e.end(retry.OutcomeOK, &anthropic, nil)
	h := newHarness(t, 120, 40, Options{Inbox: in})
	h.until("the early call", func() bool { t := turnOf(h.m, extPrefix+"early"); return t != nil && t.done })
	if got := answerOf(turnOf(h.m, extPrefix+"early")); got != "first" {
		t.Errorf("answer = %q", got)
	}
}

// TestFeedCoalescesInterleavedCalls: deltas of two calls that interleave are
// merged per call, and each call's order holds.
func TestFeedCoalescesInterleavedCalls(t *testing.T) {
	f := newFeed(nil)
	for i := 0; i < 10; i++ {
		f.add(retry.Event{Kind: retry.EventText, CallID: "a", Text: fmt.Sprint(i)})
		f.add(retry.Event{Kind: retry.EventText, CallID: "b", Text: fmt.Sprint(i)})
	}
	f.add(retry.Event{Kind: retry.EventAttemptEnd, CallID: "a"})
	f.add(retry.Event{Kind: retry.EventText, CallID: "a", Text: "x"})
	f.add(retry.Event{Kind: retry.EventText, CallID: "b", Text: "y"})
	msgs := f.take()
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	var got []string
	for _, e := range msgs[0].(eventsMsg).events {
		got = append(got, e.CallID+":"+string(e.Kind)+":"+e.Text)
	}
	want := "[a:text:0123456789 b:text:0123456789y a:attempt_end: a:text:x]"
	if fmt.Sprint(got) != want {
		t.Errorf("got  %v\nwant %s", got, want)
	}
}

// TestProxiedTargetOutsideTheChainShows: a proxied call to a target the
// user never picked shows that target, marked as the proxy's, with its
// state; a typed call whose primary the shared pacer skipped says so.
func TestProxiedTargetOutsideTheChainShows(t *testing.T) {
	in := NewInbox()
	deepseek := stream.Target{Provider: "deepseek", Model: "deepseek-chat"}
	skipped := func(ctx context.Context, e *emitter) retry.Result {
		a := e.start(anthropic)
		e.say("ok")
		a.Status = 200
		e.finish(a)
		res := retry.Result{CallID: e.c.ID, Outcome: retry.OutcomeOK, ServedBy: &anthropic, Attempts: e.attempts, Text: "ok",
			Skips: []retry.Skip{{Target: openai, Wait: 17 * time.Second}}, Ended: e.clock.Now()}
		cp := res
		e.emit(retry.Event{Kind: retry.EventCallEnd, Result: &cp})
		return res
	}
	h := newHarness(t, 120, 40, Options{Inbox: in}, skipped)
	e := proxied(in, h.clock, retry.Call{ID: "d1", Chain: []stream.Target{deepseek}, Prompt: "hi"})
	e.start(deepseek)
	h.until("the proxied call", func() bool { return h.m.ext[extPrefix+"d1"] != nil && h.m.targets.get(deepseek).busy() != "" })
	if s := h.screen(); !strings.Contains(s, "deepseek/deepseek-chat") || !strings.Contains(s, "via proxy (not in your chain)") {
		t.Errorf("the proxy's target is not shown:\n%s", s)
	}
	h.typeText("typed")
	h.press("enter")
	h.idle()
	if s := h.screen(); !strings.Contains(s, "fallback: primary openai/gpt-5.4-mini skipped: its limits need a 17s wait") {
		t.Errorf("the skip is not explained:\n%s", s)
	}
}

// TestProxiedCallLabelsAreSafe: a client's user agent and route reach the
// screen without escape sequences or anything shaped like a key, capped.
func TestProxiedCallLabelsAreSafe(t *testing.T) {
	in := NewInbox()
	h := newHarness(t, 120, 40, Options{Inbox: in})
	key := "sk-proj-" + strings.Repeat("A1b2C3d4", 6)
	proxied(in, h.clock, retry.Call{ID: "s1", Chain: []stream.Target{openai}, Prompt: "hi",
		Client: "evil/1.0 \x1b]52;c;aGk=\x07 " + key + strings.Repeat(" pad", 100), Route: "fast\x1b[2J"})
	h.until("the call", func() bool { return turnOf(h.m, extPrefix+"s1") != nil })
	o := turnOf(h.m, extPrefix+"s1").origin
	if strings.ContainsRune(o, '\x1b') || strings.Contains(o, key) || len([]rune(o)) > 2*maxLabel+40 {
		t.Errorf("origin = %q", o)
	}
}
