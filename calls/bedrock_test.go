package calls

import (
	"context"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/tui"
)

// The console lists Bedrock as one more target, its Region on screen, and
// a new user with no keys runs the failover demo from it on the
// simulator: the demo menu's failover-demo on a Bedrock Claude primary
// degrades the simulated Bedrock (SigV4-signed with the simulated
// credentials, which it verifies), and the call fails over to Anthropic
// direct.
func TestConsoleBedrockTargetAndFailoverDemo(t *testing.T) {
	ctx := context.Background()
	p, err := OpenProviders(ctx, func(string) string { return "" }, SimFlags{Sim: true, Seed: 1}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	br := stream.Target{Provider: "bedrock", Model: "us-east-1/anthropic.claude-haiku-5-5-v1:0"}
	found := false
	for _, ti := range p.ConsoleTargets() {
		if ti.Target == br {
			found = ti.Available
		}
	}
	if !found {
		t.Fatalf("%v: no available %s", p.ConsoleTargets(), br)
	}
	if ep := p.Endpoints["bedrock"]; ep.Key != "" || ep.AWS == nil {
		t.Fatalf("the simulated Bedrock endpoint does not sign with SigV4: %+v", ep)
	}
	if chain := DefaultChain(p.ConsoleTargets()); len(chain) != 3 || chain[0].Provider != "openai" {
		t.Fatalf("default chain %v", chain)
	}

	// Real, without credentials: listed, naming the variable it lacks; with
	// a Bedrock API key and AWS_REGION, available in that Region.
	getenv := func(k string) string {
		return map[string]string{"AWS_REGION": "eu-west-1", "HOME": t.TempDir()}[k]
	}
	real, err := OpenProviders(ctx, getenv, SimFlags{}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range real.ConsoleTargets() {
		if ti.Target.Provider == "bedrock" && (ti.Available || ti.Missing != "AWS_BEARER_TOKEN_BEDROCK") {
			t.Fatalf("%+v", ti)
		}
	}
	withKey, err := OpenProviders(ctx, func(k string) string {
		return map[string]string{"AWS_REGION": "eu-west-1", "AWS_BEARER_TOKEN_BEDROCK": "ABSK-x"}[k]
	}, SimFlags{}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range withKey.ConsoleTargets() {
		if ti.Target.Provider == "bedrock" && (!ti.Available || ti.Target.Model != "eu-west-1/anthropic.claude-haiku-5-5-v1:0") {
			t.Fatalf("%+v", ti)
		}
	}

	anth := stream.Target{Provider: "anthropic", Model: "claude-haiku-5-5"}
	if err := p.Faults().Inject(ctx, tui.FaultRequest{Provider: br.Provider, Kind: "failover-demo", RetryAfter: time.Minute}); err != nil {
		t.Fatal(err)
	}
	e := &retry.Engine{Doer: &stream.Router{Client: &stream.Client{}, Endpoints: p.Endpoints},
		Cooldowns: retry.NewMemoryCooldowns(), Clock: retrytest.NewFakeClock(time.Now())}
	res := e.Run(ctx, retry.Call{Chain: []stream.Target{br, anth}, Prompt: "hi"}, nil)
	if res.Outcome != retry.OutcomeOK || res.ServedBy == nil || *res.ServedBy != anth || len(res.Attempts) < 2 {
		t.Fatalf("outcome %s served by %v after %d attempts", res.Outcome, res.ServedBy, len(res.Attempts))
	}
	for _, a := range res.Attempts[:len(res.Attempts)-1] {
		if a.Target != br || (a.Class != stream.ClassOverload && a.Class != stream.ClassRateLimit) {
			t.Fatalf("attempt %+v, want Bedrock's overload or throttle", a)
		}
	}
}
