package bench

import (
	"os"
	"testing"
	"testing/synctest"

	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// TestFigures prints every policy's table for several scenarios, 120 calls at
// concurrency 16 in virtual time (a few seconds of real time for many minutes
// of simulated traffic). It asserts nothing beyond what the other tests do:
// LIMITSCOPE_BENCH_FIGURES=1 go test -run Figures -v ./bench/
func TestFigures(t *testing.T) {
	if os.Getenv("LIMITSCOPE_BENCH_FIGURES") == "" {
		t.Skip("set LIMITSCOPE_BENCH_FIGURES=1 to print the figures")
	}
	clearEnv(t)
	for _, c := range []struct{ file, scen, prov, model string }{
		{"testdata/bench60.ini", "", "openai", "gpt-5.4-mini"},
		{"testdata/bench60.ini", "", "anthropic", "claude-haiku-4-5"},
		{"testdata/ratelimited.ini", "", "openai", "gpt-5.4-mini"},
		{"testdata/spendcap.ini", "", "openai", "gpt-5.4-mini"},
		{"testdata/spendcap.ini", "", "anthropic", "claude-haiku-4-5"},
		{"", "spend-cap", "openai", "gpt-5.4-mini"},
		{"", "calm", "openai", "gpt-5.4-mini"},
		{"", "busy", "anthropic", "claude-haiku-4-5"},
		{"", "overloaded", "anthropic", "claude-haiku-4-5"},
	} {
		synctest.Test(t, func(t *testing.T) {
			env := &SimEnv{InMemory: true, Options: sim.Options{ScenarioFile: c.file, Scenario: c.scen, Seed: 1}}
			cfg := Config{Chain: []stream.Target{{Provider: c.prov, Model: c.model}}, Requests: 120, Concurrency: 16, Prompt: "Say hello in five words.", MaxTokens: 64}
			rep, err := Run(t.Context(), cfg, env)
			if err != nil {
				t.Fatal(err)
			}
			rep.Simulated = true
			rep.Scenario = c.file + c.scen
			if err := rep.WriteTable(os.Stdout); err != nil {
				t.Fatal(err)
			}
			for _, r := range rep.Policies {
				checkSums(t, r)
			}
		})
	}
}
