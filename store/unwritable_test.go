package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
)

// recordSome queues n ok calls on r.
func recordSome(r *Recorder, prefix string, n int) {
	for i := range n {
		c, evs := okSpec(prefix+itoa(uint32(i)), t0.Add(time.Duration(i)*time.Minute)).events()
		sink := r.Sink(c, nil)
		for _, ev := range evs {
			sink(ev)
		}
	}
}

// unwritable checks the history in an unwritable place: a clear error that
// names the path and why, one warning, nothing dropped, and everything
// saved once the place is writable again.
func unwritable(t *testing.T, path string, why string, fix func()) {
	t.Helper()
	var warns atomic.Int32
	var warnErr atomic.Value
	r := NewRecorder(path, SessionInfo{}, Options{Retention: -1, LockTimeout: 100 * time.Millisecond, RetryDelay: time.Hour,
		OnWarn: func(err error) { warns.Add(1); warnErr.Store(err) }})
	recordSome(r, "c", 3)
	err := r.Flush(context.Background())
	if err == nil || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), filepath.Dir(path)) {
		t.Fatalf("flush: %v, want an error naming %s and %q", err, filepath.Dir(path), why)
	}
	for _, kind := range []error{ErrCorrupt, ErrForeign, ErrNewer, ErrLocked} {
		if errors.Is(err, kind) {
			t.Errorf("an unwritable place is reported as %q: %v", kind, err)
		}
	}
	if err := r.Flush(context.Background()); err == nil {
		t.Fatal("second flush succeeded")
	}
	if warns.Load() != 1 {
		t.Errorf("warned %d times, want once", warns.Load())
	}
	if r.Pending() == 0 {
		t.Fatal("events dropped")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	fix()
	if err := r.Close(ctx); err != nil {
		t.Fatalf("close once writable: %v", err)
	}
	calls, err := (&Reader{Path: path}).List(context.Background(), Filter{})
	if err != nil || len(calls) != 3 {
		t.Fatalf("%d calls (%v), want 3", len(calls), err)
	}
	for _, c := range calls {
		if c.Outcome != retry.OutcomeOK {
			t.Errorf("call %+v", c)
		}
	}
}

// A read-only directory: root writes there anyway, so as root this test
// cannot fail and is skipped; TestHistoryUnderAFile covers an unwritable
// place as root.
func TestHistoryInAReadOnlyDirectory(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root: a read-only directory does not stop root, so this test cannot fail; TestHistoryUnderAFile covers an unwritable place as root")
	}
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
	unwritable(t, filepath.Join(dir, "state", "history.db"), "permission denied", func() {
		if err := os.Chmod(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	})
}

// The history's directory is a file (a typo in --db, or a stray file): the
// same clear error, whoever runs it.
func TestHistoryUnderAFile(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "state")
	if err := os.WriteFile(blocker, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	unwritable(t, filepath.Join(blocker, "history.db"), "not a directory", func() {
		if err := os.Remove(blocker); err != nil {
			t.Fatal(err)
		}
	})
}

// A history file that is a directory is not "corrupt" (whose message sends
// people to repair): the error says what it is.
func TestHistoryPathIsADirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(path, SessionInfo{}, Options{Retention: -1, LockTimeout: 100 * time.Millisecond, RetryDelay: time.Hour})
	recordSome(r, "d", 1)
	err := r.Flush(context.Background())
	if err == nil || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("flush: %v, want a clear 'is a directory'", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := r.Close(ctx); err == nil || !strings.Contains(err.Error(), "not saved") {
		t.Errorf("close: %v, want the unsaved events reported", err)
	}
	if _, err := (&Reader{Path: path, LockTimeout: 100 * time.Millisecond}).List(context.Background(), Filter{}); err == nil || errors.Is(err, ErrCorrupt) {
		t.Errorf("reader: %v, want a clear error that is not 'corrupt'", err)
	}
}

// limitscope creates the file 0600 in a 0700 directory (TestFilePermissions)
// and never changes an existing file's mode: one a person set to 0640 stays
// 0640 and is still written.
func TestExistingFileModeLeftAlone(t *testing.T) {
	path := tempDB(t)
	recordAll(t, path, SessionInfo{}, okSpec("a", t0))
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	recordAll(t, path, SessionInfo{}, okSpec("b", t0.Add(time.Minute)))
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v (%v)", fi.Mode(), err)
	}
}
