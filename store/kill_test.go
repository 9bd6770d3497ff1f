package store

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

const childEnv = "LIMITSCOPE_STORE_TEST_CHILD"

const fullEnv = "LIMITSCOPE_STORE_TEST_FULL"

func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		writerChild(path)
		os.Exit(0)
	}
	if path := os.Getenv(dieEnv); path != "" {
		dieChild(path)
		os.Exit(0)
	}
	if path := os.Getenv(contendEnv); path != "" {
		contendChild(path)
		os.Exit(0)
	}
	if path := os.Getenv(journalKillEnv); path != "" {
		journalKillChild(path)
		os.Exit(0)
	}
	if path := os.Getenv(fullEnv); path != "" {
		fullDiskChild(path)
		os.Exit(0)
	}
	code := m.Run()
	if big.path != "" { // the benchmarks' 1,000,000-attempt file
		_ = os.RemoveAll(filepath.Dir(big.path))
	}
	// No recorder, retention loop or reader may outlive its test.
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

// fullDiskChild writes under a 256 KiB file-size limit (RLIMIT_FSIZE, a full
// disk as far as this process can tell) until a commit fails, printing
// "ack ID" for each committed call, then "full ERROR" and "pending N".
func fullDiskChild(path string) {
	signal.Ignore(syscall.SIGXFSZ) // a write past the limit fails with EFBIG instead
	lim := syscall.Rlimit{Cur: 256 << 10, Max: 256 << 10}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Println("setrlimit", err)
		return
	}
	var warned []error
	r := NewRecorder(path, SessionInfo{Command: "full"}, Options{Retention: -1, RetryDelay: time.Hour, OnWarn: func(err error) { warned = append(warned, err) }})
	for i := 0; i < 100000; i++ {
		id := fmt.Sprintf("f-%d", i)
		c, evs := heavySpec(id, i).events()
		sink := r.Sink(c, nil)
		for _, ev := range evs {
			sink(ev)
		}
		if err := r.Flush(context.Background()); err != nil {
			fmt.Println("full", err)
			break
		}
		fmt.Println("ack", id)
	}
	err := r.Close(context.Background())
	fmt.Println("pending", r.Pending(), "warned", len(warned), "close", err != nil)
}

func heavySpec(id string, i int) spec {
	s := spec{id: id, start: t0.Add(time.Duration(i) * time.Millisecond), chain: []stream.Target{tAnthropic, tOpenAI},
		classes: []stream.Class{stream.ClassOverload, stream.ClassRateLimit, stream.ClassOK}, outcome: retry.OutcomeOK,
		prompt: "prompt " + id, text: strings.Repeat("answer "+id+" ", 20), wait: 10 * time.Millisecond}
	return s
}

// writerChild writes calls as fast as it can from several goroutines and
// prints "ack ID" for each call once Flush has committed it.
func writerChild(path string) {
	r := NewRecorder(path, SessionInfo{Command: "child"}, Options{Retention: -1})
	var out sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100000; i++ {
				id := fmt.Sprintf("g%d-%d", g, i)
				c, evs := heavySpec(id, g*100000+i).events()
				sink := r.Sink(c, nil)
				for _, ev := range evs {
					sink(ev)
				}
				if err := r.Flush(context.Background()); err != nil {
					fmt.Fprintln(os.Stderr, "flush:", err)
					os.Exit(3)
				}
				out.Lock()
				fmt.Fprintln(w, "ack", id)
				_ = w.Flush()
				out.Unlock()
			}
		}()
	}
	wg.Wait()
}

func TestKill9LosesNothingAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process")
	}
	path := tempDB(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var acked []string
	killed := false
	for sc.Scan() {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "ack "); ok {
			acked = append(acked, id)
		}
		if len(acked) == 400 && !killed {
			// In the middle of heavy writes: 8 writers are mid-batch.
			_ = cmd.Process.Signal(syscall.SIGKILL)
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed || err == nil {
		t.Fatalf("child was not killed: %v (acked %d)", err, len(acked))
	}

	// The file is consistent and holds every acknowledged call, whole.
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	})
	_ = db.Close()
	if err != nil {
		t.Fatalf("file inconsistent after kill -9: %v", err)
	}
	rd := &Reader{Path: path}
	all, err := rd.List(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	byCallID := map[string]Call{}
	for _, c := range all {
		full, err := rd.Show(context.Background(), itoa(c.ID))
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := byCallID[full.CallID]; dup {
			t.Fatalf("call %s stored twice", full.CallID)
		}
		byCallID[full.CallID] = *full
	}
	for _, id := range acked {
		c, ok := byCallID[id]
		if !ok {
			t.Fatalf("acknowledged call %s lost (%d acked, %d stored)", id, len(acked), len(all))
		}
		if c.Outcome != retry.OutcomeOK || len(c.AttemptsList) != 3 || c.Text != heavySpec(id, 0).text || c.Prompt != "prompt "+id {
			t.Fatalf("acknowledged call %s incomplete: %+v", id, c)
		}
	}
	t.Logf("%d acknowledged, %d stored, all acknowledged present", len(acked), len(all))

	// And the file takes writes again.
	recordAll(t, path, SessionInfo{}, okSpec("after", t0.Add(time.Hour)))
}

func TestFullDiskLosesNothingAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process")
	}
	path := tempDB(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fullEnv+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var acked []string
	var full, pending string
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "ack "):
			acked = append(acked, strings.TrimPrefix(line, "ack "))
		case strings.HasPrefix(line, "full "):
			full = line
		case strings.HasPrefix(line, "pending "):
			pending = line
		}
	}
	if full == "" || len(acked) < 10 || !strings.Contains(full, "too large") {
		t.Fatalf("the limit was not hit as expected (%d acked): %q\n%s", len(acked), full, out)
	}
	if pending == "" || strings.HasPrefix(pending, "pending 0 ") || !strings.Contains(pending, "warned 1 close true") {
		t.Fatalf("unsaved events not reported: %q", pending)
	}
	// The file is whole and every acknowledged call is in it, complete.
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	})
	_ = db.Close()
	if err != nil {
		t.Fatalf("file inconsistent after a failed write: %v", err)
	}
	rd := &Reader{Path: path}
	for _, id := range acked {
		c, err := rd.Show(context.Background(), id)
		if err != nil || c.Outcome != retry.OutcomeOK || len(c.AttemptsList) != 3 || c.Text != heavySpec(id, 0).text {
			t.Fatalf("acknowledged call %s: %+v %v", id, c, err)
		}
	}
	t.Logf("%d calls acknowledged before the disk filled: %s; %s", len(acked), full, pending)
	recordAll(t, path, SessionInfo{}, okSpec("after", t0.Add(time.Hour)))
}
