package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
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
// /usr/bin/time (docs/performance.md):
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

// BenchmarkHistoryScenario1MProcess builds the binary and runs `history
// scenario` with it on the same history as BenchmarkHistoryScenario1M, as
// /usr/bin/time does (docs/performance.md), and reports the process's peak
// resident set (VmHWM: the pages mapped from the binary and the history
// file, and the heap; read every 10 ms while it runs, since getrusage's
// maxrss of a child counts the parent's pages it shared until exec) and
// its CPU time. The test binary would not do: its start-up alone, with
// the test dependencies, is 29-30 MiB.
//
//	LIMITSCOPE_BENCH_HISTORY_DIR=/tmp/h go test -run '^$' -bench HistoryScenario1MProcess -benchtime 5x ./internal/cli/
func BenchmarkHistoryScenario1MProcess(b *testing.B) {
	path := benchHistory(b, scenarioBenchAttempts)
	dir := b.TempDir()
	bin := filepath.Join(dir, "limitscope")
	if out, err := exec.Command("go", "build", "-o", bin, "../..").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v: %s", err, out)
	}
	env := childEnv(b, dir)
	var peak float64
	var cpu time.Duration
	for b.Loop() {
		cmd := exec.Command(bin, "history", "scenario", "--since", "3d", "--db", path)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		hwm := 0.0
		t := time.NewTicker(10 * time.Millisecond)
	poll:
		for {
			if v, ok := readVmHWM(cmd.Process.Pid); ok {
				hwm = max(hwm, v)
			}
			select {
			case err := <-done:
				if err != nil {
					b.Fatalf("history scenario: %v: %s", err, stderr.Bytes())
				}
				break poll
			case <-t.C:
			}
		}
		t.Stop()
		peak = max(peak, hwm)
		cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	b.ReportMetric(peak, "peak-RSS-MiB")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "CPU-s/op")
}

// readVmHWM is a running process's peak resident set (VmHWM) in MiB; false
// once it has exited.
func readVmHWM(pid int) (float64, bool) {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for l := range strings.Lines(string(st)) {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err == nil
		}
	}
	return 0, false
}
