package sim

import (
	"testing"

	"go.uber.org/goleak"
)

// No goroutine outlives the tests: hung handlers, streams and servers all end.
// (The genai SDK's opencensus dependency starts a worker at init.)
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}
