package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

func TestRoundTripEveryRecord(t *testing.T) {
	clearEnv(t)
	path := tempDB(t)
	s := spec{id: "call-1", start: t0, chain: []stream.Target{tOpenAI, tAnthropic},
		classes: []stream.Class{stream.ClassRateLimit, stream.ClassOK}, outcome: retry.OutcomeOK,
		prompt: "why is the sky blue?", text: "Rayleigh scattering.", wait: 2100 * time.Millisecond}
	call, evs := s.events()
	// The first attempt broke mid-stream with partial text and x-should-retry.
	evs[3].Attempt.MidStream, evs[3].Attempt.PartialText, evs[3].Attempt.NoRetry, evs[3].Attempt.QuotaID = true, "Rayl", true, "q1"
	evs[3].Attempt.Paced = 40 * time.Millisecond
	// The user failed over 2.1s into a 20s wait (the console's ctrl+f).
	evs[3].Attempt.FailedOverByUser, evs[3].Attempt.WaitPlanned = true, 20*time.Second
	res := evs[len(evs)-1].Result
	res.Attempts[0] = *evs[3].Attempt
	res.Attempts[0].Limits.InputTokens = &stream.Window{Limit: 10, Remaining: -3, PerDay: true, HasLimit: true}

	r := NewRecorder(path, SessionInfo{Version: "v1.2.3", Mode: ModeSimulated, Command: "send"}, Options{Retention: -1})
	sink := r.Sink(call, nil)
	for _, ev := range evs {
		sink(ev)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	rd := &Reader{Path: path}
	got, err := rd.Show(context.Background(), "1")
	if err != nil {
		t.Fatal(err)
	}
	if got.CallID != "call-1" || got.Outcome != retry.OutcomeOK || !got.Started.Equal(t0) || !got.Ended.Equal(res.Ended) {
		t.Fatalf("call header: %+v", got)
	}
	if !reflect.DeepEqual(got.Chain, s.chain) || *got.ServedBy != tAnthropic || got.FinishReason != "stop" || *got.Usage != *res.Usage {
		t.Fatalf("call: %+v", got)
	}
	if got.Policy != retry.DefaultPolicy() || got.MaxTokens != 256 || got.Prompt != s.prompt || got.Text != s.text {
		t.Fatalf("policy/text: %+v", got)
	}
	if got.Attempts != 2 || got.Retries() != 1 || got.Waited != 2100*time.Millisecond+40*time.Millisecond || got.TTFT != 120*time.Millisecond {
		t.Fatalf("totals: attempts %d waited %v ttft %v", got.Attempts, got.Waited, got.TTFT)
	}
	if !reflect.DeepEqual(got.Classes, []stream.Class{stream.ClassOK, stream.ClassRateLimit}) {
		t.Fatalf("classes %v", got.Classes)
	}
	if !reflect.DeepEqual(got.AttemptsList, res.Attempts) {
		t.Fatalf("attempts differ:\n got %#v\nwant %#v", got.AttemptsList, res.Attempts)
	}
	sess, err := rd.Sessions(context.Background(), 0)
	if err != nil || len(sess) != 1 {
		t.Fatalf("sessions %v %v", sess, err)
	}
	if sess[0].Version != "v1.2.3" || sess[0].Mode != ModeSimulated || sess[0].Command != "send" || sess[0].Ended.IsZero() || sess[0].PID != os.Getpid() || got.Session != sess[0].ID {
		t.Fatalf("session %+v", sess[0])
	}

	// A failed call keeps its error.
	recordAll(t, path, SessionInfo{}, spec{id: "call-2", start: t0.Add(time.Minute), chain: []stream.Target{tGemini},
		classes: []stream.Class{stream.ClassQuota}, outcome: retry.OutcomeStopped})
	got, err = rd.Show(context.Background(), "call-2")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != 2 || got.Outcome != retry.OutcomeStopped || got.Err == nil || got.Err.Code != "insufficient_quota" || got.Err.Provider != "gemini" || got.ServedBy != nil {
		t.Fatalf("failed call %+v err %+v", got, got.Err)
	}
	if _, err := rd.Show(context.Background(), "99"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing id: %v", err)
	}

	// Cooldowns.
	cd := NewCooldowns(path, Options{})
	want := retry.Cooldown{Scope: "openai:abc123", Until: t0.Add(time.Hour), Since: t0, Target: "openai/gpt-5.4-mini", Code: "insufficient_quota", Message: "You exceeded your current quota"}
	if err := cd.Set(want); err != nil {
		t.Fatal(err)
	}
	c2, ok, err := NewCooldowns(path, Options{}).Get(want.Scope)
	if err != nil || !ok || !c2.Until.Equal(want.Until) || c2.Code != want.Code || c2.Target != want.Target {
		t.Fatalf("cooldown %+v %v %v", c2, ok, err)
	}
}

func TestNoContentStoresMetadataOnly(t *testing.T) {
	clearEnv(t)
	path := tempDB(t)
	s := okSpec("c", t0)
	s.prompt, s.text = "SECRET-PROMPT-TEXT", "SECRET-ANSWER-TEXT"
	recordAll(t, path, SessionInfo{NoContent: true}, s)
	raw, _ := os.ReadFile(path)
	if bytes.Contains(raw, []byte("SECRET-PROMPT")) || bytes.Contains(raw, []byte("SECRET-ANSWER")) {
		t.Fatal("text stored with NoContent")
	}
	got, err := (&Reader{Path: path}).Show(context.Background(), "1")
	if err != nil || got.Prompt != "" || got.Text != "" || got.Attempts != 1 || got.Outcome != retry.OutcomeOK {
		t.Fatalf("%+v %v", got, err)
	}
	sess, _ := (&Reader{Path: path}).Sessions(context.Background(), 1)
	if !sess[0].NoContent {
		t.Fatal("session does not say no-content")
	}
}

func TestFilePermissions(t *testing.T) {
	path := tempDB(t)
	recordAll(t, path, SessionInfo{}, okSpec("a", t0))
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v", fi.Mode())
	}
	di, _ := os.Stat(filepath.Dir(path))
	if di.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v", di.Mode())
	}
}

func TestListNewestFirstPaging(t *testing.T) {
	path := tempDB(t)
	var specs []spec
	for i := range 25 {
		specs = append(specs, okSpec("c"+string(rune('a'+i)), t0.Add(time.Duration(i)*time.Minute)))
	}
	recordAll(t, path, SessionInfo{}, specs...)
	rd := &Reader{Path: path}
	var seen []uint32
	var before uint32
	for page := 0; ; page++ {
		calls, err := rd.List(context.Background(), Filter{Limit: 10, BeforeID: before})
		if err != nil {
			t.Fatal(err)
		}
		if len(calls) == 0 {
			break
		}
		for _, c := range calls {
			seen = append(seen, c.ID)
		}
		before = calls[len(calls)-1].ID
		if page > 5 {
			t.Fatal("paging does not end")
		}
	}
	if len(seen) != 25 {
		t.Fatalf("saw %d calls: %v", len(seen), seen)
	}
	for i, id := range seen {
		if id != uint32(25-i) {
			t.Fatalf("order %v", seen)
		}
	}
	// Summaries are not full records and carry no text.
	calls, _ := rd.List(context.Background(), Filter{Limit: 1})
	if calls[0].Full || calls[0].Text != "" || calls[0].Chain[0] != tOpenAI || calls[0].Outcome != retry.OutcomeOK {
		t.Fatalf("summary %+v", calls[0])
	}
}

func TestListFilters(t *testing.T) {
	path := tempDB(t)
	retried := spec{id: "r", start: t0.Add(2 * time.Hour), chain: []stream.Target{tAnthropic}, classes: []stream.Class{stream.ClassRateLimit, stream.ClassOK}, outcome: retry.OutcomeOK, wait: time.Second}
	gaveUp := spec{id: "g", start: t0.Add(3 * time.Hour), chain: []stream.Target{tGemini, tOpenAI}, classes: []stream.Class{stream.ClassRateLimit, stream.ClassRateLimit}, outcome: retry.OutcomeGaveUp, wait: time.Second}
	recordAll(t, path, SessionInfo{}, okSpec("o", t0), retried, gaveUp, okSpec("o2", t0.Add(4*time.Hour), tGemini))
	rd := &Reader{Path: path}
	ids := func(f Filter) string {
		calls, err := rd.List(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, c := range calls {
			full, _ := rd.Show(context.Background(), itoa(c.ID))
			s = append(s, full.CallID)
		}
		return strings.Join(s, ",")
	}
	cases := []struct {
		f    Filter
		want string
	}{
		{Filter{}, "o2,g,r,o"},
		{Filter{Provider: "gemini"}, "o2,g"},
		{Filter{Provider: "openai"}, "g,o"}, // a fallback counts
		{Filter{Outcome: retry.OutcomeGaveUp}, "g"},
		{Filter{Class: stream.ClassRateLimit}, "g,r"},
		{Filter{Since: t0.Add(2 * time.Hour)}, "o2,g,r"},
		{Filter{Since: t0.Add(time.Hour), Provider: "anthropic"}, "r"},
		{Filter{Limit: 2}, "o2,g"},
		{Filter{Class: stream.ClassQuota}, ""},
	}
	for _, c := range cases {
		if got := ids(c.f); got != c.want {
			t.Errorf("%+v: got %q want %q", c.f, got, c.want)
		}
	}
}

func itoa(n uint32) string { return strconvItoa(int(n)) }

func TestStatsArithmetic(t *testing.T) {
	path := tempDB(t)
	mk := func(id string, i int, chain []stream.Target, classes []stream.Class, o retry.Outcome) spec {
		return spec{id: id, start: t0.Add(time.Duration(i) * time.Minute), chain: chain, classes: classes, outcome: o, wait: time.Second}
	}
	oa := []stream.Target{tOpenAI}
	an := []stream.Target{tAnthropic, tOpenAI}
	ok := []stream.Class{stream.ClassOK}
	rl := stream.ClassRateLimit
	specs := []spec{
		// openai: 4 calls; latencies 0.3, 0.3, 1.3+0.3=1.6, 3*(0.3+1)=3.9 minus last wait -> see events()
		mk("o1", 0, oa, ok, retry.OutcomeOK),
		mk("o2", 1, oa, ok, retry.OutcomeOK),
		mk("o3", 2, oa, []stream.Class{rl, stream.ClassOK}, retry.OutcomeOK),
		mk("o4", 3, oa, []stream.Class{rl, rl, rl}, retry.OutcomeGaveUp),
		// anthropic: 2 calls, one quota stop
		mk("a1", 4, an, []stream.Class{stream.ClassQuota}, retry.OutcomeStopped),
		mk("a2", 5, an, []stream.Class{rl, stream.ClassOK}, retry.OutcomeOK),
	}
	recordAll(t, path, SessionInfo{}, specs...)
	st, err := (&Reader{Path: path}).Stats(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 3 || st[0].Provider != "anthropic" || st[1].Provider != "openai" || st[2].Provider != "" {
		t.Fatalf("rows %+v", st)
	}
	o := st[1]
	// Latencies: 300ms, 300ms, 300+1000+300=1600ms, 3*(300+1000)=3900ms.
	if o.Calls != 4 || o.Retried != 2 || o.RetriedShare != 0.5 || o.Retries != 3 || o.RetriesPerCall != 0.75 ||
		o.GaveUp != 1 || o.GiveUpRate != 0.25 || o.QuotaStops != 0 || o.OK != 3 {
		t.Fatalf("openai %+v", o)
	}
	if o.P50 != 300*time.Millisecond || o.P95 != 3900*time.Millisecond {
		t.Fatalf("openai p50 %v p95 %v", o.P50, o.P95)
	}
	a := st[0]
	if a.Calls != 2 || a.QuotaStops != 1 || a.Retried != 1 || a.RetriesPerCall != 0.5 || a.P50 != 300*time.Millisecond || a.P95 != 1600*time.Millisecond {
		t.Fatalf("anthropic %+v", a)
	}
	tot := st[2]
	if tot.Calls != 6 || tot.Retries != 4 || tot.QuotaStops != 1 || tot.GaveUp != 1 {
		t.Fatalf("total %+v", tot)
	}
	// The calls that tried anthropic: its two as primary (one served by
	// openai, which gets a row of its own for it).
	st, _ = (&Reader{Path: path}).Stats(context.Background(), Filter{Provider: "anthropic"})
	if len(st) != 3 || st[len(st)-1].Calls != 2 || st[len(st)-1].Served != 1 {
		t.Fatalf("filtered %+v", st)
	}
}

// v1 is the prototype's format: version byte 1 then JSON.
func writeV1File(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	j := func(s string) []byte { return append([]byte{1}, s...) }
	err = db.Update(func(tx *bolt.Tx) error {
		m, _ := tx.CreateBucket(bMeta)
		_ = m.Put(metaApp, appName)
		_ = m.Put(metaSchema, binary.AppendUvarint(nil, 1))
		s, _ := tx.CreateBucket(bSessions)
		_ = s.Put(makeKey(t0, 1), j(`{"ended_at":"2026-11-01T13:00:00Z","version":"v0.1","mode":"real"}`))
		c, _ := tx.CreateBucket(bCalls)
		_ = c.Put(makeKey(t0.Add(time.Minute), 7), j(`{"call_id":"old-1","session":1,"ended_at":"2026-11-01T12:01:03Z","outcome":"ok",
			"chain":[{"provider":"openai","model":"gpt-4o"}],"served_by":{"provider":"openai","model":"gpt-4o-2024"},
			"finish_reason":"stop","usage":{"input_tokens":5,"output_tokens":6},"prompt":"old prompt","text":"old answer","attempts":2}`))
		_ = c.Put(makeKey(t0.Add(2*time.Minute), 9), j(`{"call_id":"old-2","session":1,"outcome":""}`))
		a, _ := tx.CreateBucket(bAttempts)
		k := makeKey(t0.Add(time.Minute), 7)
		_ = a.Put(attemptKey(k, 1), j(`{"n":1,"provider":"openai","model":"gpt-4o","status":429,"class":"rate_limit","code":"rate_limit_exceeded",
			"message":"slow down","retry_after_ms":2000,"delay_source":"retry-after","waited_ms":2100,"partial_text":"ol","started_at":"2026-11-01T12:01:00Z","duration_ms":200}`))
		_ = a.Put(attemptKey(k, 2), j(`{"n":2,"provider":"openai","model":"gpt-4o","status":200,"class":"ok","ttft_ms":150,"started_at":"2026-11-01T12:01:02.3Z","duration_ms":700,"decision":"done"}`))
		_, err := tx.CreateBucket(bCooldowns)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMigrationFromSchema1(t *testing.T) {
	path := tempDB(t)
	writeV1File(t, path)
	before, _ := os.ReadFile(path)
	rd := &Reader{Path: path}

	// Read as it is, without touching the file.
	calls, err := rd.List(context.Background(), Filter{})
	if err != nil || len(calls) != 2 || calls[1].ID != 7 || calls[0].Outcome != OutcomeRunning {
		t.Fatalf("v1 list %+v %v", calls, err)
	}
	c, err := rd.Show(context.Background(), "7")
	if err != nil || c.Prompt != "old prompt" || c.Text != "old answer" || len(c.AttemptsList) != 2 || *c.AttemptsList[0].RetryAfter != 2*time.Second {
		t.Fatalf("v1 show %+v %v", c, err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("a read changed the file")
	}

	// The first write migrates.
	recordAll(t, path, SessionInfo{Version: "v2"}, okSpec("new", t0.Add(time.Hour)))
	err = view(path, time.Second, func(tx *bolt.Tx) error {
		if v, _ := binary.Uvarint(tx.Bucket(bMeta).Get(metaSchema)); v != SchemaVersion {
			t.Errorf("schema %d after migration", v)
		}
		return tx.Bucket(bCalls).ForEach(func(k, v []byte) error {
			if v[0] != SchemaVersion {
				t.Errorf("call %x still v%d", k, v[0])
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err = rd.Show(context.Background(), "7")
	if err != nil || c.CallID != "old-1" || c.Prompt != "old prompt" || c.Text != "old answer" || c.Attempts != 2 ||
		c.Waited != 2100*time.Millisecond || c.TTFT != 150*time.Millisecond || c.AttemptsList[0].PartialText != "ol" ||
		!reflect.DeepEqual(c.Classes, []stream.Class{stream.ClassOK, stream.ClassRateLimit}) || c.ServedBy.Model != "gpt-4o-2024" {
		t.Fatalf("migrated %+v %v", c, err)
	}
	calls, _ = rd.List(context.Background(), Filter{})
	if len(calls) != 3 || calls[0].ID != 10 {
		t.Fatalf("ids continue after the old ones: %+v", calls)
	}
	sess, _ := rd.Sessions(context.Background(), 0)
	if len(sess) != 2 || sess[1].Version != "v0.1" {
		t.Fatalf("sessions %+v", sess)
	}
}

func writeSchema(t *testing.T, path string, schema uint64) {
	t.Helper()
	recordAll(t, path, SessionInfo{}, okSpec("a", t0))
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bMeta).Put(metaSchema, binary.AppendUvarint(nil, schema))
	})
	_ = db.Close()
}

func TestNewerFileRefusedUntouched(t *testing.T) {
	path := tempDB(t)
	writeSchema(t, path, SchemaVersion+1)
	before, _ := os.ReadFile(path)
	_, err := (&Reader{Path: path}).List(context.Background(), Filter{})
	if !errors.Is(err, ErrNewer) || !strings.Contains(err.Error(), "newer limitscope") || !strings.Contains(err.Error(), path) {
		t.Fatalf("list: %v", err)
	}
	r := NewRecorder(path, SessionInfo{}, Options{Retention: -1})
	c, evs := okSpec("b", t0).events()
	for _, ev := range evs {
		r.Sink(c, nil)(ev)
	}
	if err := r.Flush(context.Background()); !errors.Is(err, ErrNewer) {
		t.Fatalf("flush: %v", err)
	}
	if err := r.Close(context.Background()); err == nil || r.Pending() == 0 {
		t.Fatalf("close should report the unsaved events: %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("newer file changed")
	}
}

func TestLockedFileWarnsOnceAndLosesNothing(t *testing.T) {
	path := tempDB(t)
	recordAll(t, path, SessionInfo{}, okSpec("first", t0))
	holder, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var warns atomic.Int32
	var warnErr atomic.Value
	r := NewRecorder(path, SessionInfo{}, Options{Retention: -1, LockTimeout: 100 * time.Millisecond, RetryDelay: time.Hour,
		OnWarn: func(err error) { warns.Add(1); warnErr.Store(err) }})
	for i := range 3 {
		c, evs := okSpec("locked"+itoa(uint32(i)), t0.Add(time.Duration(i+1)*time.Minute)).events()
		sink := r.Sink(c, nil)
		for _, ev := range evs {
			sink(ev)
		}
		if err := r.Flush(context.Background()); !errors.Is(err, ErrLocked) {
			t.Fatalf("flush %d: %v", i, err)
		}
	}
	if warns.Load() != 1 {
		t.Fatalf("warned %d times", warns.Load())
	}
	if msg := warnErr.Load().(error).Error(); !strings.Contains(msg, "locked by another limitscope process") {
		t.Fatalf("warning %q", msg)
	}
	if r.Pending() == 0 {
		t.Fatal("events dropped")
	}
	// Readers wait too, with the same clear error.
	if _, err := (&Reader{Path: path, LockTimeout: 100 * time.Millisecond}).List(context.Background(), Filter{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("reader: %v", err)
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatalf("close after unlock: %v", err)
	}
	calls, err := (&Reader{Path: path}).List(context.Background(), Filter{})
	if err != nil || len(calls) != 4 {
		t.Fatalf("calls %d %v", len(calls), err)
	}
	for _, c := range calls {
		if c.Outcome != retry.OutcomeOK || c.Attempts != 1 {
			t.Fatalf("incomplete call %+v", c)
		}
	}
}

func TestCorruptAndForeignFilesRefusedUntouched(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	_ = os.WriteFile(garbage, bytes.Repeat([]byte("not a database\n"), 2000), 0o600)

	brokenMeta := filepath.Join(dir, "broken.db")
	recordAll(t, brokenMeta, SessionInfo{}, okSpec("a", t0))
	raw, _ := os.ReadFile(brokenMeta)
	for _, off := range []int{16, 4096 + 16} { // both meta pages' magic
		raw[off] ^= 0xff
	}
	_ = os.WriteFile(brokenMeta, raw, 0o600)

	foreign := filepath.Join(dir, "foreign.db")
	db, _ := bolt.Open(foreign, 0o600, nil)
	_ = db.Update(func(tx *bolt.Tx) error {
		b, _ := tx.CreateBucket([]byte("widgets"))
		return b.Put([]byte("k"), []byte("v"))
	})
	_ = db.Close()

	short := filepath.Join(dir, "short.db")
	_ = os.WriteFile(short, []byte("x"), 0o600)

	for _, c := range []struct {
		path string
		kind error
	}{{garbage, ErrCorrupt}, {brokenMeta, ErrCorrupt}, {foreign, ErrForeign}, {short, ErrCorrupt}} {
		before, _ := os.ReadFile(c.path)
		_, err := (&Reader{Path: c.path}).List(context.Background(), Filter{})
		if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), "left untouched") {
			t.Errorf("%s list: %v", c.path, err)
		}
		r := NewRecorder(c.path, SessionInfo{}, Options{Retention: -1})
		call, evs := okSpec("x", t0).events()
		for _, ev := range evs {
			r.Sink(call, nil)(ev)
		}
		if err := r.Flush(context.Background()); !errors.Is(err, c.kind) {
			t.Errorf("%s flush: %v", c.path, err)
		}
		_ = r.Close(context.Background())
		if err := NewCooldowns(c.path, Options{}).Set(retry.Cooldown{Scope: "s"}); !errors.Is(err, c.kind) {
			t.Errorf("%s cooldown: %v", c.path, err)
		}
		if _, err := Prune(context.Background(), c.path, time.Hour, t0.AddDate(1, 0, 0), time.Second); !errors.Is(err, c.kind) {
			t.Errorf("%s prune: %v", c.path, err)
		}
		if after, _ := os.ReadFile(c.path); !bytes.Equal(before, after) {
			t.Errorf("%s changed", c.path)
		}
	}
	// Repair refuses what is not a bbolt file, and a healthy foreign one.
	for _, p := range []string{garbage, foreign} {
		before, _ := os.ReadFile(p)
		if _, err := Repair(context.Background(), p, t0, time.Second); !errors.Is(err, ErrForeign) {
			t.Errorf("repair %s: %v", p, err)
		}
		if after, _ := os.ReadFile(p); !bytes.Equal(before, after) {
			t.Errorf("%s changed by repair", p)
		}
	}
}

func TestRepairCopiesWhatIsReadable(t *testing.T) {
	path := tempDB(t)
	var specs []spec
	for i := range 300 {
		s := okSpec("c"+itoa(uint32(i)), t0.Add(time.Duration(i)*time.Second))
		s.text = strings.Repeat("answer ", 50)
		specs = append(specs, s)
	}
	recordAll(t, path, SessionInfo{}, specs...)
	raw, _ := os.ReadFile(path)
	// Break both meta pages: the file cannot be opened at all.
	for _, off := range []int{16, 4096 + 16} {
		raw[off+20] ^= 0xff // inside the meta: its checksum fails
	}
	_ = os.WriteFile(path, raw, 0o600)
	if _, err := (&Reader{Path: path}).List(context.Background(), Filter{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt not detected: %v", err)
	}
	res, err := Repair(context.Background(), path, t0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	kept, _ := os.ReadFile(res.Kept)
	if !bytes.Equal(kept, raw) {
		t.Fatal("old file not kept byte-identical")
	}
	calls, err := (&Reader{Path: path}).List(context.Background(), Filter{})
	if err != nil {
		t.Fatalf("repaired file: %v", err)
	}
	if len(calls) != 300 || calls[0].ID != 300 {
		t.Fatalf("salvage found %d calls (copied %v, problems %v)", len(calls), res.Copied, res.Problems)
	}
	c150, err := (&Reader{Path: path}).Show(context.Background(), "150")
	if err != nil || c150.Text != specs[149].text || c150.Prompt != specs[149].prompt || len(c150.AttemptsList) != 1 {
		t.Fatalf("salvaged call %+v %v", c150, err)
	}

	// A file with a damaged data page: the rest is copied.
	path2 := tempDB(t)
	recordAll(t, path2, SessionInfo{}, specs...)
	raw2, _ := os.ReadFile(path2)
	db, _ := bolt.Open(path2, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	var leaf uint64
	_ = db.View(func(tx *bolt.Tx) error {
		// Find the text bucket's first leaf page through page info.
		c := tx.Bucket(bText).Cursor()
		c.First()
		for id := 2; id < len(raw2)/4096; id++ {
			p, _ := tx.Page(id)
			if p != nil && p.Type == "leaf" && bytes.Contains(raw2[id*4096:id*4096+4096], []byte("answer answer")) {
				leaf = uint64(id)
				return nil
			}
		}
		return nil
	})
	_ = db.Close()
	if leaf == 0 {
		t.Fatal("no text leaf found")
	}
	for i := 0; i < 16; i++ {
		raw2[int(leaf)*4096+i] = 0xee // the page header: bbolt panics on it
	}
	_ = os.WriteFile(path2, raw2, 0o600)
	if _, err := (&Reader{Path: path2}).Show(context.Background(), "150"); err == nil {
		t.Log("show did not hit the damaged page")
	}
	res, err = Repair(context.Background(), path2, t0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if kept, _ := os.ReadFile(res.Kept); !bytes.Equal(kept, raw2) {
		t.Fatal("old file changed")
	}
	t.Logf("repair of a damaged page: copied %v skipped %v salvaged %v problems %v", res.Copied, res.Skipped, res.Salvaged, res.Problems)
	calls, err = (&Reader{Path: path2}).List(context.Background(), Filter{})
	if err != nil || len(calls) != 300 {
		t.Fatalf("repaired calls %d %v (copied %v skipped %v problems %v)", len(calls), err, res.Copied, res.Skipped, res.Problems)
	}
	// The repaired file takes new records.
	recordAll(t, path2, SessionInfo{}, okSpec("after", t0.Add(time.Hour)))
	calls, _ = (&Reader{Path: path2}).List(context.Background(), Filter{Limit: 1})
	if len(calls) != 1 || calls[0].ID != 301 {
		t.Fatalf("after repair %+v", calls)
	}
}

func TestNoCredentialInFile(t *testing.T) {
	clearEnv(t)
	const key = "sk-proj-TESTKEY1234567890abcdefSECRET"
	t.Setenv("OPENAI_API_KEY", key)
	ep, err := stream.Resolve("openai", os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	path := tempDB(t)
	s := spec{id: "k", start: t0, chain: []stream.Target{tOpenAI}, classes: []stream.Class{stream.ClassQuota}, outcome: retry.OutcomeStopped, prompt: "hello"}
	recordAll(t, path, SessionInfo{}, s)
	cd := NewCooldowns(path, Options{})
	if err := cd.Set(retry.Cooldown{Scope: "openai:" + ep.Key.Fingerprint(), Since: t0, Code: "insufficient_quota"}); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if bytes.Contains(raw, []byte(key)) || bytes.Contains(raw, []byte("TESTKEY")) {
		t.Fatal("the key is in the history file")
	}
	if !bytes.Contains(raw, []byte(ep.Key.Fingerprint())) {
		t.Fatal("fingerprint expected in the cooldown")
	}
}

func TestCooldownsPersist(t *testing.T) {
	path := tempDB(t)
	var cd retry.Cooldowns = NewCooldowns(path, Options{})
	if _, ok, err := cd.Get("none"); ok || err != nil {
		t.Fatalf("get on missing file: %v %v", ok, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a read created the file")
	}
	for _, s := range []string{"b", "a", "c"} {
		if err := cd.Set(retry.Cooldown{Scope: s, Since: t0, Until: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	other := NewCooldowns(path, Options{})
	list, err := other.List()
	if err != nil || len(list) != 3 || list[0].Scope != "a" || list[2].Scope != "c" {
		t.Fatalf("list %+v %v", list, err)
	}
	if err := other.Clear("b"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := NewCooldowns(path, Options{}).Get("b"); ok {
		t.Fatal("cleared cooldown still there")
	}
	n, err := NewCooldowns(path, Options{}).ClearAll()
	if err != nil || n != 2 {
		t.Fatalf("clear all %d %v", n, err)
	}
	if list, _ := cd.List(); len(list) != 0 {
		t.Fatalf("after clear all: %+v", list)
	}
}

func TestCooldownsKeptInMemoryWhenLocked(t *testing.T) {
	path := tempDB(t)
	recordAll(t, path, SessionInfo{}, okSpec("a", t0))
	holder, _ := bolt.Open(path, 0o600, nil)
	cd := NewCooldowns(path, Options{LockTimeout: 60 * time.Millisecond})
	if err := cd.Set(retry.Cooldown{Scope: "s", Since: t0}); !errors.Is(err, ErrLocked) {
		t.Fatalf("set: %v", err)
	}
	if _, ok, err := cd.Get("s"); !ok || err != nil {
		t.Fatalf("get from memory %v %v", ok, err)
	}
	_ = holder.Close()
	if err := cd.Set(retry.Cooldown{Scope: "t", Since: t0}); err != nil {
		t.Fatal(err)
	}
	list, _ := NewCooldowns(path, Options{}).List()
	if len(list) != 2 {
		t.Fatalf("pending cooldown not written: %+v", list)
	}
}

func TestPruneAndCompact(t *testing.T) {
	path := tempDB(t)
	var specs []spec
	for i := range 200 {
		s := okSpec("c"+itoa(uint32(i)), t0.Add(time.Duration(i)*24*time.Hour))
		s.text = strings.Repeat("x", 2000)
		specs = append(specs, s)
	}
	recordAll(t, path, SessionInfo{}, specs...)
	now := t0.Add(200 * 24 * time.Hour)
	n, err := Prune(context.Background(), path, 90*24*time.Hour, now, time.Second)
	if err != nil || n != 110 {
		t.Fatalf("pruned %d %v", n, err)
	}
	rd := &Reader{Path: path}
	calls, _ := rd.List(context.Background(), Filter{})
	if len(calls) != 90 || calls[len(calls)-1].ID != 111 {
		t.Fatalf("left %d calls, oldest %d", len(calls), calls[len(calls)-1].ID)
	}
	err = view(path, time.Second, func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bAttempts, bText, bIDs} {
			if got := tx.Bucket(b).Stats().KeyN; got != 90 && !(bytes.Equal(b, bText) && got == 180) {
				t.Errorf("bucket %s has %d keys", b, got)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Compact(context.Background(), path, time.Second)
	if err != nil || res.After >= res.Before {
		t.Fatalf("compact %+v %v", res, err)
	}
	calls, _ = rd.List(context.Background(), Filter{})
	if len(calls) != 90 {
		t.Fatalf("after compact %d", len(calls))
	}
	recordAll(t, path, SessionInfo{}, okSpec("new", now))
	calls, _ = rd.List(context.Background(), Filter{Limit: 1})
	if calls[0].ID != 201 {
		t.Fatalf("sequence lost in compaction: %d", calls[0].ID)
	}
}

func TestConcurrentRecordingNoneLostNoneDoubled(t *testing.T) {
	path := tempDB(t)
	r := NewRecorder(path, SessionInfo{Command: "bench"}, Options{Retention: -1})
	const workers, per = 16, 40
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				s := spec{id: "w" + itoa(uint32(w)) + "-" + itoa(uint32(i)), start: t0.Add(time.Duration(w*per+i) * time.Millisecond),
					chain: []stream.Target{tOpenAI, tGemini}, classes: []stream.Class{stream.ClassOverload, stream.ClassOK}, outcome: retry.OutcomeOK, wait: time.Millisecond}
				c, evs := s.events()
				sink := r.Sink(c, nil)
				for _, ev := range evs {
					sink(ev)
				}
				if i%10 == 0 {
					if err := r.Flush(context.Background()); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	calls, err := (&Reader{Path: path}).List(context.Background(), Filter{})
	if err != nil || len(calls) != workers*per {
		t.Fatalf("%d calls %v", len(calls), err)
	}
	seen := map[uint32]bool{}
	for _, c := range calls {
		if seen[c.ID] || c.Attempts != 2 || c.Outcome != retry.OutcomeOK {
			t.Fatalf("bad call %+v", c)
		}
		seen[c.ID] = true
	}
	sess, _ := (&Reader{Path: path}).Sessions(context.Background(), 0)
	if len(sess) != 1 {
		t.Fatalf("sessions %d", len(sess))
	}
}

func TestCallDurableAtItsEnd(t *testing.T) {
	// A call's end is committed without waiting for the batch delay.
	path := tempDB(t)
	r := NewRecorder(path, SessionInfo{}, Options{Retention: -1, BatchDelay: time.Hour})
	defer r.Close(context.Background())
	c, evs := okSpec("a", t0).events()
	done := make(chan struct{})
	sink := r.Sink(c, nil)
	for _, ev := range evs[:len(evs)-1] {
		sink(ev)
	}
	go func() {
		defer close(done)
		for r.Pending() > 0 {
			time.Sleep(time.Millisecond)
		}
	}()
	sink(evs[len(evs)-1])
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("call end not committed")
	}
	calls, _ := (&Reader{Path: path}).List(context.Background(), Filter{})
	if len(calls) != 1 || calls[0].Outcome != retry.OutcomeOK {
		t.Fatalf("%+v", calls)
	}
}

func TestRunningCallVisible(t *testing.T) {
	path := tempDB(t)
	r := NewRecorder(path, SessionInfo{}, Options{Retention: -1})
	s := spec{id: "long", start: t0, chain: []stream.Target{tOpenAI}, classes: []stream.Class{stream.ClassRateLimit, stream.ClassOK}, outcome: retry.OutcomeOK, wait: time.Minute}
	c, evs := s.events()
	sink := r.Sink(c, nil)
	for _, ev := range evs[:5] { // start, attempt 1, its end, the wait
		sink(ev)
	}
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := (&Reader{Path: path}).Show(context.Background(), "1")
	if err != nil || got.Outcome != OutcomeRunning || len(got.AttemptsList) != 1 || got.Prompt != "" && got.Prompt != s.prompt {
		t.Fatalf("running %+v %v", got, err)
	}
	for _, ev := range evs[5:] {
		sink(ev)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ = (&Reader{Path: path}).Show(context.Background(), "1")
	if got.Outcome != retry.OutcomeOK || len(got.AttemptsList) != 2 || got.AttemptsList[0].Waited != time.Minute {
		t.Fatalf("ended %+v", got)
	}
}

func TestDefaultPath(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cases := []struct {
		m    map[string]string
		want string
	}{
		{map[string]string{"LIMITSCOPE_DB": "/x/h.db", "XDG_STATE_HOME": "/s", "HOME": "/h"}, "/x/h.db"},
		{map[string]string{"XDG_STATE_HOME": "/s", "HOME": "/h"}, "/s/limitscope/history.db"},
		{map[string]string{"XDG_STATE_HOME": "relative", "HOME": "/h"}, "/h/.local/state/limitscope/history.db"},
		{map[string]string{"HOME": "/h"}, "/h/.local/state/limitscope/history.db"},
	}
	for _, c := range cases {
		got, err := DefaultPath(env(c.m))
		if err != nil || got != c.want {
			t.Errorf("%v: %q %v", c.m, got, err)
		}
	}
	if _, err := DefaultPath(env(nil)); err == nil {
		t.Error("no HOME: want an error")
	}
	p, _ := ResolvePaths(env(map[string]string{"HOME": "/h", "XDG_CONFIG_HOME": "/c"}))
	if p.ConfigDir != "/c/limitscope" || p.StateDir != "/h/.local/state/limitscope" {
		t.Errorf("%+v", p)
	}
}

func TestCooldownGetIsCached(t *testing.T) {
	path := tempDB(t)
	writer := NewCooldowns(path, Options{})
	if err := writer.Set(retry.Cooldown{Scope: "s", Since: t0}); err != nil {
		t.Fatal(err)
	}
	cached := NewCooldowns(path, Options{CooldownCache: time.Hour})
	fresh := NewCooldowns(path, Options{CooldownCache: -1})
	for _, c := range []*Cooldowns{cached, fresh} {
		if _, ok, err := c.Get("s"); !ok || err != nil {
			t.Fatalf("get: %v %v", ok, err)
		}
	}
	if err := writer.Clear("s"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := cached.Get("s"); !ok {
		t.Fatal("the cache should answer within its age")
	}
	if _, ok, _ := fresh.Get("s"); ok {
		t.Fatal("an uncached reader sees the clear at once")
	}
	// Without the file being opened: remove it and the cache still answers.
	_ = os.Remove(path)
	if _, ok, err := cached.Get("s"); !ok || err != nil {
		t.Fatalf("cached get opened the file: %v %v", ok, err)
	}
}

func TestRetentionRunsInTheBackgroundAfterADelay(t *testing.T) {
	path := tempDB(t)
	var specs []spec
	for i := range 12 {
		specs = append(specs, okSpec("c"+itoa(uint32(i)), t0.Add(time.Duration(i)*24*time.Hour)))
	}
	recordAll(t, path, SessionInfo{}, specs...)
	now := t0.Add(15 * 24 * time.Hour) // calls 0..4 are older than 10 days
	rd := &Reader{Path: path}
	synctest.Test(t, func(t *testing.T) {
		r := NewRecorder(path, SessionInfo{}, Options{Retention: 10 * 24 * time.Hour, RetentionDelay: 10 * time.Second, Now: func() time.Time { return now }})
		defer r.Close(context.Background())
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if calls, _ := rd.List(context.Background(), Filter{}); len(calls) != 12 {
			t.Fatalf("pruned before the delay: %d calls", len(calls))
		}
		time.Sleep(6 * time.Second)
		synctest.Wait()
		calls, err := rd.List(context.Background(), Filter{})
		if err != nil || len(calls) != 7 || calls[len(calls)-1].ID != 6 {
			t.Fatalf("after retention: %d calls %v", len(calls), err)
		}
	})
}

func TestReusedCallIDMakesANewRecord(t *testing.T) {
	path := tempDB(t)
	a, b := okSpec("same", t0), okSpec("same", t0.Add(time.Minute))
	b.text = "second"
	recordAll(t, path, SessionInfo{}, a, b) // one batch
	recordAll(t, path, SessionInfo{}, okSpec("same", t0.Add(2*time.Minute)))
	calls, err := (&Reader{Path: path}).List(context.Background(), Filter{})
	if err != nil || len(calls) != 3 {
		t.Fatalf("%d calls %v", len(calls), err)
	}
	c, _ := (&Reader{Path: path}).Show(context.Background(), "2")
	if c.Text != "second" || c.Attempts != 1 {
		t.Fatalf("%+v", c)
	}
}

func TestWritesDuringCompactionAreKept(t *testing.T) {
	path := tempDB(t)
	recordAll(t, path, SessionInfo{}, okSpec("seed", t0))
	r := NewRecorder(path, SessionInfo{}, Options{Retention: -1})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 150 {
			c, evs := okSpec("w"+itoa(uint32(i)), t0.Add(time.Duration(i+1)*time.Second)).events()
			sink := r.Sink(c, nil)
			for _, ev := range evs {
				sink(ev)
			}
			// Back-to-back compactions can keep the file replaced for a
			// while on a loaded machine: that is reported as locked and the
			// events stay queued, as for any lock. Nothing may be lost.
			if err := r.Flush(context.Background()); err != nil && !errors.Is(err, ErrLocked) {
				t.Error(err)
				return
			}
		}
	}()
	compactions := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			if compactions >= 60 {
				<-done
				running = false
				continue
			}
			if _, err := Compact(context.Background(), path, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			compactions++
		}
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	calls, err := (&Reader{Path: path}).List(context.Background(), Filter{})
	if err != nil || len(calls) != 151 {
		t.Fatalf("%d calls after %d compactions: %v", len(calls), compactions, err)
	}
	t.Logf("%d compactions while writing", compactions)
}

func TestEachReadsInChunks(t *testing.T) {
	path := tempDB(t)
	var specs []spec
	for i := range 4500 {
		specs = append(specs, okSpec("e"+itoa(uint32(i)), t0.Add(time.Duration(i)*time.Second)))
	}
	recordAll(t, path, SessionInfo{}, specs...)
	rd := &Reader{Path: path}
	var ids []uint32
	err := rd.Each(context.Background(), Filter{}, false, func(c *Call) error {
		if c.Text != "answer "+c.CallID || len(c.AttemptsList) != 1 {
			t.Fatalf("call %+v", c)
		}
		ids = append(ids, c.ID)
		return nil
	})
	if err != nil || len(ids) != 4500 {
		t.Fatalf("%d calls %v", len(ids), err)
	}
	for i, id := range ids {
		if id != uint32(i+1) {
			t.Fatalf("order broken at %d: %d", i, id)
		}
	}
	n := 0
	_ = rd.Each(context.Background(), Filter{Since: t0.Add(2500 * time.Second), Limit: 2100}, true, func(c *Call) error {
		if n == 0 && c.ID != 2501 || c.Text != "" {
			t.Fatalf("since/noText: %+v", c)
		}
		n++
		return nil
	})
	if n != 2000 {
		t.Fatalf("since and limit: %d", n)
	}
}

func TestKeyShapedTextInMessagesIsRedacted(t *testing.T) {
	path := tempDB(t)
	keys := []string{"sk-proj-AbCdEfGhIjKlMnOpQrStUv0123", "sk-ant-api03-AbCdEfGhIjKlMnOpQrSt", "AIzaSyAbCdEfGhIjKlMnOpQrStUvWxYz0123456",
		"gsk_AbCdEfGhIjKlMnOpQrStUv", "xai-AbCdEfGhIjKlMnOpQrStUv"}
	s := spec{id: "r", start: t0, chain: []stream.Target{tOpenAI}, classes: []stream.Class{stream.ClassCaller}, outcome: retry.OutcomeFailed}
	c, evs := s.events()
	msg := "Incorrect API key provided: " + strings.Join(keys, ", ") + " (GET https://x.test/v1?alt=sse&key=SECRETVALUE123; Authorization: Bearer abcdefghijklmnopqrstuvwxyz)"
	for _, ev := range evs {
		if ev.Attempt != nil {
			ev.Attempt.Message = msg
		}
		if ev.Result != nil {
			ev.Result.Attempts[0].Message = msg
			ev.Result.Err.Message = msg
		}
	}
	r := NewRecorder(path, SessionInfo{}, Options{Retention: -1})
	sink := r.Sink(c, nil)
	for _, ev := range evs {
		sink(ev)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := NewCooldowns(path, Options{}).Set(retry.Cooldown{Scope: "x", Message: msg}); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	for _, k := range append(keys, "SECRETVALUE123", "abcdefghijklmnopqrstuvwxyz") {
		if bytes.Contains(raw, []byte(k)) {
			t.Errorf("%s stored", k)
		}
	}
	got, _ := (&Reader{Path: path}).Show(context.Background(), "1")
	if !strings.Contains(got.AttemptsList[0].Message, "Incorrect API key provided: [redacted]") || !strings.Contains(got.Err.Message, "key=[redacted]") {
		t.Fatalf("message %q / %q", got.AttemptsList[0].Message, got.Err.Message)
	}
}

func TestCooldownGetAnswersFromTheLastReadWhileLocked(t *testing.T) {
	path := tempDB(t)
	if err := NewCooldowns(path, Options{}).Set(retry.Cooldown{Scope: "s", Since: t0}); err != nil {
		t.Fatal(err)
	}
	cd := NewCooldowns(path, Options{CooldownCache: time.Nanosecond, LockTimeout: 60 * time.Millisecond})
	if _, ok, err := cd.Get("s"); !ok || err != nil {
		t.Fatalf("%v %v", ok, err)
	}
	holder, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, ok, err := cd.Get("s"); !ok || err != nil {
		t.Fatalf("while locked: %v %v", ok, err)
	}
	if _, _, err := NewCooldowns(path, Options{LockTimeout: 60 * time.Millisecond}).Get("s"); !errors.Is(err, ErrLocked) {
		t.Fatalf("no snapshot yet: want the lock error, got %v", err)
	}
}

func TestRecordCallAndTextFilter(t *testing.T) {
	path := tempDB(t)
	r := NewRecorder(path, SessionInfo{}, Options{Retention: -1})
	for _, s := range []spec{okSpec("a", t0), okSpec("b", t0.Add(time.Second), tGemini)} {
		c, evs := s.events()
		c.Prompt = "Explain ünïcode and the sky " + s.id
		r.RecordCall(c) // as the TUI does, instead of Sink
		for _, ev := range evs {
			r.Record(ev)
		}
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rd := &Reader{Path: path}
	got, err := rd.Show(context.Background(), "1")
	if err != nil || got.Prompt != "Explain ünïcode and the sky a" || got.Policy != retry.DefaultPolicy() {
		t.Fatalf("RecordCall lost the call: %+v %v", got, err)
	}
	calls, err := rd.List(context.Background(), Filter{PromptHead: 10})
	if err != nil || len(calls) != 2 || calls[0].Prompt != "Explain ü" {
		t.Fatalf("prompt head: %+v %v", calls, err)
	}
	for text, want := range map[string]int{"SKY B": 1, "gemini": 1, "ok": 2, "nothing": 0, "ünï": 2} {
		calls, _ := rd.List(context.Background(), Filter{Text: text})
		if len(calls) != want {
			t.Errorf("text %q: %d calls, want %d", text, len(calls), want)
		}
	}
}

func TestWaitsOf(t *testing.T) {
	ra := 2 * time.Second
	ws := WaitsOf([]retry.Attempt{
		{N: 1, Target: tOpenAI, Paced: time.Second, Waited: 2100 * time.Millisecond, RetryAfter: &ra, DelaySource: stream.SourceRetryAfter},
		{N: 2, Target: tOpenAI, Waited: 700 * time.Millisecond, DelaySource: stream.SourceBackoff, Class: stream.ClassOverload},
		{N: 3, Target: tGemini},
	})
	if len(ws) != 3 || !ws[0].Pacing || ws[1].Asked != ra || ws[1].Duration != 2100*time.Millisecond || ws[2].Source != stream.SourceBackoff || ws[2].Reason == "" {
		t.Fatalf("%+v", ws)
	}
}

// TestEachReusedMatchesEach: the reused call and attempts give, call for
// call, what fresh ones give, across chunks, with text, several attempts
// and calls that follow a longer one (nothing of a call left in the next).
func TestEachReusedMatchesEach(t *testing.T) {
	path := tempDB(t)
	var specs []spec
	for i := range 4300 {
		switch i % 3 {
		case 0:
			specs = append(specs, heavySpec("h"+itoa(uint32(i)), i))
		case 1:
			specs = append(specs, okSpec("o"+itoa(uint32(i)), t0.Add(time.Duration(i)*time.Millisecond)))
		default:
			specs = append(specs, benchSpec(i))
		}
	}
	recordAll(t, path, SessionInfo{}, specs...)
	rd := &Reader{Path: path}
	for _, noText := range []bool{false, true} {
		var fresh, reused []string
		collect := func(out *[]string) func(*Call) error {
			return func(c *Call) error {
				b, err := json.Marshal(c.ToJSON(!noText))
				*out = append(*out, string(b))
				return err
			}
		}
		if err := rd.Each(context.Background(), Filter{}, noText, collect(&fresh)); err != nil {
			t.Fatal(err)
		}
		if err := rd.EachReused(context.Background(), Filter{}, noText, collect(&reused)); err != nil {
			t.Fatal(err)
		}
		if len(fresh) != 4300 || len(reused) != len(fresh) {
			t.Fatalf("noText %v: %d calls, %d reused", noText, len(fresh), len(reused))
		}
		multi := 0
		for i := range fresh {
			if fresh[i] != reused[i] {
				t.Fatalf("noText %v, call %d:\n fresh  %s\n reused %s", noText, i, fresh[i], reused[i])
			}
			if strings.Count(fresh[i], `"n":`) > 1 {
				multi++
			}
		}
		if multi < 1000 {
			t.Fatalf("only %d calls with several attempts: the test checks too little", multi)
		}
	}
}

// TestFlushCoveredByAnEarlierCommit: a Flush whose events a commit that
// finished first already put on disk returns without a commit of its own
// (the proxy's calls ending together share one), and leaves what was queued
// after it for the next; a Flush with events of its own still commits.
func TestFlushCoveredByAnEarlierCommit(t *testing.T) {
	path := tempDB(t)
	ctx := context.Background()
	// No call's end is queued and the batch waits an hour: the background
	// writer never commits on its own here.
	r := NewRecorder(path, SessionInfo{}, Options{Retention: -1, BatchDelay: time.Hour})
	defer func() { _ = r.Close(ctx) }()
	queue := func(s spec, n int) {
		c, evs := s.events()
		sink := r.Sink(c, nil)
		for _, ev := range evs[:n] {
			if ev.Kind == retry.EventCallEnd {
				t.Fatal("a call's end would wake the background writer")
			}
			sink(ev)
		}
	}
	queue(okSpec("a", t0), 2)
	r.mu.Lock()
	needA := r.enqueued
	r.mu.Unlock()
	if err := r.commit(ctx, time.Second, commitAlways); err != nil || r.Pending() != 0 {
		t.Fatalf("commit a: %v, %d pending", err, r.Pending())
	}
	queue(okSpec("b", t0.Add(time.Second)), 1)
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.commit(ctx, time.Second, needA); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Pending() != 1 || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("a covered flush: %d pending (want b's 1), file modified %v -> %v (want no commit)", r.Pending(), before.ModTime(), after.ModTime())
	}
	if err := r.Flush(ctx); err != nil || r.Pending() != 0 {
		t.Fatalf("b's flush: %v, %d pending", err, r.Pending())
	}
}
