package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/creack/pty"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
)

// TestDevNullIsNotATerminal: /dev/null is a character device, not a
// terminal, so output redirected there gets no colour.
func TestDevNullIsNotATerminal(t *testing.T) {
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Fatal("/dev/null counted as a terminal")
	}
	_, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer tty.Close()
	if !isTerminal(tty) {
		t.Fatal("a pty is not counted as a terminal")
	}
}

// reviewChild runs the binary (this test binary running main) with args,
// stdout and stderr on w, in env.
func reviewChild(t *testing.T, env []string, out *os.File, args ...string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
}

// TestRedirectedOutputHasNoEscapeCodes: history, cooldowns and info write
// no escape code to a file (/dev/null is covered by TestDevNullIsNotATerminal),
// or to a terminal with NO_COLOR or TERM=dumb; a plain terminal gets colour.
func TestRedirectedOutputHasNoEscapeCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "history.db")
	seedHistory(t, db)
	cd := store.NewCooldowns(db, store.Options{})
	if err := cd.Set(retry.Cooldown{Scope: "openai:test", Target: "openai/gpt-5.4-mini", Code: "insufficient_quota", Since: time.Now()}); err != nil {
		t.Fatal(err)
	}
	base := childEnv(t, dir)
	// The proxy's token is made once, before the parallel runs read it.
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	reviewChild(t, base, devnull, "info")
	devnull.Close()
	cmds := [][]string{{"history"}, {"history", "show", "2"}, {"history", "stats"}, {"history", "sessions"}, {"cooldowns"}, {"info"}}
	run := func(name string, env []string, onPty bool, wantColour bool) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runMode(t, name, env, onPty, wantColour, cmds)
		})
	}
	run("to a file", base, false, false)
	run("on a terminal with NO_COLOR", slices.Concat(base, []string{"NO_COLOR=1"}), true, false)
	run("on a terminal with TERM=dumb", slices.Concat(base, []string{"TERM=dumb"}), true, false)
	run("on a terminal", base, true, true)
}

// runMode runs each of cmds with its output on a file or a pty and checks
// for escape codes.
func runMode(t *testing.T, name string, env []string, onPty, wantColour bool, cmds [][]string) {
	for _, args := range cmds {
		var got []byte
		if onPty {
			ptm, tty, err := pty.Open()
			if err != nil {
				t.Skipf("no pty: %v", err)
			}
			done := make(chan []byte)
			go func() {
				var b bytes.Buffer
				buf := make([]byte, 4096)
				for {
					n, err := ptm.Read(buf)
					b.Write(buf[:n])
					if err != nil {
						break
					}
				}
				done <- b.Bytes()
			}()
			reviewChild(t, env, tty, args...)
			tty.Close()
			got = <-done
			ptm.Close()
		} else {
			f, err := os.Create(filepath.Join(t.TempDir(), "out"))
			if err != nil {
				t.Fatal(err)
			}
			reviewChild(t, env, f, args...)
			f.Close()
			if got, err = os.ReadFile(f.Name()); err != nil {
				t.Fatal(err)
			}
		}
		has := bytes.Contains(got, []byte("\x1b["))
		if has && !wantColour || !has && wantColour && len(args) == 1 && args[0] == "history" {
			t.Errorf("%s %v: escape codes %v, want %v:\n%q", name, args, has, wantColour, got)
		}
	}
}

// TestTableAlignsByDisplayWidth: on a terminal, a column after wide
// characters (CJK, two columns each) starts at the same display column on
// every row; piped, cells are tab-separated.
func TestTableAlignsByDisplayWidth(t *testing.T) {
	for _, tty := range []bool{true, false} {
		a, out, _ := histTestApp(map[string]string{"NO_COLOR": "1"}, tty)
		o := newTextOut(a)
		o.table([]string{"A", "B"}, [][]cell{{{"模型模型", nil}, {"x", nil}}, {{"abc", nil}, {"y", nil}}, {{"é", nil}, {"z", nil}}})
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if !tty {
			if lines[1] != "模型模型\tx" {
				t.Errorf("piped row %q, want tab-separated", lines[1])
			}
			continue
		}
		col := -1
		for _, l := range lines {
			i := strings.LastIndex(l, " ")
			c := ansi.StringWidth(l[:i+1])
			if col >= 0 && c != col {
				t.Errorf("second column at display column %d, want %d:\n%s", c, col, out.String())
			}
			col = c
		}
	}
}
