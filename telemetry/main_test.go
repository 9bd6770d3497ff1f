package telemetry_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a goroutine outlives the tests: Close must stop
// the exporters, readers and the worker.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
