package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// holdLock holds path's lock (another open file, as another process would)
// until the test ends or the returned func is called.
func holdLock(t *testing.T, path string) func() {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	release := func() { _ = db.Close() }
	t.Cleanup(release)
	return release
}

// journalOf makes a recorder journal: call "half" committed while running,
// then its end and a whole call "new" queued while the file is held, and
// Close. It returns the journal's path; the lock is released.
func journalOf(t *testing.T, path string, info SessionInfo) string {
	t.Helper()
	recordAll(t, path, SessionInfo{}, okSpec("before", t0))
	r := NewRecorder(path, info, Options{Retention: -1, LockTimeout: 20 * time.Millisecond, RetryDelay: time.Hour, JournalAfter: 30 * time.Millisecond})
	half := okSpec("half", t0.Add(time.Minute))
	half.prompt, half.text = "prompt half sk-proj-"+strings.Repeat("K", 40), "answer half"
	c, evs := half.events()
	sink := r.Sink(c, nil)
	for _, ev := range evs[:len(evs)-1] {
		sink(ev)
	}
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	release := holdLock(t, path)
	sink(evs[len(evs)-1])
	nw := okSpec("new", t0.Add(2*time.Minute))
	nw.classes = []stream.Class{stream.ClassRateLimit, stream.ClassOK}
	c2, evs2 := nw.events()
	sink2 := r.Sink(c2, nil)
	for _, ev := range evs2 {
		sink2(ev)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatalf("close with the file held: %v", err)
	}
	release()
	j := r.Journal()
	if j == "" || r.Pending() != 0 {
		t.Fatalf("no journal written (%d pending)", r.Pending())
	}
	return j
}

// callsByID lists the file's calls by engine call id, failing on a
// duplicate.
func callsByID(t *testing.T, path string) map[string]*Call {
	t.Helper()
	rd := &Reader{Path: path}
	calls, err := rd.List(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Call{}
	for _, c := range calls {
		full, err := rd.Show(context.Background(), itoa(c.ID))
		if err != nil {
			t.Fatal(err)
		}
		if out[full.CallID] != nil {
			t.Fatalf("call %s stored twice", full.CallID)
		}
		out[full.CallID] = full
	}
	return out
}

// The journal holds what Close could not commit, and a later read merges
// it whole: the half-committed call ends, the new one is complete, the
// session is ended, and the journal is gone.
func TestJournalMergedWhole(t *testing.T) {
	path := tempDB(t)
	j := journalOf(t, path, SessionInfo{Command: "send", Mode: ModeReal})
	fi, err := os.Stat(j)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("journal mode %v (%v), want 0600", fi.Mode(), err)
	}
	if di, err := os.Stat(JournalDir(path)); err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("journal directory mode %v (%v), want 0700", di.Mode(), err)
	}
	if !strings.HasPrefix(filepath.Base(j), itoa(uint32(os.Getpid()))+"-") || !strings.HasSuffix(j, ".jrnl") {
		t.Fatalf("journal name %s", j)
	}
	data, _ := os.ReadFile(j)
	if !bytes.Contains(data, []byte("answer half")) {
		t.Fatal("journal lacks the queued answer")
	}
	calls := callsByID(t, path)
	if len(calls) != 3 {
		t.Fatalf("%d calls after the merge, want 3", len(calls))
	}
	half, nw := calls["half"], calls["new"]
	if half == nil || half.Outcome != retry.OutcomeOK || half.Text != "answer half" || !strings.HasPrefix(half.Prompt, "prompt half") {
		t.Fatalf("half-committed call after the merge: %+v", half)
	}
	if nw == nil || nw.Outcome != retry.OutcomeOK || len(nw.AttemptsList) != 2 || nw.Text != "answer new" || nw.Prompt != "prompt new" || nw.Session != half.Session {
		t.Fatalf("journaled call after the merge: %+v", nw)
	}
	s, err := (&Reader{Path: path}).Session(context.Background(), half.Session)
	if err != nil || s.Ended.IsZero() || s.Command != "send" {
		t.Fatalf("session after the merge: %+v %v", s, err)
	}
	if _, err := os.Stat(j); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("journal still there after the merge: %v", err)
	}
}

// A journal merged twice (its merger was killed between the commit and the
// delete) adds nothing the second time.
func TestJournalMergedTwiceAddsNothingTwice(t *testing.T) {
	path := tempDB(t)
	j := journalOf(t, path, SessionInfo{})
	data, err := os.ReadFile(j)
	if err != nil {
		t.Fatal(err)
	}
	if err := MergeJournals(path, time.Second); err != nil {
		t.Fatal(err)
	}
	first := callsByID(t, path)
	sessions, _ := (&Reader{Path: path}).Sessions(context.Background(), 0)
	if err := os.WriteFile(j, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MergeJournals(path, time.Second); err != nil {
		t.Fatal(err)
	}
	again := callsByID(t, path)
	sessions2, _ := (&Reader{Path: path}).Sessions(context.Background(), 0)
	if len(first) != 3 || len(again) != 3 || len(sessions2) != len(sessions) {
		t.Fatalf("calls %d then %d, sessions %d then %d", len(first), len(again), len(sessions), len(sessions2))
	}
	for id, c := range first {
		if a := again[id]; a == nil || a.ID != c.ID || len(a.AttemptsList) != len(c.AttemptsList) {
			t.Fatalf("call %s changed by the second merge: %+v then %+v", id, c, a)
		}
	}
	if HasJournals(path) {
		t.Fatal("the journal merged before was not deleted")
	}
	// A recorder's commit merges too, and a journal under a temporary name
	// (its writer died before the rename) is never applied.
	if err := os.WriteFile(j, data, 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(JournalDir(path), "1-00.tmp")
	if err := os.WriteFile(tmp, bytes.Replace(data, []byte("\x04half"), []byte("\x04halg"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	recordAll(t, path, SessionInfo{}, okSpec("later", t0.Add(time.Hour)))
	if got := callsByID(t, path); len(got) != 4 || HasJournals(path) {
		t.Fatalf("%d calls after a recorder's merge (want 4), journals left %v", len(got), journalNames(path))
	}
}

// lastRecordStart is the offset of the journal's last item record.
func lastItemsRecord(t *testing.T, data []byte) int {
	t.Helper()
	off, last := len(journalMagic), -1
	for off+8 <= len(data) {
		size := int(binary.BigEndian.Uint32(data[off:]))
		if data[off+8] == jrnlItems {
			last = off
		}
		off += 8 + size
	}
	if last < 0 || off != len(data) {
		t.Fatalf("journal framing: last items record %d, end %d of %d", last, off, len(data))
	}
	return last
}

// A journal cut anywhere in its last records (a killed writer, a full
// disk) is never applied, not in part: decoding it fails, merging it
// changes nothing and leaves it.
func TestTornJournalNeverApplied(t *testing.T) {
	path := tempDB(t)
	j := journalOf(t, path, SessionInfo{})
	data, err := os.ReadFile(j)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeJournal(data); err != nil {
		t.Fatalf("whole journal: %v", err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	start := lastItemsRecord(t, data)
	for cut := start; cut < len(data); cut++ {
		if _, err := decodeJournal(data[:cut]); !errors.Is(err, errTornJournal) {
			t.Fatalf("cut at %d of %d: %v, want a torn journal", cut, len(data), err)
		}
	}
	// Merging: every 61st cut, and every cut of the end record (each merge
	// is a commit).
	for cut := start; cut < len(data); cut++ {
		if (cut-start)%61 != 0 && cut < len(data)-13 {
			continue
		}
		if err := os.WriteFile(path, before, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(j, data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		if err := MergeJournals(path, time.Second); err != nil {
			t.Fatal(err)
		}
		calls := callsByID(t, path)
		if len(calls) != 2 || calls["new"] != nil || calls["half"].Outcome != OutcomeRunning {
			t.Fatalf("cut at %d: a torn journal was applied: %d calls", cut, len(calls))
		}
		if _, err := os.Stat(j); err != nil {
			t.Fatalf("cut at %d: torn journal removed: %v", cut, err)
		}
	}
	// A flipped byte anywhere fails the checksum.
	for _, off := range []int{len(journalMagic) + 10, start + 12, len(data) - 1} {
		d := slices.Clone(data)
		d[off] ^= 0x40
		if _, err := decodeJournal(d); !errors.Is(err, errTornJournal) {
			t.Fatalf("flip at %d: %v", off, err)
		}
	}
}

// With --no-content the journal holds no prompt and no answer, as the
// history would not.
func TestJournalHonoursNoContent(t *testing.T) {
	path := tempDB(t)
	j := journalOf(t, path, SessionInfo{NoContent: true})
	data, err := os.ReadFile(j)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"prompt new", "answer new", "answer half"} {
		if bytes.Contains(data, []byte(s)) {
			t.Fatalf("journal of a --no-content session holds %q", s)
		}
	}
	calls := callsByID(t, path)
	if c := calls["new"]; c == nil || c.HasPrompt || c.HasText || c.Outcome != retry.OutcomeOK {
		t.Fatalf("merged --no-content call: %+v", c)
	}
}

// A cooldown set while the file was held goes with the journal, and is in
// the file once merged.
func TestJournalKeepsUnsavedCooldowns(t *testing.T) {
	path := tempDB(t)
	recordAll(t, path, SessionInfo{}, okSpec("before", t0))
	r := NewRecorder(path, SessionInfo{}, Options{Retention: -1, LockTimeout: 20 * time.Millisecond, RetryDelay: time.Hour, JournalAfter: 30 * time.Millisecond})
	cd := r.Cooldowns()
	release := holdLock(t, path)
	want := retry.Cooldown{Scope: "openai:acct", Since: t0, Until: t0.Add(time.Hour), Target: "openai/gpt-5.4-mini", Code: "insufficient_quota", Message: "quota"}
	if err := cd.Set(want); err == nil {
		t.Fatal("set with the file held should report that it was kept in memory")
	}
	recordSome(r, "c", 1)
	if err := r.Close(context.Background()); err != nil || r.Journal() == "" {
		t.Fatalf("close: %v, journal %q", err, r.Journal())
	}
	release()
	list, err := NewCooldowns(path, Options{}).List()
	if err != nil || len(list) != 1 || list[0].Scope != want.Scope || !list[0].Until.Equal(want.Until) {
		t.Fatalf("cooldowns after the merge: %+v %v", list, err)
	}
}

// When the journal cannot be written either, Close keeps trying the file
// until its deadline and then says what was not saved, and why.
func TestJournalFailureReported(t *testing.T) {
	path := tempDB(t)
	recordAll(t, path, SessionInfo{}, okSpec("before", t0))
	if err := os.WriteFile(JournalDir(path), []byte("in the way"), 0o600); err != nil {
		t.Fatal(err)
	}
	holdLock(t, path)
	r := NewRecorder(path, SessionInfo{}, Options{Retention: -1, LockTimeout: 20 * time.Millisecond, RetryDelay: time.Hour, JournalAfter: 10 * time.Millisecond})
	recordSome(r, "c", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := r.Close(ctx)
	if err == nil || !strings.Contains(err.Error(), "not saved") || !strings.Contains(err.Error(), "journal") || !errors.Is(err, ErrLocked) || r.Pending() == 0 {
		t.Fatalf("close: %v (%d pending)", err, r.Pending())
	}
}

// FuzzJournalDecode: no input makes the decoder panic, and one it accepts
// is a whole journal (it encodes back to the same records).
func FuzzJournalDecode(f *testing.F) {
	h := journalHeader{Info: SessionInfo{Command: "send"}, Session: Session{Started: t0, PID: 7}, SessionKey: makeKey(t0, 3)}
	c, evs := okSpec("f", t0).events()
	items := []journalItem{{Ev: journalEvent(evs[0], false), Call: &journalCallInfo{Chain: c.Chain, Prompt: c.Prompt}}}
	for _, ev := range evs[1:] {
		items = append(items, journalItem{Ev: journalEvent(ev, false)})
	}
	data, err := encodeJournal(&h, items)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(data[:len(data)-3])
	f.Add([]byte(journalMagic))
	f.Add(append([]byte(journalMagic), 0, 0, 0, 1, 0, 0, 0, 0, 'E'))
	hp, err := gobBytes(&h)
	if err != nil {
		f.Fatal(err)
	}
	ip, err := gobBytes(items)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ip)
	f.Fuzz(func(t *testing.T, b []byte) {
		// b as a whole journal, and as the payload of a well-framed item
		// record (checksums do not stop the fuzzer reaching the decoder).
		framed := appendRecord(appendRecord([]byte(journalMagic), jrnlHeader, hp), jrnlItems, b)
		framed = appendRecord(framed, jrnlEnd, []byte{0, 0, 0, 2})
		for _, in := range [][]byte{b, framed} {
			j, err := decodeJournal(in)
			if err != nil {
				if !errors.Is(err, errTornJournal) {
					t.Fatalf("error not marked torn: %v", err)
				}
				continue
			}
			if _, err := encodeJournal(&j.header, j.items); err != nil {
				t.Fatalf("accepted journal does not encode: %v", err)
			}
		}
	})
}

const journalKillEnv = "LIMITSCOPE_STORE_TEST_JOURNAL_KILL"

// journalKillChild records one call with a 32 MiB prompt and closes its
// recorder on a file its parent holds, so that it journals (and is killed
// while it does).
func journalKillChild(path string) {
	r := NewRecorder(path, SessionInfo{Command: "send"}, Options{Retention: -1, LockTimeout: 10 * time.Millisecond, JournalAfter: 10 * time.Millisecond})
	s := okSpec("killed", t0.Add(time.Hour))
	s.prompt = strings.Repeat("k", 32<<20)
	c, evs := s.events()
	sink := r.Sink(c, nil)
	for _, ev := range evs {
		sink(ev)
	}
	_ = r.Close(context.Background())
}

// A writer killed (-9) at any moment of writing its journal leaves nothing
// half-applied: after the merge its call is either absent or whole, and
// the temporary file of a dead writer is removed.
func TestKilledJournalWriterSkippedOrMergedWhole(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes")
	}
	for i, delay := range []time.Duration{0, 2 * time.Millisecond, 8 * time.Millisecond, 30 * time.Millisecond, 150 * time.Millisecond, -1} {
		path := tempDB(t)
		recordAll(t, path, SessionInfo{}, okSpec("before", t0))
		release := holdLock(t, path)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), journalKillEnv+"="+path)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill once the journal has begun (its directory exists), after delay;
		// the last run is not killed at all.
		deadline := time.Now().Add(20 * time.Second)
		for delay >= 0 && time.Now().Before(deadline) {
			if ents, _ := os.ReadDir(JournalDir(path)); len(ents) > 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if delay >= 0 {
			time.Sleep(delay)
			_ = cmd.Process.Kill()
		}
		_ = cmd.Wait()
		release()
		calls := callsByID(t, path)
		k := calls["killed"]
		switch {
		case len(calls) == 1 && k == nil:
		case len(calls) == 2 && k != nil && len(k.Prompt) == 32<<20 && k.Outcome == retry.OutcomeOK && len(k.AttemptsList) == 1:
		default:
			t.Fatalf("run %d (kill after %v): %d calls, the killed writer's: %+v", i, delay, len(calls), k != nil)
		}
		if delay < 0 && k == nil {
			t.Fatal("a writer left to finish lost its call")
		}
		ents, _ := os.ReadDir(JournalDir(path))
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".jrnl") { // a torn .jrnl would stay, and cannot happen
				t.Fatalf("run %d: %s left after the merge", i, e.Name())
			}
		}
		t.Logf("kill after %v: killed writer's call %v", delay, k != nil)
	}
}

// Repair keeps the names of merged journals: a journal merged before the
// repair (its delete lost) adds nothing again after it.
func TestRepairKeepsMergedJournalsMerged(t *testing.T) {
	path := tempDB(t)
	j := journalOf(t, path, SessionInfo{})
	data, err := os.ReadFile(j)
	if err != nil {
		t.Fatal(err)
	}
	if err := MergeJournals(path, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := Repair(context.Background(), path, t0, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(j, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if calls := callsByID(t, path); len(calls) != 3 || HasJournals(path) {
		t.Fatalf("%d calls after the repair and a second merge, want 3", len(calls))
	}
}
