package cli

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// scenarioBenchAttempts is a history of a little over a million calls in
// genHistory's mix (1.65 attempts a call).
const scenarioBenchAttempts = 1_700_000

// BenchmarkHistoryScenario1M learns a scenario from a history of over a
// million calls, in-process, and reports the heap it held at its peak
// above the heap before it (sampled every millisecond) and the calls read.
// The binary's whole footprint is measured on the same file with
// /usr/bin/time (README, Performance):
//
//	LIMITSCOPE_BENCH_HISTORY_DIR=/tmp/h go test -run '^$' -bench HistoryScenario1M -benchtime 1x ./internal/cli/
//	/usr/bin/time -v limitscope history scenario --since 3d --db /tmp/h/attempts-1700000.db
func BenchmarkHistoryScenario1M(b *testing.B) {
	path := benchHistory(b, scenarioBenchAttempts)
	a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &bytes.Buffer{},
		getenv: func(string) string { return "" }, now: time.Now}
	args := []string{"scenario", "--db", path, "--since", "3d"}
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	heapNow := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	var peak uint64
	for b.Loop() {
		runtime.GC()
		base := heapNow()
		var top atomic.Uint64
		done := make(chan struct{})
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			t := time.NewTicker(time.Millisecond)
			defer t.Stop()
			for {
				if h := heapNow(); h > top.Load() {
					top.Store(h)
				}
				select {
				case <-done:
					return
				case <-t.C:
				}
			}
		}()
		if code := runHistory(context.Background(), a, args); code != exitOK {
			b.Fatalf("history scenario: exit %d: %s", code, a.stderr)
		}
		close(done)
		<-stopped
		if top.Load() > base {
			peak = max(peak, top.Load()-base)
		}
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
}
