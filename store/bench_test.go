package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// benchSpec is call i of a realistic mix: 60% one attempt, 25% a retry,
// 10% three attempts with a failover, 5% five attempts that give up.
func benchSpec(i int) spec {
	s := spec{id: fmt.Sprintf("call-%08d", i), start: t0.Add(time.Duration(i) * 10 * time.Millisecond), wait: 1500 * time.Millisecond}
	chains := [][]stream.Target{{tOpenAI, tAnthropic}, {tAnthropic, tGemini}, {tGemini, tOpenAI}}
	s.chain = chains[i%3]
	ok, rl, ov := stream.ClassOK, stream.ClassRateLimit, stream.ClassOverload
	switch r := i % 20; {
	case r < 12:
		s.classes, s.outcome = []stream.Class{ok}, retry.OutcomeOK
	case r < 17:
		s.classes, s.outcome = []stream.Class{rl, ok}, retry.OutcomeOK
	case r < 19:
		s.classes, s.outcome = []stream.Class{ov, ov, ok}, retry.OutcomeOK
	default:
		s.classes, s.outcome = []stream.Class{rl, rl, ov, ov, rl}, retry.OutcomeGaveUp
	}
	return s
}

type bigFile struct {
	once     sync.Once
	path     string
	attempts int
	calls    int
	took     time.Duration
	cpu      time.Duration // includes building the events
	err      error
}

var big bigFile // built once per benchmark run

const bigAttempts = 1_000_000

// bigDB builds the 1,000,000-attempt file once, through the Recorder, with
// no prompt or answer text.
func bigDB(b *testing.B) *bigFile {
	if testing.Short() {
		b.Skip("builds a 1,000,000-attempt file")
	}
	big.once.Do(func() {
		dir, err := os.MkdirTemp("", "limitscope-bench-")
		if err != nil {
			big.err = err
			return
		}
		big.path = filepath.Join(dir, "history.db")
		r := NewRecorder(big.path, SessionInfo{NoContent: true}, Options{Retention: -1, BatchSize: 8192})
		start, cpu0 := time.Now(), cpuTime()
		for i := 0; big.attempts < bigAttempts; i++ {
			c, evs := benchSpec(i).events()
			sink := r.Sink(c, nil)
			for _, ev := range evs {
				sink(ev)
			}
			big.attempts += len(benchSpec(i).classes)
			big.calls++
			for r.Pending() > 200_000 { // bound memory, as a real producer would be
				time.Sleep(time.Millisecond)
			}
		}
		big.err = r.Close(context.Background())
		big.took, big.cpu = time.Since(start), cpuTime()-cpu0
	})
	if big.err != nil {
		b.Fatal(big.err)
	}
	return &big
}

func BenchmarkBuild1M(b *testing.B) {
	f := bigDB(b)
	fi, _ := os.Stat(f.path)
	var used int64
	db, _ := bolt.Open(f.path, 0o600, &bolt.Options{ReadOnly: true})
	_ = db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil })
	_ = db.Close()
	for b.Loop() {
	}
	b.ReportMetric(float64(f.attempts)/f.took.Seconds(), "attempts/s")
	b.ReportMetric(float64(f.attempts)/f.cpu.Seconds(), "attempts/cpu-s")
	b.ReportMetric(float64(fi.Size())/float64(f.attempts), "file-B/attempt")
	b.ReportMetric(float64(used)/float64(f.attempts), "used-B/attempt")
	b.ReportMetric(float64(f.calls), "calls")
}

// BenchmarkIngest records calls through the Recorder as fast as the engine
// could hand them over, committing in batches (and at call ends).
func BenchmarkIngest(b *testing.B) {
	path := filepath.Join(b.TempDir(), "h.db")
	type call struct {
		c   retry.Call
		evs []retry.Event
		n   int
	}
	var calls []call
	for i := range 20000 {
		s := benchSpec(i)
		c, evs := s.events()
		calls = append(calls, call{c, evs, len(s.classes)})
	}
	r := NewRecorder(path, SessionInfo{NoContent: true}, Options{Retention: -1})
	attempts := 0
	cpu0 := cpuTime()
	start := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := calls[i%len(calls)]
		sink := r.Sink(c.c, nil)
		id := strconv.Itoa(i)
		for _, ev := range c.evs {
			ev.CallID = id
			sink(ev)
		}
		attempts += c.n
	}
	if err := r.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	// Until the last event is committed, not just queued.
	b.ReportMetric(float64(attempts)/time.Since(start).Seconds(), "attempts/s")
	// On a loaded machine the wall clock says little: CPU seconds (both
	// sides, the caller's Record and the writer) per attempt.
	b.ReportMetric(float64(attempts)/(cpuTime()-cpu0).Seconds(), "attempts/cpu-s")
	_ = r.Close(context.Background())
}

// BenchmarkCallDurable is the time from a call's end event to its records
// being committed (fsynced), on the 1,000,000-attempt file.
func BenchmarkCallDurable(b *testing.B) {
	f := bigDB(b)
	r := NewRecorder(f.path, SessionInfo{}, Options{Retention: -1})
	defer r.Close(context.Background())
	var total time.Duration
	var each []time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		s := benchSpec(i)
		s.id = fmt.Sprintf("durable-%d", i)
		c, evs := s.events()
		sink := r.Sink(c, nil)
		for _, ev := range evs[:len(evs)-1] {
			sink(ev)
		}
		if err := r.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		sink(evs[len(evs)-1]) // the call's end: committed at once, not after BatchDelay
		if err := r.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		total += d
		each = append(each, d)
	}
	slices.Sort(each)
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/durable-mean")
	b.ReportMetric(float64(each[len(each)/2].Microseconds())/1000, "ms/durable-p50")
	b.ReportMetric(float64(each[len(each)*95/100].Microseconds())/1000, "ms/durable-p95")
}

func BenchmarkOpen1M(b *testing.B) {
	f := bigDB(b)
	for b.Loop() {
		db, err := openDB(f.path, false, time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if err := db.View(func(tx *bolt.Tx) error { _, _, err := fileSchema(tx, f.path); return err }); err != nil {
			b.Fatal(err)
		}
		_ = db.Close()
	}
}

func BenchmarkOpenWrite1M(b *testing.B) {
	f := bigDB(b)
	for b.Loop() {
		db, err := openDB(f.path, true, time.Second)
		if err != nil {
			b.Fatal(err)
		}
		_ = db.Close()
	}
}

func BenchmarkListNewest1000of1M(b *testing.B) {
	f := bigDB(b)
	rd := &Reader{Path: f.path}
	for b.Loop() {
		calls, err := rd.List(context.Background(), Filter{Limit: 1000})
		if err != nil || len(calls) != 1000 {
			b.Fatal(len(calls), err)
		}
	}
}

func BenchmarkStats1M(b *testing.B) {
	f := bigDB(b)
	rd := &Reader{Path: f.path}
	for b.Loop() {
		st, err := rd.Stats(context.Background(), Filter{})
		if err != nil || st[len(st)-1].Calls < f.calls {
			b.Fatal(err)
		}
	}
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
