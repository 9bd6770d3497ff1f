package stream

import (
	"errors"
	"fmt"
	"github.com/limitscope/limitscope/internal/sanitize"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// redacted replaces a credential wherever one would have been printed.
const redacted = "[redacted]"

// keyParamRE matches credential-bearing query parameters in any URL inside a
// text (Gemini's ?key=, and the usual token spellings).
var keyParamRE = regexp.MustCompile(`(?i)([?&;](?:key|api[-_]?key|x-goog-api-key|access[-_]token|token|sig|signature)=)[^&\s"'<>#]*`)

// RedactURL replaces the value of every credential-bearing query parameter
// (?key=, api_key=, access_token=, ...) in s, wherever a URL appears in it.
func RedactURL(s string) string {
	if !strings.Contains(s, "=") {
		return s
	}
	return keyParamRE.ReplaceAllString(s, "${1}"+redacted)
}

// redactor scrubs one attempt's key and any ?key= URL from text, as the
// user will see it: after escape sequences and invisible characters are
// stripped (sanitize.Redact), so a key with ESC, BEL or a bidi character
// inside it is still found.
type redactor struct{ keys []string }

// newRedactor scrubs k and the other credentials given (an AWS key id,
// secret and session token).
func newRedactor(k Secret, more ...string) redactor {
	var r redactor
	for _, key := range append([]string{k.Reveal()}, more...) {
		if len(key) >= sanitize.MinSecret { // a shorter one cannot be scrubbed without mangling ordinary text
			r.keys = append(r.keys, key)
		}
	}
	return r
}

// text scrubs raw text (kept byte for byte otherwise: snippets show control
// bytes as \xNN, so nothing in them is hidden from the user).
func (r redactor) text(s string) string {
	s = RedactURL(s)
	for _, key := range r.keys {
		if strings.Contains(s, key) {
			s = strings.ReplaceAll(s, key, redacted)
		}
	}
	return s
}

// field makes a printable field: stripped, scrubbed, at most max bytes.
func (r redactor) field(s string, max int) string {
	return sanitize.Truncate(RedactURL(sanitize.Redact(s, r.keys...)), max)
}

// deltas returns the scrubber of one attempt's text deltas: the exact text
// with the key replaced as a terminal would show it, even when split across
// deltas or interleaved with escape sequences.
func (r redactor) deltas() *sanitize.Redactor { return sanitize.NewRedactor(r.keys...) }

// err wraps err so that its text is scrubbed; errors.Is and errors.As still
// see the original.
func (r redactor) err(err error) error {
	if err == nil {
		return nil
	}
	var re *redactedError
	if errors.As(err, &re) && re.err == err {
		return err
	}
	return &redactedError{msg: r.field(err.Error(), maxMessage), err: err}
}

// scrub cleans every printable field of a Result. Text is already scrubbed
// (readEvents builds it from the scrubbed deltas); the URL pass catches a
// ?key= split across deltas.
func (r redactor) scrub(res Result) Result {
	res.Text = RedactURL(res.Text)
	res.RequestID = r.field(res.RequestID, 200)
	res.Model = r.field(res.Model, 200)
	res.ResponseID = r.field(res.ResponseID, 200)
	res.FinishReason = r.field(res.FinishReason, 200)
	if e := res.Err; e != nil {
		e.Code = r.field(e.Code, 200)
		e.Message = r.field(e.Message, maxMessage)
		e.QuotaID = r.field(e.QuotaID, 200)
		e.RequestID = r.field(e.RequestID, 200)
		e.Snippet = r.text(e.Snippet)
		e.Err = r.err(e.Err)
	}
	return res
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// maxMessage bounds an error message kept from a body.
const maxMessage = 4096

// SnippetSize is how many bytes of an unexpected body Error.Snippet shows.
const SnippetSize = 256

// snippet renders the first bytes of a body for a person: printable UTF-8 is
// kept, anything else (control bytes, invalid UTF-8, binary) is written as
// \xNN, so nothing reaching a terminal can act as an escape sequence.
func snippet(b []byte) string {
	if len(b) > SnippetSize {
		b = b[:SnippetSize]
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&sb, `\x%02x`, b[0])
		case r == '\n' || r == '\t':
			sb.WriteRune(r)
		case r == '\r':
			sb.WriteString(`\r`)
		case unicode.IsControl(r):
			for _, c := range b[:n] {
				fmt.Fprintf(&sb, `\x%02x`, c)
			}
		default:
			sb.WriteString(string(b[:n]))
		}
		b = b[n:]
	}
	return sb.String()
}
