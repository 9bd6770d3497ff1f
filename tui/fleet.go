package tui

import (
	"context"
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/limitscope/limitscope/internal/sanitize"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// FleetEvent is one attempt of a process of the fleet (limitscope processes
// sharing state through Redis, --state), as the console shows it. It never
// carries a prompt, an answer or a key.
type FleetEvent struct {
	Proc     string // the process: host/pid/suffix
	Host     string
	Command  string // send, proxy, tui, bench
	Target   string // provider[:api][@account]/model
	Status   int
	Class    stream.Class
	Code     string
	Duration time.Duration
	At       time.Time // when the fleet took it, on this machine's clock
	Mine     bool      // this console's own (already on screen)
	Backlog  bool      // from before the console started: counted, not logged
}

// FleetFeed is the fleet's live stream of attempts, adapted from the shared
// state by the caller (nil: no fleet).
type FleetFeed interface {
	// Next waits up to wait for new events, oldest first.
	Next(ctx context.Context, wait time.Duration) ([]FleetEvent, error)
	// Up reports whether the shared state is reachable now.
	Up() bool
	// Where names the shared state for the screen (no password).
	Where() string
	// Live is the processes (FleetEvent.Proc) alive at the last Next; nil
	// when not known (then every process with an event counts).
	Live() map[string]bool
}

// fleetMsg is one read of the fleet's stream.
type fleetMsg struct {
	events []FleetEvent
	up     bool
	live   map[string]bool
}

// fleetView is the console's view of the fleet: the last minute of its
// attempts, for fleet-wide usage per target, and whether the shared state
// is reachable.
type fleetView struct {
	feed   FleetFeed
	events []FleetEvent // the last minute, oldest first
	live   map[string]bool
	up     bool
	warned bool // the outage was said on screen
}

// fleetWait is how long one read of the stream waits for events.
const fleetWait = time.Second

// initFleet sets up the fleet view when the console has a fleet.
func (m *Model) initFleet() {
	if m.opts.Fleet == nil {
		return
	}
	m.fleet = &fleetView{feed: m.opts.Fleet, up: true}
	m.targets.fleet = m.fleet.usage
}

// fleetUsage is the fleet's usage line for t ("" without a fleet).
func (p *targetsPane) fleetUsage(t stream.Target, now time.Time) string {
	if p.fleet == nil {
		return ""
	}
	return p.fleet(t, now)
}

// fleetListen reads the fleet's stream once (nil without a fleet).
func (m *Model) fleetListen() tea.Cmd {
	if m.fleet == nil {
		return nil
	}
	feed := m.fleet.feed
	return func() tea.Msg {
		evs, _ := feed.Next(context.Background(), fleetWait)
		return fleetMsg{events: evs, up: feed.Up(), live: feed.Live()}
	}
}

// fleetUpdate takes a read: other processes' attempts go to the attempt
// log, every attempt to the usage, and an outage is said once on the status
// line (the targets pane says it as long as it lasts).
func (m *Model) fleetUpdate(msg fleetMsg) tea.Cmd {
	f := m.fleet
	if f == nil {
		return nil
	}
	m.now = m.opts.Now()
	var cmds []tea.Cmd
	if !msg.up && !f.warned {
		f.warned = true
		cmds = append(cmds, m.setStatus("Shared state at "+f.feed.Where()+" unreachable: this console runs on its own state until it is back.", true))
	}
	if msg.up && !f.up && f.warned {
		f.warned = false
		cmds = append(cmds, m.setStatus("Shared state at "+f.feed.Where()+" is back.", false))
	}
	f.up = msg.up
	if msg.live != nil {
		f.live = msg.live
	}
	for _, ev := range msg.events {
		f.events = append(f.events, ev)
		if ev.Mine || ev.Backlog {
			continue
		}
		t, err := stream.ParseTarget(ev.Target)
		if err != nil {
			continue
		}
		m.log.add(&logRow{callID: fleetPrefix + ev.Proc + "\x00" + ev.Command, at: ev.At, attempt: retry.Attempt{
			N: 1, Target: t, Status: ev.Status, Class: ev.Class, Code: ev.Code, Duration: ev.Duration, StartedAt: ev.At.Add(-ev.Duration)}})
	}
	f.trim(m.now)
	m.targets.invalidate()
	cmds = append(cmds, m.fleetListen())
	return tea.Batch(cmds...)
}

// fleetPrefix starts the call id of a fleet row in the attempt log.
const fleetPrefix = "fleet\x00"

// fleetTag marks another process's row: "laptop/proxy 4711 "; "" for this
// console's own.
func fleetTag(r *logRow) string {
	rest, ok := strings.CutPrefix(r.callID, fleetPrefix)
	if !ok {
		return ""
	}
	proc, cmd, _ := strings.Cut(rest, "\x00")
	host, pid := proc, ""
	if parts := strings.Split(proc, "/"); len(parts) >= 2 {
		host, pid = parts[0], parts[1]
	}
	return oneLine(sanitize.Printable(host+"/"+cmd+" "+pid)) + " "
}

// trim drops events older than a minute.
func (f *fleetView) trim(now time.Time) {
	cut := now.Add(-time.Minute)
	i := 0
	for i < len(f.events) && !f.events[i].At.After(cut) {
		i++
	}
	f.events = append(f.events[:0:0], f.events[i:]...)
}

// usage is the fleet's use of t over the last minute: "3 processes, 41
// req/min", counting every request of the minute (the provider's window
// counts them all) and only the processes still alive; "" when no process
// used it (or no fleet); the outage while the shared state is away.
func (f *fleetView) usage(t stream.Target, now time.Time) string {
	if f == nil {
		return ""
	}
	if !f.up && f.warned {
		return "fleet: shared state away, local state"
	}
	key := t.String()
	procs := map[string]bool{}
	n := 0
	cut := now.Add(-time.Minute)
	for _, ev := range f.events {
		if ev.Target == key && ev.At.After(cut) {
			n++
			if f.live == nil || f.live[ev.Proc] {
				procs[ev.Proc] = true
			}
		}
	}
	if n == 0 {
		return ""
	}
	p := "processes"
	if len(procs) == 1 {
		p = "process"
	}
	return fmt.Sprintf("fleet: %d %s, %d req/min", len(procs), p, n)
}
