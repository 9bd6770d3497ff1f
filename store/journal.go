package store

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// The journal: what a recorder could not commit before its deadline at
// exit (the file stayed locked by other writers) is written to a file of
// its own in <db>.journal/, named <pid>-<random>.jrnl, mode 0600 in a 0700
// directory. The next writer that holds the history's lock merges every
// complete journal into the history in its own transaction and deletes it.
//
// A journal is written to a temporary name, synced, renamed into place and
// its directory synced, so a journal under its final name is whole unless
// the disk damaged it. Its format is a magic line followed by records, each
// a 4-byte big-endian payload length, the payload's CRC-32C and the
// payload: one header record (the session and the state of the calls it
// had already committed), item records (the queued events, in order) and
// an end record naming how many records came before it. A journal whose
// end record is missing, or any of whose records is short or fails its
// checksum, is never applied, not even in part.
//
// Merging is idempotent: the merge transaction records the journal's name
// in the meta bucket, and a journal whose name is recorded is only
// deleted, so a journal merged twice (a process killed between the commit
// and the delete) adds nothing twice.

// journalMagic opens every journal file.
const journalMagic = "limitscope-journal 1\n"

const (
	jrnlHeader byte = 'H'
	jrnlItems  byte = 'I'
	jrnlEnd    byte = 'E'
)

// journalItemsPerRecord bounds one item record.
const journalItemsPerRecord = 256

// maxJournalRecord bounds one record's payload when reading.
const maxJournalRecord = 1 << 30

// metaJournalPrefix prefixes, in the meta bucket, the names of merged
// journals (value: when, as a big-endian Unix second).
var metaJournalPrefix = []byte("journal/")

// journalMarkerAge is how long a merged journal's name is remembered.
const journalMarkerAge = 30 * 24 * time.Hour

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// JournalDir is the directory of path's journals.
func JournalDir(path string) string { return path + ".journal" }

// journalHeader is a journal's first record: the recorder's state when it
// wrote the journal.
type journalHeader struct {
	Info       SessionInfo
	Session    Session
	SessionKey []byte // nil: the session was never committed
	Calls      []journalCall
	Cooldowns  []retry.Cooldown // set but not yet written
	Cleared    []string         // cleared but not yet written
	Written    time.Time
}

// journalCall is a call the recorder had committed and not yet ended.
type journalCall struct {
	ID  string
	Key []byte
	Rec Call
}

// journalItem is one queued event with the call's registration.
type journalItem struct {
	Ev   retry.Event
	Call *journalCallInfo
}

// journalCallInfo is what apply reads of a retry.Call.
type journalCallInfo struct {
	Chain     []stream.Target
	Prompt    string
	MaxTokens int
	Policy    retry.Policy
	Route     string
	Client    string
}

// journal is a decoded journal.
type journal struct {
	header journalHeader
	items  []journalItem
}

// journalItemOf is it as the journal keeps it (see journalEvent).
func journalItemOf(it *item, noContent bool) journalItem {
	ji := journalItem{Ev: journalEvent(it.ev, noContent)}
	if c := it.call; c != nil {
		ji.Call = &journalCallInfo{Chain: c.Chain, MaxTokens: c.MaxTokens, Policy: c.Policy, Route: cleanOrigin(c.Route), Client: cleanOrigin(c.Client)}
		if !noContent {
			ji.Call.Prompt = c.Prompt
		}
	}
	return ji
}

// journalEvent is ev as the journal keeps it: only what apply reads, with
// nothing the history would not keep (no text with --no-content, messages
// scrubbed).
func journalEvent(ev retry.Event, noContent bool) retry.Event {
	out := retry.Event{Kind: ev.Kind, CallID: ev.CallID, Time: ev.Time, Chain: ev.Chain}
	if ev.Attempt != nil {
		a := journalAttempt(*ev.Attempt, noContent)
		out.Attempt = &a
	}
	if ev.Result != nil {
		res := retry.Result{
			CallID: ev.Result.CallID, Outcome: ev.Result.Outcome, Text: ev.Result.Text,
			FinishReason: ev.Result.FinishReason, Usage: ev.Result.Usage, ServedBy: ev.Result.ServedBy,
			RetryAt: ev.Result.RetryAt, CooldownUntil: ev.Result.CooldownUntil, CooldownHit: ev.Result.CooldownHit,
			Started: ev.Result.Started, Ended: ev.Result.Ended,
		}
		if noContent {
			res.Text = ""
		}
		if e := ev.Result.Err; e != nil {
			res.Err = &stream.Error{Class: e.Class, Status: e.Status, Code: e.Code, Message: redact(e.Message)}
		}
		res.Attempts = make([]retry.Attempt, len(ev.Result.Attempts))
		for i, a := range ev.Result.Attempts {
			res.Attempts[i] = journalAttempt(a, noContent)
		}
		out.Result = &res
	}
	return out
}

func journalAttempt(a retry.Attempt, noContent bool) retry.Attempt {
	a.Message = redact(a.Message)
	if noContent {
		a.PartialText = ""
	} else {
		a.PartialText = string(capText(a.PartialText, MaxPartialText))
	}
	if a.Cooldown != nil {
		c := *a.Cooldown
		c.Message = redact(c.Message)
		a.Cooldown = &c
	}
	return a
}

// appendRecord appends one framed record.
func appendRecord(b []byte, kind byte, payload []byte) []byte {
	var hdr [8]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(len(payload)+1))
	crc := crc32.Update(crc32.Checksum([]byte{kind}, crcTable), crcTable, payload)
	binary.BigEndian.PutUint32(hdr[4:], crc)
	b = append(b, hdr[:]...)
	b = append(b, kind)
	return append(b, payload...)
}

func gobBytes(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(v); err != nil {
		return nil, fmt.Errorf("encode journal record: %w", err)
	}
	return buf.Bytes(), nil
}

// encodeJournal lays out a whole journal.
func encodeJournal(h *journalHeader, items []journalItem) ([]byte, error) {
	b := []byte(journalMagic)
	p, err := gobBytes(h)
	if err != nil {
		return nil, err
	}
	b = appendRecord(b, jrnlHeader, p)
	n := 1
	for chunk := range slices.Chunk(items, journalItemsPerRecord) {
		if p, err = gobBytes(chunk); err != nil {
			return nil, err
		}
		b = appendRecord(b, jrnlItems, p)
		n++
	}
	return appendRecord(b, jrnlEnd, binary.BigEndian.AppendUint32(nil, uint32(n))), nil
}

// errTornJournal marks a journal that is incomplete or damaged.
var errTornJournal = errors.New("journal incomplete or damaged")

// decodeJournal reads a whole journal. Anything short of a complete,
// checksummed journal ending in its end record is errTornJournal, and
// nothing of it is returned.
func decodeJournal(b []byte) (j *journal, err error) {
	defer func() {
		if r := recover(); r != nil { // gob on a payload that passed its checksum, but still
			j, err = nil, fmt.Errorf("%w: %v", errTornJournal, r)
		}
	}()
	if !bytes.HasPrefix(b, []byte(journalMagic)) {
		return nil, fmt.Errorf("%w: no journal header", errTornJournal)
	}
	b = b[len(journalMagic):]
	out := &journal{}
	n := 0
	for {
		if len(b) < 9 {
			return nil, fmt.Errorf("%w: short record", errTornJournal)
		}
		size := binary.BigEndian.Uint32(b[:4])
		crc := binary.BigEndian.Uint32(b[4:8])
		if size == 0 || size > maxJournalRecord || uint64(size) > uint64(len(b)-8) {
			return nil, fmt.Errorf("%w: record %d cut short", errTornJournal, n)
		}
		rec := b[8 : 8+size]
		b = b[8+size:]
		if crc32.Checksum(rec, crcTable) != crc {
			return nil, fmt.Errorf("%w: record %d fails its checksum", errTornJournal, n)
		}
		kind, payload := rec[0], rec[1:]
		switch {
		case kind == jrnlHeader && n == 0:
			if err := gob.NewDecoder(bytes.NewReader(payload)).Decode(&out.header); err != nil {
				return nil, fmt.Errorf("%w: header: %v", errTornJournal, err)
			}
		case kind == jrnlItems && n > 0:
			var chunk []journalItem
			if err := gob.NewDecoder(bytes.NewReader(payload)).Decode(&chunk); err != nil {
				return nil, fmt.Errorf("%w: record %d: %v", errTornJournal, n, err)
			}
			out.items = append(out.items, chunk...)
		case kind == jrnlEnd && n > 0:
			if len(payload) != 4 || binary.BigEndian.Uint32(payload) != uint32(n) || len(b) != 0 {
				return nil, fmt.Errorf("%w: end record does not match", errTornJournal)
			}
			return out, nil
		default:
			return nil, fmt.Errorf("%w: record %d of kind %q out of place", errTornJournal, n, kind)
		}
		n++
	}
}

// writeJournal writes data as a new journal of path: a temporary file,
// synced, renamed to <pid>-<random>.jrnl, the directory synced. It returns
// the journal's path.
func writeJournal(path string, data []byte) (string, error) {
	dir := JournalDir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("journal directory: %w", err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	name := strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(rnd[:])
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("create journal: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	final := filepath.Join(dir, name+".jrnl")
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err == nil {
		err = syncDirErr(dir)
	}
	if err != nil {
		_ = os.Remove(tmp)
		_ = os.Remove(final)
		return "", fmt.Errorf("write journal: %w", err)
	}
	return final, nil
}

// syncDirErr syncs a directory's entries to disk.
func syncDirErr(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// journalNames lists path's complete journals (file names, in name
// order); nil when there is no journal directory.
func journalNames(path string) []string {
	names, _ := journalFiles(path)
	return names
}

// journalFiles lists path's complete journals and the temporary files of
// journals being written.
func journalFiles(path string) (names, tmps []string) {
	ents, err := os.ReadDir(JournalDir(path))
	if err != nil {
		return nil, nil
	}
	for _, e := range ents {
		switch {
		case !e.Type().IsRegular():
		case strings.HasSuffix(e.Name(), ".jrnl"):
			names = append(names, e.Name())
		case strings.HasSuffix(e.Name(), ".tmp"):
			tmps = append(tmps, e.Name())
		}
	}
	return names, tmps
}

// removeDeadTemps deletes the temporary files of journal writers that died
// before renaming them (their pid, the name's first part, is gone): such a
// journal was never complete, and its process reported nothing saved.
func removeDeadTemps(dir string, tmps []string) {
	for _, name := range tmps {
		pid, err := strconv.Atoi(name[:max(0, strings.IndexByte(name, '-'))])
		if err != nil || pid <= 0 {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.Remove(filepath.Join(dir, name))
		}
	}
}

// HasJournals reports whether path has journals waiting to be merged.
func HasJournals(path string) bool { return len(journalNames(path)) > 0 }

// journalWork reports whether a writer holding path's lock has journal
// work: journals to merge, or temporary files of writers that may be dead.
func journalWork(path string) bool {
	names, tmps := journalFiles(path)
	return len(names)+len(tmps) > 0
}

// journalMerge is what mergeJournals did in a transaction, for after it
// commits.
type journalMerge struct {
	dir     string
	remove  []string // merged now or before: delete once committed
	skipped []string // damaged or incomplete: left as they are
	calls   int
	more    bool // journals left for lack of budget
}

// journalMergeBudget bounds the journal bytes a writer's commit merges (at
// least one journal is merged whatever its size): a writer that gets the
// lock under contention is not kept long by everyone else's journals; the
// next writer takes the rest.
const journalMergeBudget = 32 << 20

// mergeJournals applies, inside tx, the complete journals of path not yet
// merged, up to budget bytes of them (0: all), and marks each merged. The
// files are deleted by done, after the commit.
func mergeJournals(tx *bolt.Tx, path string, budget int64) (*journalMerge, error) {
	names, tmps := journalFiles(path)
	m := &journalMerge{dir: JournalDir(path)}
	removeDeadTemps(m.dir, tmps)
	meta := tx.Bucket(bMeta)
	if meta == nil {
		return m, nil
	}
	now := time.Now()
	if len(names) > 0 {
		if err := pruneJournalMarkers(meta, now); err != nil {
			return nil, err
		}
	}
	var read int64
	for _, name := range names {
		if budget > 0 && read >= budget {
			m.more = true
			break
		}
		marker := append(slices.Clone(metaJournalPrefix), name...)
		if meta.Get(marker) != nil {
			m.remove = append(m.remove, name)
			continue
		}
		data, err := readJournalFile(filepath.Join(m.dir, name))
		read += int64(len(data))
		if err != nil {
			m.skipped = append(m.skipped, name)
			continue
		}
		j, err := decodeJournal(data)
		if err != nil {
			m.skipped = append(m.skipped, name)
			continue
		}
		n, err := applyJournal(tx, path, j)
		if err != nil {
			return nil, fmt.Errorf("merge journal %s: %w", name, err)
		}
		m.calls += n
		if err := meta.Put(marker, binary.BigEndian.AppendUint64(nil, uint64(now.Unix()))); err != nil {
			return nil, fmt.Errorf("mark journal %s merged: %w", name, err)
		}
		m.remove = append(m.remove, name)
	}
	return m, nil
}

// readJournalFile reads a journal, refusing one that is not a regular file.
func readJournalFile(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// journalMarkers returns the names of merged journals kept in meta (for
// repair to carry over).
func journalMarkers(meta *bolt.Bucket) []kv {
	var out []kv
	c := meta.Cursor()
	for k, v := c.Seek(metaJournalPrefix); k != nil && bytes.HasPrefix(k, metaJournalPrefix); k, v = c.Next() {
		out = append(out, kv{slices.Clone(k), slices.Clone(v)})
	}
	return out
}

// pruneJournalMarkers forgets merged journals' names older than
// journalMarkerAge.
func pruneJournalMarkers(meta *bolt.Bucket, now time.Time) error {
	var old [][]byte
	c := meta.Cursor()
	for k, v := c.Seek(metaJournalPrefix); k != nil && bytes.HasPrefix(k, metaJournalPrefix); k, v = c.Next() {
		if len(v) == 8 && now.Sub(time.Unix(int64(binary.BigEndian.Uint64(v)), 0)) > journalMarkerAge {
			old = append(old, slices.Clone(k))
		}
	}
	for _, k := range old {
		if err := meta.Delete(k); err != nil {
			return fmt.Errorf("forget merged journal: %w", err)
		}
	}
	return nil
}

// done deletes the merged journals once their transaction committed.
func (m *journalMerge) done() {
	if m == nil || len(m.remove) == 0 {
		return
	}
	for _, name := range m.remove {
		_ = os.Remove(filepath.Join(m.dir, name))
	}
	syncDir(m.dir)
}

// applyJournal replays j's events into tx as its recorder would have
// committed them.
func applyJournal(tx *bolt.Tx, path string, j *journal) (int, error) {
	h := &j.header
	r := &Recorder{path: path, info: h.Info, session: h.Session, sessionKey: h.SessionKey, sessDirty: true, calls: map[string]*callState{}}
	r.opts.fill()
	for _, c := range h.Calls {
		r.calls[c.ID] = &callState{key: c.Key, rec: c.Rec}
	}
	var q queue
	for _, it := range j.items {
		var c *retry.Call
		if it.Call != nil {
			c = &retry.Call{ID: it.Ev.CallID, Chain: it.Call.Chain, Prompt: it.Call.Prompt, MaxTokens: it.Call.MaxTokens, Policy: it.Call.Policy, Route: it.Call.Route, Client: it.Call.Client}
		}
		q.push(item{ev: it.Ev, call: c})
	}
	touched, _, _, err := r.apply(tx, &q, true)
	if err != nil {
		return 0, err
	}
	if err := applyJournalCooldowns(tx, h); err != nil {
		return 0, err
	}
	return len(touched), nil
}

// applyJournalCooldowns writes a journal's cooldown changes, unless the
// file holds a newer cooldown of the same scope (set since by another
// process).
func applyJournalCooldowns(tx *bolt.Tx, h *journalHeader) error {
	b := tx.Bucket(bCooldowns)
	if b == nil {
		return nil
	}
	newer := func(scope string, than time.Time) bool {
		v := b.Get([]byte(scope))
		if v == nil {
			return false
		}
		cur, err := decodeCooldown(v)
		return err == nil && cur.Since.After(than)
	}
	for _, scope := range h.Cleared {
		if !newer(scope, h.Written) {
			if err := b.Delete([]byte(scope)); err != nil {
				return fmt.Errorf("merge cooldown clear: %w", err)
			}
		}
	}
	for _, c := range h.Cooldowns {
		if c.Scope == "" || newer(c.Scope, c.Since) {
			continue
		}
		v, err := encodeCooldown(&c)
		if err != nil {
			return err
		}
		if err := b.Put([]byte(c.Scope), v); err != nil {
			return fmt.Errorf("merge cooldown: %w", err)
		}
	}
	return nil
}

// MergeJournals merges path's complete journals into it now if the file's
// lock can be had within timeout (the history commands call it with a
// short one before they read). Journals that are incomplete or damaged are
// left as they are. Every write to the file merges some too.
func MergeJournals(path string, timeout time.Duration) error {
	if !journalWork(path) {
		return nil
	}
	db, err := openDB(path, true, timeout)
	if err != nil {
		return err
	}
	var m *journalMerge
	err = updateTx(db, path, func(tx *bolt.Tx) (err error) {
		m, err = mergeJournals(tx, path, 0)
		return err
	})
	if err == nil {
		m.done()
	}
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close history: %w", cerr)
	}
	return err
}
