package tui

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// fakeFleet hands the console the batches the test sends.
type fakeFleet struct {
	batches chan []FleetEvent
	up      atomic.Bool
	live    map[string]bool // set before the first read
}

func (f *fakeFleet) Next(ctx context.Context, _ time.Duration) ([]FleetEvent, error) {
	select {
	case evs := <-f.batches:
		return evs, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *fakeFleet) Up() bool              { return f.up.Load() }
func (f *fakeFleet) Where() string         { return "redis://127.0.0.1:6379/0" }
func (f *fakeFleet) Live() map[string]bool { return f.live }

// The fleet's calls show beside the console's own, tagged with their host
// and command; the targets pane counts the fleet's processes and requests
// per minute; an outage is said once on the status line and stays on the
// pane until Redis is back.
func TestFleetView(t *testing.T) {
	ff := &fakeFleet{batches: make(chan []FleetEvent)}
	ff.up.Store(true)
	h := newHarness(t, 140, 40, Options{Fleet: ff})
	t.Cleanup(func() { close(ff.batches) })
	h.do(h.m.fleetListen())
	at := t0.Add(-10 * time.Second)
	ff.batches <- []FleetEvent{
		{Proc: "laptop/4711/aa", Host: "laptop", Command: "proxy", Target: openai.String(), Status: 200, Class: stream.ClassOK, Duration: 800 * time.Millisecond, At: at},
		{Proc: "ci-7/99/bb", Host: "ci-7", Command: "send", Target: openai.String(), Status: 429, Class: stream.ClassRateLimit, Code: "rate_limit_exceeded", At: at.Add(time.Second)},
		{Proc: "me/1/cc", Host: "me", Command: "tui", Target: openai.String(), Status: 200, Class: stream.ClassOK, At: at.Add(2 * time.Second), Mine: true},
	}
	h.until("the fleet's usage on the targets pane", func() bool { return strings.Contains(h.screen(), "fleet: 3 processes, 3 req/min") })
	sc := h.screen()
	for _, want := range []string{"laptop/proxy 4711", "ci-7/send 99", "rate_limit_exceeded"} {
		if !strings.Contains(sc, want) {
			t.Errorf("the screen lacks %q:\n%s", want, sc)
		}
	}
	if strings.Contains(sc, "me/tui") {
		t.Errorf("the console's own attempt shows as the fleet's:\n%s", sc)
	}

	// Later reads, applied directly (the listener the last one started
	// waits until the test ends).
	gen := h.m.statusGen
	h.send(fleetMsg{up: false})
	if !strings.Contains(h.screen(), "unreachable") || !strings.Contains(h.screen(), "shared state away") {
		t.Fatalf("the outage is not said:\n%s", h.screen())
	}
	h.send(fleetMsg{up: false})
	if n := h.m.statusGen - gen; n != 1 {
		t.Fatalf("the outage was said %d times, want once", n)
	}
	h.send(fleetMsg{up: true})
	if !strings.Contains(h.screen(), "is back") || strings.Contains(h.screen(), "shared state away") {
		t.Fatalf("the return is not said:\n%s", h.screen())
	}
}

// The fleet line counts a full minute from the console's first read (the
// feed starts a minute back: that backlog counts, but stays off the
// attempt log), and only the processes still alive.
func TestFleetLineCountsLiveProcessesFromTheStart(t *testing.T) {
	ff := &fakeFleet{batches: make(chan []FleetEvent), live: map[string]bool{"a/1/aa": true, "b/2/bb": true}}
	ff.up.Store(true)
	h := newHarness(t, 140, 40, Options{Fleet: ff})
	t.Cleanup(func() { close(ff.batches) })
	h.do(h.m.fleetListen())
	var evs []FleetEvent
	// 600 requests over the minute before the console started, from
	// three processes; c/3/cc has exited since.
	for i := range 600 {
		proc := []string{"a/1/aa", "b/2/bb", "c/3/cc"}[i%3]
		evs = append(evs, FleetEvent{Proc: proc, Host: "h", Command: "proxy", Target: openai.String(), Status: 200, Class: stream.ClassOK,
			At: t0.Add(-59*time.Second + time.Duration(i)*95*time.Millisecond), Backlog: true})
	}
	ff.batches <- evs
	h.until("the fleet's line", func() bool { return strings.Contains(h.screen(), "fleet: 2 processes, 600 req/min") })
	if strings.Contains(h.screen(), "h/proxy 1") {
		t.Fatalf("the backlog is on the attempt log:\n%s", h.screen())
	}
}
