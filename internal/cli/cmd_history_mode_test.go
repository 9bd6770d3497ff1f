package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

// TestHistoryListByMode: simulated calls are marked on a terminal and
// --mode keeps the real or the simulated ones (list and export).
func TestHistoryListByMode(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "h.db")
	seedHistory(t, db) // three simulated calls
	rec := store.NewRecorder(db, store.SessionInfo{Version: "test", Mode: store.ModeReal, Command: "send"}, store.Options{Retention: -1})
	oa := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	call := retry.Call{ID: "c-real", Chain: []stream.Target{oa}, Prompt: "real"}
	sink := rec.Sink(call, nil)
	start := time.Now().Add(-time.Minute)
	at := retry.Attempt{N: 1, Target: oa, Status: 200, Class: stream.ClassOK, StartedAt: start, Duration: time.Second, Decision: retry.DecideDone}
	sink(retry.Event{Kind: retry.EventCallStart, CallID: call.ID, Time: start, Chain: call.Chain})
	sink(retry.Event{Kind: retry.EventAttemptEnd, CallID: call.ID, Time: start.Add(time.Second), Attempt: &at})
	sink(retry.Event{Kind: retry.EventCallEnd, CallID: call.ID, Time: start.Add(time.Second),
		Result: &retry.Result{CallID: call.ID, Outcome: retry.OutcomeOK, Attempts: []retry.Attempt{at}, Started: start, Ended: start.Add(time.Second), ServedBy: &oa}})
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"LIMITSCOPE_DB": db}
	count := func(out string) int { return len(strings.Split(strings.TrimSpace(out), "\n")) - 1 }
	for _, c := range []struct {
		args []string
		want int
	}{{[]string{"list"}, 4}, {[]string{"list", "--mode", "real"}, 1}, {[]string{"list", "--mode", "simulated"}, 3},
		{[]string{"list", "--mode", "simulated", "--limit", "2"}, 2}} {
		code, out, errOut := histRun(t, env, false, runHistory, c.args...)
		if code != exitOK || count(out) != c.want {
			t.Errorf("%v: exit %d, %d calls, want %d\n%s%s", c.args, code, count(out), c.want, out, errOut)
		}
	}
	if code, out, _ := histRun(t, env, false, runHistory, "export", "--mode", "real"); code != exitOK || strings.Count(out, "\n") != 1 || !strings.Contains(out, "c-real") {
		t.Errorf("export --mode real: exit %d\n%s", code, out)
	}
	if code, _, errOut := histRun(t, env, false, runHistory, "list", "--mode", "bogus"); code != exitUsage || !strings.Contains(errOut, "real or simulated") {
		t.Errorf("--mode bogus: exit %d %s", code, errOut)
	}
	// stats never mixes the modes in one row: each mode has its own rows and
	// its own "all" line; --mode keeps one.
	if code, out, errOut := histRun(t, env, false, runHistory, "stats"); code != exitOK ||
		!strings.Contains(out, "real\tall\t1\t") || !strings.Contains(out, "simulated\tall\t3\t") {
		t.Errorf("stats does not split real from simulated calls: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := histRun(t, env, false, runHistory, "stats", "--mode", "real"); code != exitOK ||
		!strings.Contains(out, "real\tall\t1\t") || strings.Contains(out, "simulated") {
		t.Errorf("stats --mode real: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := histRun(t, env, false, runHistory, "stats", "--json"); code != exitOK || !strings.Contains(out, `"simulated_calls": 3`) {
		t.Errorf("stats --json lacks simulated_calls: %s", out)
	}
	code, out, _ := histRun(t, map[string]string{"LIMITSCOPE_DB": db, "NO_COLOR": "1"}, true, runHistory, "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitOK || !strings.HasSuffix(lines[0], "MODE") || !strings.HasSuffix(lines[1], "real") || !strings.HasSuffix(lines[2], "sim") {
		t.Errorf("terminal list does not mark the mode:\n%s", out)
	}
}
