package proxy

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: a
// cancelled call, a caller that went away mid-stream or a failover must not
// leak one. Every HTTP client a test uses is its own (newTestClient), and
// its idle keep-alive connections are closed by the test's cleanup, so no
// net/http persistConn goroutine outlives its test; no goroutine is
// ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
