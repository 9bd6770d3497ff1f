package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

const pruneChunkSize = 5000

// pruneOnce deletes up to limit calls (with their attempts, text and id)
// that started before cutoff, and sessions that ended before it, in one
// transaction. It returns the number of calls deleted.
func pruneOnce(path string, timeout time.Duration, cutoff time.Time, limit int) (int, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	n, deleted := 0, 0
	err := update(path, timeout, func(tx *bolt.Tx) error {
		end := makeKey(cutoff, 0)
		calls, ids := tx.Bucket(bCalls), tx.Bucket(bIDs)
		attempts, text := tx.Bucket(bAttempts), tx.Bucket(bText)
		var keys [][]byte
		c := calls.Cursor()
		for k, _ := c.First(); k != nil && bytes.Compare(k, end) < 0 && len(keys) < limit; k, _ = c.Next() {
			keys = append(keys, slices.Clone(k))
		}
		for _, k := range keys {
			for _, b := range []*bolt.Bucket{attempts, text} {
				var sub [][]byte
				bc := b.Cursor()
				for sk, _ := bc.Seek(k); sk != nil && bytes.HasPrefix(sk, k); sk, _ = bc.Next() {
					sub = append(sub, slices.Clone(sk))
				}
				for _, sk := range sub {
					if err := b.Delete(sk); err != nil {
						return err
					}
				}
			}
			if err := ids.Delete(seqKey(keySeq(k))); err != nil {
				return err
			}
			if err := calls.Delete(k); err != nil {
				return err
			}
		}
		n = len(keys)
		deleted = n
		if n >= limit {
			return nil
		}
		sessions := tx.Bucket(bSessions)
		var old [][]byte
		sc := sessions.Cursor()
		for k, v := sc.First(); k != nil && bytes.Compare(k, end) < 0; k, v = sc.Next() {
			s, err := decodeSession(k, v)
			// Started before the cutoff and ended before it, or never
			// ended (its process died) a day before it.
			if err != nil || (!s.Ended.IsZero() && s.Ended.Before(cutoff)) || (s.Ended.IsZero() && s.Started.Before(cutoff.Add(-24*time.Hour))) {
				old = append(old, slices.Clone(k))
			}
		}
		for _, k := range old {
			if err := sessions.Delete(k); err != nil {
				return err
			}
		}
		n = max(n, len(old)) // something was deleted: scrub
		return nil
	})
	if err != nil || n == 0 {
		return 0, err
	}
	// The deleted records' old pages are free now: overwrite them, so a
	// pruned prompt cannot be read back from the file (by repair's salvage
	// or anyone with the file).
	if err := update(path, timeout, scrubFree); err != nil {
		return 0, fmt.Errorf("overwrite pruned pages: %w", err)
	}
	return deleted, nil
}

// scrubFree overwrites every page on the file's free list with zeros and
// syncs them, inside a write transaction (so no reader holds those pages:
// other processes wait on the lock, and bbolt reuses no free page before
// the transaction commits).
func scrubFree(tx *bolt.Tx) error {
	ps := tx.DB().Info().PageSize
	f, err := os.OpenFile(tx.DB().Path(), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	zero := make([]byte, 16*ps)
	runStart, runLen := 0, 0
	flush := func() error {
		for runLen > 0 {
			k := min(runLen, 16)
			if _, err := f.WriteAt(zero[:k*ps], int64(runStart)*int64(ps)); err != nil {
				return err
			}
			runStart += k
			runLen -= k
		}
		return nil
	}
	for id := 2; ; id++ {
		p, err := tx.Page(id)
		if err != nil {
			return err
		}
		if p == nil {
			break
		}
		if p.Type != "free" {
			if err := flush(); err != nil {
				return err
			}
			continue
		}
		if runLen == 0 {
			runStart = id
		}
		runLen++
	}
	if err := flush(); err != nil {
		return err
	}
	return f.Sync()
}

// Prune deletes calls that started more than keep ago (now minus keep), in
// small transactions so other processes are never held up for long. It
// returns how many calls were deleted. The pages that held them are
// overwritten with zeros before it returns (a pruned prompt cannot be read
// back from the file), but the file does not shrink: see Compact.
func Prune(ctx context.Context, path string, keep time.Duration, now time.Time, timeout time.Duration) (int, error) {
	if keep <= 0 {
		return 0, nil
	}
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := pruneOnce(path, timeout, now.Add(-keep), pruneChunkSize)
		total += n
		if err != nil {
			return total, fmt.Errorf("prune history: %w", err)
		}
		if n < pruneChunkSize {
			return total, nil
		}
	}
}

// CompactResult reports a compaction.
type CompactResult struct {
	Before int64 `json:"bytes_before"`
	After  int64 `json:"bytes_after"`
}

// Compact rewrites the file without its free pages, giving space back to
// the disk. It holds the file's lock throughout, so writers wait (and
// reopen the new file afterwards).
func Compact(ctx context.Context, path string, timeout time.Duration) (CompactResult, error) {
	var res CompactResult
	fi, err := os.Stat(path)
	if err != nil {
		return res, fmt.Errorf("compact history: %w", err)
	}
	res.Before = fi.Size()
	src, err := openDB(path, true, timeout)
	if err != nil {
		return res, fmt.Errorf("compact history: %w", err)
	}
	defer func() { _ = src.Close() }()
	err = guard(path, func() error {
		return src.View(func(tx *bolt.Tx) error {
			_, empty, err := fileSchema(tx, path)
			if err == nil && empty {
				err = errors.New("nothing to compact")
			}
			return err
		})
	})
	if err != nil {
		return res, fmt.Errorf("compact history: %w", err)
	}
	tmp := path + ".compact-tmp"
	_ = os.Remove(tmp)
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: timeout, NoStatistics: true})
	if err != nil {
		return res, fmt.Errorf("compact history: %w", err)
	}
	err = guard(path, func() error { return bolt.Compact(dst, src, 64<<20) })
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		_ = os.Remove(tmp)
		return res, fmt.Errorf("compact history: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return res, fmt.Errorf("compact history: %w", err)
	}
	syncDir(filepath.Dir(path))
	if fi, err := os.Stat(path); err == nil {
		res.After = fi.Size()
	}
	return res, nil
}

func syncDir(dir string) { _ = syncDirErr(dir) }

// RepairResult reports what repair copied and what it could not, by kind
// (the bucket names: "calls", "sessions", "attempts", "text", "cooldowns",
// "cards", and any bucket of a newer limitscope copied as it is).
type RepairResult struct {
	Kept     string         `json:"kept"` // where the old file now is
	Copied   map[string]int `json:"copied"`
	Skipped  map[string]int `json:"skipped"`  // records found but unreadable, not copied
	Salvaged map[string]int `json:"salvaged"` // of Copied, read from the pages directly
	// Lost counts the records that the copied ones prove existed but that
	// were not found: a call's missing attempts, prompt or answer, the call
	// of copied attempts or text, the session of copied calls.
	Lost map[string]int `json:"lost"`
	// DamagedPages is the number of pages too damaged to read; their
	// records are not in Skipped or Lost (nothing tells how many they held).
	DamagedPages int `json:"damaged_pages"`
	// MissingPages is how many pages the file's meta page names beyond its
	// end (a truncated file): their records cannot be counted either.
	MissingPages int      `json:"missing_pages"`
	Problems     []string `json:"problems,omitempty"`
}

// Summary is one honest line: what was copied, and every record skipped or
// known lost, by count and kind.
func (r *RepairResult) Summary() string {
	kinds := []string{"calls", "attempts", "sessions", "text", "cooldowns", "cards"}
	part := func(m map[string]int) string {
		var p []string
		for _, k := range kinds {
			if m[k] > 0 {
				p = append(p, fmt.Sprintf("%d %s", m[k], k))
			}
		}
		var others []string // buckets this limitscope does not know
		for k, n := range m {
			if n > 0 && !slices.Contains(kinds, k) {
				others = append(others, k)
			}
		}
		slices.Sort(others)
		for _, k := range others {
			p = append(p, fmt.Sprintf("%d of bucket %q", m[k], k))
		}
		return strings.Join(p, ", ")
	}
	s := "copied " + part(r.Copied)
	if part(r.Copied) == "" {
		s = "copied nothing"
	}
	if p := part(r.Skipped); p != "" {
		s += "; skipped (unreadable) " + p
	}
	if p := part(r.Lost); p != "" {
		s += "; lost " + p
	}
	if r.DamagedPages > 0 {
		s += fmt.Sprintf("; %d damaged pages whose records cannot be counted", r.DamagedPages)
	}
	if r.MissingPages > 0 {
		s += fmt.Sprintf("; the file is truncated: %d pages missing, whose records cannot be counted", r.MissingPages)
	}
	if part(r.Skipped) == "" && part(r.Lost) == "" && r.DamagedPages == 0 && r.MissingPages == 0 {
		s += "; nothing skipped"
	}
	return s
}

type rec struct{ k, v []byte }

// lostRecords counts what the copied records prove existed but is missing.
func lostRecords(calls, sessions, attempts, text []rec) map[string]int {
	lost := map[string]int{}
	callKeys := map[string]*Call{}
	for _, r := range calls {
		if c, err := decodeCall(r.k, r.v, true); err == nil {
			callKeys[string(r.k)] = c
		}
	}
	sessIDs := map[uint32]bool{}
	for _, r := range sessions {
		sessIDs[keySeq(r.k)] = true
	}
	atts := map[string]int{}
	orphans := map[string]bool{}
	for _, r := range attempts {
		ck := string(r.k[:min(len(r.k), keyLen)])
		atts[ck]++
		if callKeys[ck] == nil {
			orphans[ck] = true
		}
	}
	texts := map[string]bool{}
	for _, r := range text {
		if len(r.k) != keyLen+3 {
			continue
		}
		ck := string(r.k[:keyLen])
		texts[string(r.k[:keyLen+1])] = true
		if callKeys[ck] == nil {
			orphans[ck] = true
		}
	}
	lost["calls"] = len(orphans)
	missingSess := map[uint32]bool{}
	for k, c := range callKeys {
		if c.Session != 0 && !sessIDs[c.Session] {
			missingSess[c.Session] = true
		}
		if n := c.Attempts - atts[k]; n > 0 && c.Outcome != OutcomeRunning {
			lost["attempts"] += n
		}
		if c.HasPrompt && !texts[k+string(textPrompt)] {
			lost["text"]++
		}
		if c.HasText && !texts[k+string(textAnswer)] {
			lost["text"]++
		}
	}
	lost["sessions"] = len(missingSess)
	for k, n := range lost {
		if n == 0 {
			delete(lost, k)
		}
	}
	return lost
}

// missingPages is how many pages the newest valid meta page names beyond the
// file's end (0 when none is missing; without a valid meta page, 1 when the
// file ends inside a page, else 0).
func missingPages(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	head := make([]byte, 2*maxPageSize)
	n, _ := io.ReadFull(f, head)
	best := newestMeta(head[:n])
	if !best.valid {
		// Nothing tells how long the file was, but one that ends inside a
		// page was cut.
		if fi.Size()%minPageSize != 0 {
			return 1
		}
		return 0
	}
	have := uint64(fi.Size()) / uint64(best.pageSize)
	if best.hwm > have {
		return int(best.hwm - have)
	}
	return 0
}

// looksLikeHistory reports whether a file without a bbolt header (both meta
// pages gone) still holds limitscope's records.
func looksLikeHistory(path string) bool {
	raw, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	if bytes.Contains(raw, appName) {
		return true
	}
	found, _, err := salvage(path, nil)
	return err == nil && (len(found[string(bCalls)]) > 0 || len(found[string(bSessions)]) > 0)
}

// looksLikeBolt reports whether a bbolt meta page's magic number is where
// bbolt puts it, in the first or second meta page.
func looksLikeBolt(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	buf := make([]byte, 64<<10+32)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return false, err
	}
	buf = buf[:n]
	const magic = 0xED0CDAED
	for _, off := range []int{16, 4096 + 16, 8192 + 16, 16384 + 16, 65536 + 16} {
		if off+4 <= len(buf) && binary.LittleEndian.Uint32(buf[off:]) == magic {
			return true, nil
		}
	}
	return false, nil
}

// repairBuckets are the buckets repair checks record by record and
// salvages from the pages: every bucket but meta (whose schema and journal
// markers it copies) and ids (rebuilt from the calls), and the cards.
var repairBuckets = slices.Concat(allBuckets[1:], [][]byte{bCards})

// knownBucket reports whether name is a bucket of this limitscope.
func knownBucket(name []byte) bool {
	return slices.ContainsFunc(repairBuckets, func(b []byte) bool { return bytes.Equal(b, name) }) || bytes.Equal(name, bMeta)
}

// Repair copies every readable record of a damaged history file into a
// fresh one, keeps the old file beside it (history.db.broken-TIME), and
// puts the fresh one in its place: the call records, cooldowns and limits
// cards, each checked and salvaged from pages bbolt cannot reach; the meta
// bucket's schema and journal markers; and a bucket of a newer limitscope
// as it is (bbolt's walk only, said in Problems). A file that is not a
// bbolt file at all, or a healthy file of another program, is refused and
// left as it is.
func Repair(ctx context.Context, path string, now time.Time, timeout time.Duration) (RepairResult, error) {
	r := &repair{
		path: path,
		res:  RepairResult{Copied: map[string]int{}, Skipped: map[string]int{}, Salvaged: map[string]int{}, Lost: map[string]int{}},
		data: map[string][]rec{}, seqs: map[string]uint64{}, skippedCards: map[string]bool{},
	}
	src, err := r.check(timeout)
	if err != nil {
		return r.res, fmt.Errorf("repair history: %w", err)
	}
	if src != nil {
		defer func() { _ = src.Close() }()
	}
	if err := r.read(ctx, src); err != nil {
		// A foreign file is refused as it is; a cancel is returned bare.
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return r.res, err
		}
		return r.res, fmt.Errorf("repair history: %w", err)
	}
	r.salvage()
	tmp, err := r.write(timeout)
	if err != nil {
		return r.res, fmt.Errorf("repair history: %w", err)
	}
	if err := r.swap(tmp, now); err != nil {
		return r.res, fmt.Errorf("repair history: %w", err)
	}
	return r.res, nil
}

// repair is one Repair's state, passed from phase to phase: check (is the
// file a history, can it be opened), read (bbolt's walk of every bucket),
// salvage (every page read directly), write (a fresh file beside the old
// one) and swap (the old file kept, the fresh one in its place).
type repair struct {
	path string
	res  RepairResult

	data         map[string][]rec  // per bucket, the records to copy, by key
	seqs         map[string]uint64 // per bucket, its sequence in the old file
	schema       []byte            // the old file's schema version
	markers      []kv              // the journal markers of the old file's meta
	others       [][]byte          // buckets of a newer limitscope: copied unchecked
	skippedCards map[string]bool   // the walk's unreadable cards' keys
}

// check refuses a file that is no history (no bbolt header and no history
// record) or is locked, and opens it with bbolt where bbolt can: src is
// nil, with the reason in Problems, where it cannot.
func (r *repair) check(timeout time.Duration) (src *bolt.DB, err error) {
	ok, err := looksLikeBolt(r.path)
	if err != nil {
		return nil, err
	}
	if !ok && !looksLikeHistory(r.path) {
		return nil, &FileError{Path: r.path, Kind: ErrForeign, Err: errors.New("no bbolt header and no history record")}
	}
	src, openErr := openDB(r.path, false, timeout)
	if errors.Is(openErr, ErrLocked) {
		return nil, openErr
	}
	if src == nil {
		var fe *FileError
		if errors.As(openErr, &fe) && fe.Err != nil {
			r.res.Problems = append(r.res.Problems, "open: "+fe.Err.Error())
		} else {
			r.res.Problems = append(r.res.Problems, "open: "+openErr.Error())
		}
	}
	return src, nil
}

// read walks every bucket of src through bbolt, keeping the records that
// check as valid and counting the others as skipped; a bucket whose tree
// is bad (bbolt would loop on a cycle) or a page that faults stops that
// bucket's walk, said in Problems, and is left to salvage. It refuses a
// healthy file of another program.
func (r *repair) read(ctx context.Context, src *bolt.DB) error {
	if src != nil {
		// bbolt trusts the tree's links: a cycle would send its cursor
		// round for ever. Walk the branches first; a bad tree is left to
		// the page-by-page salvage.
		meta, _ := inspectFile(r.path)
		treeErrs, rootErr := checkBucketTrees(r.path, meta)
		if rootErr != nil {
			r.res.Problems = append(r.res.Problems, "bucket tree: "+rootErr.Error())
		} else if err := r.walk(ctx, src, treeErrs); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// walk is read's walk of src's buckets, given the trees that checked bad.
func (r *repair) walk(ctx context.Context, src *bolt.DB, treeErrs map[string]error) error {
	foreign := false
	_ = guard(r.path, func() error {
		return src.View(func(tx *bolt.Tx) error {
			if m := tx.Bucket(bMeta); m != nil {
				if string(m.Get(metaApp)) != string(appName) {
					foreign = true
				}
				r.schema = slices.Clone(m.Get(metaSchema))
				r.markers = journalMarkers(m)
			} else {
				_ = tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
					if !knownBucket(name) {
						foreign = true
					}
					return nil
				})
			}
			if !foreign {
				_ = tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
					if !knownBucket(name) {
						r.others = append(r.others, slices.Clone(name))
					}
					return nil
				})
			}
			return nil
		})
	})
	if foreign {
		return &FileError{Path: r.path, Kind: ErrForeign}
	}
	for _, name := range slices.Concat(repairBuckets, r.others) {
		bname := string(name)
		known := knownBucket(name)
		err := guard(r.path, func() error {
			return src.View(func(tx *bolt.Tx) error {
				b := tx.Bucket(name)
				if b == nil {
					return nil
				}
				r.seqs[bname] = b.Sequence()
				if err := treeErrs[bname]; err != nil {
					return err
				}
				c := b.Cursor()
				for k, v := c.First(); k != nil; k, v = c.Next() {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					if v == nil || (known && !validRecord(name, k, v)) {
						r.res.Skipped[bname]++
						if bname == string(bCards) {
							r.skippedCards[string(k)] = true
						}
						continue
					}
					r.data[bname] = append(r.data[bname], rec{slices.Clone(k), slices.Clone(v)})
				}
				return nil
			})
		})
		var fe *FileError
		if errors.As(err, &fe) && fe.Err != nil {
			err = fe.Err
		}
		if err != nil {
			r.res.Problems = append(r.res.Problems, fmt.Sprintf("%s: stopped at a damaged page: %v", bname, err))
		}
		if !known {
			r.res.Problems = append(r.res.Problems, fmt.Sprintf("bucket %q is not one this limitscope knows (a newer one wrote it): its %d readable records were copied as they are, unchecked, and none could be salvaged from a damaged page", bname, len(r.data[bname])))
		}
	}
	return nil
}

// salvage reads every page directly too: a damaged branch can hide intact
// leaves from bbolt's walk without an error. Pages on the free list are
// left out (they hold deleted records and older copies). A copy from an
// intact live page wins over bbolt's (the same page, unless bbolt read
// another copy), which wins over any other copy: an older copy on a page
// no live tree reaches, or a damaged page. It then counts the missing
// pages, drops strays and counts what was lost.
func (r *repair) salvage() {
	res := &r.res
	found, damaged, err := salvageCandidates(r.path, nil)
	if err != nil {
		res.Problems = append(res.Problems, "salvage: "+err.Error())
	}
	if damaged > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("%d damaged pages: their records are lost and cannot be counted", damaged))
		res.DamagedPages = damaged
	}
	for _, name := range repairBuckets {
		bname := string(name)
		have := map[string]int{}
		for i, rc := range r.data[bname] {
			have[string(rc.k)] = i
		}
		for k, c := range found[bname] {
			i, ok := have[k]
			switch {
			case !ok:
				r.data[bname] = append(r.data[bname], rec{[]byte(k), c.v})
				res.Salvaged[bname]++
			case c.trust > trustWalk:
				r.data[bname][i].v = c.v
			}
		}
		slices.SortFunc(r.data[bname], func(a, b rec) int { return bytes.Compare(a.k, b.k) })
	}
	// The damaged cards salvage met and no readable copy replaced, unless
	// the walk counted them already.
	cards := map[string]bool{}
	for _, rc := range r.data[string(bCards)] {
		cards[string(rc.k)] = true
	}
	for k := range found[unreadableCards] {
		if !cards[k] && !r.skippedCards[k] {
			res.Skipped[string(bCards)]++
		}
	}

	res.MissingPages = missingPages(r.path)
	if res.MissingPages > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("the file is truncated: %d pages missing", res.MissingPages))
	}
	dropStrays(r.data, res.Skipped)
	res.Lost = lostRecords(r.data[string(bCalls)], r.data[string(bSessions)], r.data[string(bAttempts)], r.data[string(bText)])
}

// write puts what read and salvage kept into a fresh file beside the old
// one (PATH.repair-tmp), with the old file's schema and journal markers and
// the id index rebuilt from the calls, and returns its path. On an error
// the fresh file is removed.
func (r *repair) write(timeout time.Duration) (string, error) {
	tmp := r.path + ".repair-tmp"
	_ = os.Remove(tmp)
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: timeout, NoStatistics: true})
	if err != nil {
		return "", err
	}
	err = dst.Update(func(tx *bolt.Tx) error {
		if err := prepareWrite(tx, tmp); err != nil {
			return err
		}
		for _, kv := range r.markers { // journals merged before stay merged
			if err := tx.Bucket(bMeta).Put(kv.k, kv.v); err != nil {
				return err
			}
		}
		if len(r.schema) > 0 {
			if v, n := binary.Uvarint(r.schema); n > 0 && v <= SchemaVersion {
				if err := tx.Bucket(bMeta).Put(metaSchema, r.schema); err != nil {
					return err
				}
			}
		}
		for _, name := range slices.Concat(repairBuckets, r.others) {
			if err := r.writeBucket(tx, name); err != nil {
				return err
			}
		}
		// Rebuild the id index from the calls that survived.
		if string(r.schema) != string(binary.AppendUvarint(nil, 1)) {
			ids := tx.Bucket(bIDs)
			for _, rc := range r.data[string(bCalls)] {
				if err := ids.Put(seqKey(keySeq(rc.k)), rc.k); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// writeBucket copies one bucket's kept records into tx, with its sequence
// (at least the highest call or session number kept).
func (r *repair) writeBucket(tx *bolt.Tx, name []byte) error {
	b := tx.Bucket(name)
	if b == nil {
		// The cards and newer buckets: made when the old file had them or
		// something of theirs was salvaged.
		if _, had := r.seqs[string(name)]; !had && len(r.data[string(name)]) == 0 {
			return nil
		}
		var err error
		if b, err = tx.CreateBucket(name); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	b.FillPercent = 1.0
	var maxSeq uint64
	for _, rc := range r.data[string(name)] {
		if len(rc.k) == 0 || len(rc.k) > bolt.MaxKeySize || len(rc.v) > bolt.MaxValueSize {
			r.res.Skipped[string(name)]++
			continue
		}
		if err := b.Put(rc.k, rc.v); err != nil {
			return err
		}
		if string(name) == string(bCalls) || string(name) == string(bSessions) {
			maxSeq = max(maxSeq, uint64(keySeq(rc.k)))
		}
		r.res.Copied[string(name)]++
	}
	return b.SetSequence(max(r.seqs[string(name)], maxSeq))
}

// swap keeps the old file as PATH.broken-TIME (a hard link, so the path
// always names a file, never nothing) and renames the fresh one into its
// place. On an error the fresh file is removed and the old one stays.
func (r *repair) swap(tmp string, now time.Time) error {
	r.res.Kept = fmt.Sprintf("%s.broken-%s", r.path, now.UTC().Format("20060102T150405Z"))
	if err := os.Link(r.path, r.res.Kept); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("keep the old file: %w", err)
	}
	if err := os.Rename(tmp, r.path); err != nil {
		_ = os.Remove(r.res.Kept)
		_ = os.Remove(tmp)
		return err
	}
	syncDir(filepath.Dir(r.path))
	return nil
}

// validRecord reports whether a record decodes.
func validRecord(bucket, k, v []byte) bool {
	switch string(bucket) {
	case string(bCalls):
		_, err := decodeCall(k, v, false)
		return err == nil && len(k) == keyLen
	case string(bAttempts):
		_, err := decodeAttempt(k, v, keyTime(k), nil)
		return err == nil && keyAttempt(k) > 0
	case string(bSessions):
		_, err := decodeSession(k, v)
		return err == nil
	case string(bCooldowns):
		_, err := decodeCooldown(v)
		return err == nil
	case string(bText):
		return validTextKey(k)
	case string(bCards):
		return validCard(k, v)
	case string(bIDs):
		return false // rebuilt from the calls
	}
	return true
}

// dropStrays removes the attempts and partial texts whose attempt number
// their ended call does not have (a damaged key: a flipped byte made attempt
// 1 attempt 257), and counts them as skipped.
func dropStrays(data map[string][]rec, skipped map[string]int) {
	calls := map[string]*Call{}
	for _, r := range data[string(bCalls)] {
		if c, err := decodeCall(r.k, r.v, true); err == nil && c.Outcome != OutcomeRunning {
			calls[string(r.k)] = c
		}
	}
	stray := func(ck []byte, n int) bool {
		c := calls[string(ck)]
		return c != nil && n > c.Attempts
	}
	data[string(bAttempts)] = slices.DeleteFunc(data[string(bAttempts)], func(r rec) bool {
		if stray(r.k[:keyLen], keyAttempt(r.k)) {
			skipped[string(bAttempts)]++
			return true
		}
		return false
	})
	data[string(bText)] = slices.DeleteFunc(data[string(bText)], func(r rec) bool {
		if len(r.k) == keyLen+3 && r.k[keyLen] == textPartial && stray(r.k[:keyLen], int(binary.BigEndian.Uint16(r.k[keyLen+1:]))) {
			skipped[string(bText)]++
			return true
		}
		return false
	})
}
