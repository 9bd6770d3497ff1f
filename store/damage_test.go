package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// damage is one deterministic way to break a history file.
type damage struct {
	name string
	fn   func(raw []byte) []byte
}

// damageCorpus returns truncations at every page boundary, byte flips with
// fixed seeds (1 to seeds), zeroed meta pages and zeroed data pages of the
// file raw.
func damageCorpus(raw []byte, ps, seeds int) []damage {
	pages := len(raw) / ps
	var out []damage
	for p := 1; p < pages; p++ {
		out = append(out, damage{fmt.Sprintf("truncate-at-page-%d", p), func(r []byte) []byte { return r[:p*ps] }})
	}
	out = append(out, damage{"truncate-mid-page", func(r []byte) []byte { return r[:len(r)-ps/2] }})
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		out = append(out, damage{fmt.Sprintf("flip-seed-%d", seed), func(r []byte) []byte {
			rng := rand.New(rand.NewPCG(seed, 14))
			n := 1 + rng.IntN(8)
			for range n {
				// Half in page headers and element tables, where damage
				// misleads bbolt most; half anywhere.
				var off int
				if rng.IntN(2) == 0 {
					off = rng.IntN(pages)*ps + rng.IntN(64)
				} else {
					off = rng.IntN(len(r))
				}
				r[off] ^= byte(1 + rng.IntN(255))
			}
			return r
		}})
	}
	zero := func(from, to int) func([]byte) []byte {
		return func(r []byte) []byte { clear(r[from:min(to, len(r))]); return r }
	}
	out = append(out,
		damage{"zero-meta-0", zero(0, ps)},
		damage{"zero-meta-1", zero(ps, 2*ps)},
		damage{"zero-both-metas", zero(0, 2*ps)},
	)
	for p := 2; p < pages; p += max(1, pages/12) {
		out = append(out, damage{fmt.Sprintf("zero-page-%d", p), zero(p*ps, (p+1)*ps)})
	}
	return out
}

// damagedHistory records a small but real history: two sessions, calls with
// retries, fail-overs and a broken stream's partial text, a call whose text
// spans overflow pages, and a cooldown.
func damagedHistory(t *testing.T) (string, []byte) {
	t.Helper()
	path := tempDB(t)
	var specs []spec
	for i := range 40 {
		s := okSpec("c"+itoa(uint32(i)), t0.Add(time.Duration(i)*time.Second), tOpenAI, tAnthropic)
		if i%3 == 0 {
			s.classes = []stream.Class{stream.ClassRateLimit, stream.ClassOK}
		}
		if i == 7 {
			s.text = strings.Repeat("long answer ", 1200) // overflow pages
		}
		specs = append(specs, s)
	}
	recordAll(t, path, SessionInfo{Mode: ModeReal, Command: "send"}, specs[:20]...)
	recordAll(t, path, SessionInfo{Mode: ModeSimulated, Command: "tui"}, specs[20:]...)
	cd := NewCooldowns(path, Options{})
	if err := cd.Set(retry.Cooldown{Scope: "account:openai:946ae4c7aaee", Target: tOpenAI.String(), Code: "insufficient_quota", Until: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, raw
}

// exercise runs everything send, the console and `history` do with the
// file, and fails the test on a panic; errors are fine. It returns the
// first error met, for the log.
func exercise(t *testing.T, path string) (errs []error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v", r)
		}
	}()
	ctx := context.Background()
	rd := &Reader{Path: path, LockTimeout: 50 * time.Millisecond}
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	calls, err := rd.List(ctx, Filter{PromptHead: 40})
	note(err)
	for _, c := range calls {
		_, err := rd.Show(ctx, itoa(c.ID))
		note(err)
	}
	_, err = rd.Show(ctx, "c7")
	note(err)
	_, err = rd.Stats(ctx, Filter{})
	note(err)
	note(rd.Each(ctx, Filter{}, false, func(*Call) error { return nil }))
	_, err = rd.Sessions(ctx, 0)
	note(err)

	// What send does: a cooldown check, a call recorded, the recorder
	// closed. None may panic or hang; a damaged file is one clear error.
	var warns []error
	r := NewRecorder(path, SessionInfo{Command: "send"}, Options{Retention: -1, LockTimeout: 50 * time.Millisecond,
		OnWarn: func(err error) { warns = append(warns, err) }})
	cd := r.Cooldowns()
	_, _, err = cd.Get("account:openai:946ae4c7aaee")
	note(err)
	recordSome(r, "after-damage-", 2)
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	err = r.Close(cctx)
	cancel()
	note(err)
	if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrForeign) && !errors.Is(err, ErrNewer) {
		t.Errorf("recording into a damaged file: %v, want a FileError that says what to run", err)
	}
	if len(warns) > 1 {
		t.Errorf("warned %d times, want at most once: %v", len(warns), warns)
	}
	if err != nil && !strings.Contains(err.Error(), "limitscope history repair") && errors.Is(err, ErrCorrupt) {
		t.Errorf("error does not say what to run: %v", err)
	}
	return errs
}

// TestDamagedHistoryNeverKills breaks a real history file in over a hundred
// deterministic ways; every store call used by send, the console and
// `history` returns (no fault, no panic), and repair recovers every record
// of every intact leaf page. The file differs per run (sessions record the
// pid, start time and wall clock; commits batch by time), so the same flips
// land on other bytes: set LIMITSCOPE_DAMAGE_KEEP to a directory to keep the
// base file of a failing run (gzipped, named after the damages that failed),
// then add it to testdata/damage.
func TestDamagedHistoryNeverKills(t *testing.T) {
	_, raw := damagedHistory(t)
	failed := damageAll(t, raw, nil)
	if dir := os.Getenv("LIMITSCOPE_DAMAGE_KEEP"); dir != "" && len(failed) > 0 {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(raw)
		_ = zw.Close()
		name := filepath.Join(dir, fmt.Sprintf("base-%d.%s.db.gz", time.Now().UnixNano(), strings.Join(failed, "+")))
		if err := os.WriteFile(name, buf.Bytes(), 0o600); err != nil {
			t.Error(err)
		}
		t.Logf("base file kept in %s", name)
	}
}

// TestDamagedHistoryRegressions runs, on each base file of an earlier failing
// run of TestDamagedHistoryNeverKills (testdata/damage/base-ID.DAMAGES.db.gz),
// the damages that failed (DAMAGES, joined by "+").
func TestDamagedHistoryRegressions(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "damage", "*.db.gz"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no base files in testdata/damage (%v)", err)
	}
	for _, f := range files {
		parts := strings.Split(strings.TrimSuffix(filepath.Base(f), ".db.gz"), ".")
		if len(parts) != 2 || parts[1] == "" {
			t.Fatalf("%s: want base-ID.DAMAGES.db.gz", f)
		}
		t.Run(parts[0], func(t *testing.T) {
			damageAll(t, readBase(t, f), strings.Split(parts[1], "+"))
		})
	}
}

// readBase reads a gzipped base file of testdata/damage.
func readBase(t testing.TB, name string) []byte {
	t.Helper()
	gz, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// damageAll runs the damage corpus (or the damages named in only) on the
// healthy history file raw, and returns the names of the damages that failed.
func damageAll(t *testing.T, raw []byte, only []string) (failed []string) {
	t.Helper()
	const ps = 4096
	orig := filepath.Join(t.TempDir(), "orig.db")
	if err := os.WriteFile(orig, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	live := livePages(t, orig, raw, ps)
	// 90 flip seeds, more to explore (LIMITSCOPE_DAMAGE_SEEDS), or as many
	// as the damages named in only need.
	seeds := 90
	if n, err := strconv.Atoi(os.Getenv("LIMITSCOPE_DAMAGE_SEEDS")); err == nil {
		seeds = n
	}
	for _, name := range only {
		if n, err := strconv.Atoi(strings.TrimPrefix(name, "flip-seed-")); err == nil {
			seeds = max(seeds, n)
		}
	}
	corpus := damageCorpus(raw, ps, seeds)
	if len(corpus) < 100 {
		t.Fatalf("only %d damages", len(corpus))
	}
	dir := t.TempDir()
	if one := os.Getenv("LIMITSCOPE_DAMAGE_ONLY"); one != "" { // to debug one damage
		only = []string{one}
	}
	ran := 0
	for i, d := range corpus {
		if only != nil && !slices.Contains(only, d.name) {
			continue
		}
		ran++
		path := filepath.Join(dir, fmt.Sprintf("d%03d", i), "history.db")
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		bad := d.fn(bytes.Clone(raw))
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		ok := t.Run(d.name, func(t *testing.T) {
			exercise(t, path)
			// The recorder may have written (a flip that bbolt never
			// reads): repair the file as the damage left it.
			if err := os.WriteFile(path, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			res, err := func() (res RepairResult, err error) {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("repair panicked: %v", r)
					}
				}()
				return Repair(context.Background(), path, t0, 50*time.Millisecond)
			}()
			if err != nil {
				t.Fatalf("repair: %v", err)
			}
			checkRepaired(t, path, bad, live, ps, res)
			// And the repaired file takes writes and answers.
			recordAll(t, path, SessionInfo{}, okSpec("post-repair", t0.Add(time.Hour)))
			if c, err := (&Reader{Path: path}).Show(context.Background(), "post-repair"); err != nil || c.Outcome != retry.OutcomeOK {
				t.Fatalf("repaired file: %v", err)
			}
		})
		if !ok {
			failed = append(failed, d.name)
		}
	}
	if only != nil && ran != len(only) {
		t.Errorf("ran %d of the damages %v", ran, only)
	}
	return failed
}

// liveRecord is one record of the healthy file and the leaf page (with its
// overflow) that holds it.
type liveRecord struct {
	bucket   string
	k, v     []byte
	from, to int    // byte range of its page
	page     []byte // the page's bytes as they were
}

// livePages lists every record of the healthy file with its page.
func livePages(t testing.TB, path string, raw []byte, ps int) []liveRecord {
	t.Helper()
	out := liveRecords(t, path, raw, ps)
	if len(out) < 100 {
		t.Fatalf("only %d live records found", len(out))
	}
	return out
}

// liveRecords is livePages for a file of any size.
func liveRecords(t testing.TB, path string, raw []byte, ps int) []liveRecord {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out []liveRecord
	errDone := errors.New("done")
	err = db.Update(func(tx *bolt.Tx) error {
		byKV := map[string]string{} // key+value -> bucket
		for _, name := range allBuckets {
			_ = tx.Bucket(name).ForEach(func(k, v []byte) error {
				byKV[string(k)+"\x00"+string(v)] = string(name)
				return nil
			})
		}
		for id := 2; id*ps < len(raw); id++ {
			p, err := tx.Page(id)
			if err != nil || p == nil || p.Type != "leaf" {
				continue
			}
			off := id * ps
			end := off + (1+p.OverflowCount)*ps
			count := int(binary.LittleEndian.Uint16(raw[off+10:]))
			for i := range count {
				el := off + 16 + i*16
				pos := int(binary.LittleEndian.Uint32(raw[el+4:]))
				ks := int(binary.LittleEndian.Uint32(raw[el+8:]))
				vs := int(binary.LittleEndian.Uint32(raw[el+12:]))
				if binary.LittleEndian.Uint32(raw[el:])&1 != 0 {
					continue // a sub-bucket
				}
				k, v := raw[el+pos:el+pos+ks], raw[el+pos+ks:el+pos+ks+vs]
				if b, ok := byKV[string(k)+"\x00"+string(v)]; ok && b != string(bMeta) && b != string(bIDs) {
					out = append(out, liveRecord{b, bytes.Clone(k), bytes.Clone(v), off, end, raw[off:end]})
				}
			}
		}
		return errDone // read only
	})
	if !errors.Is(err, errDone) {
		t.Fatal(err)
	}
	return out
}

// checkRepaired checks that every record of an intact page is in the
// repaired file, and that repair's report adds up.
func checkRepaired(t *testing.T, path string, bad []byte, live []liveRecord, ps int, res RepairResult) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatalf("repaired file does not open: %v", err)
	}
	defer db.Close()
	missing, gone := 0, 0
	_ = db.View(func(tx *bolt.Tx) error {
		for _, r := range live {
			if tx.Bucket([]byte(r.bucket)).Get(r.k) == nil {
				gone++ // a changed value (a flip inside a text) is not gone
			}
			if r.to > len(bad) || !bytes.Equal(bad[r.from:r.to], r.page) {
				continue // its page was damaged
			}
			b := tx.Bucket([]byte(r.bucket))
			if got := b.Get(r.k); !bytes.Equal(got, r.v) {
				if missing < 5 {
					t.Errorf("record %s %x of an intact page lost in repair (copied %v, salvaged %v, skipped %v, problems %v)", r.bucket, r.k, res.Copied, res.Salvaged, res.Skipped, res.Problems)
				}
				missing++
			}
		}
		return nil
	})
	// Honest: when anything live is gone, the report says something was.
	if gone > 0 && strings.Contains(res.Summary(), "nothing skipped") {
		t.Errorf("%d live records gone, but repair says %q", gone, res.Summary())
	}
}

// A pruned call's prompt cannot be read back from the file once Prune
// returns: not in the raw bytes, not through repair's salvage (zeroed meta
// pages included), and repair still recovers every live call.
func TestPrunedRecordsAreUnrecoverable(t *testing.T) {
	const marker = "sk-MARKER-pasted-secret-0123456789"
	path := tempDB(t)
	var specs []spec
	for i := range 60 { // old calls with the secret pasted in
		s := okSpec("old"+itoa(uint32(i)), t0.Add(time.Duration(i)*time.Second))
		s.prompt = "please debug " + marker + " " + itoa(uint32(i))
		s.text = strings.Repeat("x", 300)
		specs = append(specs, s)
	}
	for i := range 30 { // recent ones
		specs = append(specs, okSpec("new"+itoa(uint32(i)), t0.Add(48*time.Hour+time.Duration(i)*time.Second)))
	}
	recordAll(t, path, SessionInfo{}, specs...)
	if raw, _ := os.ReadFile(path); !bytes.Contains(raw, []byte(marker)) {
		t.Fatal("the marker was never written: the test proves nothing")
	}
	n, err := Prune(context.Background(), path, 24*time.Hour, t0.Add(49*time.Hour), time.Second)
	if err != nil || n != 60 {
		t.Fatalf("pruned %d (%v), want 60", n, err)
	}
	raw, _ := os.ReadFile(path)
	if bytes.Contains(raw, []byte(marker)) {
		t.Fatal("a pruned prompt is still in the file's bytes")
	}
	for _, zeroMeta := range []bool{false, true} {
		p := filepath.Join(t.TempDir(), "history.db")
		bad := bytes.Clone(raw)
		if zeroMeta {
			clear(bad[:2*4096])
		}
		if err := os.WriteFile(p, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		res, err := Repair(context.Background(), p, t0, time.Second)
		if err != nil {
			t.Fatalf("repair (zeroed metas %v): %v", zeroMeta, err)
		}
		fixed, _ := os.ReadFile(p)
		if bytes.Contains(fixed, []byte(marker)) || strings.Contains(fmt.Sprint(res), marker) {
			t.Fatalf("repair brought a pruned prompt back (zeroed metas %v)", zeroMeta)
		}
		calls, err := (&Reader{Path: p}).List(context.Background(), Filter{})
		if err != nil || len(calls) != 30 {
			t.Fatalf("repair (zeroed metas %v) kept %d calls (%v), want the 30 live ones: %s", zeroMeta, len(calls), err, res.Summary())
		}
		for _, c := range calls {
			if full, err := (&Reader{Path: p}).Show(context.Background(), itoa(c.ID)); err != nil || !strings.HasPrefix(full.CallID, "new") || full.Prompt != "prompt "+full.CallID {
				t.Fatalf("repaired call %+v %v", full, err)
			}
		}
	}
}

// FuzzDamagedFile flips bytes of real history files and truncates them:
// checkFile, every read and repair return without a panic or a fault. On a
// history whose buckets have their own pages (a fixed base file of
// testdata/damage), repair also keeps every record of an intact page.
func FuzzDamagedFile(f *testing.F) {
	small, err := os.ReadFile(fuzzSeedFile(f))
	if err != nil {
		f.Fatal(err)
	}
	bases, _ := filepath.Glob(filepath.Join("testdata", "damage", "*.db.gz"))
	if len(bases) == 0 {
		f.Fatal("no base file in testdata/damage")
	}
	slices.Sort(bases)
	big := readBase(f, bases[0])
	bigPath := filepath.Join(f.TempDir(), "big.db")
	if err := os.WriteFile(bigPath, big, 0o600); err != nil {
		f.Fatal(err)
	}
	live := livePages(f, bigPath, big, 4096)
	f.Add(uint32(16+20), byte(0xff), uint32(0))
	f.Add(uint32(2*4096+10), byte(0x7f), uint32(0))
	f.Add(uint32(0), byte(0), uint32(3*4096))
	f.Fuzz(func(t *testing.T, off uint32, flip byte, cut uint32) {
		for _, raw := range [][]byte{small, big} {
			bad := bytes.Clone(raw)
			bad[int(off)%len(bad)] ^= flip
			if cut > 0 {
				bad = bad[:int(cut)%len(bad)]
			}
			p := filepath.Join(t.TempDir(), "history.db")
			if err := os.WriteFile(p, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			_ = checkFile(p)
			rd := &Reader{Path: p, LockTimeout: 50 * time.Millisecond}
			_, _ = rd.List(context.Background(), Filter{})
			_, _ = rd.Stats(context.Background(), Filter{})
			_ = rd.Each(context.Background(), Filter{}, false, func(*Call) error { return nil })
			res, err := Repair(context.Background(), p, t0, time.Second)
			if err == nil && len(raw) == len(big) {
				checkRepaired(t, p, bad, live, 4096, res)
			}
		}
	})
}
