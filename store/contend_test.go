package store

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/limitscope/limitscope/retry"
)

const contendEnv = "LIMITSCOPE_STORE_TEST_CONTEND"

// contendFullEnv set to a number runs TestContendedWritersLoseNothing with
// that many writers, 2 MB prompts and the default JournalAfter (the
// full-size figures: 200).
const contendFullEnv = "LIMITSCOPE_TEST_CONTEND_FULL"

// contendChild is one `send`: it records one call with a prompt of the
// size it is given and closes its recorder with the 10 s history_hook
// allows, printing "saved", "journaled" or "lost N: ERROR", then how long
// Close took.
func contendChild(path string) {
	id := os.Getenv(contendEnv + "_ID")
	size, _ := strconv.Atoi(os.Getenv(contendEnv + "_SIZE"))
	after, _ := time.ParseDuration(os.Getenv(contendEnv + "_AFTER"))
	r := NewRecorder(path, SessionInfo{Command: "send", Mode: ModeReal}, Options{Retention: -1, JournalAfter: after})
	s := okSpec(id, t0)
	s.prompt = strings.Repeat("p", size)
	c, evs := s.events()
	sink := r.Sink(c, nil)
	for _, ev := range evs {
		sink(ev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	err := r.Close(ctx)
	took := time.Since(start).Milliseconds()
	switch {
	case err != nil:
		fmt.Printf("lost %d: %v\n", r.Pending(), err)
	case r.Journal() != "":
		fmt.Printf("journaled %d\n", took)
	default:
		fmt.Printf("saved %d\n", took)
	}
}

// Many processes closing their recorders at once on one file (flock is
// per open file, so only separate processes contend as `send`s do): every
// call lands whole, none is left running, once one more open merged the
// journals of the writers that could not get the lock in time. The
// committed run forces the journal with a 1ms JournalAfter; set
// LIMITSCOPE_TEST_CONTEND_FULL=200 for 200 writers with 2 MB
// prompts and the defaults.
func TestContendedWritersLoseNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes")
	}
	n, size, after := 40, 256<<10, "1ms"
	if v := os.Getenv(contendFullEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a number of writers", contendFullEnv, v)
		}
		size, after = 2<<20, "0s"
	}
	path := tempDB(t)
	var wg sync.WaitGroup
	outs := make([]string, n)
	// The committed run holds the file until a quarter of the writers are
	// done, so that they journal whatever the machine's load (the others
	// then contend; a writer's commit merging journals is tested apart).
	finished := make(chan struct{}, n)
	release := func() {}
	if after == "1ms" {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		release = holdLock(t, path)
	}
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { finished <- struct{}{} }()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), contendEnv+"="+path, fmt.Sprintf("%s_ID=w%d", contendEnv, i),
				fmt.Sprintf("%s_SIZE=%d", contendEnv, size), contendEnv+"_AFTER="+after)
			out, err := cmd.CombinedOutput()
			outs[i] = strings.TrimSpace(string(out))
			if err != nil {
				outs[i] += " (" + err.Error() + ")"
			}
		}()
	}
	for range n / 4 {
		<-finished
	}
	release()
	wg.Wait()
	elapsed := time.Since(start)
	lost, journaled, slowest := 0, 0, 0
	for i, o := range outs {
		word, ms, _ := strings.Cut(o, " ")
		switch word {
		case "saved", "journaled":
			if word == "journaled" {
				journaled++
			}
			if v, err := strconv.Atoi(ms); err == nil {
				slowest = max(slowest, v)
			}
		default:
			lost++
			t.Errorf("writer %d: %s", i, o)
		}
	}
	left := len(journalNames(path))
	rd := &Reader{Path: path, LockTimeout: 10 * time.Second}
	listStart := time.Now()
	calls, err := rd.List(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	merge := time.Since(listStart)
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
	t.Logf("%d writers, %d-byte prompts: %d saved, %d journaled (%d journals left when they had all exited, merged by the next list in %s), %d lost; slowest Close %dms, all done in %s",
		n, size, n-journaled-lost, journaled, left, merge.Round(time.Millisecond), lost, slowest, elapsed.Round(time.Millisecond))
	if lost > 0 || len(calls) != n || running > 0 || len(sessions) != n || open > 0 {
		t.Fatalf("%d writers: %d reported lost, %d calls stored, %d not ended, %d sessions, %d never ended", n, lost, len(calls), running, len(sessions), open)
	}
	if after == "1ms" && journaled < n/4 {
		t.Fatalf("%d of %d writers journaled: want at least the quarter that ended while the file was held", journaled, n)
	}
	if names := journalNames(path); len(names) > 0 {
		t.Fatalf("journals left after the merge: %v", names)
	}
	seen := map[string]bool{}
	for _, c := range calls {
		full, err := rd.Show(context.Background(), strconv.Itoa(int(c.ID)))
		if err != nil {
			t.Fatal(err)
		}
		if seen[full.CallID] || len(full.Prompt) != size || full.Text != "answer "+full.CallID || len(full.AttemptsList) != len(okSpec("", t0).classes) {
			t.Fatalf("call %s: duplicate %v, %d-byte prompt, %d attempts", full.CallID, seen[full.CallID], len(full.Prompt), len(full.AttemptsList))
		}
		seen[full.CallID] = true
	}
}

// When the journal cannot be written, Close keeps trying a locked file
// until its context ends, not for one lock timeout: a file held for many
// lock timeouts loses nothing.
func TestCloseWaitsOutALockUntilItsDeadline(t *testing.T) {
	path := tempDB(t)
	recordAll(t, path, SessionInfo{}, okSpec("first", t0))
	if err := os.WriteFile(JournalDir(path), []byte("in the way"), 0o600); err != nil {
		t.Fatal(err)
	}
	holder, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(path, SessionInfo{}, Options{Retention: -1, LockTimeout: 20 * time.Millisecond, RetryDelay: time.Hour, JournalAfter: 20 * time.Millisecond})
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
