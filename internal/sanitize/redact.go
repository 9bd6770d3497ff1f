package sanitize

import (
	"strings"
	"unicode/utf8"
)

// Printable is the one function for a whole string that reaches a person:
// it makes s safe for a terminal (Text) and then replaces anything shaped
// like a credential (Secrets). The order matters: a key with an escape
// sequence, BEL or a bidi character inside it is only whole, and so only
// found, once those are stripped.
func Printable(s string) string { return Secrets(Text(s)) }

// Redact returns s with every secret that a terminal would show (see
// Redactor) replaced by "[redacted]"; the rest of s is kept byte for byte.
func Redact(s string, secrets ...string) string {
	r := NewRedactor(secrets...)
	return r.Text(s) + r.Flush()
}

// MinSecret is the shortest secret a Redactor replaces.
const MinSecret = 4

// Redacted is what a Redactor writes in place of a secret.
const Redacted = "[redacted]"

// maxHeld bounds the invisible bytes a Redactor holds back inside a
// possible secret; past it they are dropped (only a hostile stream pads a
// key with that much), so memory stays bounded and the key is still found.
const maxHeld = 16 << 10

// Redactor replaces known secrets (the attempt's API key) in a stream of
// text given in pieces, as a terminal would show the text: a secret is
// found in what Text would print, so one split across pieces, or with
// escape sequences, BEL or bidi characters inside it, is still found, and
// its whole span in the input (invisible bytes included) is replaced. All
// other bytes pass unchanged: the output is the exact text minus secrets,
// still to be made printable (Text, Filter) where it is shown. At the end
// of each piece it holds back only what could be the start of a secret (and
// an incomplete UTF-8 rune), and gives it out with the next piece or on
// Flush. A Redactor with no secret passes text through. It is not safe for
// concurrent use.
type Redactor struct {
	secrets []string
	held    string // input held back
	heldF   Filter // the filter's state at the start of held
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

// Text returns the next piece with secrets replaced, less what it holds back.
func (r *Redactor) Text(s string) string {
	if len(r.secrets) == 0 {
		return s
	}
	if out, ok := r.plain(s); ok {
		return out
	}
	return r.run(r.held+s, false)
}

// plain is Text for the common piece, without run's copy and index arrays:
// when the filter is in its normal state and what is held and s are clean
// (every rune printed as it is, so what a terminal shows is the input
// itself) and no secret is in them, the output is the input less the tail
// that could start a secret, which is held (from the normal state), as run
// would hold it. With nothing held and no such tail, s itself comes out,
// not copied. False: run must decide.
func (r *Redactor) plain(s string) (string, bool) {
	if r.heldF.st != stNormal || len(r.heldF.pending) > 0 || !clean(s) || r.held != "" && !clean(r.held) {
		return "", false
	}
	t := s
	if r.held != "" {
		t = r.held + s
	}
	for _, k := range r.secrets {
		if strings.Contains(t, k) {
			return "", false
		}
	}
	n := r.heldTail(t)
	r.held, r.heldF = t[len(t)-n:], Filter{}
	return t[:len(t)-n], true
}

// Flush ends the stream and returns what was held back.
func (r *Redactor) Flush() string {
	if len(r.secrets) == 0 {
		return ""
	}
	if r.held == "" {
		r.heldF = Filter{}
		return ""
	}
	out := r.run(r.held, true)
	r.held, r.heldF = "", Filter{}
	return out
}

// run filters raw (which starts in state r.heldF), replaces the spans of
// the secrets found in what is visible, and (unless final) holds back the
// tail that could start a secret.
func (r *Redactor) run(raw string, final bool) string {
	end := len(raw)
	if !final {
		// Never feed the filter half a rune: hold it back whole.
		start := end
		for start > 0 && end-start < utf8.UTFMax && !utf8.RuneStart(raw[start-1]) {
			start--
		}
		if start > 0 && !utf8.FullRuneInString(raw[start-1:]) {
			end = start - 1
		}
	}
	f := r.heldF
	var vis strings.Builder
	// rawAt[k] is the input range of the rune that printed visible byte k.
	type span struct{ from, to int }
	var rawAt []span
	// The filter's state at each rune boundary near the end, where the
	// input may be held back from.
	type mark struct {
		at int
		f  Filter
	}
	var marks []mark
	tailFrom := end - r.longest()
	for i := 0; i < end; {
		if i >= tailFrom {
			marks = append(marks, mark{i, f})
		}
		n0 := vis.Len()
		next, ok := f.step(&vis, raw[:end], i)
		if !ok {
			next = end
		}
		for range vis.Len() - n0 {
			rawAt = append(rawAt, span{i, next})
		}
		i = next
	}
	v := vis.String()

	// The matches, in visible bytes, left to right, not overlapping.
	var out strings.Builder
	rawDone, visDone := 0, 0
	for visDone < len(v) {
		at, k := -1, ""
		for _, sec := range r.secrets {
			if j := strings.Index(v[visDone:], sec); j >= 0 && (at < 0 || j < at) {
				at, k = j, sec
			}
		}
		if at < 0 {
			break
		}
		from, to := rawAt[visDone+at].from, rawAt[visDone+at+len(k)-1].to
		out.WriteString(raw[rawDone:from])
		out.WriteString(Redacted)
		rawDone, visDone = to, visDone+at+len(k)
	}

	hold, holdF, atVisible := end, f, false // the input from here on is held back, the state there
	if !final {
		if n := r.heldTail(v[visDone:]); n > 0 {
			// It starts at a visible rune, which the filter prints the
			// same from its normal state.
			hold, holdF, atVisible = rawAt[len(v)-n].from, Filter{}, true
		}
		// A secret written whole in the input but not shown (inside an
		// escape string) is replaced too: hold its possible start.
		if n := r.heldTail(raw[rawDone:end]); n > 0 && end-n < hold {
			for _, m := range marks {
				if m.at == end-n {
					hold, holdF, atVisible = m.at, m.f, false
				}
			}
		}
	}
	out.WriteString(raw[rawDone:max(hold, rawDone)])
	if final {
		out.WriteString(raw[end:])
	} else {
		held := raw[max(hold, rawDone):]
		if len(held) > maxHeld && atVisible {
			held = Text(raw[hold:end]) + raw[end:]
		}
		r.held, r.heldF = held, holdF
	}
	return r.replace(out.String())
}

// replace replaces secrets written whole in s.
func (r *Redactor) replace(s string) string {
	for _, k := range r.secrets {
		if strings.Contains(s, k) {
			s = strings.ReplaceAll(s, k, Redacted)
		}
	}
	return s
}

// longest is the length of the longest secret.
func (r *Redactor) longest() int {
	n := 0
	for _, k := range r.secrets {
		n = max(n, len(k))
	}
	return n
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
