package calls_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/limitscope/limitscope/stream"
)

// TestMain fails the run if any goroutine outlives the tests: the wiring
// must stop what it starts (simulators, recorders, streams, engines).
func TestMain(m *testing.M) {
	code := m.Run()
	stream.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
