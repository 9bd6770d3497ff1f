package calls

import (
	"context"
	"testing"

	"github.com/limitscope/limitscope/stream"
)

// The console lists Bedrock as one more target, its Region on screen, and
// a new user with no keys runs the failover demo from it on the
// simulator: the demo menu's failover-demo on a Bedrock Claude primary
// degrades the simulated Bedrock (SigV4-signed with the simulated
// credentials, which it verifies), and the call fails over to Anthropic
// direct.
func TestConsoleBedrockTargetAndFailoverDemo(t *testing.T) {
	ctx := context.Background()
	br := stream.Target{Provider: "bedrock", Model: "us-east-1/anthropic.claude-haiku-5-5-v1:0"}
	p := simConsole(t, br)
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

	res := runFailoverDemo(t, p, br)
	for _, a := range res.Attempts[:len(res.Attempts)-1] {
		if a.Class != stream.ClassOverload && a.Class != stream.ClassRateLimit {
			t.Fatalf("attempt %+v, want Bedrock's overload or throttle", a)
		}
	}
}
