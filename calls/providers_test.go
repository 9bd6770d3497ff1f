package calls

import (
	"strings"
	"testing"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// TestConsoleCurlHasNoKey: the console's copy-as-curl names the key's
// variable, never the key.
func TestConsoleCurlHasNoKey(t *testing.T) {
	const key = "sk-CURLCANARY-abcdefghijklmnop"
	p := &Providers{Endpoints: map[string]stream.Endpoint{"openai": {Provider: "openai", BaseURL: "https://api.openai.com/v1", Key: key}}}
	cmd := p.Curl(64)(retry.Attempt{Target: stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}}, "hi")
	if strings.Contains(cmd, "CURLCANARY") || !strings.Contains(cmd, `"Authorization: Bearer $OPENAI_API_KEY"`) {
		t.Fatalf("curl:\n%s", cmd)
	}
}

// TestConsoleTargetsUseTheProviderTable: the console's default target per
// provider is stream.ProviderInfo.DefaultModel, in the table's order.
func TestConsoleTargetsUseTheProviderTable(t *testing.T) {
	p := &Providers{Endpoints: map[string]stream.Endpoint{"openai": {Provider: "openai"}},
		Missing: map[string]*stream.MissingKeyError{"anthropic": {Vars: []string{"ANTHROPIC_API_KEY"}}}}
	got := p.ConsoleTargets()
	var want []stream.Target
	for _, info := range stream.Providers() {
		m := info.DefaultModel
		if info.SigV4Service != "" { // an AWS API's target names its Region
			m = stream.WithRegion(m, "")
		}
		want = append(want, stream.Target{Provider: info.Name, Model: m})
	}
	if len(got) != len(want) {
		t.Fatalf("%d targets, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Target != want[i] {
			t.Errorf("target %d = %v, want %v", i, got[i].Target, want[i])
		}
		switch got[i].Target.Provider {
		case "openai":
			if !got[i].Available {
				t.Error("openai has an endpoint but is not available")
			}
		case "anthropic":
			if got[i].Available || got[i].Missing != "ANTHROPIC_API_KEY" {
				t.Errorf("anthropic: %+v, want missing ANTHROPIC_API_KEY", got[i])
			}
		}
	}
}
