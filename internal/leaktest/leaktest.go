// Package leaktest ends a test binary with a check that no goroutine
// outlived its tests: every command must stop what it started (simulators,
// recorders, streams, engines), whether it ended well, failed or was
// cancelled.
package leaktest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/limitscope/limitscope/stream"
)

// Main runs m's tests and exits with their code, or with 1 when they
// passed but left a goroutine running. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	// Keep-alive connections of the HTTP client shared by every
	// stream.Client without its own are idle, not leaked.
	stream.CloseIdleConnections()
	if code == 0 {
		// Ignored, as in tui's tests: a tea.Tick command of a console that
		// has quit, which bubbletea leaves to its timer (it ends when the
		// timer fires, up to a second later).
		if err := goleak.Find(goleak.IgnoreTopFunction("charm.land/bubbletea/v2.Tick.func1")); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
