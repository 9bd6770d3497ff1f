//go:build linux

package main

// End-to-end tests: the real program (main()) driven through a
// pseudo-terminal, its output fed into a terminal emulator whose cells the
// tests read, as a user would see them.
//
// The program under test is this test binary re-executed with e2eMainEnv
// set: an init function then runs main() before any test machinery starts.
// That is more robust than `go build` inside the test: it needs no Go
// toolchain, build cache or network at test time (a `go test -c` binary
// copied elsewhere still works), costs no compile, and it runs exactly the
// code under test, main() included. (The package's test files are linked
// in, but only their init functions run, and this one exits first.)

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/vt"
	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

// e2eMainEnv, when set, makes the test binary run main() instead of tests.
const e2eMainEnv = "LIMITSCOPE_E2E_RUN_MAIN"

// The exit codes the binary documents that these tests check.
const (
	exitOK    = 0
	exitUsage = 2 // usage or configuration
)

func init() {
	if os.Getenv(e2eMainEnv) == "1" {
		main() // exits
	}
}

const (
	e2eCols, e2eRows = 120, 40
	// e2eDeadline bounds every wait for the screen: generous, so a loaded
	// machine (or -race) is slow, not failing. Waits poll and end as soon
	// as the screen shows what they wait for.
	e2eDeadline = 20 * time.Second
)

// e2eEnv is the child's environment: no provider key or base URL, and the
// home, state and history paths in dir.
func e2eEnv(t testing.TB, dir string, extra ...string) []string {
	t.Helper()
	drop := map[string]bool{"HOME": true, "XDG_STATE_HOME": true, "XDG_CONFIG_HOME": true,
		"LIMITSCOPE_DB": true, "LIMITSCOPE_SIM": true, "NO_COLOR": true, "TERM": true}
	for _, v := range stream.AllEnvVars() {
		drop[v] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			env = append(env, kv)
		}
	}
	env = append(env,
		e2eMainEnv+"=1",
		"TERM=xterm-256color",
		"HOME="+filepath.Join(dir, "home"),
		"XDG_STATE_HOME="+filepath.Join(dir, "state"),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"LIMITSCOPE_DB="+filepath.Join(dir, "history.db"),
	)
	return append(env, extra...)
}

// e2eTerm is the program running on a pty, and the terminal it draws on.
type e2eTerm struct {
	t   testing.TB
	cmd *exec.Cmd
	ptm *os.File // the terminal's side
	tty *os.File // the program's side, kept open to read its modes after exit

	start     time.Time
	mu        sync.Mutex
	emu       *vt.Emulator
	raw       bytes.Buffer
	firstByte time.Duration // since start; 0: none yet
	readDone  chan struct{}
	replyDone chan struct{}
	exited    chan struct{}
	waitErr   error
}

// startE2E starts the program with args on a 120x40 pty.
func startE2E(t testing.TB, env []string, args ...string) *e2eTerm {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ptm, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pty: %v", err)
	}
	if err := pty.Setsize(ptm, &pty.Winsize{Cols: e2eCols, Rows: e2eRows}); err != nil {
		t.Fatalf("pty size: %v", err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &unix.SysProcAttr{Setsid: true, Setctty: true}
	e := &e2eTerm{t: t, cmd: cmd, ptm: ptm, tty: tty, emu: vt.NewEmulator(e2eCols, e2eRows),
		readDone: make(chan struct{}), replyDone: make(chan struct{}), exited: make(chan struct{})}
	e.start = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	go e.readLoop()
	go e.replyLoop()
	go func() { e.waitErr = cmd.Wait(); close(e.exited) }()
	t.Cleanup(e.close)
	return e
}

// readLoop feeds everything the program writes into the emulator.
func (e *e2eTerm) readLoop() {
	defer close(e.readDone)
	buf := make([]byte, 32<<10)
	for {
		n, err := e.ptm.Read(buf)
		if n > 0 {
			e.mu.Lock()
			if e.firstByte == 0 {
				e.firstByte = time.Since(e.start)
			}
			e.raw.Write(buf[:n])
			_, _ = e.emu.Write(buf[:n])
			e.mu.Unlock()
		}
		if err != nil {
			return // EIO once the program has exited and the tty is closed
		}
	}
}

// replyLoop sends the emulator's answers to the program's queries (device
// attributes, colours) back, as a real terminal does.
func (e *e2eTerm) replyLoop() {
	defer close(e.replyDone)
	buf := make([]byte, 1024)
	for {
		n, err := e.emu.Read(buf)
		if n > 0 {
			_, _ = e.ptm.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// close ends the program if it still runs and stops every goroutine.
func (e *e2eTerm) close() {
	select {
	case <-e.exited:
	default:
		_ = e.cmd.Process.Kill()
		<-e.exited
	}
	_ = e.tty.Close()
	<-e.readDone // the read fails once no one holds the tty
	// End replyLoop by closing the emulator's reply pipe; not with
	// emu.Close, which sets a flag Read checks without a lock.
	if pw, ok := e.emu.InputPipe().(*io.PipeWriter); ok {
		_ = pw.Close()
	}
	<-e.replyDone
	_ = e.ptm.Close()
}

// screen is the text on the terminal now.
func (e *e2eTerm) screen() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.emu.String()
}

// send types s.
func (e *e2eTerm) send(s string) {
	e.t.Helper()
	if _, err := e.ptm.Write([]byte(s)); err != nil {
		e.t.Fatalf("type %q: %v", s, err)
	}
}

// waitScreen polls the screen until ok holds for it, and fails the test
// with the screen when it does not within the deadline.
func (e *e2eTerm) waitScreen(what string, ok func(string) bool) string {
	e.t.Helper()
	deadline := time.Now().Add(e2eDeadline)
	for {
		s := e.screen()
		if ok(s) {
			return s
		}
		select {
		case <-e.exited:
			e.t.Fatalf("the program exited (%v) while waiting for %s; screen:\n%s", e.waitErr, what, e.screen())
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no %s on the screen within %v; screen:\n%s", what, e2eDeadline, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitText waits for every word to be on the screen.
func (e *e2eTerm) waitText(words ...string) string {
	e.t.Helper()
	return e.waitScreen(fmt.Sprintf("%q", words), func(s string) bool {
		for _, w := range words {
			if !strings.Contains(s, w) {
				return false
			}
		}
		return true
	})
}

// waitExit waits for the program to end and returns its exit code.
func (e *e2eTerm) waitExit() int {
	e.t.Helper()
	select {
	case <-e.exited:
	case <-time.After(e2eDeadline):
		e.t.Fatalf("the program did not exit within %v; screen:\n%s", e2eDeadline, e.screen())
	}
	var ee *exec.ExitError
	if errors.As(e.waitErr, &ee) {
		return ee.ExitCode()
	}
	if e.waitErr != nil {
		e.t.Fatalf("wait: %v", e.waitErr)
	}
	return 0
}

// firstStart starts the console in simulated mode and waits for its first
// screen.
func firstStart(t *testing.T) *e2eTerm {
	t.Helper()
	// e2eEnv drops every provider variable from the child's environment.
	e := startE2E(t, e2eEnv(t, t.TempDir()))
	e.waitText("SIMULATED", "READY", "Type a prompt")
	return e
}

func TestE2EFirstStartAnswersAPrompt(t *testing.T) {
	t.Parallel()
	e := firstStart(t)
	s := e.screen()
	for _, w := range []string{"limitscope", "targets", "conversation", "openai/gpt-5.4-mini"} {
		if !strings.Contains(s, w) {
			t.Errorf("first screen lacks %q:\n%s", w, s)
		}
	}
	e.send("What is a rate limit?")
	e.waitText("What is a rate limit?")
	e.send("\r")
	s = e.waitText("served by")
	if !strings.Contains(s, "> What is a rate limit?") {
		t.Errorf("the prompt is not in the conversation:\n%s", s)
	}
	if strings.Contains(s, "(fallback:") { // the fallback note, not a word of the answer
		t.Errorf("a healthy primary, yet a fallback served:\n%s", s)
	}
}

func TestE2EFailoverDemo(t *testing.T) {
	t.Parallel()
	e := firstStart(t)
	before := e.screen()
	e.send("\t") // leave the input
	e.waitScreen("the input left", func(s string) bool { return s != before })
	e.send("d")
	e.waitText("failover-demo")
	e.send("5")
	e.waitScreen("the demo menu closed", func(s string) bool { return !strings.Contains(s, "fallbacks stay healthy") })
	e.send("i")
	e.waitText("Type a prompt")
	e.send("Summarize the incident.")
	e.waitText("Summarize the incident.")
	e.send("\r")
	// The demo draws 429s and overloads from the simulator's seed (random
	// per run): the primary is WAITING on a Retry-After or OVERLOADED, and
	// either way the fallback serves and says why.
	s := e.waitText("served by", "(fallback:")
	if !strings.Contains(s, "primary openai/gpt-5.4-mini") {
		t.Errorf("the fallback note does not name the primary:\n%s", s)
	}
	if !strings.Contains(s, "WAITING") && !strings.Contains(s, "OVERLOADED") {
		t.Errorf("the primary shows neither WAITING nor OVERLOADED after the demo's fault:\n%s", s)
	}
}

func TestE2EQuitRestoresTheTerminal(t *testing.T) {
	t.Parallel()
	e := firstStart(t)
	before, err := unix.IoctlGetTermios(int(e.tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if before.Lflag&unix.ICANON != 0 {
		t.Fatalf("the console runs with a line-buffered terminal (ICANON set)")
	}
	e.mu.Lock()
	alt := e.emu.IsAltScreen()
	e.mu.Unlock()
	if !alt {
		t.Errorf("the console does not use the alternate screen")
	}
	shown := e.screen()
	e.send("\t")
	e.waitScreen("the input left", func(s string) bool { return s != shown })
	e.send("q")
	if code := e.waitExit(); code != exitOK {
		t.Fatalf("q: exit %d, want 0", code)
	}
	after, err := unix.IoctlGetTermios(int(e.tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if after.Lflag&(unix.ICANON|unix.ECHO) != unix.ICANON|unix.ECHO {
		t.Errorf("the terminal is left in raw mode: lflag %#x", after.Lflag)
	}
	_ = e.tty.Close()
	<-e.readDone // the last side of the tty closed: every byte written is in the emulator
	e.mu.Lock()
	alt, hidden, raw := e.emu.IsAltScreen(), e.emu.CursorHidden(), e.raw.String()
	e.mu.Unlock()
	if alt {
		t.Errorf("the alternate screen is still on after quitting")
	}
	if !strings.Contains(raw, "\x1b[?1049l") {
		t.Errorf("no leave-alt-screen sequence in the output")
	}
	if hidden {
		t.Errorf("the cursor is still hidden after quitting")
	}
}

func TestE2ENoTerminalSaysOneLine(t *testing.T) {
	for _, v := range stream.AllEnvVars() {
		t.Setenv(v, "")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), e2eDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = e2eEnv(t, t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(""), &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
		t.Fatalf("no terminal: %v, want exit %d; stderr:\n%s", err, exitUsage, errb.String())
	}
	if !strings.Contains(errb.String(), "needs a terminal") || strings.Count(errb.String(), "\n") != 1 {
		t.Errorf("stderr is not one line giving the reason:\n%s", errb.String())
	}
	if out.Len() != 0 {
		t.Errorf("stdout not empty: %q", out.String())
	}
}

// BenchmarkE2EStartup measures the time from starting the process to its
// first frame (the header on the alternate screen), with no history and
// with a 1,000,000-attempt history. It builds that history once (about 10
// s), so it runs only as a benchmark:
//
//	go test -run X -bench E2EStartup -benchtime 10x .
//
// Reported: ms-to-frame and ms-first-byte (means since fork/exec).
func BenchmarkE2EStartup(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a 1,000,000-attempt history")
	}
	for _, v := range stream.AllEnvVars() {
		b.Setenv(v, "")
	}
	b.Run("history=none", func(b *testing.B) { benchStartup(b, e2eEnv(b, b.TempDir())) })
	dir := b.TempDir()
	db := filepath.Join(dir, "history.db")
	took, attempts, err := build1MHistory(db)
	if err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(db)
	b.Logf("history: %d attempts, %.0f MB, built in %v", attempts, float64(fi.Size())/1e6, took.Round(time.Millisecond))
	b.Run("history=1M", func(b *testing.B) { benchStartup(b, e2eEnv(b, dir)) })
}

func benchStartup(b *testing.B, env []string) {
	var frame, first time.Duration
	for b.Loop() {
		e := startE2E(b, env)
		frame += e.waitFirstFrame()
		e.mu.Lock()
		first += e.firstByte
		e.mu.Unlock()
		e.close()
	}
	b.ReportMetric(float64(frame.Microseconds())/1e3/float64(b.N), "ms-to-frame")
	b.ReportMetric(float64(first.Microseconds())/1e3/float64(b.N), "ms-first-byte")
}

// waitFirstFrame waits for the header on the alternate screen and returns
// the time since the process started.
func (e *e2eTerm) waitFirstFrame() time.Duration {
	e.t.Helper()
	deadline := time.Now().Add(e2eDeadline)
	for {
		e.mu.Lock()
		alt := e.emu.IsAltScreen()
		s := e.emu.String()
		e.mu.Unlock()
		if alt && strings.Contains(s, "SIMULATED") && strings.Contains(s, "limitscope") {
			return time.Since(e.start)
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no first frame within %v; screen:\n%s", e2eDeadline, s)
		}
		time.Sleep(time.Millisecond)
	}
}

// build1MHistory records calls through store.Recorder until the file holds
// 1,000,000 attempts (store's BenchmarkBuild1M mix: 60% one attempt, 25%
// a retry, 10% three attempts, 5% five that give up), without text.
func build1MHistory(path string) (time.Duration, int, error) {
	start := time.Now()
	r := store.NewRecorder(path, store.SessionInfo{NoContent: true, Mode: store.ModeSimulated, Command: "e2e-bench"},
		store.Options{Retention: -1, BatchSize: 8192})
	attempts := 0
	t0 := time.Now().Add(-24 * time.Hour)
	for i := 0; attempts < 1_000_000; i++ {
		c, evs := historyCall(i, t0)
		sink := r.Sink(c, nil)
		for _, ev := range evs {
			sink(ev)
		}
		for _, ev := range evs {
			if ev.Kind == retry.EventAttemptEnd {
				attempts++
			}
		}
		for r.Pending() > 200_000 {
			time.Sleep(time.Millisecond)
		}
	}
	err := r.Close(context.Background())
	return time.Since(start), attempts, err
}

// historyCall is call i of the mix, as the engine's events.
func historyCall(i int, t0 time.Time) (retry.Call, []retry.Event) {
	id := fmt.Sprintf("call-%08d", i)
	start := t0.Add(time.Duration(i) * 10 * time.Millisecond)
	chains := [][]stream.Target{
		{{Provider: "openai", Model: "gpt-5.4-mini"}, {Provider: "anthropic", Model: "claude-haiku-5-5"}},
		{{Provider: "anthropic", Model: "claude-haiku-5-5"}, {Provider: "gemini", Model: "gemini-3.8-flash"}},
		{{Provider: "gemini", Model: "gemini-3.8-flash"}, {Provider: "openai", Model: "gpt-5.4-mini"}},
	}
	chain := chains[i%3]
	ok, rl, ov := stream.ClassOK, stream.ClassRateLimit, stream.ClassOverload
	classes, outcome := []stream.Class{ok}, retry.OutcomeOK
	switch r := i % 20; {
	case r < 12:
	case r < 17:
		classes = []stream.Class{rl, ok}
	case r < 19:
		classes = []stream.Class{ov, ov, ok}
	default:
		classes, outcome = []stream.Class{rl, rl, ov, ov, rl}, retry.OutcomeGaveUp
	}
	call := retry.Call{ID: id, Chain: chain, MaxTokens: 256, Policy: retry.DefaultPolicy()}
	evs := []retry.Event{{Kind: retry.EventCallStart, CallID: id, Time: start, Chain: chain}}
	now := start
	var atts []retry.Attempt
	for n, cl := range classes {
		tgt := chain[min(n, len(chain)-1)]
		a := retry.Attempt{N: n + 1, Target: tgt, Class: cl, StartedAt: now, Duration: 300 * time.Millisecond,
			TTFT: 120 * time.Millisecond, RequestID: fmt.Sprintf("req_%s_%d", id, n+1)}
		if cl == ok {
			a.Status, a.Decision = 200, retry.DecideDone
		} else {
			ra := 2 * time.Second
			a.Status, a.Code, a.Message = 429, "rate_limit_exceeded", "Rate limit reached for requests."
			a.RetryAfter, a.DelaySource, a.Waited, a.Decision = &ra, stream.SourceRetryAfter, 1500*time.Millisecond, retry.DecideRetry
		}
		evs = append(evs, retry.Event{Kind: retry.EventAttemptStart, CallID: id, Time: now, Attempt: &retry.Attempt{N: n + 1, Target: tgt, StartedAt: now}})
		now = now.Add(a.Duration)
		evs = append(evs, retry.Event{Kind: retry.EventAttemptEnd, CallID: id, Time: now, Attempt: &a})
		if a.Waited > 0 {
			evs = append(evs, retry.Event{Kind: retry.EventWait, CallID: id, Time: now, Wait: &retry.Wait{Target: tgt, Duration: a.Waited, Source: a.DelaySource}})
			now = now.Add(a.Waited)
		}
		atts = append(atts, a)
	}
	res := &retry.Result{CallID: id, Outcome: outcome, Attempts: atts, Started: start, Ended: now}
	if outcome == retry.OutcomeOK {
		last := atts[len(atts)-1].Target
		res.FinishReason, res.Usage, res.ServedBy = "stop", &stream.Usage{InputTokens: 12, OutputTokens: 34}, &last
	} else {
		la := atts[len(atts)-1]
		res.Err = &stream.Error{Class: la.Class, Status: la.Status, Code: la.Code, Message: la.Message}
	}
	evs = append(evs, retry.Event{Kind: retry.EventCallEnd, CallID: id, Time: now, Result: res})
	return call, evs
}

func TestE2EHistoryShowsTheAnsweredCall(t *testing.T) {
	t.Parallel()
	e := firstStart(t)
	e.send("Where did the tokens go?")
	e.waitText("Where did the tokens go?")
	e.send("\r")
	e.waitText("served by")
	shown := e.screen()
	e.send("\t")
	e.waitScreen("the input left", func(s string) bool { return s != shown })
	// The call is committed to the history when it ends, which may be
	// just after its answer shows: reopen the view until it is listed.
	deadline := time.Now().Add(e2eDeadline)
	for {
		e.send("h")
		s := e.waitScreen("the history view", func(s string) bool {
			return strings.Contains(s, "/ filters") && !strings.Contains(s, "Loading…")
		})
		if strings.Contains(s, "Where did the tokens go?") && strings.Contains(s, "1 att") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the answered call is not in the history view; screen:\n%s", s)
		}
		e.send("\x1b") // back; the next key waits for the screen to change
		e.waitScreen("the history view closed", func(s string) bool { return !strings.Contains(s, "/ filters") })
	}
	e.send("\r")
	s := e.waitText("served by openai/gpt-5.4-mini", "1 attempts")
	if !strings.Contains(s, "> Where did the tokens go?") {
		t.Errorf("the opened call lacks its prompt:\n%s", s)
	}
}
