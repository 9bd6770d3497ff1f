package tui

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/limitscope/limitscope/retry"
)

func TestFeedCoalescesTextAndKeepsEverythingElse(t *testing.T) {
	f := newFeed(nil)
	f.sink(retry.Event{Kind: retry.EventAttemptStart, CallID: "c"})
	for i := 0; i < 100; i++ {
		f.sink(retry.Event{Kind: retry.EventText, CallID: "c", Text: fmt.Sprint(i % 10)})
	}
	f.sink(retry.Event{Kind: retry.EventAttemptEnd, CallID: "c"})
	f.sink(retry.Event{Kind: retry.EventText, CallID: "c", Text: "x"})
	f.sink(retry.Event{Kind: retry.EventText, CallID: "other", Text: "y"})
	f.sink(retry.Event{Kind: retry.EventCallEnd, CallID: "c"})
	f.push(runDoneMsg{runID: "c"})
	f.sink(retry.Event{Kind: retry.EventCallStart, CallID: "d"})

	msgs := f.take()
	if len(msgs) != 3 {
		t.Fatalf("%d messages, want events, runDone, events", len(msgs))
	}
	em := msgs[0].(eventsMsg)
	var kinds []string
	for _, e := range em.events {
		kinds = append(kinds, string(e.Kind)+":"+e.Text)
	}
	want := "[attempt_start: text:0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789 attempt_end: text:x text:y call_end:]"
	if got := fmt.Sprint(kinds); got != want {
		t.Errorf("events\n got %s\nwant %s", got, want)
	}
	if _, ok := msgs[1].(runDoneMsg); !ok {
		t.Errorf("runDone not after the call's events: %T", msgs[1])
	}
	if em := msgs[2].(eventsMsg); len(em.events) != 1 || em.events[0].CallID != "d" {
		t.Errorf("later events = %+v", em)
	}
	if len(f.take()) != 0 {
		t.Errorf("take left messages behind")
	}
}

// TestFeedUnderLoad streams 20,000 deltas from one goroutine while the feed
// delivers: no text is lost, order holds, and deltas arrive in few messages.
func TestFeedUnderLoad(t *testing.T) {
	rec := &recorder{}
	f := newFeed(rec)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var got []tea.Msg
	done := make(chan struct{})
	go f.run(ctx, func(m tea.Msg) {
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
		if _, ok := m.(runDoneMsg); ok {
			close(done)
		}
	})
	const n = 20000
	f.sink(retry.Event{Kind: retry.EventAttemptStart, CallID: "c"})
	for i := 0; i < n; i++ {
		f.sink(retry.Event{Kind: retry.EventText, CallID: "c", Text: "a"})
	}
	f.sink(retry.Event{Kind: retry.EventCallEnd, CallID: "c"})
	f.push(runDoneMsg{runID: "c"})
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the feed never delivered the end")
	}
	mu.Lock()
	defer mu.Unlock()
	text, textEvents, ends := 0, 0, 0
	for _, m := range got {
		em, ok := m.(eventsMsg)
		if !ok {
			continue
		}
		for _, e := range em.events {
			switch e.Kind {
			case retry.EventText:
				text += len(e.Text)
				textEvents++
			case retry.EventCallEnd:
				ends++
			}
		}
	}
	if text != n || ends != 1 {
		t.Errorf("delivered %d bytes of text and %d ends, want %d and 1", text, ends, n)
	}
	if textEvents > n/10 {
		t.Errorf("%d text events for %d deltas: not coalesced", textEvents, n)
	}
	if len(rec.evs) != n+2 {
		t.Errorf("the recorder got %d events, want every one (%d)", len(rec.evs), n+2)
	}
}
