package stream

import (
	"strings"
	"testing"
)

func TestParseTargetAccount(t *testing.T) {
	for _, tc := range []struct{ in, prov, acct, model, err string }{
		{in: "openai@team/gpt-5.4-mini", prov: "openai", acct: "team", model: "gpt-5.4-mini"},
		{in: "OpenAI:Responses@Team/gpt-5.4-mini", prov: "openai:responses", acct: "team", model: "gpt-5.4-mini"},
		{in: "groq@p-2/meta-llama/llama-4", prov: "groq", acct: "p-2", model: "meta-llama/llama-4"},
		{in: "openai/gpt@x", prov: "openai", model: "gpt@x"}, // an @ in the model is the model's
		{in: "openai@/m", err: "account"},
		{in: "openai@-x/m", err: "account"},
		{in: "openai@a.b/m", err: "account"},
		{in: "nope@team/m", err: "unknown provider"},
	} {
		got, err := ParseTarget(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error about %s", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got.Provider != tc.prov || got.Account != tc.acct || got.Model != tc.model {
			t.Errorf("%q: %+v %v", tc.in, got, err)
			continue
		}
		back, err := ParseTarget(got.String())
		if err != nil || back != got {
			t.Errorf("%q: String %q parses to %+v %v", tc.in, got.String(), back, err)
		}
	}
}

func TestAccountKeyEnv(t *testing.T) {
	if got := AccountKeyEnv("gemini", "my-team"); strings.Join(got, ",") != "GOOGLE_API_KEY_MY_TEAM,GEMINI_API_KEY_MY_TEAM" {
		t.Errorf("gemini@my-team: %v", got)
	}
	if got := AccountKeyEnv("openai:responses", "team"); len(got) != 1 || got[0] != "OPENAI_API_KEY_TEAM" {
		t.Errorf("openai:responses@team: %v", got)
	}
	env := map[string]string{"OPENAI_API_KEY": "sk-default", "OPENAI_BASE_URL": "http://x/v1"}
	_, err := ResolveAccount("openai", "team", nil, func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY_TEAM") {
		t.Errorf("an account never takes the default key: %v", err)
	}
	env["OPENAI_API_KEY_TEAM"] = "sk-team"
	ep, err := ResolveAccount("openai", "team", nil, func(k string) string { return env[k] })
	if err != nil || ep.Key.Reveal() != "sk-team" || ep.BaseURL != "http://x/v1" {
		t.Errorf("openai@team: %+v %v", ep, err)
	}
}

// Two accounts of one provider are two cooldown scopes; the Router finds
// an account's endpoint through Accounts.
func TestRouterAccounts(t *testing.T) {
	r := Router{Endpoints: map[string]Endpoint{"openai": {Provider: "openai", Key: "k1"}},
		Accounts: func(t Target) (Endpoint, error) {
			return Endpoint{Provider: t.Provider, Key: Secret("k-" + t.Account)}, nil
		}}
	a := r.Scope(Target{Provider: "openai", Model: "m"}, ScopeAccount)
	b := r.Scope(Target{Provider: "openai", Account: "team", Model: "m"}, ScopeAccount)
	c := r.Scope(Target{Provider: "openai:responses", Account: "team", Model: "m"}, ScopeAccount)
	if a == b || b != c || !strings.HasPrefix(b, "account:openai:") {
		t.Errorf("scopes %q %q %q: want the default and team apart, team's shared by its API variant", a, b, c)
	}
}

func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"openai@team/m", "openai:responses@a/b/c", "@/", "x@y@z/m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := ParseTarget(s)
		if err != nil {
			return
		}
		back, err := ParseTarget(tg.String())
		if err != nil || back != tg {
			t.Fatalf("%q: %+v round-trips to %+v %v", s, tg, back, err)
		}
	})
}
