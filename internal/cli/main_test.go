package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/limitscope/limitscope/internal/leaktest"
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
	leaktest.Main(m)
}
