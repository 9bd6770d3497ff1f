package store

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/limitscope/limitscope/retry"
)

const contendEnv = "LIMITSCOPE_STORE_TEST_CONTEND"

// contendChild is one `send`: it records one call with a 2 MB prompt and
// closes its recorder with the 10 s history_hook allows, printing "saved"
// or "lost N: ERROR".
func contendChild(path string) {
	id := os.Getenv(contendEnv + "_ID")
	r := NewRecorder(path, SessionInfo{Command: "send", Mode: ModeReal}, Options{Retention: -1})
	s := okSpec(id, t0)
	s.prompt = strings.Repeat("p", 2<<20)
	c, evs := s.events()
	sink := r.Sink(c, nil)
	for _, ev := range evs {
		sink(ev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		fmt.Printf("lost %d: %v\n", r.Pending(), err)
		return
	}
	fmt.Println("saved")
}

// Many processes closing their recorders at once on one file, each with a
// 2 MB prompt (flock is per open file, so only separate processes contend
// as `send`s do): every call lands, none is left running.
func TestContendedWritersLoseNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes")
	}
	const n = 40
	path := tempDB(t)
	var wg sync.WaitGroup
	outs := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), contendEnv+"="+path, fmt.Sprintf("%s_ID=w%d", contendEnv, i))
			out, err := cmd.CombinedOutput()
			outs[i] = strings.TrimSpace(string(out))
			if err != nil {
				outs[i] += " (" + err.Error() + ")"
			}
		}()
	}
	wg.Wait()
	lost := 0
	for i, o := range outs {
		if o != "saved" {
			lost++
			t.Errorf("writer %d: %s", i, o)
		}
	}
	rd := &Reader{Path: path, LockTimeout: 10 * time.Second}
	calls, err := rd.List(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, c := range calls {
		if c.Outcome != retry.OutcomeOK {
			running++
		}
	}
	sessions, err := rd.Sessions(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	open := 0
	for _, s := range sessions {
		if s.Ended.IsZero() {
			open++
		}
	}
	if lost > 0 || len(calls) != n || running > 0 || len(sessions) != n || open > 0 {
		t.Fatalf("%d writers: %d reported lost, %d calls stored, %d not ended, %d sessions, %d never ended", n, lost, len(calls), running, len(sessions), open)
	}
}

// Close keeps trying a locked file until its context ends, not for one
// lock timeout: a file held for many lock timeouts loses nothing.
func TestCloseWaitsOutALockUntilItsDeadline(t *testing.T) {
	path := tempDB(t)
	recordAll(t, path, SessionInfo{}, okSpec("first", t0))
	holder, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(path, SessionInfo{}, Options{Retention: -1, LockTimeout: 20 * time.Millisecond, RetryDelay: time.Hour})
	recordSome(r, "held", 3)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done <- r.Close(ctx)
	}()
	// Held for ten lock timeouts; Close must still be waiting.
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Close gave up while the file was held: %v", err)
	default:
	}
	_ = holder.Close()
	if err := <-done; err != nil {
		t.Fatalf("close after the lock was released: %v", err)
	}
	calls, err := (&Reader{Path: path}).List(context.Background(), Filter{})
	if err != nil || len(calls) != 4 {
		t.Fatalf("%d calls (%v), want 4", len(calls), err)
	}
}
