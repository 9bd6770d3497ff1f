package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/limitscope/limitscope/calls"
	"github.com/limitscope/limitscope/store"
)

// TestSendGoesOnWhenTheHistoryCannotBeWritten: a history that cannot be
// written never costs the answer or the exit code; it is one clear warning
// on stderr naming the path.
func TestSendGoesOnWhenTheHistoryCannotBeWritten(t *testing.T) {
	t.Parallel()
	env := isolatedEnv(t)
	dir := t.TempDir()
	blocker := filepath.Join(dir, "state")
	if err := os.WriteFile(blocker, []byte("a file where the directory should be"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(blocker, "history.db")
	ta := newTestApp(env)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	code := run(ctx, ta.app, []string{"send", "--sim", "--max-tokens", "4", "--db", db, "--model", "openai/gpt-5.4-mini", "hi"})
	if code != exitOK || strings.TrimSpace(ta.out.String()) == "" {
		t.Fatalf("exit %d, answer %q, stderr %q", code, ta.out, ta.errOut)
	}
	msg := ta.errOut.String()
	if !strings.Contains(msg, blocker) || !strings.Contains(msg, "not a directory") || !strings.Contains(msg, "not saved") {
		t.Errorf("want a warning naming %s and why, and that the call was not saved: %q", blocker, msg)
	}
	if strings.Contains(msg, "corrupt") {
		t.Errorf("an unwritable place is not a corrupt file: %q", msg)
	}
	// Waiting on it would take the whole close allowance (10 s); a short
	// answer takes well under a second, so a loaded machine keeps margin.
	if took := time.Since(start); took >= calls.DefaultCloseAllowance {
		t.Errorf("took %v: the command waited on a history it can never write", took)
	}
}

// TestSendWaitsOutALockedHistory: another process holds the history (a
// long `history export`, a second console) for longer than one lock wait;
// send still answers, exits 0, and saves the call once the lock goes,
// before it exits: nothing is lost and nothing is reported unsaved.
func TestSendWaitsOutALockedHistory(t *testing.T) {
	t.Parallel()
	env := isolatedEnv(t)
	db := filepath.Join(t.TempDir(), "history.db")
	ta := newTestApp(env)
	if code := run(context.Background(), ta.app, []string{"send", "--sim", "--max-tokens", "4", "--db", db, "--model", "openai/gpt-5.4-mini", "first"}); code != exitOK {
		t.Fatalf("first send: exit %d %s", code, ta.errOut)
	}
	holder, err := bolt.Open(db, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		time.Sleep(2200 * time.Millisecond) // longer than one lock wait (2 s): the recorder must warn and try again
		_ = holder.Close()
		close(released)
	}()
	ta = newTestApp(env)
	start := time.Now()
	code := run(context.Background(), ta.app, []string{"send", "--sim", "--max-tokens", "4", "--db", db, "--model", "openai/gpt-5.4-mini", "second"})
	<-released
	if code != exitOK || strings.TrimSpace(ta.out.String()) == "" {
		t.Fatalf("exit %d, answer %q, stderr %q", code, ta.out, ta.errOut)
	}
	if msg := ta.errOut.String(); strings.Contains(msg, "not saved") || strings.Count(msg, "locked") > 1 {
		t.Errorf("want nothing unsaved and at most one warning: %q", msg)
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("took %v", took)
	}
	calls, err := (&store.Reader{Path: db}).List(context.Background(), store.Filter{})
	if err != nil || len(calls) != 2 {
		t.Fatalf("%d calls in the history (%v), want both", len(calls), err)
	}
}
