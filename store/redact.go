package store

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/limitscope/limitscope/internal/sanitize"
)

// redact replaces anything shaped like a credential with [redacted]. The
// store never receives a key, but a provider's error message or a proxy's
// page may quote one: messages are scrubbed before they are written.
func redact(s string) string { return sanitize.Secrets(s) }

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
