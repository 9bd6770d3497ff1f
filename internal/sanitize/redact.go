package sanitize

import "strings"

// Printable is the one function for a whole string that reaches a person:
// it makes s safe for a terminal (Text) and then replaces anything shaped
// like a credential (Secrets). The order matters: a key with an escape
// sequence, BEL or a bidi character inside it is only whole, and so only
// found, once those are stripped.
func Printable(s string) string { return Secrets(Text(s)) }

// Redact returns Text(s) with every occurrence of each secret replaced by
// "[redacted]". Secrets shorter than MinSecret are ignored (too short to
// replace without mangling ordinary text).
func Redact(s string, secrets ...string) string {
	r := NewRedactor(secrets...)
	return r.Text(s) + r.Flush()
}

// MinSecret is the shortest secret a Redactor replaces.
const MinSecret = 4

// Redacted is what a Redactor writes in place of a secret.
const Redacted = "[redacted]"

// Redactor is a Filter that also replaces known secrets (the attempt's API
// key) in a stream of text given in pieces, as the user will see it: after
// escape sequences and invisible characters are dropped, and across piece
// boundaries. At the end of each piece it holds back only the longest tail
// that is the start of a secret (nothing when none is), and gives it out
// with the next piece or on Flush. The zero value is a plain Filter. It is
// not safe for concurrent use.
type Redactor struct {
	f       Filter
	secrets []string
	held    string
}

// NewRedactor returns a Redactor for secrets.
func NewRedactor(secrets ...string) *Redactor {
	r := &Redactor{}
	for _, s := range secrets {
		if len(s) >= MinSecret {
			r.secrets = append(r.secrets, s)
		}
	}
	return r
}

// Text returns the printable, redacted part of the next piece.
func (r *Redactor) Text(s string) string {
	out := r.held + r.f.Text(s)
	r.held = ""
	if len(r.secrets) == 0 {
		return out
	}
	out = r.replace(out)
	if n := r.heldTail(out); n > 0 {
		r.held = out[len(out)-n:]
		out = out[:len(out)-n]
	}
	return out
}

// Flush ends the stream and returns what was held back.
func (r *Redactor) Flush() string {
	out := r.held + r.f.Flush()
	r.held = ""
	return r.replace(out)
}

func (r *Redactor) replace(s string) string {
	for _, k := range r.secrets {
		if strings.Contains(s, k) {
			s = strings.ReplaceAll(s, k, Redacted)
		}
	}
	return s
}

// heldTail is the length of the longest tail of s that is a proper prefix
// of a secret.
func (r *Redactor) heldTail(s string) int {
	best := 0
	for _, k := range r.secrets {
		from := max(len(s)-(len(k)-1), 0)
		for i := from; i < len(s)-best; i++ {
			if s[i] == k[0] && strings.HasPrefix(k, s[i:]) {
				best = len(s) - i
				break
			}
		}
	}
	return best
}
