package sanitize

import (
	"strings"
	"testing"
)

// The AWS credentials a message could quote are credential shapes too: an
// access key id (long-term AKIA, temporary ASIA), a Bedrock API key and a
// SigV4 signature; ordinary text that only resembles them is kept.
func TestSecretsAWSShapes(t *testing.T) {
	sig := strings.Repeat("0a", 32)
	for _, s := range []string{
		"The security token AKIAIOSFODNN7EXAMPLE is invalid",
		"key ASIAY34FZKBOKMUTVV7A expired",
		"Authorization: AWS4-HMAC-SHA256 Credential=x/20261201/us-east-1/bedrock/aws4_request, SignedHeaders=host, Signature=" + sig,
		"api key ABSKQmVkcm9ja0FQSUtleS1leGFtcGxlMTIzNDU2Nzg5",
	} {
		got := Secrets(s)
		if !strings.Contains(got, "[redacted]") || strings.Contains(got, "AKIAIOSFODNN7EXAMPLE") || strings.Contains(got, sig) || strings.Contains(got, "ABSKQmVk") || strings.Contains(got, "ASIAY34") {
			t.Errorf("%q -> %q", s, got)
		}
	}
	for _, s := range []string{"ASIAN markets", "AKIA is short", "Signature=abc"} {
		if got := Secrets(s + " and more text to pass the length check"); strings.Contains(got, "[redacted]") {
			t.Errorf("%q -> %q", s, got)
		}
	}
}

// TestSecretsLetTheSimulatorKeyIDPrint: the simulator's fixed key id is
// printed as it is; a real-shaped one beside it is still redacted.
func TestSecretsLetTheSimulatorKeyIDPrint(t *testing.T) {
	in := "export AWS_ACCESS_KEY_ID=" + SimulatorAWSKeyID + " (not AKIAIOSFODNN7EXAMPLE)"
	got := Secrets(in)
	if !strings.Contains(got, SimulatorAWSKeyID) || strings.Contains(got, "AKIAIOSFODNN7EXAMPLE") || !strings.Contains(got, "[redacted]") {
		t.Errorf("Secrets(%q) = %q", in, got)
	}
	if got := Printable("key AKIASIMULATEDNOTREA1"); strings.Contains(got, "AKIASIMULATEDNOTREA1") {
		t.Errorf("a key id one character off printed: %q", got)
	}
}
