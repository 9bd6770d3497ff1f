package tui

import (
	"context"
	"errors"
	"fmt"
	"time"

	tea "charm.land/bubbletea/v2"
)

// Run runs the console in the alternate screen until the user quits (q, or
// ctrl+c with no call in flight), then returns nil. A call in flight is
// cancelled on the way out. opts.Runner must be set.
func Run(ctx context.Context, opts Options) error {
	return runProgram(ctx, opts)
}

// RunWith is Run with extra Bubble Tea program options (an input, an
// output, a window size, a filter): for end-to-end tests of a command's
// wiring without a terminal.
func RunWith(ctx context.Context, opts Options, extra ...tea.ProgramOption) error {
	return runProgram(ctx, opts, extra...)
}

// runProgram is Run with extra program options (tests give it input and output).
func runProgram(ctx context.Context, opts Options, extra ...tea.ProgramOption) error {
	if opts.Runner == nil {
		return errors.New("tui: no runner")
	}
	m := New(opts)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := tea.NewProgram(m, append([]tea.ProgramOption{tea.WithContext(ctx)}, extra...)...)
	go m.feed.run(fctx, p.Send)
	_, err := p.Run()
	m.stop()
	m.drain(3 * time.Second)
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

// drain waits (at most d) for cancelled runs to return, so the Recorder sees
// their end as cancelled. It reports whether they all returned.
func (m *Model) drain(d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		m.runs.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
