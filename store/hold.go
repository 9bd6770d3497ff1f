package store

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// How a recorder holds the file open between commits (see fileHold).
const (
	// holdIdle ends a hold when no commit came for this long.
	holdIdle = 20 * time.Millisecond
	// holdMax ends a hold this long after it began, whatever comes.
	holdMax = 250 * time.Millisecond
	// holdGap is the least time between a hold's end and the next hold's
	// start. Longer than a lock waiter's slowest poll (30 ms, waitLock), so
	// another process waiting for the file meets it free between commits.
	holdGap = 50 * time.Millisecond
)

// fileHold serialises one process's use of the history file (a recorder's
// commits, its cooldowns' reads and writes, retention), and lets a recorder
// keep the file open between commits that come close together: a burst of
// commits (the proxy's calls ending under load) then takes the lock, checks
// the file and maps it once, not once per commit. Every commit still syncs.
//
// A hold ends holdIdle after the last commit, or holdMax after it began,
// and the next begins no sooner than holdGap later; meanwhile each commit
// opens and closes the file, so another process waiting for the lock (a
// reader, another writer) finds it free between commits, as it would with
// no hold. While held, the file is locked exclusively: no other process
// can change or replace it; each use still checks that the path names the
// file held, and any failure ends the hold.
//
// The embedded mutex is held by whoever uses the file; the methods below
// are called with it held.
type fileHold struct {
	sync.Mutex
	path  string
	allow bool // holds allowed (a recorder's file); else every use opens and closes

	db                 *bolt.DB    // the held file, or nil
	fi                 os.FileInfo // db's file, to tell a replaced path
	began, last, until time.Time   // the hold's start, its last use; no new hold before until
	idle               *time.Timer // ends the hold once idle
}

// newFileHold returns the hold of path; allow lets update keep it open.
func newFileHold(path string, allow bool) *fileHold {
	return &fileHold{path: path, allow: allow}
}

// held returns the held database when it still is the path's file, ending
// the hold otherwise.
func (h *fileHold) held() *bolt.DB {
	if h.db == nil {
		return nil
	}
	if now, err := os.Stat(h.path); err != nil || !os.SameFile(now, h.fi) {
		h.release()
		return nil
	}
	return h.db
}

// release ends the hold, if any: the file is closed and its lock freed.
func (h *fileHold) release() {
	if h.idle != nil {
		h.idle.Stop()
	}
	if h.db == nil {
		return
	}
	_ = h.db.Close()
	h.db, h.fi = nil, nil
	h.until = time.Now().Add(holdGap)
}

// update runs fn in one write transaction: in the held file, else in a
// freshly opened one, which is kept open when hold is set and holds are
// allowed now (else closed, as updateCtx does).
func (h *fileHold) update(ctx context.Context, timeout time.Duration, hold bool, fn func(tx *bolt.Tx) error) error {
	if db := h.held(); db != nil {
		err := updateTx(db, h.path, fn)
		now := time.Now()
		h.last = now
		if err != nil || now.Sub(h.began) >= holdMax {
			h.release()
		}
		return err
	}
	if !hold || !h.allow || time.Now().Before(h.until) {
		return updateCtx(ctx, h.path, timeout, fn)
	}
	db, err := openForUpdate(ctx, h.path, timeout)
	if err != nil {
		return err
	}
	if err := updateTx(db, h.path, fn); err != nil {
		_ = db.Close()
		return err
	}
	// openDBCtx saw the path name the file it locked, and the lock is
	// still held: the path's file now is db's.
	fi, err := os.Stat(h.path)
	if err != nil {
		_ = db.Close()
		return nil // committed; just not held
	}
	now := time.Now()
	h.db, h.fi, h.began, h.last = db, fi, now, now
	if h.idle == nil {
		h.idle = time.AfterFunc(holdIdle, h.endIdle)
	} else {
		h.idle.Reset(holdIdle)
	}
	return nil
}

// endIdle is the idle timer's: it ends a hold unused for holdIdle, else
// looks again when it would be.
func (h *fileHold) endIdle() {
	h.Lock()
	defer h.Unlock()
	if h.db == nil {
		return
	}
	if since := time.Since(h.last); since < holdIdle {
		h.idle.Reset(holdIdle - since)
		return
	}
	h.release()
}

// view runs fn in one read transaction, in the held file if any (see the
// package's view).
func (h *fileHold) view(timeout time.Duration, fn func(tx *bolt.Tx) error) error {
	if db := h.held(); db != nil {
		return viewTx(db, h.path, fn)
	}
	return view(h.path, timeout, fn)
}

// openForUpdate opens path to write, waiting for its lock as openDBCtx
// does, and merges its journals first (see updateCtx).
func openForUpdate(ctx context.Context, path string, timeout time.Duration) (*bolt.DB, error) {
	db, err := openDBCtx(ctx, path, true, timeout)
	if err != nil {
		return nil, err
	}
	if journalWork(path) {
		var m *journalMerge
		if updateTx(db, path, func(tx *bolt.Tx) (err error) {
			m, err = mergeJournals(tx, path, journalMergeBudget)
			return err
		}) == nil {
			m.done()
		}
	}
	return db, nil
}

// closeDB closes db, keeping err if there was one.
func closeDB(db *bolt.DB, err error) error {
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close history: %w", cerr)
	}
	return err
}
