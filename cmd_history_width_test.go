package main

import (
	"path/filepath"
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
