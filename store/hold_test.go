package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"
)

// lockedNow reports whether another open of path cannot take its shared
// lock at once (flock is per open file: this process's recorder holding
// the file counts as another holder).
func lockedNow(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}

// recordOne records one whole call and waits until it is on disk.
func recordOne(t *testing.T, r *Recorder, id string) {
	t.Helper()
	c, evs := okSpec(id, t0).events()
	sink := r.Sink(c, nil)
	for _, ev := range evs {
		sink(ev)
	}
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestNobodyHoldsTheFileWhileIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := tempDB(t)
		r := NewRecorder(path, SessionInfo{}, Options{Retention: -1})
		defer r.Close(context.Background())
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("the recorder touched the file before its first batch")
		}
		recordOne(t, r, "a")
		// Kept open for the commits that may follow at once...
		if !lockedNow(t, path) {
			t.Fatal("the file was closed right after the commit: a burst of commits opens it each time")
		}
		// ...and given up once idle: another process gets the lock.
		time.Sleep(holdIdle)
		synctest.Wait()
		if lockedNow(t, path) {
			t.Fatalf("the idle recorder still holds the file %s after its last commit", holdIdle)
		}
	})
}

func TestBusyRecorderLetsOthersIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := tempDB(t)
		r := NewRecorder(path, SessionInfo{}, Options{Retention: -1})
		// A commit every 5 ms without a pause; another process probes the
		// lock between them.
		start := time.Now()
		var heldFor, freeAt time.Duration = 0, -1
		for i := 0; time.Since(start) < 2*holdMax; i++ {
			recordOne(t, r, fmt.Sprint(i))
			time.Sleep(5 * time.Millisecond)
			if lockedNow(t, path) {
				if freeAt < 0 {
					heldFor = time.Since(start)
				}
			} else if freeAt < 0 {
				freeAt = time.Since(start)
			}
		}
		if err := r.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		// Held through the burst's first holdMax, so its commits share
		// one open...
		if heldFor < holdMax-10*time.Millisecond {
			t.Errorf("the hold ended after %s of commits 5 ms apart, want about %s", heldFor, holdMax)
		}
		// ...then free between commits, as without a hold.
		if freeAt < 0 || freeAt > holdMax+10*time.Millisecond {
			t.Errorf("another process found the file free first at %v (-1: never), want by %s", freeAt, holdMax)
		}
		if n := countCalls(t, path); n < 50 {
			t.Errorf("%d calls on disk", n)
		}
	})
}

// countCalls is the number of calls in the file at path.
func countCalls(t *testing.T, path string) int {
	t.Helper()
	n := 0
	err := (&Reader{Path: path}).Each(context.Background(), Filter{}, true, func(*Call) error { n++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestWaiterEndsTheHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := tempDB(t)
		r := NewRecorder(path, SessionInfo{}, Options{Retention: -1})
		defer r.Close(context.Background())
		recordOne(t, r, "first")
		// A reader starts waiting while commits come every 5 ms: it gets
		// the file at the next commit, not at the hold's end.
		got := make(chan time.Duration, 1)
		start := time.Now()
		go func() {
			if _, err := (&Reader{Path: path}).List(context.Background(), Filter{Limit: 1}); err != nil {
				t.Error(err)
			}
			got <- time.Since(start)
		}()
		var waited time.Duration
		for i := 0; ; i++ {
			select {
			case waited = <-got:
			default:
				recordOne(t, r, fmt.Sprint(i))
				time.Sleep(5 * time.Millisecond)
				continue
			}
			break
		}
		if waited > 50*time.Millisecond {
			t.Errorf("the reader waited %s for a recorder committing every 5 ms (a hold lasts up to %s)", waited, holdMax)
		}
	})
}

func TestHeldFileCutUnderneath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := tempDB(t)
		r := NewRecorder(path, SessionInfo{}, Options{Retention: -1, LockTimeout: 50 * time.Millisecond})
		recordOne(t, r, "kept")
		if !lockedNow(t, path) {
			t.Fatal("not held after a commit")
		}
		// A process that ignores the lock cuts the file the recorder has
		// mapped: its next commit fails with an error, it does not crash.
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, fi.Size()/4); err != nil {
			t.Fatal(err)
		}
		c, evs := okSpec("after", t0).events()
		sink := r.Sink(c, nil)
		for _, ev := range evs {
			sink(ev)
		}
		err = r.Flush(context.Background())
		if err == nil {
			t.Fatal("a commit into a file cut to a quarter succeeded")
		}
		t.Logf("the commit after the cut: %v", err)
		if r.Pending() == 0 {
			t.Error("the failed commit's events were dropped")
		}
		// The background writer, woken by the call's end, tries too (and
		// fails the same way): let it finish before looking at the lock,
		// which its try holds for a moment (CI once looked in that moment).
		synctest.Wait()
		if lockedNow(t, path) {
			t.Error("the failed commit left the damaged file held")
		}
		_ = r.Close(context.Background())
	})
}

// An open that refuses a file cut short (its meta pages name more pages
// than it holds) lets go of it: the next writer is told the file is
// corrupt, not that it is locked.
func TestRefusedOpenLetsGo(t *testing.T) {
	path := tempDB(t)
	r := NewRecorder(path, SessionInfo{}, Options{Retention: -1})
	for i := range 40 {
		c, evs := okSpec(fmt.Sprintf("c%d", i), t0).events()
		sink := r.Sink(c, nil)
		for _, ev := range evs {
			sink(ev)
		}
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for cut := 2 * 4096; cut < len(data); cut += 4096 {
		bad := filepath.Join(t.TempDir(), "history.db")
		if err := os.WriteFile(bad, data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		db, _, err := openDBFile(context.Background(), bad, true, 50*time.Millisecond, nil)
		if err == nil {
			_ = db.Close()
			break // every page in use is there: the file's tail is room to grow
		}
		refused++
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("cut at %d: %v, want a corrupt file", cut, err)
		}
		if lockedNow(t, bad) {
			t.Fatalf("cut at %d: the open failed (%v) and left the file locked", cut, err)
		}
	}
	if refused < 3 {
		t.Fatalf("only %d cuts refused", refused)
	}
}

// TestReopenKnowsOnlyTheFileItLeft: after a write that closes the file, the
// hold knows the file as it left it (the next open skips the walk of its
// trees), and a file changed since, by anyone, is no longer the one known
// (its trees are walked again).
func TestReopenKnowsOnlyTheFileItLeft(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	h := newFileHold(path, false)
	h.Lock()
	err := h.update(context.Background(), time.Second, true, func(*bolt.Tx) error { return nil })
	h.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if h.db != nil {
		t.Fatal("a hold not allowed kept the file open")
	}
	open := func() *os.File {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	if !h.known.matches(open()) {
		t.Fatal("the file as the hold left it is not the one it knows")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{0}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if h.known.matches(open()) {
		t.Fatal("a file written since still matches the hold's stamp")
	}
	var none *fileStamp
	if none.matches(open()) {
		t.Fatal("no stamp matched a file")
	}
}
