package telemetry

import (
	"context"
	"fmt"
)

// FlushSpans is Flush, then the ended spans' batches sent to the collector
// (for the benchmarks, which count that CPU against export).
func (t *Telemetry) FlushSpans(ctx context.Context) error {
	if err := t.Flush(ctx); err != nil {
		return err
	}
	if t == nil || t.tp == nil {
		return nil
	}
	if err := t.tp.ForceFlush(ctx); err != nil {
		return fmt.Errorf("telemetry: flush spans: %w", err)
	}
	return nil
}
