package tui

import (
	"context"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/limitscope/limitscope/retry"
)

// frame is how long text deltas are coalesced before they are delivered:
// 20 text updates a second, so a stream costs the renderer 20 frames a
// second, not 60 (the renderer's cost per frame is the whole screen's; at
// 200x60 and 200 tokens/s, 16 ms frames took 19-20% of a core, 50 ms ones
// 9-10%). A key press still shows at the renderer's next frame (60 a second).
const frame = 50 * time.Millisecond

// eventsMsg carries, in order, the events one frame gathered. Consecutive
// text deltas of one call are already merged into one event.
type eventsMsg struct {
	events []retry.Event
}

// runDoneMsg says a run returned; it is queued after the run's last event.
type runDoneMsg struct {
	runID  string
	result retry.Result
}

// feed carries engine events from the goroutines that run calls to the
// program. Text deltas are coalesced (lossy in granularity only: no text is
// lost); every other event and every runDoneMsg is delivered, in order.
type feed struct {
	rec Recorder

	mu    sync.Mutex
	queue []tea.Msg // pending messages, in order; eventsMsg entries are open for appending
	wake  chan struct{}
}

func newFeed(rec Recorder) *feed {
	return &feed{rec: rec, wake: make(chan struct{}, 1)}
}

// sink is the engine's event callback. It records the event, then queues it.
func (f *feed) sink(ev retry.Event) {
	if f.rec != nil {
		f.rec.Record(ev)
	}
	f.add(ev)
}

// coalesceReach is how far back in a frame's events a text delta looks for
// an earlier delta of its call to merge into: concurrent calls (the
// proxy's) interleave their deltas.
const coalesceReach = 64

// add queues one event. A text delta is merged into the call's previous
// delta in the open frame when no other event of that call came after it,
// so each call's events keep their order and no text is lost.
func (f *feed) add(ev retry.Event) {
	f.mu.Lock()
	var last *eventsMsg
	if n := len(f.queue); n > 0 {
		if em, ok := f.queue[n-1].(*eventsMsg); ok {
			last = em
		}
	}
	if last == nil {
		last = &eventsMsg{}
		f.queue = append(f.queue, last)
	}
	if ev.Kind == retry.EventText {
		for i, stop := len(last.events)-1, max(0, len(last.events)-coalesceReach); i >= stop; i-- {
			prev := &last.events[i]
			if prev.CallID != ev.CallID {
				continue
			}
			if prev.Kind == retry.EventText {
				prev.Text += ev.Text
				f.mu.Unlock()
				f.notify()
				return
			}
			break
		}
	}
	last.events = append(last.events, ev)
	f.mu.Unlock()
	f.notify()
}

// push queues a message that must be delivered after everything queued so far.
func (f *feed) push(msg tea.Msg) {
	f.mu.Lock()
	f.queue = append(f.queue, msg)
	f.mu.Unlock()
	f.notify()
}

func (f *feed) notify() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// take removes and returns everything queued.
func (f *feed) take() []tea.Msg {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queue
	f.queue = nil
	out := make([]tea.Msg, 0, len(q))
	for _, m := range q {
		if em, ok := m.(*eventsMsg); ok {
			out = append(out, *em)
			continue
		}
		out = append(out, m)
	}
	return out
}

// run delivers queued messages through send until ctx ends: it wakes on the
// first message, lets a frame's worth of deltas gather, then sends everything
// in order. It is the one goroutine that feeds engine events to the program.
func (f *feed) run(ctx context.Context, send func(tea.Msg)) {
	t := time.NewTimer(frame)
	t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		}
		t.Reset(frame)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		for _, m := range f.take() {
			send(m)
		}
	}
}
