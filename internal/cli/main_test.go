package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/limitscope/limitscope/stream"
)

// childMainEnv, when set, makes this test binary run Main instead of its
// tests: the tests that need a process of their own (two processes on one
// Redis, output to a file or a pty) run it as the limitscope binary.
const childMainEnv = "LIMITSCOPE_CLI_TEST_RUN_MAIN"

func init() {
	if os.Getenv(childMainEnv) == "1" {
		Main("dev") // exits
	}
}

// childEnv is a child process's environment: this binary as limitscope, no
// provider key or base URL, and the home, state and history paths in dir.
func childEnv(t testing.TB, dir string) []string {
	t.Helper()
	env := map[string]string{
		"LIMITSCOPE_SIM": "", "NO_COLOR": "",
		childMainEnv:      "1",
		"TERM":            "xterm-256color",
		"HOME":            filepath.Join(dir, "home"),
		"XDG_STATE_HOME":  filepath.Join(dir, "state"),
		"XDG_CONFIG_HOME": filepath.Join(dir, "config"),
		"LIMITSCOPE_DB":   filepath.Join(dir, "history.db"),
	}
	for _, v := range stream.AllEnvVars() {
		env[v] = ""
	}
	return environ(env)
}

// TestMain fails the run if any goroutine outlives the tests: every command
// must stop what it started (simulators, recorders, streams, engines),
// whether it ended well, failed or was cancelled.
func TestMain(m *testing.M) {
	if db := os.Getenv(fullDiskEnv); db != "" {
		fullDiskSendChild(db)
		os.Exit(0)
	}
	code := m.Run()
	// Keep-alive connections of the HTTP client shared by every
	// stream.Client without its own are idle, not leaked.
	stream.CloseIdleConnections()
	if code == 0 {
		// Ignored, as in tui's tests: a tea.Tick command of a console that
		// has quit, which bubbletea leaves to its timer (it ends when the
		// timer fires, up to a second later).
		if err := goleak.Find(goleak.IgnoreTopFunction("charm.land/bubbletea/v2.Tick.func1")); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
