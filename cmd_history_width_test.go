package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
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
