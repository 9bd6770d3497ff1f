package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

// TestHistoryTablesFitTheTerminal: on an 80- or 120-column terminal, every
// line of history list and stats fits: no row wraps. What is clipped is
// marked "…"; piped output stays whole.
func TestHistoryTablesFitTheTerminal(t *testing.T) {
	db := filepath.Join(t.TempDir(), "history.db")
	seedHistory(t, db)
	for _, cols := range []int{80, 120} {
		env := map[string]string{"LIMITSCOPE_DB": db, "COLUMNS": strconv.Itoa(cols), "NO_COLOR": "1"}
		for _, args := range [][]string{{"list"}, {"stats"}} {
			code, out, errOut := histRun(t, env, true, runHistory, args...)
			if code != 0 {
				t.Fatalf("%v: exit %d %s", args, code, errOut)
			}
			for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
				if w := ansi.StringWidth(l); w > cols {
					t.Errorf("history %v at %d columns: a %d-column line:\n%s", args, cols, w, out)
					break
				}
			}
			if args[0] == "list" && (!strings.Contains(out, "OUTCOME") || !strings.Contains(out, "stopped") || !strings.Contains(out, "anthropic/")) {
				t.Errorf("history list at %d columns lost what matters:\n%s", cols, out)
			}
		}
	}
	env := map[string]string{"LIMITSCOPE_DB": db, "COLUMNS": "80"}
	if _, out, _ := histRun(t, env, false, runHistory, "list"); strings.Contains(out, "…") {
		t.Errorf("piped list is clipped:\n%s", out)
	}
}

// TestExportLimitTakesTheNewest: export --limit N takes the same end as list
// --limit N, the newest N, and writes them oldest first.
func TestExportLimitTakesTheNewest(t *testing.T) {
	db := filepath.Join(t.TempDir(), "history.db")
	seedHistory(t, db)
	env := map[string]string{"LIMITSCOPE_DB": db}
	_, out, _ := histRun(t, env, false, runHistory, "list", "--limit", "2")
	var listed []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		listed = append(listed, strings.Split(l, "\t")[0])
	}
	for _, format := range []string{"jsonl", "csv"} {
		code, out, errOut := histRun(t, env, false, runHistory, "export", "--format", format, "--limit", "2")
		if code != 0 {
			t.Fatalf("export: exit %d %s", code, errOut)
		}
		var ids []string
		for i, l := range strings.Split(strings.TrimSpace(out), "\n") {
			switch {
			case format == "csv" && i > 0:
				ids = append(ids, strings.Split(l, ",")[0])
			case format == "jsonl":
				var j struct {
					ID uint32 `json:"id"`
				}
				if err := json.Unmarshal([]byte(l), &j); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, strconv.Itoa(int(j.ID)))
			}
		}
		ids = slices.Compact(ids)
		if len(ids) != 2 || len(listed) != 2 || ids[0] != listed[1] || ids[1] != listed[0] {
			t.Errorf("export --format %s --limit 2 wrote calls %v; list --limit 2 lists %v (newest first)", format, ids, listed)
		}
	}
}

// TestListClassesInTimeOrder: the CLASSES column says what the attempts met
// in the order they met it.
func TestListClassesInTimeOrder(t *testing.T) {
	db := filepath.Join(t.TempDir(), "history.db")
	seedHistory(t, db)
	_, out, _ := histRun(t, map[string]string{"LIMITSCOPE_DB": db}, false, runHistory, "list")
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Split(l, "\t"); len(f) > 8 && f[0] == "2" && f[8] != "overload,connection,ok" {
			t.Errorf("call 2's classes %q, want overload,connection,ok (its attempts' order)", f[8])
		}
	}
	if !strings.Contains(out, "overload,connection,ok") {
		t.Errorf("no call lists its classes in time order:\n%s", out)
	}
}

// TestProviderMeansTried: --provider keeps the calls that sent it a request;
// --in-chain also those where it was an unused fallback; stats names both
// counts (primary and served).
func TestProviderMeansTried(t *testing.T) {
	db := filepath.Join(t.TempDir(), "history.db")
	oa := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	an := stream.Target{Provider: "anthropic", Model: "claude-haiku-4-5"}
	rec := store.NewRecorder(db, store.SessionInfo{Version: "test", Mode: store.ModeSimulated, Command: "send"}, store.Options{Retention: -1})
	start := histT0
	record := func(id string, chain []stream.Target, atts ...retry.Attempt) {
		call := retry.Call{ID: id, Chain: chain, Prompt: "p", Policy: retry.DefaultPolicy()}
		sink := rec.Sink(call, nil)
		sink(retry.Event{Kind: retry.EventCallStart, CallID: id, Time: start, Chain: chain})
		for i := range atts {
			atts[i].StartedAt = start
			sink(retry.Event{Kind: retry.EventAttemptEnd, CallID: id, Time: start, Attempt: &atts[i]})
		}
		served := atts[len(atts)-1].Target
		sink(retry.Event{Kind: retry.EventCallEnd, CallID: id, Time: start.Add(time.Second), Result: &retry.Result{CallID: id,
			Outcome: retry.OutcomeOK, Attempts: atts, ServedBy: &served, Started: start, Ended: start.Add(time.Second), Text: "t"}})
		start = start.Add(time.Minute)
	}
	ok := func(tg stream.Target) retry.Attempt {
		return retry.Attempt{N: 1, Target: tg, Status: 200, Class: stream.ClassOK, Decision: retry.DecideDone, Duration: time.Second}
	}
	record("unused-fallback", []stream.Target{oa, an}, ok(oa))
	over := retry.Attempt{N: 1, Target: oa, Status: 529, Class: stream.ClassOverload, Decision: retry.DecideFailover, Duration: time.Second}
	served := ok(an)
	served.N = 2
	record("failed-over", []stream.Target{oa, an}, over, served)
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"LIMITSCOPE_DB": db}
	count := func(args ...string) int {
		code, out, errOut := histRun(t, env, false, runHistory, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d %s", args, code, errOut)
		}
		return strings.Count(strings.TrimSpace(out), "\n") // rows under the header
	}
	if n := count("list", "--provider", "anthropic"); n != 1 {
		t.Errorf("list --provider anthropic: %d calls, want 1 (the one that sent it a request)", n)
	}
	if n := count("list", "--provider", "anthropic", "--in-chain"); n != 2 {
		t.Errorf("list --provider anthropic --in-chain: %d calls, want 2", n)
	}
	if n := count("export", "--provider", "anthropic") + 1; n != 1 { // jsonl: a line a call, no header
		t.Errorf("export --provider anthropic: %d lines, want 1", n)
	}
	_, out, _ := histRun(t, env, false, runHistory, "stats", "--provider", "anthropic")
	if !strings.Contains(out, "all\t1\t1\t1\t") {
		t.Errorf("stats --provider anthropic: want 1 call (primary openai), tried 1, served 1:\n%s", out)
	}
	_, out, _ = histRun(t, env, false, runHistory, "stats")
	// Primary, tried (sent a request) and served, per provider.
	if !strings.Contains(out, "anthropic\t0\t1\t1\t") || !strings.Contains(out, "openai\t2\t2\t1\t") {
		t.Errorf("stats does not name primary, tried and served per provider:\n%s", out)
	}
	if code, _, errOut := histRun(t, env, false, runHistory, "list", "--provider", "antropic"); code != exitUsage || !strings.Contains(errOut, "unknown") {
		t.Errorf("an unknown provider: exit %d %q, want a usage error naming it unknown", code, errOut)
	}
}
