package cli

import (
	"bytes"
	"context"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// TestBoundMemorySetsAndRestoresTheLimit: history stats and export run under
// the review commands' soft memory limit, put the previous one back after,
// and keep a limit the user set.
func TestBoundMemorySetsAndRestoresTheLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(prev)
	runtime.GC()
	before := reviewLimit(liveHeap())
	restore := boundMemory()
	after := reviewLimit(liveHeap()) // a collection may end in between
	if got := debug.SetMemoryLimit(-1); (got != before && got != after) || got < reviewMemoryLimit {
		t.Errorf("limit while running %d, want %d (at least %d)", got, before, reviewMemoryLimit)
	}
	restore()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("limit after %d, want none", got)
	}
	debug.SetMemoryLimit(64 << 20) // as GOMEMLIMIT=64MiB would
	restore = boundMemory()
	if got := debug.SetMemoryLimit(-1); got != 64<<20 {
		t.Errorf("a limit the user set became %d", got)
	}
	restore()
}

// The limit is 12 MiB for a heap like the binary's, and never under what
// the collector's pacing asks for a larger live heap.
func TestReviewLimitFollowsTheLiveHeap(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int64
	}{{0, 12 << 20}, {2 << 20, 12 << 20}, {3 << 20, 12 << 20}, {64 << 20, 134 << 20}, {math.MaxUint64, math.MaxInt64/2 + 6<<20 - 1}} {
		if got := reviewLimit(c.live); got != c.want {
			t.Errorf("reviewLimit(%d) = %d, want %d", c.live, got, c.want)
		}
	}
}

// history export, run in a process that holds a larger live heap than the
// binary's (a benchmark, a test), does not make the collector run without
// end: with the old fixed 12 MiB limit under a 64 MiB live heap, an export
// of 10,000 attempts ran 22 collections, where GOGC's pacing runs none or
// one (and a 100 k-attempt one took 86 s in the benchmark, 0.8 s in the
// binary).
func TestHistoryExportInABigProcessCollectsAsUsual(t *testing.T) {
	prev := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(prev)
	path := filepath.Join(t.TempDir(), "history.db")
	genHistory(t, path, 10_000)
	ballast := make([]byte, 64<<20)
	for i := range ballast {
		ballast[i] = byte(i)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &bytes.Buffer{},
		getenv: func(string) string { return "" }, now: time.Now}
	if code := runHistory(context.Background(), a, []string{"export", "--db", path}); code != exitOK {
		t.Fatalf("history export: exit %d: %s", code, a.stderr)
	}
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(ballast)
	if n := after.NumGC - before.NumGC; n > 5 {
		t.Errorf("history export ran %d collections with a 64 MiB live heap (the limit under it?)", n)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("the limit stayed on after the command: %d", got)
	}
}
