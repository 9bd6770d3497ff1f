package calls_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/calls"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// Two accounts of one provider in one chain on the simulator: a spend-cap
// stop armed for the first account (its own key, sim.AccountKey("a")) cools
// only that account, and with --failover-on-quota the second account
// answers; without it the call stops.
func TestFailoverBetweenAccountsOnQuota(t *testing.T) {
	for _, failover := range []bool{true, false} {
		clearEnv(t)
		env := calls.Env{Getenv: os.Getenv}
		var f calls.Flags
		cs, err := calls.Open(context.Background(), env, f, true, "test")
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.Providers.Sim.Server.Inject(sim.Fault{Provider: "openai@a", Kind: sim.FaultSpendCap}); err != nil {
			t.Fatal(err)
		}
		a := stream.Target{Provider: "openai", Account: "a", Model: "gpt-5.4-mini"}
		b := stream.Target{Provider: "openai", Account: "b", Model: "gpt-5.4-mini"}
		res := cs.Run(context.Background(), retry.Call{Chain: []stream.Target{a, b}, Prompt: "hi",
			Policy: retry.Policy{MaxAttempts: 2, FailoverOnQuota: failover}}, nil)
		cds, err := cs.Engine.Cooldowns.List()
		if err != nil {
			t.Fatal(err)
		}
		var acct []string
		for _, c := range cds {
			if strings.Contains(c.Scope, "account:") {
				acct = append(acct, c.Scope)
			}
		}
		// Only account a's scope is cooled, and it is not b's.
		if len(acct) != 1 || acct[0] != cs.Doer.Scope(a, stream.ScopeAccount) || acct[0] == cs.Doer.Scope(b, stream.ScopeAccount) {
			t.Errorf("failover=%v: account cooldowns %v, want only %s", failover, acct, cs.Doer.Scope(a, stream.ScopeAccount))
		}
		if failover {
			if res.Outcome != retry.OutcomeOK || res.ServedBy == nil || res.ServedBy.Account != "b" {
				t.Errorf("failover: outcome %s served by %v, want ok by account b", res.Outcome, res.ServedBy)
			}
		} else if res.Outcome != retry.OutcomeStopped {
			t.Errorf("no failover: outcome %s, want stopped", res.Outcome)
		}
		cs.Close(context.Background(), 0)
	}
}

// A named account reads its key from its own variable, by convention or
// as the accounts file names it, never the default account's key; a
// missing one names the variable, and no key is in any error.
func TestAccountKeys(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("OPENAI_API_KEY", "sk-default-0000000000")
	t.Setenv("OPENAI_API_KEY_TEAM", "sk-team-1111111111")
	t.Setenv("MY_CLAUDE", "sk-ant-2222222222")
	if err := os.MkdirAll(filepath.Join(dir, "limitscope"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "limitscope", "accounts.json"), []byte(`{"accounts":{"anthropic@me":"MY_CLAUDE"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := calls.OpenProviders(context.Background(), os.Getenv, calls.SimFlags{}, false)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := p.AccountEndpoint(stream.Target{Provider: "openai:responses", Account: "team", Model: "m"})
	if err != nil || ep.Key.Reveal() != "sk-team-1111111111" {
		t.Errorf("openai:responses@team: %v, key from the wrong variable", err)
	}
	ep, err = p.AccountEndpoint(stream.Target{Provider: "anthropic", Account: "me", Model: "m"})
	if err != nil || ep.Key.Reveal() != "sk-ant-2222222222" {
		t.Errorf("anthropic@me (accounts file): %v", err)
	}
	err = p.Check([]stream.Target{{Provider: "openai", Account: "other", Model: "m"}})
	if err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY_OTHER") || strings.Contains(err.Error(), "sk-") {
		t.Errorf("missing account key: %v, want one naming OPENAI_API_KEY_OTHER", err)
	}
	if p.Curl(10)(retry.Attempt{Target: stream.Target{Provider: "openai", Account: "team", Model: "m"}}, "hi") == "" {
		t.Error("no curl for an account")
	}
	if c := p.Curl(10)(retry.Attempt{Target: stream.Target{Provider: "openai", Account: "team", Model: "m"}}, "hi"); !strings.Contains(c, "$OPENAI_API_KEY_TEAM") || strings.Contains(c, "sk-team") {
		t.Errorf("curl %q: want the account's variable, never its key", c)
	}

	// A key pasted into the file is refused without being repeated.
	if err := os.WriteFile(filepath.Join(dir, "limitscope", "accounts.json"), []byte(`{"accounts":{"openai@x":"sk-proj-abc.def-ghi","sk-live-zzz":"V"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = calls.OpenProviders(context.Background(), os.Getenv, calls.SimFlags{}, false)
	if err == nil || strings.Contains(err.Error(), "sk-") {
		t.Errorf("a key in the accounts file: %v, want an error that does not repeat it", err)
	}
}

// Pacing is per account: a rate-limit hold met by one account's key holds
// that account's target only.
func TestPacingPerAccount(t *testing.T) {
	clearEnv(t)
	cs, err := calls.Open(context.Background(), calls.Env{Getenv: os.Getenv}, calls.Flags{}, true, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background(), 0)
	a := stream.Target{Provider: "groq", Account: "a", Model: "llama-3.3-70b-versatile"}
	b := stream.Target{Provider: "groq", Account: "b", Model: "llama-3.3-70b-versatile"}
	if err := cs.Providers.Sim.Server.Inject(sim.Fault{Provider: "groq@a", Kind: sim.FaultRateLimit, RetryAfter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	res := cs.Run(context.Background(), retry.Call{Chain: []stream.Target{a}, Prompt: "hi", Policy: retry.Policy{MaxAttempts: 1}}, nil)
	if res.Outcome == retry.OutcomeOK {
		t.Fatalf("account a answered through its hold: %+v", res)
	}
	sa, sb := cs.Engine.TargetState(a), cs.Engine.TargetState(b)
	if sa.Pace.HoldUntil.IsZero() || !sb.Pace.HoldUntil.IsZero() {
		t.Errorf("holds: a %v, b %v; want a's only", sa.Pace.HoldUntil, sb.Pace.HoldUntil)
	}
	if res := cs.Run(context.Background(), retry.Call{Chain: []stream.Target{b}, Prompt: "hi", Policy: retry.Policy{MaxAttempts: 1}}, nil); res.Outcome != retry.OutcomeOK {
		t.Errorf("account b: %s, want ok (the hold is a's)", res.Outcome)
	}
}
