package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestDocsBenchFlags: the bench flag table of docs/commands.md names every
// flag of `limitscope bench -h` with the default the binary has.
func TestDocsBenchFlags(t *testing.T) {
	b, err := os.ReadFile("docs/commands.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	start := strings.Index(readme, "### `bench`\n")
	if start < 0 {
		t.Fatal("no ### `bench` section in docs/commands.md")
	}
	section := readme[start:]
	if end := strings.Index(section[len("### `bench`\n"):], "\n### "); end >= 0 {
		section = section[:end+len("### `bench`\n")]
	}
	table := map[string]string{} // flag -> its row's default cell
	for _, l := range strings.Split(section, "\n") {
		cells := strings.Split(l, "|")
		if len(cells) < 4 {
			continue
		}
		for _, m := range regexp.MustCompile("`--([a-z-]+)").FindAllStringSubmatch(cells[1], -1) {
			table[m[1]] = cells[2]
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "bench", "-h")
	cmd.Env = e2eEnv(t, t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bench -h: %v\n%s", err, out)
	}
	help := string(out)
	flagRe := regexp.MustCompile(`(?m)^  -([a-z-]+)`)
	defRe := regexp.MustCompile(`\(default "?([^")]+)"?\)`)
	lines := strings.Split(help, "\n")
	seen := 0
	for i, l := range lines {
		m := flagRe.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		seen++
		name := m[1]
		cell, ok := table[name]
		if !ok {
			t.Errorf("docs/commands.md's bench table lacks --%s", name)
			continue
		}
		if i+1 < len(lines) {
			if d := defRe.FindStringSubmatch(lines[i+1]); d != nil && !strings.Contains(cell, d[1]) {
				t.Errorf("docs/commands.md says --%s defaults to %q; the binary: %s", name, strings.TrimSpace(cell), d[1])
			}
		}
	}
	if seen < 10 {
		t.Fatalf("read %d flags from bench -h:\n%s", seen, help)
	}
}
