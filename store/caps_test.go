package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// A writer holding the file (another handle: flock is per open file) does
// not delay a call's cooldown check: Get answers at once, from the last
// read or with ErrLocked, even with a long lock timeout.
func TestCooldownReadNeverWaitsOnAWriter(t *testing.T) {
	path := tempDB(t)
	cd := NewCooldowns(path, Options{LockTimeout: 30 * time.Second, CooldownCache: -1})
	if err := cd.Set(retry.Cooldown{Scope: "s", Until: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := cd.Get("s"); !ok || err != nil {
		t.Fatalf("first read: %v %v", ok, err)
	}
	holder, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	fresh := NewCooldowns(path, Options{LockTimeout: 30 * time.Second})
	start := time.Now()
	_, ok, err := fresh.Get("s")
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Get waited %s on a locked file", took)
	}
	if ok || !errors.Is(err, ErrLocked) {
		t.Fatalf("with no earlier read: %v %v, want unknown (ErrLocked)", ok, err)
	}
	// One that read before answers from that read.
	start = time.Now()
	c, ok, err := cd.Get("s")
	if took := time.Since(start); took > 5*time.Second || err != nil || !ok || c.Scope != "s" {
		t.Fatalf("Get after a read: %+v %v %v in %s", c, ok, err, took)
	}
}

// A broken stream's partial text is stored up to MaxPartialText bytes.
func TestPartialTextIsCapped(t *testing.T) {
	path := tempDB(t)
	s := spec{id: "big", start: t0, chain: []stream.Target{tOpenAI, tAnthropic},
		classes: []stream.Class{stream.ClassConnection, stream.ClassOK}, outcome: retry.OutcomeOK, prompt: "p", text: "a"}
	c, evs := s.events()
	huge := strings.Repeat("é", MaxPartialText) // 2 MiB of two-byte runes
	for i := range evs {
		if evs[i].Kind == retry.EventAttemptEnd && evs[i].Attempt.N == 1 {
			a := *evs[i].Attempt
			a.PartialText, a.MidStream = huge, true
			evs[i].Attempt = &a
		}
		if evs[i].Kind == retry.EventCallEnd {
			res := *evs[i].Result
			res.Attempts = append([]retry.Attempt(nil), res.Attempts...)
			res.Attempts[0].PartialText = huge
			evs[i].Result = &res
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
	got, err := (&Reader{Path: path}).Show(context.Background(), "big")
	if err != nil {
		t.Fatal(err)
	}
	p := got.AttemptsList[0].PartialText
	if len(p) > MaxPartialText || len(p) < MaxPartialText-1 || !strings.HasPrefix(huge, p) {
		t.Fatalf("stored %d bytes of partial text, want the first %d", len(p), MaxPartialText)
	}
}
