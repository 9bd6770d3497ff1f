package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// readmeCommand is one command a document shows.
type readmeCommand struct {
	line string   // as written, after the document's name
	args []string // after "go run ." or "limitscope"
}

// docFiles is every document whose commands and links the tests check:
// README.md first, then docs/*.md in name order.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 6 {
		t.Fatalf("found %d documents in docs/; the glob is broken", len(docs))
	}
	sort.Strings(docs)
	return append([]string{"README.md"}, docs...)
}

// readmeCommands extracts every command the documents show, in order:
// each line of a ```sh block, and each "$ limitscope ..." line of a
// captured run.
func readmeCommands(t *testing.T) []readmeCommand {
	t.Helper()
	var out []readmeCommand
	for _, f := range docFiles(t) {
		out = append(out, docCommands(t, f)...)
	}
	return out
}

// docCommands extracts the commands one document shows.
func docCommands(t *testing.T, file string) []readmeCommand {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []readmeCommand
	inSh, inBlock := false, false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			if inBlock {
				inSh, inBlock = false, false
			} else {
				inBlock, inSh = true, strings.TrimPrefix(line, "```") == "sh"
			}
			continue
		}
		if !inBlock {
			continue
		}
		cmd := ""
		switch {
		case inSh:
			cmd, _, _ = strings.Cut(line, "#")
		case strings.HasPrefix(line, "$ limitscope "):
			cmd = strings.TrimPrefix(line, "$ ")
		}
		cmd = strings.TrimSpace(cmd)
		if cmd == "" {
			continue
		}
		line := file + ": " + cmd
		words := shellWords(t, cmd)
		switch {
		case len(words) >= 2 && words[0] == "go" && words[1] == "test":
			out = append(out, readmeCommand{line: line, args: nil})
			continue
		case len(words) >= 3 && words[0] == "go" && words[1] == "run" && words[2] == ".":
			words = words[3:]
		case words[0] == "limitscope":
			words = words[1:]
		default:
			t.Fatalf("%s: not go run . or limitscope", line)
		}
		out = append(out, readmeCommand{line: line, args: words})
	}
	return out
}

// shellWords splits a command line as sh would for the simple quoting the
// README uses ("..." and '...').
func shellWords(t *testing.T, s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case unicode.IsSpace(r):
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("unbalanced quote in %q", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestDocsExamples runs every command the README and docs/*.md show, on
// the simulator with no key, in the order written (README.md first) and
// sharing one history, and checks each does what the document says of it.
func TestDocsExamples(t *testing.T) {
	t.Parallel()
	cmds := readmeCommands(t)
	if len(cmds) < 6 {
		t.Fatalf("found %d commands in the documents; the extraction is broken", len(cmds))
	}
	dir := t.TempDir()
	env := e2eEnv(t, dir)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	runCmd := func(args []string) (int, string, string) {
		cmd := exec.Command(exe, args...)
		cmd.Env = env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), out.String(), errb.String()
		} else if err != nil {
			t.Errorf("%v: %v", args, err)
			return -1, "", ""
		}
		return 0, out.String(), errb.String()
	}
	// Commands run in the documents' order; those between two history commands
	// run at once (each answer is paced as a real one), and a history
	// command waits for every command before it.
	sends := 0
	var wg sync.WaitGroup
	var console []readmeCommand // run last, on this goroutine (the pty harness may stop the test)
	for _, c := range cmds {
		c := c
		if c.args != nil && len(c.args) == 0 {
			console = append(console, c)
			continue
		}
		if len(c.args) > 0 && c.args[0] == "history" {
			wg.Wait()
			check(t, c, sends, runCmd)
			continue
		}
		if len(c.args) > 0 && c.args[0] == "send" && !tierRefused(c.args) {
			sends++
		}
		wg.Add(1)
		before := sends
		go func() {
			defer wg.Done()
			check(t, c, before, runCmd)
		}()
	}
	wg.Wait()
	for _, c := range console {
		check(t, c, 0, runCmd)
	}
}

// sendJSON is the part of `send --json`'s document the documents' checks read.
type sendJSON struct {
	Outcome   string         `json:"outcome"`
	Simulated bool           `json:"simulated"`
	ServedBy  *stream.Target `json:"served_by"`
	Attempts  []struct {
		Provider string `json:"provider"`
	} `json:"attempts"`
}

// requestsBy is the providers asked, in order.
func requestsBy(d sendJSON) string {
	var parts []string
	for _, a := range d.Attempts {
		parts = append(parts, a.Provider)
	}
	return strings.Join(parts, " ")
}

// check runs one command a document shows and checks it does what it says;
// sends is how many send commands come before it.
func check(t *testing.T, c readmeCommand, sends int, runCmd func([]string) (int, string, string)) {
	switch {
	case c.args == nil:
		// "go test ./..." is this very run.
		return
	case len(c.args) == 0:
		// The console: on the simulator when no key is set.
		e := startE2E(t, e2eEnv(t, t.TempDir()))
		e.waitText("SIMULATED", "Type a prompt")
	case tierModel(c.args) != "":
		checkTierExample(t, c, runCmd)
	case c.args[0] == "send":
		code, out, errOut := runCmd(c.args)
		if code != exitOK {
			t.Errorf("%s: exit %d\n%s", c.line, code, errOut)
			return
		}
		if !contains(c.args, "--json") {
			if strings.TrimSpace(out) == "" || !strings.Contains(errOut, "served by") || !strings.Contains(errOut, "simulator") {
				t.Errorf("%s: want the answer on stdout and who served from the simulator on stderr; got\n%s\n%s", c.line, out, errOut)
			}
			return
		}
		var doc sendJSON
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Errorf("%s: not one JSON document: %v\n%s", c.line, err, out)
			return
		}
		if doc.Outcome != "ok" || !doc.Simulated || doc.ServedBy == nil {
			t.Errorf("%s: outcome %s simulated %v served by %v", c.line, doc.Outcome, doc.Simulated, doc.ServedBy)
			return
		}
		// The headless failover example: the fallback serves.
		if fb := flagValue(c.args, "--fallback"); fb != "" && doc.ServedBy.String() != fb {
			t.Errorf("%s: served by %s, want the fallback %s (the README's failover example fails over); attempts %s",
				c.line, doc.ServedBy, fb, requestsBy(doc))
		}
	case c.args[0] == "history" && len(c.args) > 1 && c.args[1] == "scenario":
		checkScenarioExample(t, c, runCmd)
	case c.args[0] == "history":
		code, out, errOut := runCmd(c.args)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != exitOK || len(lines) != 1+sends || !strings.HasPrefix(lines[0], "ID\tSTARTED") {
			t.Errorf("%s: exit %d, want a header and the %d calls sent before it:\n%s%s", c.line, code, sends, out, errOut)
		}
	case c.args[0] == "sim" && contains(c.args, "--list"):
		code, out, _ := runCmd(c.args)
		for _, want := range []string{"SCENARIO", "calm", "failover-demo", "FAULT", "rate_limit"} {
			if code != exitOK || !strings.Contains(out, want) {
				t.Errorf("%s: exit %d, output lacks %q", c.line, code, want)
			}
		}
	case c.args[0] == "bench":
		// A captured run of minutes: run the limitscope policy of it,
		// smaller, and check what the document says of that row.
		args := append(append([]string(nil), c.args...), "--policy", "limitscope", "--requests", "6", "--concurrency", "2", "--json")
		code, out, errOut := runCmd(args)
		var rep struct {
			Policies []struct {
				Policy     string `json:"policy"`
				Completed  int    `json:"completed"`
				Stopped    int    `json:"stopped"`
				AfterQuota int    `json:"requests_after_quota"`
			} `json:"policies"`
		}
		if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil || len(rep.Policies) != 1 {
			t.Errorf("%s: exit %d, %v\n%s%s", c.line, code, err, out, errOut)
			return
		}
		p := rep.Policies[0]
		if flagValue(c.args, "--scenario") == "spend-cap" {
			if p.Stopped == 0 || p.AfterQuota != 0 {
				t.Errorf("%s: limitscope stopped %d, after quota %d; the document says it stops and sends nothing after the quota error", c.line, p.Stopped, p.AfterQuota)
			}
		} else if p.Completed != 6 {
			t.Errorf("%s: limitscope completed %d/6; the document says all complete", c.line, p.Completed)
		}
	default:
		t.Errorf("%s: this command has no check here: add one", c.line)
	}
}

func contains(args []string, s string) bool {
	for _, a := range args {
		if a == s {
			return true
		}
	}
	return false
}

// flagValue is the value after flag in args ("" if absent).
func flagValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// checkScenarioExample runs the history scenario example: the
// calls the documents sent before it, learnt into a file the simulator reads.
func checkScenarioExample(t *testing.T, c readmeCommand, runCmd func([]string) (int, string, string)) {
	code, out, errOut := runCmd(c.args)
	if code != exitOK {
		t.Errorf("%s: exit %d\n%s", c.line, code, errOut)
		return
	}
	if err := sim.CheckScenario(strings.NewReader(out), "stdout"); err != nil {
		t.Errorf("%s: the scenario does not parse: %v\n%s", c.line, err, out)
	}
	for _, want := range []string{"Source: calls since", "[openai]", "rpm = 500"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s: no %q in\n%s", c.line, want, out)
		}
	}
}

// TestDocsLinks: every relative link in README.md and docs/*.md names a
// file that exists, and an #anchor names a heading of that document.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	linkRe := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRe.FindAllStringSubmatch(outsideCode(string(b)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %s: %v", file, target, err)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			db, err := os.ReadFile(dest)
			if err != nil {
				t.Errorf("%s: link %s: %v", file, target, err)
				continue
			}
			if !slices.Contains(headingAnchors(string(db)), anchor) {
				t.Errorf("%s: link %s: %s has no heading #%s", file, target, dest, anchor)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d links; the extraction is broken", checked)
	}
}

// outsideCode is a Markdown document without its fenced code blocks.
func outsideCode(doc string) string {
	var out strings.Builder
	inBlock := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock
			continue
		}
		if !inBlock {
			out.WriteString(line + "\n")
		}
	}
	return out.String()
}

// headingAnchors is the anchor of every heading of a Markdown document, as
// GitHub makes them: lower case, spaces as "-", punctuation but "-" and
// "_" dropped, "-1", "-2"... after a repeated one.
func headingAnchors(doc string) []string {
	var out []string
	seen := map[string]int{}
	for _, line := range strings.Split(outsideCode(doc), "\n") {
		text := strings.TrimLeft(line, "#")
		if text == line || !strings.HasPrefix(text, " ") {
			continue
		}
		var slug strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				slug.WriteRune(r)
			case r == ' ':
				slug.WriteByte('-')
			}
		}
		a := slug.String()
		if n := seen[a]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", a, n))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out
}

// TestDocsProviderTables: the provider tables of the documents and
// SECURITY.md's list of key variables name the providers of stream's
// table, no more and no fewer. A new provider is a row in each.
func TestDocsProviderTables(t *testing.T) {
	t.Parallel()
	var all, own, keys []string
	for _, p := range stream.Providers() {
		all = append(all, p.Name)
		if p.Account == "" {
			own = append(own, p.Name)
			keys = append(keys, p.KeyEnv...)
		}
	}
	// The README's table names each target prefix: `openai/`.
	checkNames(t, "README.md's provider table", tableNames(t, "README.md", "## Providers and keys", "| prefix |", "/"), all)
	checkNames(t, "sim/README.md's table of mounts", tableNames(t, "sim/README.md", "", "| provider | `*_BASE_URL` value |", ""), own)
	checkNames(t, "sim/README.md's table of limits", tableNames(t, "sim/README.md", "## Limits", "| provider | default limits |", ""), own)
	// SECURITY.md's first bullet lists every key variable.
	b, err := os.ReadFile("SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "- Keys are read **only from the environment**")
	bullet, _, _ := strings.Cut(rest, "\n- ")
	if !ok {
		t.Fatal("SECURITY.md: no bullet \"Keys are read **only from the environment**\"")
	}
	var listed []string
	for _, m := range regexp.MustCompile("`([A-Z0-9_]+)`").FindAllStringSubmatch(bullet, -1) {
		listed = append(listed, m[1])
	}
	checkNames(t, "SECURITY.md's key variables", listed, keys)
}

// tableNames is the first cell of each row of the table whose header row
// starts with header (after the heading section, when given), in
// backquotes or not, without suffix.
func tableNames(t *testing.T, file, section, header, suffix string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if section != "" {
		_, doc, _ = strings.Cut(doc, "\n"+section+"\n")
	}
	_, doc, ok := strings.Cut(doc, "\n"+header)
	if !ok {
		t.Fatalf("%s: no table with the header %q", file, header)
	}
	var names []string
	for i, line := range strings.Split(doc, "\n") {
		if i < 2 {
			continue // the rest of the header, and the separator row
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cell := strings.TrimSpace(strings.Split(line, "|")[1])
		names = append(names, strings.TrimSuffix(strings.Trim(cell, "`"), suffix))
	}
	return names
}

// checkNames reports the names want has and got lacks, and the other way.
func checkNames(t *testing.T, what string, got, want []string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("%s lacks %s (in stream's provider table)", what, w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("%s names %s, which stream's provider table does not", what, g)
		}
	}
}
