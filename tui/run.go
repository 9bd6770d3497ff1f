package tui

import (
	"context"
	"errors"
	"fmt"

	tea "charm.land/bubbletea/v2"
)

// Run runs the console in the alternate screen until the user quits (q, or
// ctrl+c with no call in flight), then returns nil. A call in flight is
// cancelled on the way out. opts.Runner must be set.
func Run(ctx context.Context, opts Options) error {
	if opts.Runner == nil {
		return errors.New("tui: no runner")
	}
	m := New(opts)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := tea.NewProgram(m, tea.WithContext(ctx))
	go m.feed.run(fctx, p.Send)
	_, err := p.Run()
	m.stop()
	if err != nil {
		if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
			return nil // the caller's context ended (a signal): a clean exit
		}
		if errors.Is(err, tea.ErrInterrupted) {
			return nil
		}
		return fmt.Errorf("console: %w", err)
	}
	return nil
}

// stop cancels the call in flight, if any.
func (m *Model) stop() {
	if m.call != nil {
		m.call.cancel()
	}
}
