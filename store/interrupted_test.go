package store

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

const dieEnv = "LIMITSCOPE_STORE_TEST_DIE"

// dieChild commits a call in the middle of its second attempt, then kills
// itself (kill -9) before the call ends.
func dieChild(path string) {
	r := NewRecorder(path, SessionInfo{Command: "send"}, Options{Retention: -1})
	c, evs := spec{id: "killed", start: t0, chain: []stream.Target{tOpenAI, tAnthropic},
		classes: []stream.Class{stream.ClassRateLimit, stream.ClassOK}, outcome: retry.OutcomeOK, prompt: "p"}.events()
	sink := r.Sink(c, nil)
	ends := 0
	for _, ev := range evs {
		if ev.Kind == retry.EventAttemptEnd {
			if ends++; ends == 2 {
				break
			}
		}
		sink(ev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Flush(ctx); err != nil {
		fmt.Println("flush:", err)
		return
	}
	fmt.Println("flushed")
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	time.Sleep(time.Minute)
}

// A call left running by a killed process is closed as interrupted, with
// its recorded attempt, by the next recorder; a live process's running call
// is left alone.
func TestRunningCallOfADeadProcessIsClosedAsInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process")
	}
	path := tempDB(t)
	// A live one: this process, mid-call.
	live := NewRecorder(path, SessionInfo{Command: "tui"}, Options{Retention: -1})
	lc, levs := okSpec("alive", t0.Add(-time.Minute)).events()
	lsink := live.Sink(lc, nil)
	lsink(levs[0])
	if err := live.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), dieEnv+"="+path)
	out, err := cmd.Output()
	if !strings.Contains(string(out), "flushed") {
		t.Fatalf("child: %s %v", out, err)
	}
	rd := &Reader{Path: path}
	if c, err := rd.Show(context.Background(), "killed"); err != nil || c.Outcome != OutcomeRunning {
		t.Fatalf("before: %+v %v", c, err)
	}
	recordAll(t, path, SessionInfo{Command: "send"}, okSpec("next", t0.Add(time.Hour)))
	c, err := rd.Show(context.Background(), "killed")
	if err != nil {
		t.Fatal(err)
	}
	if c.Outcome != OutcomeInterrupted || c.Attempts != 1 || len(c.AttemptsList) != 1 || c.Ended.IsZero() || c.Prompt != "p" {
		t.Fatalf("the killed call: outcome %s, %d attempts, ended %v, prompt %q", c.Outcome, c.Attempts, c.Ended, c.Prompt)
	}
	if s, err := rd.Session(context.Background(), c.Session); err != nil || s.Ended.IsZero() {
		t.Fatalf("its session: %+v %v", s, err)
	}
	if a, err := rd.Show(context.Background(), "alive"); err != nil || a.Outcome != OutcomeRunning {
		t.Fatalf("a live process's call was closed: %+v %v", a, err)
	}
	st, err := rd.Stats(context.Background(), Filter{})
	if err != nil || st[len(st)-1].Interrupted != 1 {
		t.Fatalf("stats: %+v %v", st, err)
	}
	if err := live.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
