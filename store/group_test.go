package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Calls ending close together (one every 250 µs, as a proxy under load
// ends them) share commits: each Flush that comes within groupBusy of
// another waits GroupDelay first, so 40 calls take at most 20
// transactions, where without the delay each takes its own. A lone Flush
// commits at once. On the bubble's fake clock.
func TestFlushesCloseTogetherShareACommit(t *testing.T) {
	run := func(delay time.Duration) (commits int64, first time.Duration) {
		synctest.Test(t, func(t *testing.T) {
			r := NewRecorder(tempDB(t), SessionInfo{}, Options{Retention: -1, GroupDelay: delay})
			defer r.Close(context.Background())
			start := time.Now()
			recordOne(t, r, "lone")
			first = time.Since(start)
			time.Sleep(time.Second)
			before := r.commits.Load()
			var wg sync.WaitGroup
			for i := range 40 {
				wg.Go(func() {
					time.Sleep(time.Duration(i) * 250 * time.Microsecond)
					recordOne(t, r, fmt.Sprint("c", i))
				})
			}
			wg.Wait()
			commits = r.commits.Load() - before
		})
		return commits, first
	}
	n, first := run(0)
	t.Logf("40 calls: %d commits with the default delay", n)
	if n > 20 || n < 1 || first != 0 {
		t.Errorf("with the default delay: 40 calls took %d commits, the lone one waited %s: want at most 20, and no wait", n, first)
	}
	if n, _ := run(-1); n != 40 {
		t.Errorf("without the delay: 40 calls took %d commits, want 40", n)
	}
}
