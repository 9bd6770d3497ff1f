package sanitize

import (
	"strings"
	"unicode/utf8"
)

// Limits on how much of an unterminated sequence is swallowed: a hostile
// stream that opens an OSC string and never closes it does not hide the
// rest of the answer.
const (
	maxCSI    = 64   // runes of a CSI sequence before it is given up
	maxString = 4096 // runes of an OSC/DCS/SOS/PM/APC string before it is given up
)

type state uint8

const (
	stNormal    state = iota
	stEsc             // after ESC
	stEscInter        // after ESC and intermediate bytes
	stCSI             // inside a control sequence
	stString          // inside a control string (OSC, DCS, SOS, PM, APC)
	stStringEsc       // ESC inside a control string (ST is ESC \)
)

// Filter sanitizes a stream of text given in pieces. The zero value is
// ready to use. It is not safe for concurrent use.
type Filter struct {
	st      state
	n       int    // runes in the current sequence
	pending []byte // an incomplete UTF-8 rune at the end of the last piece
}

// Text returns s safe to print on a terminal: see the package comment.
func Text(s string) string {
	if clean(s) {
		return s
	}
	var f Filter
	return f.Text(s) + f.Flush()
}

// Text returns the printable part of the next piece of the stream.
func (f *Filter) Text(s string) string {
	if f.st == stNormal && len(f.pending) == 0 && clean(s) {
		return s
	}
	if len(f.pending) > 0 {
		s = string(f.pending) + s
		f.pending = f.pending[:0]
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		next, ok := f.step(&b, s, i)
		if !ok {
			// The piece ends inside a rune: keep it for the next one.
			f.pending = append(f.pending, s[i:]...)
			break
		}
		i = next
	}
	return b.String()
}

// step filters the rune at s[i:], writing what of it is printed to b, and
// returns the index after it; ok is false when s ends inside the rune.
func (f *Filter) step(b *strings.Builder, s string, i int) (next int, ok bool) {
	r, size := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && size <= 1 && !utf8.FullRuneInString(s[i:]) {
		return i, false
	}
	if r == utf8.RuneError && size <= 1 {
		// A raw 8-bit C1 introducer (not UTF-8 encoded) is what a
		// terminal in an 8-bit mode obeys: it starts its sequence here
		// too, so no "0;title" or "31m" is left behind.
		switch c := s[i]; {
		case f.st == stNormal && c == 0x9b:
			f.enter(stCSI)
		case f.st == stNormal && (c == 0x9d || c == 0x90 || c == 0x98 || c == 0x9e || c == 0x9f):
			f.enter(stString)
		case (f.st == stString || f.st == stStringEsc) && c == 0x9c: // a raw ST
			f.st = stNormal
		default:
			f.st = stNormal
			b.WriteRune(utf8.RuneError)
		}
		return i + 1, true
	}
	f.rune(b, r)
	return i + size, true
}

// Flush ends the stream: an incomplete rune kept from the last piece comes
// out as U+FFFD, and an unterminated sequence is forgotten.
func (f *Filter) Flush() string {
	f.st, f.n = stNormal, 0
	if len(f.pending) == 0 {
		return ""
	}
	f.pending = f.pending[:0]
	return string(utf8.RuneError)
}

// Reset forgets any sequence or incomplete rune in progress (a new stream
// starts).
func (f *Filter) Reset() {
	f.st, f.n = stNormal, 0
	f.pending = f.pending[:0]
}

func (f *Filter) rune(b *strings.Builder, r rune) {
	switch f.st {
	case stEsc:
		switch {
		case r == '[':
			f.enter(stCSI)
		case r == ']' || r == 'P' || r == 'X' || r == '^' || r == '_':
			f.enter(stString)
		case r >= 0x20 && r <= 0x2f:
			f.enter(stEscInter)
		case r >= 0x30 && r <= 0x7e:
			f.st = stNormal // a two-character escape, dropped
		case r == 0x1b:
			// ESC ESC: the second starts again.
		default:
			f.st = stNormal
			f.normal(b, r)
		}
	case stEscInter:
		switch {
		case r >= 0x20 && r <= 0x2f && f.n < maxCSI:
			f.n++
		case r >= 0x30 && r <= 0x7e:
			f.st = stNormal
		default:
			f.st = stNormal
			f.normal(b, r)
		}
	case stCSI:
		switch {
		case r >= 0x20 && r <= 0x3f && f.n < maxCSI:
			f.n++ // parameters and intermediates
		case r >= 0x40 && r <= 0x7e:
			f.st = stNormal // the final byte
		default:
			f.st = stNormal
			f.normal(b, r)
		}
	case stString:
		switch {
		case r == 0x07 || r == 0x9c: // BEL (xterm) or ST
			f.st = stNormal
		case r == 0x1b:
			f.st = stStringEsc
		case r == '\n' || f.n >= maxString:
			// Give up on it rather than hide the rest of the text.
			f.st = stNormal
			f.normal(b, r)
		default:
			f.n++
		}
	case stStringEsc:
		if r == '\\' {
			f.st = stNormal
			return
		}
		// ESC ends the string and starts a new escape.
		f.st = stEsc
		f.rune(b, r)
	default:
		f.normal(b, r)
	}
}

func (f *Filter) enter(s state) { f.st, f.n = s, 0 }

func (f *Filter) normal(b *strings.Builder, r rune) {
	switch {
	case r == 0x1b:
		f.enter(stEsc)
	case r == 0x9b: // CSI as one C1 code
		f.enter(stCSI)
	case r == 0x9d || r == 0x90 || r == 0x98 || r == 0x9e || r == 0x9f: // OSC, DCS, SOS, PM, APC
		f.enter(stString)
	case r == '\n' || r == '\t':
		b.WriteRune(r)
	case dropped(r):
	default:
		b.WriteRune(r)
	}
}

// dropped reports a rune that is never printed: C0 and C1 controls but
// newline and tab, DEL, and bidi overrides and isolates.
func dropped(r rune) bool {
	switch {
	case r < 0x20:
		return r != '\n' && r != '\t'
	case r >= 0x7f && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// clean reports whether s needs no change: valid UTF-8 with nothing
// dropped. Most text is plain, and this avoids copying it.
func clean(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 || dropped(r) {
			return false
		}
		i += size
	}
	return true
}

// Truncate returns Text(s) cut to at most max bytes on a rune boundary, with
// "…" marking a cut. Use it, not a per-character filter, for a bounded
// message: dropping ESC and BEL one by one leaves a sequence's body
// ("]0;PWNED") behind.
func Truncate(s string, max int) string {
	s = Text(s)
	if len(s) <= max {
		return s
	}
	const ell = "…"
	cut := max - len(ell)
	if cut < 0 {
		cut = 0
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ell
}

// JSON makes encoded JSON safe to print on a terminal: encoding/json
// escapes C0 controls in strings but writes C1 controls (U+0080 to U+009F,
// which some terminals obey when UTF-8 encoded), DEL and the bidi overrides
// as they are. They can only be inside strings, so escaping them as \uXXXX
// keeps the JSON's meaning.
func JSON(b []byte) []byte {
	s := string(b)
	if !strings.ContainsFunc(s, jsonEscaped) {
		return b
	}
	var sb strings.Builder
	sb.Grow(len(b) + 16)
	const hex = "0123456789abcdef"
	for _, r := range s {
		if jsonEscaped(r) {
			sb.WriteString(`\u`)
			sb.WriteByte(hex[r>>12&0xf])
			sb.WriteByte(hex[r>>8&0xf])
			sb.WriteByte(hex[r>>4&0xf])
			sb.WriteByte(hex[r&0xf])
			continue
		}
		sb.WriteRune(r)
	}
	return []byte(sb.String())
}

func jsonEscaped(r rune) bool { return r >= 0x7f && dropped(r) }
