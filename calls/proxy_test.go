package calls

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
)

// TestProxyPolicyPrecedence: an alias's own policy wins over the flags
// given, which win over the file's top-level policy, which wins over the
// built-in defaults, field by field.
func TestProxyPolicyPrecedence(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "proxy.json")
	doc := `{"policy": {"max_attempts": 7, "deadline": "50s", "max_wait": "90s"},
	 "aliases": {"fast": {"chain": ["openai/gpt-5.4-mini"], "policy": {"max_attempts": 2}},
	             "plain": ["anthropic/claude-haiku-5-5"]}}`
	if err := os.WriteFile(cfgPath, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	var f Flags
	f.Register(fs)
	if err := fs.Parse([]string{"--deadline", "20s", "--max-attempts", "4", "--failover-on-quota"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadProxyConfig(cfgPath, f, fs)
	if err != nil {
		t.Fatal(err)
	}
	def := retry.DefaultPolicy()
	top := cfg.Policy
	if top.MaxAttempts != 4 || top.Deadline != 20*time.Second || top.MaxWait != 90*time.Second || top.FailoverWait != def.FailoverWait || !top.FailoverOnQuota {
		t.Errorf("routes' policy %+v: want the flags given (4, 20s, failover on quota) over the file's, the file's max_wait 90s, defaults elsewhere", top)
	}
	fast := cfg.RoutePolicy(cfg.Aliases["fast"], f.Policy)
	if fast.MaxAttempts != 2 || fast.Deadline != 20*time.Second || fast.MaxWait != 90*time.Second || !fast.FailoverOnQuota {
		t.Errorf("alias policy %+v: want its own max_attempts 2, the rest from the flags and the file", fast)
	}
	if cfg.Aliases["plain"].Policy != nil {
		t.Error("an alias without a policy got one (it takes the routes' policy)")
	}

	// No flags given: the file's top-level policy stands.
	fs = flag.NewFlagSet("proxy", flag.ContinueOnError)
	var g Flags
	g.Register(fs)
	cfg, err = LoadProxyConfig(cfgPath, g, fs)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Policy.MaxAttempts != 7 || cfg.Policy.Deadline != 50*time.Second || cfg.Policy.TriesPerTarget != def.TriesPerTarget {
		t.Errorf("without flags: %+v, want the file's 7 and 50s, defaults elsewhere", cfg.Policy)
	}
}

// TestSimulatedHistoryKeepsCooldownsInMemory: a simulated session's
// cooldowns never touch the history file; a real one's are the file's.
func TestSimulatedHistoryKeepsCooldownsInMemory(t *testing.T) {
	db := filepath.Join(t.TempDir(), "h.db")
	env := Env{Getenv: func(string) string { return "" }}
	sim := OpenHistory(env, HistoryFlags{DB: db, Keep: DefaultKeep}, true, "send")
	if err := sim.Cooldowns().Set(retry.Cooldown{Scope: "account:openai:x", Since: time.Now()}); err != nil {
		t.Fatal(err)
	}
	sim.Close(t.Context(), time.Second)
	real := OpenHistory(env, HistoryFlags{DB: db, Keep: DefaultKeep}, false, "send")
	defer real.Close(t.Context(), time.Second)
	if list, err := real.Cooldowns().List(); err != nil || len(list) != 0 {
		t.Fatalf("the simulated cooldown reached the file: %v %v", list, err)
	}
	if err := real.Cooldowns().Set(retry.Cooldown{Scope: "account:openai:y", Since: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if list, err := real.Cooldowns().List(); err != nil || len(list) != 1 {
		t.Fatalf("the real cooldown: %v %v", list, err)
	}
}
