package store

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// Stats read in many small transactions gives the same numbers as in one.
func TestStatsInChunksMatchesOneRead(t *testing.T) {
	path := tempDB(t)
	var specs []spec
	for i := range 101 {
		s := okSpec("c"+itoa(uint32(i)), t0.Add(time.Duration(i)*time.Second), []stream.Target{tOpenAI, tAnthropic, tGemini}[i%3])
		if i%4 == 0 {
			s.classes = []stream.Class{stream.ClassRateLimit, stream.ClassOK}
			s.wait = time.Duration(i) * time.Millisecond
		}
		specs = append(specs, s)
	}
	recordAll(t, path, SessionInfo{}, specs...)
	whole, err := (&Reader{Path: path}).Stats(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, chunk := range []int{1, 7, 100, 101} {
		got, err := (&Reader{Path: path, chunk: chunk}).Stats(context.Background(), Filter{})
		if err != nil || !slices.Equal(got, whole) {
			t.Fatalf("chunks of %d: %+v %v\nwant %+v", chunk, got, err, whole)
		}
	}
	if whole[len(whole)-1].Calls != 101 {
		t.Fatalf("total %+v", whole[len(whole)-1])
	}
}

// Past maxExact values the percentiles come from a fixed-size histogram,
// within 1/128 of the exact ones.
func TestLatencyPercentilesInBoundedMemory(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var l latencies
	var all []time.Duration
	for range 3 * maxExact {
		d := time.Duration(rng.ExpFloat64() * float64(800*time.Millisecond))
		l.add(d)
		all = append(all, d)
	}
	if l.exact != nil || len(l.hist) != histBuckets {
		t.Fatal("did not switch to the histogram")
	}
	slices.Sort(all)
	for _, p := range []float64{0.5, 0.95, 0.99} {
		want, got := percentile(all, p), l.percentile(p)
		if diff := float64(got-want) / float64(want); diff > 1.0/128 || diff < -1.0/128 {
			t.Errorf("p%v: %v, exact %v", p*100, got, want)
		}
	}
	for i := range histBuckets {
		if histIndex(histValue(i)) != i {
			t.Fatalf("bucket %d: value %v falls in %d", i, histValue(i), histIndex(histValue(i)))
		}
	}
}

// Simulated and real calls can be told apart in List, Stats and Each,
// including calls recorded before calls carried their mode.
func TestModeFilter(t *testing.T) {
	path := tempDB(t)
	recordAll(t, path, SessionInfo{Mode: ModeReal}, okSpec("r1", t0), okSpec("r2", t0.Add(time.Second)))
	recordAll(t, path, SessionInfo{Mode: ModeSimulated}, okSpec("s1", t0.Add(2*time.Second)),
		spec{id: "s2", start: t0.Add(3 * time.Second), chain: []stream.Target{tOpenAI}, classes: []stream.Class{stream.ClassServer}, outcome: retry.OutcomeFailed})
	check := func(when string) {
		t.Helper()
		rd := &Reader{Path: path}
		for mode, want := range map[string][]string{ModeReal: {"r1", "r2"}, ModeSimulated: {"s1", "s2"}} {
			calls, err := rd.List(context.Background(), Filter{Mode: mode})
			if err != nil || len(calls) != 2 {
				t.Fatalf("%s: list %s: %d calls %v", when, mode, len(calls), err)
			}
			var ids []string
			if err := rd.Each(context.Background(), Filter{Mode: mode}, true, func(c *Call) error { ids = append(ids, c.CallID); return nil }); err != nil || !slices.Equal(ids, want) {
				t.Fatalf("%s: each %s: %v %v", when, mode, ids, err)
			}
			st, err := rd.Stats(context.Background(), Filter{Mode: mode})
			if err != nil || st[len(st)-1].Calls != 2 {
				t.Fatalf("%s: stats %s: %+v %v", when, mode, st, err)
			}
		}
		if st, _ := rd.Stats(context.Background(), Filter{Mode: ModeSimulated}); st[len(st)-1].Failed != 1 {
			t.Fatalf("%s: simulated stats %+v", when, st)
		}
	}
	check("new records")
	// Records from before calls carried the mode: their session tells.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bCalls)
		var puts [][2][]byte
		_ = b.ForEach(func(k, v []byte) error {
			c, err := decodeCall(k, v, false)
			if err != nil {
				return err
			}
			c.Mode = ""
			puts = append(puts, [2][]byte{slices.Clone(k), encodeCall(c)})
			return nil
		})
		for _, p := range puts {
			if err := b.Put(p[0], p[1]); err != nil {
				return err
			}
		}
		return nil
	})
	_ = db.Close()
	if err != nil {
		t.Fatal(err)
	}
	check("older records")
}
