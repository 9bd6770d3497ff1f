package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestBoundMemorySetsAndRestoresTheLimit: history stats and export run under
// the review commands' soft memory limit, put the previous one back after,
// and keep a limit the user set.
func TestBoundMemorySetsAndRestoresTheLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(prev)
	restore := boundMemory()
	if got := debug.SetMemoryLimit(-1); got != reviewMemoryLimit {
		t.Errorf("limit while running %d, want %d", got, reviewMemoryLimit)
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
