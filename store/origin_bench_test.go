package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkBuild1MProxied is BenchmarkBuild1M with every call marked as
// proxied (a route and a typical SDK User-Agent), for the bytes each
// attempt then costs on disk.
func BenchmarkBuild1MProxied(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a 1,000,000-attempt file")
	}
	path := filepath.Join(b.TempDir(), "history.db")
	r := NewRecorder(path, SessionInfo{NoContent: true}, Options{Retention: -1, BatchSize: 8192})
	attempts := 0
	for i := 0; attempts < bigAttempts; i++ {
		s := benchSpec(i)
		c, evs := s.events()
		c.Route, c.Client = "fast", "OpenAI/Python 1.99.0"
		sink := r.Sink(c, nil)
		for _, ev := range evs {
			sink(ev)
		}
		attempts += len(s.classes)
		for r.Pending() > 200_000 {
			time.Sleep(time.Millisecond)
		}
	}
	if err := r.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(path)
	var used int64
	db, _ := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	_ = db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil })
	_ = db.Close()
	for b.Loop() {
	}
	b.ReportMetric(float64(fi.Size())/float64(attempts), "file-B/attempt")
	b.ReportMetric(float64(used)/float64(attempts), "used-B/attempt")
}
