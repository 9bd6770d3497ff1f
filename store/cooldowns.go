package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/limitscope/limitscope/retry"
)

// Cooldowns keeps quota cooldowns in the history file, so a stop and its
// reset survive restarts and are seen by every limitscope process. It
// implements retry.Cooldowns and is safe for concurrent use. Each call opens
// the file for one transaction; when the file cannot be written the
// cooldown is kept in memory and written by a later call.
type Cooldowns struct {
	path    string
	timeout time.Duration
	now     func() time.Time
	file    *fileHold // shared with the recorder of the same file

	mu      sync.Mutex
	mem     map[string]retry.Cooldown // set here but not yet written
	cleared map[string]bool           // cleared here but not yet written

	// The engine asks at every call's start; a snapshot of the file's
	// cooldowns younger than ttl answers without opening the file.
	ttl    time.Duration
	snap   map[string]retry.Cooldown
	snapAt time.Time // wall clock
}

var _ retry.Cooldowns = (*Cooldowns)(nil)

// NewCooldowns returns the cooldowns of the file at path. Use
// Recorder.Cooldowns instead when the process also records.
func NewCooldowns(path string, opts Options) *Cooldowns {
	opts.fill()
	return &Cooldowns{path: path, timeout: opts.LockTimeout, now: opts.Now, file: newFileHold(path, false), mem: map[string]retry.Cooldown{}, ttl: opts.CooldownCache}
}

func encodeCooldown(c *retry.Cooldown) ([]byte, error) {
	cc := *c
	cc.Message = redact(cc.Message)
	b, err := json.Marshal(&cc)
	if err != nil {
		return nil, fmt.Errorf("encode cooldown: %w", err)
	}
	return append([]byte{SchemaVersion}, b...), nil
}

func decodeCooldown(v []byte) (retry.Cooldown, error) {
	var c retry.Cooldown
	if len(v) == 0 {
		return c, errors.New("empty cooldown record")
	}
	if v[0] > SchemaVersion {
		return c, newerRecordError(v[0])
	}
	if err := json.Unmarshal(v[1:], &c); err != nil {
		return c, fmt.Errorf("decode cooldown: %w", err)
	}
	return c, nil
}

// Get returns the cooldown of scope, if one is recorded. It never waits on
// the file: while a writer (this process's recorder or another process)
// holds it, the last read answers, and with none yet an error wrapping
// ErrLocked says the answer is unknown (the engine then sends anyway).
func (s *Cooldowns) Get(scope string) (retry.Cooldown, bool, error) {
	s.mu.Lock()
	if c, ok := s.mem[scope]; ok {
		s.mu.Unlock()
		return c, true, nil
	}
	if s.cleared[scope] {
		s.mu.Unlock()
		return retry.Cooldown{}, false, nil
	}
	snap := s.snap
	if snap != nil && time.Since(s.snapAt) < s.ttl {
		c, ok := snap[scope]
		s.mu.Unlock()
		return c, ok, nil
	}
	s.mu.Unlock()
	all, err := s.readNow()
	if err != nil && errors.Is(err, ErrLocked) && snap != nil {
		c, ok := snap[scope] // the file is held: the last known state
		return c, ok, nil
	}
	if err != nil {
		return retry.Cooldown{}, false, fmt.Errorf("cooldown %s: %w", scope, err)
	}
	c, ok := all[scope]
	return c, ok, nil
}

// readNow is read without waiting: ErrLocked at once while the file is held.
func (s *Cooldowns) readNow() (map[string]retry.Cooldown, error) {
	if !s.file.TryLock() {
		return nil, &FileError{Path: s.path, Kind: ErrLocked, Err: errors.New("this process is writing it")}
	}
	defer s.file.Unlock()
	return s.readLocked(time.Nanosecond)
}

// read loads every cooldown of the file and refreshes the snapshot.
func (s *Cooldowns) read() (map[string]retry.Cooldown, error) {
	s.file.Lock()
	defer s.file.Unlock()
	return s.readLocked(s.timeout)
}

// readLocked is read with s.file held, waiting up to timeout for the lock.
func (s *Cooldowns) readLocked(timeout time.Duration) (map[string]retry.Cooldown, error) {
	out := map[string]retry.Cooldown{}
	err := s.file.view(timeout, func(tx *bolt.Tx) error {
		if tx == nil || tx.Bucket(bCooldowns) == nil {
			return nil
		}
		return tx.Bucket(bCooldowns).ForEach(func(k, v []byte) error {
			c, err := decodeCooldown(v)
			if err != nil {
				return fmt.Errorf("cooldown %q: %w", k, err)
			}
			out[c.Scope] = c
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.snap, s.snapAt = out, time.Now()
	s.mu.Unlock()
	return out, nil
}

// Set records a cooldown, replacing any of the same scope.
func (s *Cooldowns) Set(c retry.Cooldown) error {
	if c.Scope == "" {
		return errors.New("cooldown without a scope")
	}
	s.mu.Lock()
	s.mem[c.Scope] = c
	delete(s.cleared, c.Scope)
	s.mu.Unlock()
	return s.sync()
}

// Clear ends the cooldown of scope.
func (s *Cooldowns) Clear(scope string) error {
	s.mu.Lock()
	delete(s.mem, scope)
	if s.cleared == nil {
		s.cleared = map[string]bool{}
	}
	s.cleared[scope] = true
	s.mu.Unlock()
	return s.sync()
}

// ClearAll ends every cooldown and returns how many there were.
func (s *Cooldowns) ClearAll() (int, error) {
	s.mu.Lock()
	s.mem = map[string]retry.Cooldown{}
	s.cleared = nil
	s.snap = nil
	s.mu.Unlock()
	n := 0
	s.file.Lock()
	defer s.file.Unlock()
	err := s.file.update(context.Background(), s.timeout, false, func(tx *bolt.Tx) error {
		b := tx.Bucket(bCooldowns)
		var keys [][]byte
		_ = b.ForEach(func(k, _ []byte) error { keys = append(keys, append([]byte(nil), k...)); return nil })
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		n = len(keys)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("clear cooldowns: %w", err)
	}
	return n, nil
}

// sync writes the pending sets and clears; they stay pending on error.
func (s *Cooldowns) sync() error {
	mem, cleared := s.pending()
	s.file.Lock()
	defer s.file.Unlock()
	err := s.file.update(context.Background(), s.timeout, false, func(tx *bolt.Tx) error {
		return writeCooldowns(tx, mem, cleared)
	})
	if err != nil {
		return fmt.Errorf("save cooldowns (kept in memory): %w", err)
	}
	s.saved(mem, cleared)
	return nil
}

// pending returns copies of the sets and clears not yet written.
func (s *Cooldowns) pending() (map[string]retry.Cooldown, map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.mem), maps.Clone(s.cleared)
}

// writeCooldowns writes sets and clears in tx.
func writeCooldowns(tx *bolt.Tx, mem map[string]retry.Cooldown, cleared map[string]bool) error {
	b := tx.Bucket(bCooldowns)
	if b == nil {
		return errors.New("cooldowns bucket missing")
	}
	for scope := range cleared {
		if err := b.Delete([]byte(scope)); err != nil {
			return fmt.Errorf("clear cooldown: %w", err)
		}
	}
	for _, c := range mem {
		v, err := encodeCooldown(&c)
		if err != nil {
			return err
		}
		if err := b.Put([]byte(c.Scope), v); err != nil {
			return fmt.Errorf("write cooldown: %w", err)
		}
	}
	return nil
}

// saved forgets the sets and clears written (or journaled), unless they
// changed since.
func (s *Cooldowns) saved(mem map[string]retry.Cooldown, cleared map[string]bool) {
	s.mu.Lock()
	s.snap = nil
	for k, c := range mem {
		if cur, ok := s.mem[k]; ok && cur == c {
			delete(s.mem, k)
		}
	}
	for k := range cleared {
		if _, set := s.mem[k]; !set {
			delete(s.cleared, k)
		}
	}
	s.mu.Unlock()
}

// List returns every recorded cooldown, active or not, sorted by scope.
// Journaled cooldowns are merged first when the file is free (see
// MergeJournals).
func (s *Cooldowns) List() ([]retry.Cooldown, error) {
	s.file.Lock()
	s.file.release() // the merge opens the file on its own
	_ = MergeJournals(s.path, time.Nanosecond)
	s.file.Unlock()
	out, err := s.read()
	if err != nil {
		return nil, fmt.Errorf("list cooldowns: %w", err)
	}
	s.mu.Lock()
	for k := range s.cleared {
		delete(out, k)
	}
	maps.Copy(out, s.mem)
	s.mu.Unlock()
	list := slices.Collect(maps.Values(out))
	slices.SortFunc(list, func(a, b retry.Cooldown) int { return strings.Compare(a.Scope, b.Scope) })
	return list, nil
}
