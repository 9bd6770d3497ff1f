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

// TestNoAWSCredentialInAnyOutput: with the AWS variables set to canaries
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
// AWS_BEARER_TOKEN_BEDROCK), send on Bedrock through success, the service's
// 403s for both kinds of credentials, a throttle, an exception after 200
// and a daily quota (a cooldown written), then everything that reads the
// history back: no canary, and no SigV4 signature or Authorization value,
// is in any output or any file written.
func TestNoAWSCredentialInAnyOutput(t *testing.T) {
	const (
		canaryID     = "AKIACANARYB3D40CK000"
		canarySecret = "canary-aws-secret-7f3a9e0123456789XYZ"
		canaryToken  = "canary-aws-session-token-0123456789XYZ"
		canaryBearer = "ABSKcanary-bedrock-api-key-0123456789XYZ"
	)
	clearEnv(t)
	dir := t.TempDir()
	r, err := sim.Start(context.Background(), "127.0.0.1:0", sim.Options{Scenario: "calm", TokensPerSecond: 1e6})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var outputs []string
	runCmd := func(env map[string]string, args ...string) int {
		t.Helper()
		env["LIMITSCOPE_DB"] = filepath.Join(dir, "state", "history.db")
		env["XDG_STATE_HOME"] = filepath.Join(dir, "state")
		env["XDG_CONFIG_HOME"] = filepath.Join(dir, "config")
		env["HOME"] = dir
		env["AWS_ENDPOINT_URL_BEDROCK_RUNTIME"] = r.BaseURL("bedrock")
		env["ANTHROPIC_BASE_URL"] = r.BaseURL("anthropic")
		env["ANTHROPIC_API_KEY"] = sim.FakeKey
		for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK", "AWS_REGION"} {
			t.Setenv(k, env[k]) // the SDK's credential chain reads the process environment
		}
		t.Setenv("HOME", dir)
		ta := newTestApp(env)
		ta.app.getenv = func(k string) string { return env[k] }
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		code := run(ctx, ta.app, args)
		outputs = append(outputs, strings.Join(args, " ")+"\n"+ta.out.String()+ta.errOut.String())
		return code
	}
	sigv4 := func(id, secret, token string) map[string]string {
		return map[string]string{"AWS_ACCESS_KEY_ID": id, "AWS_SECRET_ACCESS_KEY": secret, "AWS_SESSION_TOKEN": token, "AWS_REGION": "us-west-2"}
	}
	const M = "bedrock/us-west-2/anthropic.claude-haiku-5-5-v1:0"
	inject := func(f sim.Fault) {
		t.Helper()
		if err := r.Server.Inject(f); err != nil {
			t.Fatal(err)
		}
	}
	// The service's 403s: a Bedrock API key and AWS credentials it does
	// not know, each with the other variables set too.
	for _, json := range []bool{false, true} {
		args := []string{"send", "--model", M, "hi"}
		if json {
			args = []string{"send", "--json", "--model", M, "hi"}
		}
		env := sigv4(canaryID, canarySecret, canaryToken)
		env["AWS_BEARER_TOKEN_BEDROCK"] = canaryBearer
		if code := runCmd(env, args...); code != exitFailed {
			t.Errorf("bad bearer token: exit %d", code)
		}
		if code := runCmd(sigv4(canaryID, canarySecret, canaryToken), args...); code != exitFailed {
			t.Errorf("unknown AWS credentials: exit %d", code)
		}
		// Known key id, canary secret: the signature does not match.
		if code := runCmd(sigv4(sim.FakeAWSAccessKeyID, canarySecret, ""), args...); code != exitFailed {
			t.Errorf("wrong secret: exit %d", code)
		}
	}
	good := func() map[string]string {
		return sigv4(sim.FakeAWSAccessKeyID, sim.FakeAWSSecretAccessKey, sim.FakeAWSSessionToken)
	}
	if code := runCmd(good(), "send", "--model", M, "hello"); code != exitOK {
		t.Fatalf("signed with the simulated credentials: exit %d\n%s", code, outputs[len(outputs)-1])
	}
	inject(sim.Fault{Provider: "bedrock", Kind: sim.FaultRateLimit, RetryAfter: time.Millisecond})
	runCmd(good(), "send", "--json", "--model", M, "hi")
	inject(sim.Fault{Provider: "bedrock", Kind: sim.FaultMidStream, Code: "throttling"})
	runCmd(good(), "send", "--model", M, "--fallback", "anthropic/claude-haiku-5-5", "hi")
	inject(sim.Fault{Provider: "bedrock", Kind: sim.FaultDailyQuota})
	if code := runCmd(good(), "send", "--json", "--model", M, "hi"); code != exitStopped {
		t.Errorf("daily quota: exit %d", code)
	}
	for _, args := range [][]string{
		{"history", "list"}, {"history", "list", "--json"}, {"history", "show", "1"}, {"history", "show", "--json", "2"},
		{"history", "export"}, {"history", "export", "--format", "csv"}, {"history", "stats", "--json"},
		{"cooldowns"}, {"cooldowns", "--json"}, {"info"}, {"info", "--json"},
	} {
		runCmd(good(), args...)
	}
	forbidden := []string{canaryID, canarySecret, canaryToken, canaryBearer, sim.FakeAWSSecretAccessKey, sim.FakeAWSSessionToken,
		"Signature=", "AWS4-HMAC-SHA256", "X-Amz-Security-Token"}
	joined := strings.Join(outputs, "\n")
	if !strings.Contains(joined, "InvalidSignatureException") || !strings.Contains(joined, "UnrecognizedClientException") {
		t.Fatalf("the 403s did not come back; the test tests nothing:\n%s", joined)
	}
	for _, o := range outputs {
		for _, s := range forbidden {
			if i := strings.Index(o, s); i >= 0 {
				t.Errorf("%q in the output of %s\n...%s...", s, o[:strings.IndexByte(o, '\n')], o[max(0, i-100):min(len(o), i+60)])
			}
		}
	}
	files := 0
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("reading %s: %v", path, err)
			return nil
		}
		for _, s := range forbidden {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%q is in %s", s, path)
			}
		}
		return nil
	})
	if files == 0 {
		t.Fatal("no history file was written")
	}
}
