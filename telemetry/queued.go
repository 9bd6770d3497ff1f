package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/metric"
)

// MetricCallsQueued is the gauge of calls waiting for a concurrency slot
// at a target's gate (the pacer's queue), all targets together; under
// Prometheus naming rules it reads limitscope_calls_queued.
const MetricCallsQueued = "limitscope.calls.queued"

// SetQueued names what the calls-queued gauge reads (the engine's pacer's
// Queued); until it is called the gauge reads 0. Safe on a nil Telemetry.
func (t *Telemetry) SetQueued(f func() int) {
	if t == nil || f == nil {
		return
	}
	t.queuedCalls.Store(&f)
}

// registerQueued adds the calls-queued gauge to m.
func registerQueued(m metric.Meter, t *Telemetry) error {
	_, err := m.Int64ObservableGauge(MetricCallsQueued, metric.WithUnit("{call}"),
		metric.WithDescription("Calls waiting for a concurrency slot at a target's gate (the proxy's queue)."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			n := 0
			if f := t.queuedCalls.Load(); f != nil {
				n = (*f)()
			}
			o.Observe(int64(n))
			return nil
		}))
	if err != nil {
		return fmt.Errorf("telemetry: %s: %w", MetricCallsQueued, err)
	}
	return nil
}
