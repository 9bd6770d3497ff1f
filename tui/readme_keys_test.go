package tui

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestReadmeKeyTable: the README's key table lists, for each view's key map
// (its "where" column names the section), exactly the keys bound there,
// as the help labels them. The words are the README's own.
func TestReadmeKeyTable(t *testing.T) {
	b, err := os.ReadFile("../docs/commands.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "### Keys\n")
	if start < 0 {
		t.Fatal("the README has no ### Keys section")
	}
	doc = doc[start:]
	if end := strings.Index(doc[1:], "\n#"); end >= 0 {
		doc = doc[:end+1]
	}
	documented := map[string][]string{}
	for _, line := range strings.Split(doc, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || strings.TrimSpace(cells[1]) == "where" || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			continue
		}
		where := strings.TrimSpace(cells[1])
		documented[where] = append(documented[where], keyTokens(strings.Trim(strings.TrimSpace(cells[2]), "`"))...)
	}
	if len(documented) == 0 {
		t.Fatal("no key table under ### Keys")
	}
	for _, g := range DefaultKeyMap().groups() {
		var bound []string
		for _, nb := range namedBindings(g.keys) {
			bound = append(bound, keyTokens(nb.b.Help().Key)...)
		}
		slices.Sort(bound)
		bound = slices.Compact(bound)
		doc := documented[g.title]
		for _, k := range bound {
			if !slices.Contains(doc, k) {
				t.Errorf("README: %s's %q is bound but not in the key table", g.title, k)
			}
		}
		for _, k := range doc {
			if !slices.Contains(bound, k) {
				t.Errorf("README: the key table lists %q under %s, which binds no such key", k, g.title)
			}
		}
		delete(documented, g.title)
	}
	for where := range documented {
		t.Errorf("README: the key table names %q, which is no view's key map", where)
	}
}
