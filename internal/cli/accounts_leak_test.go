package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/sim"
)

// TestNoAccountKeyInAnyOutput is TestNoKeyInAnyOutput for the named
// accounts' variables (OPENAI_API_KEY_TEAM by convention, an accounts
// file's MY_CLAUDE_KEY) and the commands that use them, probe included:
// a provider echoing the key everywhere never gets it into any output or
// file, nor does a missing account's error.
func TestNoAccountKeyInAnyOutput(t *testing.T) {
	clearEnv(t)
	r, err := sim.Start(context.Background(), "127.0.0.1:0", sim.Options{Scenario: "calm", TokensPerSecond: 1e6})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	simRoot := func(provider string) string {
		return strings.Replace(r.BaseURL(provider), strings.TrimSuffix(r.URL, "/"), "SIMROOT", 1)
	}
	good := newEchoProxy(t, r.URL, true)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	if err := os.MkdirAll(filepath.Join(cfg, "limitscope"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "limitscope", "accounts.json"), []byte(`{"accounts":{"anthropic@me":"MY_CLAUDE_KEY"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func() map[string]string {
		e := good.env(simRoot)
		for k := range e {
			if strings.HasSuffix(k, "_API_KEY") {
				e[k] = "" // only the accounts' variables hold a key
			}
		}
		e["OPENAI_API_KEY_TEAM"] = canaryKey
		e["MY_CLAUDE_KEY"] = canaryKey
		e["LIMITSCOPE_DB"] = filepath.Join(dir, "state", "history.db")
		e["XDG_STATE_HOME"] = filepath.Join(dir, "state")
		e["XDG_CONFIG_HOME"] = cfg
		e["HOME"] = dir
		return e
	}
	var outputs []string
	runCmd := func(args ...string) int {
		t.Helper()
		e := env()
		ta := newTestApp(e)
		ta.app.getenv = func(k string) string { return e[k] }
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		code := run(ctx, ta.app, args)
		outputs = append(outputs, strings.Join(args, " ")+"\n"+ta.out.String()+ta.errOut.String())
		return code
	}
	if code := runCmd("send", "--model", "openai@team/gpt-5.4-mini", "hello"); code != exitOK {
		t.Fatalf("send openai@team: exit %d\n%s", code, outputs[len(outputs)-1])
	}
	runCmd("send", "--json", "--model", "anthropic@me/claude-haiku-4-5", "hello")
	runCmd("send", "--json", "--model", "openai:responses@team/gpt-5.4-mini", "hello")
	if code := runCmd("probe", "--yes", "--budget", "3", "--json", "openai@team/gpt-5.4-mini"); code != exitOK {
		t.Fatalf("probe: exit %d\n%s", code, outputs[len(outputs)-1])
	}
	runCmd("probe", "--yes", "--budget", "3", "anthropic@me/claude-haiku-4-5")
	if code := runCmd("probe", "--yes", "openai@other/gpt-5.4-mini"); code == exitOK || !strings.Contains(outputs[len(outputs)-1], "OPENAI_API_KEY_OTHER") {
		t.Errorf("a missing account: exit %d\n%s", code, outputs[len(outputs)-1])
	}
	if err := r.Server.Inject(sim.Fault{Provider: "openai", Kind: sim.FaultSpendCap}); err != nil {
		t.Fatal(err)
	}
	runCmd("send", "--model", "openai@team/gpt-5.4-mini", "hi")
	for _, args := range [][]string{{"history", "list", "--json"}, {"history", "show", "1"}, {"history", "show", "--json", "2"},
		{"history", "export"}, {"history", "cards"}, {"history", "cards", "--json"}, {"cooldowns", "--json"}, {"info", "--json"}} {
		runCmd(args...)
	}
	if all := strings.Join(outputs, "\n"); !strings.Contains(all, "openai@team/gpt-5.4-mini  sim") && !strings.Contains(all, "openai@team/gpt-5.4-mini  real") {
		t.Errorf("history cards lists no card of openai@team:\n%s", all)
	}
	if good.sawKey.Load() == 0 {
		t.Fatal("the account key never reached the provider: the test tests nothing")
	}
	for _, o := range outputs {
		if i := strings.Index(o, canaryKey[8:]); i >= 0 {
			t.Errorf("the key leaked in the output of %s\n...%s...", o[:strings.IndexByte(o, '\n')], o[max(0, i-120):min(len(o), i+60)])
		}
	}
	files := 0
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(canaryKey[8:])) {
			t.Errorf("the key is in %s", path)
		}
		return nil
	})
	if files < 2 {
		t.Fatal("no history file was written")
	}
}
