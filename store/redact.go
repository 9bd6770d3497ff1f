package store

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/limitscope/limitscope/internal/sanitize"
)

// secretShapes are credentials as providers and clients write them. The
// store never receives a key, but a provider's error message or a proxy's
// page may quote one: messages are scrubbed before they are written.
var secretShapes = []*regexp.Regexp{
	regexp.MustCompile(`\bsk-[A-Za-z0-9_\-]{16,}`),            // OpenAI, Anthropic (sk-ant-), DeepSeek
	regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{30,}`),           // Google
	regexp.MustCompile(`\bgsk_[A-Za-z0-9]{16,}`),              // Groq
	regexp.MustCompile(`\bxai-[A-Za-z0-9]{16,}`),              // xAI
	regexp.MustCompile(`\blsp-[A-Za-z0-9]{16,}`),              // limitscope proxy's own token
	regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._\-]{16,}`), // an Authorization header
	regexp.MustCompile(`(?i)([?&]key=)[^&\s"']+`),             // Gemini's ?key=
}

// redact replaces anything shaped like a credential with [redacted].
func redact(s string) string {
	if len(s) < 16 || !mayHoldSecret(s) {
		return s
	}
	for i, re := range secretShapes {
		if i == len(secretShapes)-1 {
			s = re.ReplaceAllString(s, "${1}[redacted]")
			continue
		}
		s = re.ReplaceAllString(s, "[redacted]")
	}
	return s
}

// mayHoldSecret is a cheap test that skips the expressions for the usual
// message, which quotes no credential.
func mayHoldSecret(s string) bool {
	for _, m := range []string{"sk-", "AIza", "gsk_", "xai-", "lsp-", "earer", "EARER", "key=", "KEY=", "Key="} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// MaxOriginLen caps a call's stored Route and Client, in bytes.
const MaxOriginLen = 256

// cleanOrigin makes a caller-supplied label (a User-Agent, a model name)
// fit to store: key-shaped text redacted, terminal escape sequences
// dropped whole, other control and format characters and invalid UTF-8
// dropped, spaces collapsed, at most MaxOriginLen bytes
// cut at a rune. Redaction comes first so that a cut cannot leave part of
// a key the patterns no longer recognise.
func cleanOrigin(s string) string {
	if s == "" {
		return ""
	}
	s = sanitize.Text(redact(s))
	var b strings.Builder
	b.Grow(min(len(s), MaxOriginLen))
	space := false
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size <= 1:
			continue
		case unicode.IsSpace(r):
			space = b.Len() > 0
			continue
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			continue
		}
		n := utf8.RuneLen(r)
		if space {
			n++
		}
		if b.Len()+n > MaxOriginLen {
			break
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}
