package sim

import (
	"testing"

	"go.uber.org/goleak"
)

// No goroutine outlives the tests: hung handlers, streams and servers all end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
