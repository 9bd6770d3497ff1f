package proxy

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: a
// cancelled call, a caller that went away mid-stream or a failover must not
// leak one. Idle keep-alive connections of the HTTP clients the tests use
// are closed by each test's cleanup.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
