package calls

import (
	"context"
	"testing"

	"github.com/limitscope/limitscope/stream"
)

// The console lists the Gemini Interactions API as one more target (after
// the providers: the default chain is unchanged), without a key it names
// the gemini key variable, and the failover demo runs from it: the demo
// menu's failover-demo on an Interactions primary degrades the simulated
// gemini provider, and the call fails over to anthropic.
func TestConsoleInteractionsTargetAndFailoverDemo(t *testing.T) {
	ctx := context.Background()
	ix := stream.Target{Provider: "gemini:interactions", Model: "gemini-3.8-flash"}
	p := simConsole(t, ix)
	if chain := DefaultChain(p.ConsoleTargets()); len(chain) != 3 || chain[2].Provider != "gemini" {
		t.Fatalf("default chain %v", chain)
	}
	real, err := OpenProviders(ctx, func(string) string { return "" }, SimFlags{}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range real.ConsoleTargets() {
		if ti.Target == ix && (ti.Available || ti.Missing != "GOOGLE_API_KEY") {
			t.Fatalf("%+v", ti)
		}
	}

	runFailoverDemo(t, p, ix)
}
