package cli

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/limitscope/limitscope/stream"
)

// isolatedEnv is a test's own environment, read through app.getenv: no
// provider key or base URL, no LIMITSCOPE_SIM, and the history, state and
// config folders in temporary folders. Unlike clearEnv it does not touch
// the process's environment (t.Setenv), so tests using it run in parallel.
func isolatedEnv(t *testing.T, extra ...map[string]string) map[string]string {
	t.Helper()
	env := map[string]string{"LIMITSCOPE_SIM": "", "NO_COLOR": ""}
	for _, v := range stream.AllEnvVars() {
		env[v] = ""
	}
	env["LIMITSCOPE_DB"] = filepath.Join(t.TempDir(), "history.db")
	env["XDG_STATE_HOME"] = t.TempDir()
	env["XDG_CONFIG_HOME"] = t.TempDir()
	for _, e := range extra {
		maps.Copy(env, e)
	}
	return env
}

// getenvOf reads env only.
func getenvOf(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// environ is os.Environ with env's values in place (an empty value
// removes the variable), for a child process.
func environ(env map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := env[k]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range env {
		if v != "" {
			out = append(out, k+"="+v)
		}
	}
	return out
}
