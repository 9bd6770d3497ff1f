package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
)

// How a recorder holds the file open between commits (see fileHold).
const (
	// holdIdle ends a hold when no commit came for this long.
	holdIdle = 20 * time.Millisecond
	// holdMax ends a hold this long after it began, whatever comes.
	holdMax = 250 * time.Millisecond
	// holdYield is how long a recorder stands aside, once, when it sees a
	// waiter's fresh mark: longer than the waiter's slowest poll.
	holdYield = 30 * time.Millisecond
	// holdGap is the least time between a hold's end and the next hold's
	// start. Longer than a lock waiter's slowest poll (30 ms, waitLock), so
	// another process waiting for the file meets it free between commits.
	holdGap = 50 * time.Millisecond
)

// waitFresh is how recent a waiter's mark must be to end a hold: a waiter
// renews it at every poll (at most 30 ms apart).
const waitFresh = 100 * time.Millisecond

// waitingPath is the file whose modification time says when a process last
// waited for the history file's lock. It is empty, and stays.
func waitingPath(path string) string { return path + ".waiting" }

// markWaiting says that this process waits for path's lock, so that a
// recorder holding it open lets go at its next commit. Errors are ignored:
// without the mark the waiter still gets the file, only later (holdMax).
func markWaiting(path string, now time.Time) {
	w := waitingPath(path)
	if err := os.Chtimes(w, now, now); errors.Is(err, os.ErrNotExist) {
		if f, err := os.OpenFile(w, os.O_WRONLY|os.O_CREATE, 0o600); err == nil {
			_ = f.Close()
			_ = os.Chtimes(w, now, now)
		}
	}
}

// othersWait reports whether a process marked that it waits for path's
// lock within waitFresh.
func othersWait(path string, now time.Time) bool {
	fi, err := os.Stat(waitingPath(path))
	return err == nil && now.Sub(fi.ModTime()) < waitFresh
}

// fileHold serialises one process's use of the history file (a recorder's
// commits, its cooldowns' reads and writes, retention), and lets a recorder
// keep the file open between commits that come close together: a burst of
// commits (the proxy's calls ending under load) then takes the lock, checks
// the file and maps it once, not once per commit. Every commit still syncs.
//
// A hold ends holdIdle after the last commit, holdMax after it began, or
// at the first commit after another process (or another open in this one)
// marked that it waits for the lock (markWaiting, from waitLock), and the
// next begins no sooner than holdGap later and not while the mark is
// fresh; meanwhile each commit opens and closes the file. A recorder that
// sees a waiter's mark also stands aside once for holdYield, so that one
// of the waiter's polls finds the file free even when commits follow each
// other without a pause. While held, the
// file is locked exclusively: no other process can change or replace it;
// each use still checks that the path names the file held, and any failure
// ends the hold.
//
// The embedded mutex is held by whoever uses the file; the methods below
// are called with it held.
type fileHold struct {
	sync.Mutex
	path  string
	allow bool // holds allowed (a recorder's file); else every use opens and closes

	yielded            time.Time   // when this stood aside for a waiter last
	db                 *bolt.DB    // the held file, or nil
	file               *os.File    // db's open file (its lock)
	fi                 os.FileInfo // db's file, to tell a replaced path
	began, last, until time.Time   // the hold's start, its last use; no new hold before until
	idle               *time.Timer // ends the hold once idle (stopped while none)
	// known is the file as this process left it after its last write (nil:
	// not known): a reopen that finds it so skips the walk of its trees.
	known *fileStamp
}

// fileStamp is an open file as fstat sees it: which file, its size, and
// when its data and its inode last changed. A file whose stamp is the one
// taken when this process last let go of it after writing it was changed
// by nobody since: a write by anyone moves its ctime, which no process
// can set back.
type fileStamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

// stampOf is f's stamp, or nil when fstat fails.
func stampOf(f *os.File) *fileStamp {
	var st syscall.Stat_t
	if f == nil || syscall.Fstat(int(f.Fd()), &st) != nil {
		return nil
	}
	return &fileStamp{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
}

// matches reports whether f is the file s was taken of, unchanged since.
func (s *fileStamp) matches(f *os.File) bool {
	if s == nil {
		return false
	}
	now := stampOf(f)
	return now != nil && *now == *s
}

// newFileHold returns the hold of path; allow lets update keep it open.
func newFileHold(path string, allow bool) *fileHold {
	h := &fileHold{path: path, allow: allow}
	h.idle = time.AfterFunc(time.Hour, h.endIdle) // armed by each hold
	h.idle.Stop()
	return h
}

// held returns the held database when it still is the path's file, ending
// the hold otherwise.
func (h *fileHold) held() *bolt.DB {
	if h.db == nil {
		return nil
	}
	if now, err := os.Stat(h.path); err != nil || !os.SameFile(now, h.fi) || othersWait(h.path, time.Now()) {
		h.release()
		return nil
	}
	return h.db
}

// release ends the hold, if any: the file is closed and its lock freed.
func (h *fileHold) release() {
	h.idle.Stop()
	if h.db == nil {
		return
	}
	h.known = stampOf(h.file) // still locked: as this process left it
	_ = h.db.Close()
	h.db, h.file, h.fi = nil, nil, nil
	h.until = time.Now().Add(holdGap)
}

// abandon ends a hold whose file faulted under bbolt (cut or overwritten by
// a process that ignored the lock): bbolt's Close could wait for ever on a
// transaction the fault left open, so the file's lock is let go and the
// file closed; the mapping (address space only) and bbolt's state are left
// behind. The next use opens and checks the file afresh.
func (h *fileHold) abandon() {
	h.idle.Stop()
	h.known = nil
	if h.db == nil {
		return
	}
	dropFile(h.file)
	h.db, h.file, h.fi = nil, nil, nil
	h.until = time.Now().Add(holdGap)
}

// dropFile lets go of a database's file without bbolt's Close (see
// abandon): the mapping keeps the open file alive, and with it the lock,
// so the lock is undone by hand.
func dropFile(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	_ = f.Close()
}

// closeOrDrop closes db after a transaction that returned err: with bbolt's
// Close, unless err says the file faulted (see abandon).
func closeOrDrop(db *bolt.DB, file *os.File, err error) error {
	if errors.Is(err, ErrCorrupt) {
		dropFile(file)
		return err
	}
	return closeDB(db, err)
}

// update runs fn in one write transaction: in the held file, else in a
// freshly opened one, which is kept open when hold is set and holds are
// allowed now (else closed, as updateCtx does).
func (h *fileHold) update(ctx context.Context, timeout time.Duration, hold bool, fn func(tx *bolt.Tx) error) error {
	if db := h.held(); db != nil {
		err := updateTx(db, h.path, fn)
		now := time.Now()
		h.last = now
		switch {
		case errors.Is(err, ErrCorrupt):
			h.abandon()
		case err != nil || now.Sub(h.began) >= holdMax:
			h.release()
		}
		return err
	}
	now := time.Now()
	waiting := h.allow && othersWait(h.path, now)
	if waiting && now.Sub(h.yielded) >= waitFresh {
		// Busy commits can keep the file locked nearly all the time, and
		// the waiter polls: let one of its polls find it free.
		h.yielded = now
		t := time.NewTimer(holdYield)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	known := h.known
	h.known = nil // until this use leaves the file as it knows it
	db, file, err := openForUpdate(ctx, h.path, timeout, known)
	if err != nil {
		return err
	}
	if err := updateTx(db, h.path, fn); err != nil {
		return closeOrDrop(db, file, err)
	}
	if !hold || !h.allow || now.Before(h.until) || waiting {
		// As updateCtx, noting the file as this process leaves it.
		h.known = stampOf(file)
		return closeDB(db, nil)
	}
	// openDBCtx saw the path name the file it locked, and the lock is
	// still held: the path's file now is db's.
	fi, err := os.Stat(h.path)
	if err != nil {
		_ = db.Close()
		return nil // committed; just not held
	}
	now = time.Now()
	h.db, h.file, h.fi, h.began, h.last = db, file, fi, now, now
	h.idle.Reset(holdIdle)
	return nil
}

// endIdle is the idle timer's: it ends a hold unused for holdIdle, else
// looks again when it would be. (h.idle is set before it can fire, and
// never replaced.)
func (h *fileHold) endIdle() {
	if !h.TryLock() {
		// In use (a commit, perhaps standing aside for a waiter): look
		// again later rather than queue behind it.
		h.idle.Reset(holdIdle)
		return
	}
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
		err := viewTx(db, h.path, fn)
		if errors.Is(err, ErrCorrupt) {
			h.abandon() // a fault may have left bbolt's locks taken
		}
		return err
	}
	return view(h.path, timeout, fn)
}

// openForUpdate opens path to write, waiting for its lock as openDBCtx
// does, and merges its journals first (see updateCtx).
func openForUpdate(ctx context.Context, path string, timeout time.Duration, known *fileStamp) (*bolt.DB, *os.File, error) {
	db, file, err := openDBFile(ctx, path, true, timeout, known)
	if err != nil {
		return nil, nil, err
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
	return db, file, nil
}

// closeDB closes db, keeping err if there was one.
func closeDB(db *bolt.DB, err error) error {
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close history: %w", cerr)
	}
	return err
}
