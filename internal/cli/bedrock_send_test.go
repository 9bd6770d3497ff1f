package cli

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/sim"
)

// TestSendBedrockWorkedCases runs the worked cases of Amazon Bedrock's
// ConverseStream through `send --json` against the
// simulator (a Bedrock API key, AWS_BEARER_TOKEN_BEDROCK), on the fake
// clock the engine and the simulator share, so the requests and the waits
// are exact. A Region is the model's first segment: failing over to
// another Region is one more entry of the chain.
func TestSendBedrockWorkedCases(t *testing.T) {
	const (
		E = "bedrock/us-east-1/anthropic.claude-haiku-5-5-v1:0"
		W = "bedrock/us-west-2/anthropic.claude-haiku-5-5-v1:0"
		A = "anthropic/claude-haiku-5-5"
		b = "bedrock"
	)
	cases := []struct {
		name     string
		faults   []sim.Fault
		args     []string
		requests string
		models   string // the attempts' models, when it matters
		outcome  string
		exit     int
		served   string
		first    string // the first attempt's class
		code     string // and its code
		midFirst bool
		minWait  time.Duration
		maxWait  time.Duration
	}{
		{"ThrottlingException x-amz-retry-after 1000 ms honoured, then 200", []sim.Fault{{Provider: b, Kind: sim.FaultRateLimit, RetryAfter: time.Second}},
			[]string{"--model", E}, b + " " + b, "", "ok", 0, b, "rate_limit", "ThrottlingException", false, time.Second, 1250 * time.Millisecond},
		{"ThrottlingException Retry-After 2 s honoured, then 200", []sim.Fault{{Provider: b, Kind: sim.FaultRateLimit, RetryAfter: 2 * time.Second, Code: "retry_after"}},
			[]string{"--model", E}, b + " " + b, "", "ok", 0, b, "rate_limit", "ThrottlingException", false, 2 * time.Second, 2250 * time.Millisecond},
		// The daily throttle has the per-minute one's name and status; only
		// its message says "per day": a per-day quota, no retry, no failover.
		{"too many tokens per day is a per-day quota: no retry", []sim.Fault{{Provider: b, Kind: sim.FaultDailyQuota}},
			[]string{"--model", E, "--fallback", A}, b, "", "stopped", 3, "", "quota", "ThrottlingException", false, 0, 0},
		{"ServiceQuotaExceededException stops, no retry", []sim.Fault{{Provider: b, Kind: sim.FaultSpendCap}},
			[]string{"--model", E}, b, "", "stopped", 3, "", "quota", "ServiceQuotaExceededException", false, 0, 0},
		{"503 ServiceUnavailable twice fails over to another Region", []sim.Fault{{Provider: b, Kind: sim.FaultOverload, Count: 2}},
			[]string{"--model", E, "--fallback", W}, b + " " + b + " " + b, "us-east-1 us-east-1 us-west-2", "ok", 0, b, "overload", "ServiceUnavailableException", false, 0, 20 * time.Second},
		{"529 twice fails over to Anthropic direct", []sim.Fault{{Provider: b, Kind: sim.FaultOverload, Count: 2, Code: "529"}},
			[]string{"--model", E, "--fallback", A}, b + " " + b + " anthropic", "", "ok", 0, "anthropic", "overload", "", false, 0, 20 * time.Second},
		{"ModelNotReadyException twice fails over to another model", []sim.Fault{{Provider: b, Kind: sim.FaultOverload, Count: 2, Code: "model_not_ready"}},
			[]string{"--model", E, "--fallback", "bedrock/us-east-1/amazon.nova-lite-v1:0"}, b + " " + b + " " + b, "", "ok", 0, b, "overload", "ModelNotReadyException", false, 0, 20 * time.Second},
		{"ModelStreamErrorException after 200, retried", []sim.Fault{{Provider: b, Kind: sim.FaultMidStream}},
			[]string{"--model", E}, b + " " + b, "", "ok", 0, b, "server", "ModelStreamErrorException", true, 0, 20 * time.Second},
		{"in-stream throttlingException keeps its meaning", []sim.Fault{{Provider: b, Kind: sim.FaultMidStream, Code: "throttling"}},
			[]string{"--model", E}, b + " " + b, "", "ok", 0, b, "rate_limit", "ThrottlingException", true, 0, 20 * time.Second},
		{"cut stream (no messageStop, metadata), retried", []sim.Fault{{Provider: b, Kind: sim.FaultCut}},
			[]string{"--model", E}, b + " " + b, "", "ok", 0, b, "connection", "", true, 0, 20 * time.Second},
		{"stream cut inside a message, retried", []sim.Fault{{Provider: b, Kind: sim.FaultCut, Code: "frame"}},
			[]string{"--model", E}, b + " " + b, "", "ok", 0, b, "connection", "", true, 0, 20 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := runWorkedCase(t, workedCase{tc.faults, tc.args, tc.requests, tc.outcome, tc.exit, tc.served, tc.minWait, tc.maxWait})
			if len(d.Attempts) == 0 {
				return
			}
			a := d.Attempts[0]
			if string(a.Class) != tc.first || a.Code != tc.code || a.MidStream != tc.midFirst || tc.midFirst && a.Status != 200 {
				t.Errorf("first attempt %+v, want class %s code %q mid-stream %v", a, tc.first, tc.code, tc.midFirst)
			}
			if a.RequestID == "" {
				t.Error("no request id on the first attempt")
			}
			if strings.Contains(tc.name, "per day") && !strings.Contains(a.Message, "per day") {
				t.Errorf("message %q does not name the day", a.Message)
			}
			if tc.models != "" {
				var regions []string
				for _, at := range d.Attempts {
					r, _, _ := strings.Cut(at.Model, "/")
					regions = append(regions, r)
				}
				if got := strings.Join(regions, " "); got != tc.models {
					t.Errorf("Regions asked %q, want %q", got, tc.models)
				}
			}
		})
	}
}

// TestSendBedrockSigV4CredentialChain: with no Bedrock API key, send signs
// with SigV4 from the AWS SDK's credential chain (here the environment's
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, the simulated ones), which
// the simulator verifies; a wrong secret is the service's 403, a caller
// error, with no retry and no secret in the output.
func TestSendBedrockSigV4CredentialChain(t *testing.T) {
	for _, tc := range []struct {
		secret  string
		outcome string
		exit    int
	}{{sim.FakeAWSSecretAccessKey, "ok", 0}, {"wrong-secret-0123456789", "failed", 1}} {
		clearEnv(t)
		env := map[string]string{}
		ta := newTestApp(env)
		_, senv := simEnv(t, ta.clock)
		maps.Copy(env, senv)
		delete(env, "AWS_BEARER_TOKEN_BEDROCK")
		env["AWS_ACCESS_KEY_ID"] = sim.FakeAWSAccessKeyID
		t.Setenv("AWS_ACCESS_KEY_ID", sim.FakeAWSAccessKeyID)
		t.Setenv("AWS_SECRET_ACCESS_KEY", tc.secret)
		t.Setenv("AWS_REGION", "eu-west-1")
		env["AWS_REGION"] = "eu-west-1"
		code := run(context.Background(), ta.app, []string{"send", "--json", "--no-history", "--model", "bedrock/anthropic.claude-haiku-5-5-v1:0", "hello"})
		d := decodeSend(t, ta.out.Bytes())
		if string(d.Outcome) != tc.outcome || len(d.Attempts) != 1 {
			t.Fatalf("secret %q: exit %d outcome %s attempts %d; stderr %s", tc.secret[:5], code, d.Outcome, len(d.Attempts), ta.errOut)
		}
		if tc.exit == 0 && code != 0 {
			t.Errorf("exit %d", code)
		}
		if tc.exit != 0 {
			a := d.Attempts[0]
			if a.Status != 403 || a.Code != "InvalidSignatureException" || a.Class != "caller" {
				t.Errorf("wrong secret: %+v, want the 403 InvalidSignatureException", a)
			}
		}
		all := ta.out.String() + ta.errOut.String()
		for _, secret := range []string{tc.secret, sim.FakeAWSSecretAccessKey, "Signature=", "AWS4-HMAC-SHA256"} {
			if strings.Contains(all, secret) {
				t.Errorf("output carries %q", secret)
			}
		}
	}
}
