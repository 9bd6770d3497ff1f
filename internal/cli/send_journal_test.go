package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/limitscope/limitscope/store"
)

// A `send` that ends while another process holds the history does not wait
// out its 10 s: it journals its call beside the file, says nothing, and the
// next `history list` merges the journal and shows the call.
func TestSendJournalsALockedHistoryAndListMergesIt(t *testing.T) {
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
	ta = newTestApp(env)
	start := time.Now()
	code := run(context.Background(), ta.app, []string{"send", "--sim", "--max-tokens", "4", "--db", db, "--model", "openai/gpt-5.4-mini", "journaled prompt"})
	took := time.Since(start)
	_ = holder.Close()
	if code != exitOK || strings.TrimSpace(ta.out.String()) == "" {
		t.Fatalf("exit %d, answer %q, stderr %q", code, ta.out, ta.errOut)
	}
	if msg := ta.errOut.String(); strings.Contains(msg, "lost") || strings.Contains(msg, "not saved") {
		t.Errorf("a journaled call reported lost: %q", msg)
	}
	if took > 8*time.Second {
		t.Errorf("send with a locked history took %v: it waited instead of journaling", took)
	}
	names, _ := filepath.Glob(filepath.Join(store.JournalDir(db), "*.jrnl"))
	if len(names) != 1 {
		t.Fatalf("journals %v, want one", names)
	}
	if fi, err := os.Stat(names[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("journal mode %v (%v)", fi.Mode(), err)
	}

	ta = newTestApp(env)
	if code := run(context.Background(), ta.app, []string{"history", "list", "--json", "--db", db}); code != exitOK {
		t.Fatalf("history list: exit %d %s", code, ta.errOut)
	}
	var out struct {
		Calls []store.CallJSON `json:"calls"`
	}
	if err := json.Unmarshal(ta.out.Bytes(), &out); err != nil {
		t.Fatalf("history list --json: %v\n%s", err, ta.out)
	}
	if len(out.Calls) != 2 {
		t.Fatalf("%d calls listed after the merge, want 2:\n%s", len(out.Calls), ta.out)
	}
	for _, c := range out.Calls {
		if c.Outcome == store.OutcomeRunning {
			t.Fatalf("call left running: %+v", c)
		}
	}
	if store.HasJournals(db) {
		t.Fatal("journal still there after history list")
	}
}
