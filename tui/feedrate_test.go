package tui

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/theme"
)

// TestFeedTextUpdatesTwentyASecond streams a delta every millisecond
// for a second of fake time: the feed hands the program at most about 20
// messages (each a new frame for the renderer to draw), and every byte.
func TestFeedTextUpdatesTwentyASecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFeed(nil)
		ctx, cancel := context.WithCancel(context.Background())
		var msgs int
		var text strings.Builder
		done := make(chan struct{})
		go func() {
			defer close(done)
			f.run(ctx, func(m tea.Msg) {
				msgs++
				for _, ev := range m.(eventsMsg).events {
					text.WriteString(ev.Text)
				}
			})
		}()
		for range 1000 {
			f.sink(retry.Event{Kind: retry.EventText, CallID: "c", Text: "x"})
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Second) // the last frame is delivered
		synctest.Wait()
		cancel()
		<-done
		if text.Len() != 1000 {
			t.Fatalf("%d bytes delivered, want 1000", text.Len())
		}
		if msgs > 21 {
			t.Errorf("%d messages in a second of streaming, want at most 21 (20 frames a second)", msgs)
		}
	})
}

// TestTranscriptViewAsksWelcomeOnlyWhenEmpty: the empty transcript's text is
// styled only while the transcript is empty, not on every frame of a stream.
func TestTranscriptViewAsksWelcomeOnlyWhenEmpty(t *testing.T) {
	st := theme.New(true, false)
	var c transcript
	asked := 0
	welcome := func() []string { asked++; return []string{"welcome"} }
	if out := strings.Join(c.view(40, 5, &st, nil, welcome), "\n"); !strings.Contains(out, "welcome") || asked != 1 {
		t.Fatalf("empty transcript: asked %d times, view %q", asked, out)
	}
	c.add("c1", "hello", stream.Target{}, time.Time{})
	for range 10 {
		c.view(40, 5, &st, nil, welcome)
	}
	if asked != 1 {
		t.Errorf("welcome asked %d times with a turn on screen, want only the first (empty) view", asked)
	}
}
