package main

import (
	"os"
	"testing"

	"github.com/limitscope/limitscope/internal/leaktest"
)

// TestMain fails the run if any goroutine outlives the tests: every command
// must stop what it started (simulators, recorders, streams, engines),
// whether it ended well, failed or was cancelled.
func TestMain(m *testing.M) {
	if spec := os.Getenv(bareProxyEnv); spec != "" {
		bareProxyChild(spec)
	}
	leaktest.Main(m)
}
