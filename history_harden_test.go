package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSendGoesOnWhenTheHistoryCannotBeWritten: a history that cannot be
// written never costs the answer or the exit code; it is one clear warning
// on stderr naming the path.
func TestSendGoesOnWhenTheHistoryCannotBeWritten(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	blocker := filepath.Join(dir, "state")
	if err := os.WriteFile(blocker, []byte("a file where the directory should be"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(blocker, "history.db")
	ta := newTestApp(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	code := run(ctx, ta.app, []string{"send", "--sim", "--db", db, "--model", "openai/gpt-5.4-mini", "hi"})
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
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v: the command waited on a history it can never write", took)
	}
}
