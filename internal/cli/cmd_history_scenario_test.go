package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

func scenarioApp() (*app, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut,
		getenv: func(string) string { return "" }, now: time.Now}
	return a, &out, &errOut
}

// history scenario learns the newest session into a file the simulator
// loads; the file holds no request id or message.
func TestHistoryScenarioLearnsAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	genHistory(t, path, 3000)
	a, out, errOut := scenarioApp()
	if code := runHistory(context.Background(), a, []string{"scenario", "--db", path, "--since", "2d"}); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	text := out.String()
	if err := sim.CheckScenario(strings.NewReader(text), "stdout"); err != nil {
		t.Fatalf("the learnt scenario does not parse: %v\n%s", err, text)
	}
	for _, want := range []string{"Source: calls since", "[openai]", "[anthropic]", "[gemini]", "first_token_dist"} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	for _, leak := range []string{"req_", "call-0", "Rate limit reached"} {
		if strings.Contains(text, leak) {
			t.Errorf("the learnt file holds %q", leak)
		}
	}
	file := filepath.Join(t.TempDir(), "learnt.ini")
	a, _, errOut = scenarioApp()
	if code := runHistory(context.Background(), a, []string{"scenario", "--db", path, "--since", "2d", "--name", "mine", "--out", file}); code != exitOK {
		t.Fatalf("--out: exit %d: %s", code, errOut)
	}
	s, err := sim.New(sim.Options{ScenarioFile: file})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Scenario() != "mine" {
		t.Errorf("scenario %q, want mine (--name)", s.Scenario())
	}
}

// Bad input is a clear error: an unknown session, a range with nothing in
// it, an --out file that exists (kept as it was unless --force).
func TestHistoryScenarioBadInput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	genHistory(t, path, 200)
	run := func(args ...string) (int, string) {
		a, _, errOut := scenarioApp()
		code := runHistory(context.Background(), a, append([]string{"scenario", "--db", path}, args...))
		return code, errOut.String()
	}
	if code, msg := run("--session", "77"); code != exitFailed || !strings.Contains(msg, "no session 77") {
		t.Errorf("unknown session: exit %d: %s", code, msg)
	}
	if code, msg := run("--since", "2020-01-01", "--until", "2020-01-02"); code != exitFailed || !strings.Contains(msg, "nothing to learn") {
		t.Errorf("empty range: exit %d: %s", code, msg)
	}
	if code, msg := run("--provider", "deepseek"); code != exitFailed || !strings.Contains(msg, "nothing to learn") {
		t.Errorf("no matching call: exit %d: %s", code, msg)
	}
	if code, msg := run("--db", filepath.Join(t.TempDir(), "none.db")); code != exitFailed || !strings.Contains(msg, "no history") {
		t.Errorf("no history file: exit %d: %s", code, msg)
	}
	out := filepath.Join(t.TempDir(), "mine.ini")
	if err := os.WriteFile(out, []byte("# mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, msg := run("--out", out); code != exitUsage || !strings.Contains(msg, "exists") {
		t.Errorf("existing --out: exit %d: %s", code, msg)
	}
	if b, _ := os.ReadFile(out); string(b) != "# mine\n" {
		t.Errorf("an existing --out was changed: %q", b)
	}
	if code, msg := run("--out", out, "--force", "--since", "2d"); code != exitOK {
		t.Errorf("--force: exit %d: %s", code, msg)
	}
	if b, _ := os.ReadFile(out); !strings.Contains(string(b), "name = learnt") {
		t.Errorf("--force did not replace the file: %q", b)
	}
	// Made between the check and the write: still kept.
	made := filepath.Join(t.TempDir(), "race.ini")
	err := writeNewFile(made, false, func(w io.Writer) error {
		return os.WriteFile(made, []byte("theirs"), 0o600)
	})
	if err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a file made meanwhile: %v", err)
	}
	if b, _ := os.ReadFile(made); string(b) != "theirs" {
		t.Errorf("a file made meanwhile was replaced: %q", b)
	}
}

// Without --session or a range, the newest session is learnt; its calls
// alone.
func TestHistoryScenarioNewestSession(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	genHistory(t, path, 300) // session 1, its calls a day old
	rec := store.NewRecorder(path, store.SessionInfo{Version: "test", Mode: store.ModeSimulated, Command: "bench", NoContent: true}, store.Options{Retention: -1})
	tgt := stream.Target{Provider: "groq", Model: "m"}
	now := time.Now()
	for i := range 30 {
		id := fmt.Sprintf("c%d", i)
		at := now.Add(time.Duration(i) * time.Second)
		sink := rec.Sink(retry.Call{ID: id, Chain: []stream.Target{tgt}}, nil)
		sink(retry.Event{Kind: retry.EventCallStart, CallID: id, Time: at, Chain: []stream.Target{tgt}})
		a := retry.Attempt{N: 1, Target: tgt, Class: stream.ClassOK, Status: 200, StartedAt: at, Duration: time.Second, TTFT: 200 * time.Millisecond,
			Limits: &stream.Limits{At: at, Requests: &stream.Window{Limit: 14400, Remaining: 14000, HasLimit: true, HasRemaining: true, PerDay: true}}}
		sink(retry.Event{Kind: retry.EventAttemptEnd, CallID: id, Time: at.Add(time.Second), Attempt: &a})
		sink(retry.Event{Kind: retry.EventCallEnd, CallID: id, Time: at.Add(time.Second), Result: &retry.Result{CallID: id, Outcome: retry.OutcomeOK,
			Attempts: []retry.Attempt{a}, Started: at, Ended: at.Add(time.Second), ServedBy: &tgt, Usage: &stream.Usage{InputTokens: 5, OutputTokens: 100}}})
	}
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	a, out, errOut := scenarioApp()
	if code := runHistory(context.Background(), a, []string{"scenario", "--db", path}); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	text := out.String()
	if !strings.Contains(text, "Source: session 2 (bench, simulated): 30 calls") || !strings.Contains(text, "[groq]") || strings.Contains(text, "[openai]") {
		t.Errorf("not the newest session alone:\n%s", text)
	}
	if !strings.Contains(text, "rpd = 14400") {
		t.Errorf("no per-day requests limit:\n%s", text)
	}
}
