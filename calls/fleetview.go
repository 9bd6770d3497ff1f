package calls

import (
	"context"
	"time"

	"github.com/limitscope/limitscope/fleet"
	"github.com/limitscope/limitscope/tui"
)

// FleetFeed is the console's live view of the fleet with --state (nil
// without): the attempts every process publishes, from a minute back
// (fleet.Backlog) on, and the processes alive.
func (c *Calls) FleetFeed() tui.FleetFeed {
	if c.Fleet == nil {
		return nil
	}
	return fleetFeed{f: c.Fleet, r: c.Fleet.NewReader()}
}

// fleetFeed adapts a fleet.Reader to tui.FleetFeed.
type fleetFeed struct {
	f *fleet.Fleet
	r *fleet.Reader
}

func (ff fleetFeed) Next(ctx context.Context, wait time.Duration) ([]tui.FleetEvent, error) {
	evs, err := ff.r.Next(ctx, wait)
	out := make([]tui.FleetEvent, 0, len(evs))
	for _, e := range evs {
		out = append(out, tui.FleetEvent{Proc: e.Proc, Host: e.Host, Command: e.Command, Target: e.Target, Status: e.Status,
			Class: e.Class, Code: e.Code, Duration: e.Duration, At: e.At, Mine: e.Mine, Backlog: e.Backlog})
	}
	return out, err
}

func (ff fleetFeed) Up() bool              { return ff.f.Up() }
func (ff fleetFeed) Live() map[string]bool { return ff.r.Live() }
func (ff fleetFeed) Where() string         { return ff.f.Where() }
