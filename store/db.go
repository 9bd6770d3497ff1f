package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Bucket names.
var (
	bMeta      = []byte("meta")
	bSessions  = []byte("sessions")
	bCalls     = []byte("calls")
	bIDs       = []byte("ids")
	bAttempts  = []byte("attempts")
	bText      = []byte("text")
	bCooldowns = []byte("cooldowns")

	allBuckets = [][]byte{bMeta, bSessions, bCalls, bIDs, bAttempts, bText, bCooldowns}

	metaApp    = []byte("app")
	metaSchema = []byte("schema")
	appName    = []byte("limitscope-history")
)

// DefaultLockTimeout is how long an open waits for another process's lock.
const DefaultLockTimeout = 2 * time.Second

// The kinds of FileError; test with errors.Is.
var (
	ErrLocked  = errors.New("history file is locked by another limitscope process")
	ErrCorrupt = errors.New("history file is corrupt")
	ErrForeign = errors.New("not a limitscope history file")
	ErrNewer   = errors.New("history file was written by a newer limitscope")
)

// FileError says what is wrong with the history file, and what to do.
type FileError struct {
	Path   string
	Kind   error // ErrLocked, ErrCorrupt, ErrForeign or ErrNewer
	Schema int   // the file's schema, for ErrNewer
	Err    error // the detail, may be nil
}

func (e *FileError) Error() string {
	switch e.Kind {
	case ErrLocked:
		return fmt.Sprintf("history file %s is locked by another limitscope process (%v)", e.Path, e.Err)
	case ErrCorrupt:
		return fmt.Sprintf("history file %s is corrupt (%v); it was left untouched: run `limitscope history repair` to copy what is readable into a fresh file", e.Path, e.Err)
	case ErrForeign:
		return fmt.Sprintf("%s is not a limitscope history file; it was left untouched: point --db or LIMITSCOPE_DB at another path", e.Path)
	case ErrNewer:
		return fmt.Sprintf("history file %s was written by a newer limitscope (schema %d; this one reads up to %d); it was left untouched: upgrade limitscope, or use --db for another file", e.Path, e.Schema, SchemaVersion)
	}
	return fmt.Sprintf("history file %s: %v", e.Path, e.Err)
}

// Unwrap returns the kind and the detail.
func (e *FileError) Unwrap() []error { return []error{e.Kind, e.Err} }

// newerRecordError is a record whose version this binary cannot read.
func newerRecordError(v byte) error {
	return &FileError{Kind: ErrNewer, Schema: int(v)}
}

// openDB opens the file for one batch, waiting up to timeout for another
// process's lock. A read-only open of a missing file returns an error
// wrapping os.ErrNotExist and creates nothing.
func openDB(path string, write bool, timeout time.Duration) (*bolt.DB, error) {
	return openDBCtx(context.Background(), path, write, timeout)
}

// openDBCtx is openDB that waits for the lock until ctx ends when ctx has a
// deadline (else for timeout). The lock is polled: a waiter that has waited
// longer polls more often, so under contention the oldest waiters win and
// every writer makes progress. The file's meta pages are checked before bbolt
// maps it (checkFile). The open retries when the path was replaced (by repair
// or compaction) while it waited, so nothing is ever written to an unlinked
// file.
func openDBCtx(ctx context.Context, path string, write bool, timeout time.Duration) (*bolt.DB, error) {
	db, _, err := openDBFile(ctx, path, write, timeout, nil)
	return db, err
}

// openDBFile is openDBCtx that also returns the open file bbolt uses (and
// holds the lock on), for a caller that may have to let go of the file
// without bbolt's Close (see fileHold.abandon). known (nil: none) is the
// file as this process left it after writing it last: when the locked file
// still matches it, its trees are not walked again (its meta pages still
// are checked).
func openDBFile(ctx context.Context, path string, write bool, timeout time.Duration, known *fileStamp) (db *bolt.DB, file *os.File, err error) {
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	if write {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, nil, fmt.Errorf("history directory: %w", err)
		}
	}
	start := time.Now()
	deadline := start.Add(timeout)
	if d, ok := ctx.Deadline(); ok {
		deadline = d
	}
	for {
		before, statErr := os.Stat(path)
		if statErr != nil && !write {
			return nil, nil, fmt.Errorf("history file %s: %w", path, statErr)
		}
		if statErr == nil && before.IsDir() {
			return nil, nil, fmt.Errorf("history file %s is a directory: point --db or LIMITSCOPE_DB at a file", path)
		}
		var f *os.File
		var hookErr error
		opts := &bolt.Options{
			Timeout:      time.Nanosecond, // the lock is taken in OpenFile: bbolt's own try then succeeds at once
			ReadOnly:     !write,
			NoStatistics: true,
			OpenFile: func(name string, flag int, mode os.FileMode) (*os.File, error) {
				var err error
				if f, err = os.OpenFile(name, flag, mode); err != nil {
					return nil, err
				}
				// flock is per open file: bbolt's flock on this same file
				// then succeeds at once.
				if hookErr = waitLock(ctx, f, write, start, deadline); hookErr == nil {
					// Held: check what bbolt will trust before it maps.
					if cerr := checkOpen(name, !known.matches(f)); cerr != nil {
						hookErr = &FileError{Path: path, Kind: ErrCorrupt, Err: cerr}
					}
				}
				if hookErr != nil {
					_ = f.Close()
					return nil, hookErr
				}
				return f, nil
			},
		}
		if write && statErr == nil && before.Size() > 32<<20 {
			// Room to grow without remapping (which copies every dirty
			// node) in the middle of a batch; the mapping is only address
			// space. Not for small files: below 16 MiB of mapping bbolt
			// grows the file to the whole mapping.
			opts.InitialMmapSize = int(2 * before.Size())
		}
		db, err = safeOpen(path, opts)
		if hookErr != nil {
			return nil, nil, hookErr
		}
		if err != nil {
			if f != nil {
				// bbolt closes the file on the errors it returns, but not
				// after a panic or fault (safeOpen): undo its lock by hand
				// (a mapping it made keeps the open file alive, and with it
				// the lock), as fileHold.abandon does. On a file bbolt
				// did close, Fd is -1 and this touches nothing.
				dropFile(f)
			}
			return nil, nil, classifyOpenError(path, timeout, err)
		}
		// Same file as the path names now? A rename while we waited means
		// the file we hold is no longer the history.
		now, err1 := os.Stat(path)
		held, err2 := f.Stat()
		if err1 == nil && err2 == nil && os.SameFile(now, held) && (statErr != nil || os.SameFile(before, now)) {
			return db, f, nil
		}
		_ = db.Close()
		if !time.Now().Before(deadline) {
			// Compaction or repair kept replacing the file: as good as locked.
			return nil, nil, &FileError{Path: path, Kind: ErrLocked, Err: errors.New("replaced repeatedly while opening")}
		}
	}
}

// waitLock takes f's lock (exclusive to write, else shared), polling until
// deadline or ctx's end. A waiter that has waited longer polls more often
// (20ms for a newcomer down to 2ms after a second, with jitter so waiters do
// not poll in step), so under contention the oldest waiters tend to win and
// every writer makes progress.
func waitLock(ctx context.Context, f *os.File, exclusive bool, start, deadline time.Time) error {
	how := syscall.LOCK_SH | syscall.LOCK_NB
	if exclusive {
		how = syscall.LOCK_EX | syscall.LOCK_NB
	}
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return fmt.Errorf("lock history file: %w", err)
		}
		now := time.Now()
		if ctx.Err() != nil || !now.Before(deadline) {
			return &FileError{Path: f.Name(), Kind: ErrLocked, Err: fmt.Errorf("still locked after %s", now.Sub(start).Round(time.Millisecond))}
		}
		markWaiting(f.Name(), now) // a recorder holding the file makes way (fileHold)
		poll := max(2*time.Millisecond, 20*time.Millisecond-now.Sub(start)/50)
		poll = poll/2 + rand.N(poll)
		t := time.NewTimer(min(poll, deadline.Sub(now)))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// safeOpen opens with bbolt, turning its panics and memory faults on a
// damaged file into ErrInvalid.
func safeOpen(path string, opts *bolt.Options) (db *bolt.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("%w: %v", berrors.ErrInvalid, r)
		}
	}()
	err = faultSafe(func() error {
		var oerr error
		db, oerr = bolt.Open(path, 0o600, opts)
		return oerr
	})
	return db, err
}

func classifyOpenError(path string, timeout time.Duration, err error) error {
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return &FileError{Path: path, Kind: ErrLocked, Err: fmt.Errorf("still locked after %s", timeout)}
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum),
		errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrInvalidMapping):
		return &FileError{Path: path, Kind: ErrCorrupt, Err: err}
	case errors.Is(err, os.ErrNotExist), errors.Is(err, os.ErrPermission):
		return fmt.Errorf("history file %s: %w", path, err)
	case errors.As(err, new(*fs.PathError)), errors.As(err, new(syscall.Errno)):
		// The system refused (a read-only file system, a full disk while
		// creating the file, an I/O error): not the file's fault, and
		// repair would not help.
		return fmt.Errorf("history file %s: %w", path, err)
	}
	// bbolt reports short or mangled files with plain errors ("file size too
	// small", page size checks): anything else from Open is the file's fault.
	return &FileError{Path: path, Kind: ErrCorrupt, Err: err}
}

// fileSchema reads the file's schema: 0 with empty for a file with no
// bucket at all (new), an error for a foreign, corrupt or newer file.
func fileSchema(tx *bolt.Tx, path string) (schema int, empty bool, err error) {
	m := tx.Bucket(bMeta)
	if m == nil {
		any := false
		_ = tx.ForEach(func([]byte, *bolt.Bucket) error { any = true; return errStop })
		if any {
			return 0, false, &FileError{Path: path, Kind: ErrForeign}
		}
		return 0, true, nil
	}
	if string(m.Get(metaApp)) != string(appName) {
		return 0, false, &FileError{Path: path, Kind: ErrForeign}
	}
	v, n := binary.Uvarint(m.Get(metaSchema))
	if n <= 0 {
		return 0, false, &FileError{Path: path, Kind: ErrCorrupt, Err: errors.New("no schema version")}
	}
	if v > SchemaVersion {
		return int(v), false, &FileError{Path: path, Kind: ErrNewer, Schema: int(v)}
	}
	return int(v), false, nil
}

var errStop = errors.New("stop")

// prepareWrite makes the file ready for a write transaction: creates the
// buckets of a new file, migrates an older one, and refuses foreign, newer
// or corrupt ones without writing.
func prepareWrite(tx *bolt.Tx, path string) error {
	schema, empty, err := fileSchema(tx, path)
	if err != nil {
		return err
	}
	if empty {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("create bucket %s: %w", b, err)
			}
		}
		m := tx.Bucket(bMeta)
		if err := m.Put(metaApp, appName); err != nil {
			return fmt.Errorf("write meta: %w", err)
		}
		return m.Put(metaSchema, binary.AppendUvarint(nil, SchemaVersion))
	}
	if schema < SchemaVersion {
		if err := migrate(tx, schema); err != nil {
			return fmt.Errorf("migrate history from schema %d: %w", schema, err)
		}
	}
	for _, b := range allBuckets {
		if tx.Bucket(b) == nil {
			return &FileError{Path: path, Kind: ErrCorrupt, Err: fmt.Errorf("bucket %s missing", b)}
		}
	}
	return nil
}

// update runs fn in one write transaction on a freshly opened file and
// closes it. Panics from a corrupt page are turned into a FileError.
func update(path string, timeout time.Duration, fn func(tx *bolt.Tx) error) error {
	return updateCtx(context.Background(), path, timeout, fn)
}

// updateCtx is update whose wait for the lock lasts until ctx ends when ctx
// has a deadline (see openDBCtx). Once the file is held, its journals (see
// JournalDir) are merged first, in a transaction of their own, so that a
// journal that cannot be applied never stops fn's commit (it stays for a
// later merge).
func updateCtx(ctx context.Context, path string, timeout time.Duration, fn func(tx *bolt.Tx) error) error {
	db, file, err := openForUpdate(ctx, path, timeout, nil)
	if err != nil {
		return err
	}
	return closeOrDrop(db, file, updateTx(db, path, fn))
}

// updateTx runs fn in one write transaction of db, on a file made ready
// for it (prepareWrite).
func updateTx(db *bolt.DB, path string, fn func(tx *bolt.Tx) error) error {
	return guard(path, func() error {
		return db.Update(func(tx *bolt.Tx) error {
			if err := prepareWrite(tx, path); err != nil {
				return err
			}
			return fn(tx)
		})
	})
}

// view runs fn in one read transaction. A missing file is an empty history:
// fn runs with a nil tx. An older schema is read as it is (records carry
// their own version).
func view(path string, timeout time.Duration, fn func(tx *bolt.Tx) error) error {
	db, err := openDB(path, false, timeout)
	if errors.Is(err, os.ErrNotExist) {
		return fn(nil)
	}
	if err != nil {
		return err
	}
	return closeDB(db, viewTx(db, path, fn))
}

// viewTx runs fn in one read transaction of db (see view).
func viewTx(db *bolt.DB, path string, fn func(tx *bolt.Tx) error) error {
	return guard(path, func() error {
		return db.View(func(tx *bolt.Tx) error {
			_, empty, err := fileSchema(tx, path)
			if err != nil {
				return err
			}
			if empty {
				return fn(nil)
			}
			return fn(tx)
		})
	})
}

// guard turns a bbolt panic on a corrupt page into an error, and names the
// file in a FileError that lacks it.
func guard(path string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &FileError{Path: path, Kind: ErrCorrupt, Err: fmt.Errorf("%v", r)}
		}
		var fe *FileError
		if errors.As(err, &fe) && fe.Path == "" {
			fe.Path = path
		}
	}()
	return faultSafe(fn)
}

// putSorted writes a batch in key order with buckets filled to 100%: the
// keys are time-ordered, so pages are appended and never split half-full.
func bucket(tx *bolt.Tx, name []byte) *bolt.Bucket {
	b := tx.Bucket(name)
	if b != nil {
		b.FillPercent = 1.0
	}
	return b
}
