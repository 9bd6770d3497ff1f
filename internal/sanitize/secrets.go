package sanitize

import (
	"regexp"
	"strings"
)

// secretShapes are credentials as providers and clients write them; the
// table is never written after init.
var secretShapes = []*regexp.Regexp{
	regexp.MustCompile(`\bsk-[A-Za-z0-9_\-]{16,}`),            // OpenAI, Anthropic (sk-ant-), DeepSeek
	regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{30,}`),           // Google
	regexp.MustCompile(`\bgsk_[A-Za-z0-9]{16,}`),              // Groq
	regexp.MustCompile(`\bxai-[A-Za-z0-9]{16,}`),              // xAI
	regexp.MustCompile(`\blsp-[A-Za-z0-9]{16,}`),              // limitscope proxy's own token
	regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._\-]{16,}`), // an Authorization header
	regexp.MustCompile(`\b(?:AKIA|ASIA)[A-Z0-9]{16}\b`),       // an AWS access key id (long-term, temporary)
	regexp.MustCompile(`\bABSK[A-Za-z0-9+/=]{16,}`),           // a Bedrock API key
	regexp.MustCompile(`Signature=[0-9a-f]{64}`),              // a SigV4 signature
	regexp.MustCompile(`(?i)([?&]key=)[^&\s"']+`),             // Gemini's ?key=
}

// Secrets replaces anything shaped like a credential (an OpenAI, Anthropic,
// Google, Groq or xAI key, the proxy's token, a bearer header, an AWS
// access key id, a Bedrock API key, a SigV4 signature, a ?key= parameter)
// with [redacted]. It is a second line of defence for text that came from
// elsewhere (a provider's message, a caller's User-Agent).
func Secrets(s string) string {
	if len(s) < 16 || !mayHoldSecret(s) {
		return s
	}
	for i, re := range secretShapes {
		if i == len(secretShapes)-1 {
			s = re.ReplaceAllString(s, "${1}[redacted]")
			continue
		}
		s = re.ReplaceAllStringFunc(s, func(m string) string {
			if m == SimulatorAWSKeyID {
				return m
			}
			return "[redacted]"
		})
	}
	return s
}

// SimulatorAWSKeyID is the simulator's fixed AWS access key id (its banner
// prints it): shaped like a key id, it is not one, and Secrets lets it
// print. Any other key id is redacted.
const SimulatorAWSKeyID = "AKIASIMULATEDNOTREAL"

// mayHoldSecret is a cheap test that skips the expressions for the usual
// message, which quotes no credential.
func mayHoldSecret(s string) bool {
	for _, m := range []string{"sk-", "AIza", "gsk_", "xai-", "lsp-", "earer", "EARER", "key=", "KEY=", "Key=", "AKIA", "ASIA", "ABSK", "Signature="} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}
