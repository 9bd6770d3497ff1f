package sanitize

import (
	"strings"
	"testing"
)

const key = "sk-test-SECRET-0123456789abcdef"

// A key split across pieces, or with ESC, BEL or bidi characters inside it,
// is what the user would see whole: it never comes out, at any split.
func TestRedactorAcrossPiecesAndInvisibles(t *testing.T) {
	for _, in := range []string{
		"the key is " + key + ", done",
		"the key is sk-test-\x1b[0mSECRET-01234\a56789ab\u202ecdef, done",
		"sk-test-SEC\x1b]0;x\x07RET-0123456789\u2066abcdef",
		"ss" + key + "sk-" + key[:10],
	} {
		want := Redact(in, key)
		if strings.Contains(Text(want), key) || strings.Contains(want, key) || !strings.Contains(want, Redacted) {
			t.Fatalf("Redact(%q) = %q", in, want)
		}
		for cut := 0; cut <= len(in); cut++ {
			for cut2 := cut; cut2 <= len(in); cut2++ {
				r := NewRedactor(key)
				got := r.Text(in[:cut]) + r.Text(in[cut:cut2]) + r.Text(in[cut2:]) + r.Flush()
				if got != want {
					t.Fatalf("%q cut at %d,%d: %q, want %q", in, cut, cut2, got, want)
				}
			}
		}
	}
}

// Everything but the key's span is kept byte for byte (the exact text goes
// to --json and the history; printing edges strip it), and a key hidden in
// an escape string is replaced too.
func TestRedactKeepsTheRestExact(t *testing.T) {
	for in, want := range map[string]string{
		"a\x1b[31mred\x1b[0m " + key + " z\r\n":            "a\x1b[31mred\x1b[0m [redacted] z\r\n",
		"x " + key[:5] + "\x1b[1m\a" + key[5:] + "\u202e!": "x [redacted]\u202e!",
		"title \x1b]0;" + key + "\x07 end":                 "title \x1b]0;[redacted]\x07 end",
		"no key, \x1b]0;t\x07 \xff bytes":                  "no key, \x1b]0;t\x07 \xff bytes",
	} {
		if got := Redact(in, key); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
		for cut := 0; cut <= len(in); cut++ {
			r := NewRedactor(key)
			if got := r.Text(in[:cut]) + r.Text(in[cut:]) + r.Flush(); got != want {
				t.Fatalf("%q cut at %d: %q, want %q", in, cut, got, want)
			}
		}
	}
}

// Only a tail that could start the key is held back; plain text flows at once.
func TestRedactorHoldsBackOnlyAKeyPrefix(t *testing.T) {
	r := NewRedactor(key)
	for _, c := range []struct{ in, out string }{
		{"hello world", "hello world"},
		{"it is sk-te", "it is "},
		{"a", "sk-tea"},
		{" risk", " ri"},
		{"y", "sky"},
		{"sk-test-SECRET", ""},
		{"-0123456789abcdef!", Redacted + "!"},
	} {
		if got := r.Text(c.in); got != c.out {
			t.Fatalf("Text(%q) = %q, want %q", c.in, got, c.out)
		}
	}
	r.Text("tail sk")
	if got := r.Flush(); got != "sk" {
		t.Fatalf("Flush = %q", got)
	}
	if got := NewRedactor("abc").Text("abc"); got != "abc" {
		t.Errorf("a secret shorter than MinSecret was replaced: %q", got)
	}
}

func TestPrintableStripsBeforeMatchingShapes(t *testing.T) {
	in := "key sk-proj-ABCDEFGH\x1b[0mIJKLMNOPQRSTUV\x07 end"
	if got := Printable(in); got != "key [redacted] end" {
		t.Fatalf("Printable = %q", got)
	}
}

// Leftovers of a stripped sequence ("]0;PWNED") never reach a message: not
// from an ESC-introduced sequence, a UTF-8 C1 one or a raw 8-bit C1 byte.
func TestNoSequenceLeftovers(t *testing.T) {
	for _, in := range []string{
		"rate limited \x1b]0;PWNED\x07 try later",
		"rate limited \u009d0;PWNED\u009c try later",
		"rate limited \x9d0;PWNED\x07 try later",
		"rate limited \x9d0;PWNED\x9c try later",
		"rate limited \x9b31m try later",
	} {
		got := Truncate(in, 4096)
		if got != "rate limited  try later" {
			t.Errorf("Truncate(%q) = %q", in, got)
		}
	}
	if got := Truncate("héllo wörld", 6); got != "h\u00e9…" || len(got) > 6 {
		t.Errorf("Truncate cut: %q", got)
	}
	if got := Truncate("short", 6); got != "short" {
		t.Errorf("%q", got)
	}
}

func FuzzRedactor(f *testing.F) {
	f.Add("x sk-test-SECRET-0123456789abcdef y", 3, 9)
	f.Add("sk-test-\x1b[mSECRET-0123456789abcdef", 1, 20)
	f.Fuzz(func(t *testing.T, s string, a, b int) {
		cut := func(n int) int {
			if n < 0 {
				n = -n
			}
			if n < 0 { // MinInt
				n = 0
			}
			return n % (len(s) + 1)
		}
		i, j := cut(a), cut(b)
		if i > j {
			i, j = j, i
		}
		r := NewRedactor(key)
		got := r.Text(s[:i]) + r.Text(s[i:j]) + r.Text(s[j:]) + r.Flush()
		if strings.Contains(got, key) {
			t.Fatalf("key in %q", got)
		}
		if want := Redact(s, key); got != want {
			t.Fatalf("split %d,%d: %q, whole %q", i, j, got, want)
		}
		// The no-copy path gives what the full one gives, piece by piece.
		slow := NewRedactor(key)
		want := slow.run(slow.held+s[:i], false)
		want += slow.run(slow.held+s[i:j], false)
		want += slow.run(slow.held+s[j:], false)
		want += slow.run(slow.held, true)
		if got != want {
			t.Fatalf("split %d,%d: %q, without the plain path %q", i, j, got, want)
		}
		if strings.Contains(Text(got), key) {
			t.Fatalf("the key shows in %q", Text(got))
		}
	})
}

// The no-copy path: a clean delta with no key and no possible key start in
// its tail comes out as it is, without an allocation, while a key split
// across deltas (its start in a delta that would otherwise pass through, or
// after one that did) is still found whole.
func TestRedactorPlainDeltasNotCopied(t *testing.T) {
	r := NewRedactor(key)
	in := "Once upon a time, a dragon guarded a hoard of gold. "
	if n := testing.AllocsPerRun(100, func() {
		if got := r.Text(in); got != in {
			t.Fatalf("Text(%q) = %q", in, got)
		}
	}); n != 0 {
		t.Errorf("a plain delta cost %.0f allocations, want 0", n)
	}
	for _, deltas := range [][]string{
		{"plain text, then s", "k-test-SECRET-0123", "456789abcdef and more"},
		{"plain ", "sk-test-SECRET-0123456789abcdef", " plain"},
		{"plain ", "sk-test-SE", "CRET-0123456789ab", "cdef"},
		{"ris", "k is sk", "-test-SECRET-0123456789abcdef!"},
		{"x", "\x1b[1m", "sk-test-SECRET-0123456789abcdef"},
		{"no key at all, ", "just words ", "s"},
	} {
		r := NewRedactor(key)
		got := ""
		for _, d := range deltas {
			got += r.Text(d)
		}
		got += r.Flush()
		if want := Redact(strings.Join(deltas, ""), key); got != want || strings.Contains(got, key) {
			t.Errorf("%q: %q, want %q", deltas, got, want)
		}
	}
}

// BenchmarkRedactorAnswer scrubs a 40-delta answer (words with their
// spaces, as a stream delivers them) for one key, as the stream client does
// for every attempt: its cost per answer and its allocations.
//
//	go test -run '^$' -bench RedactorAnswer -benchmem ./internal/sanitize/
func BenchmarkRedactorAnswer(b *testing.B) {
	words := strings.Fields("This is gpt-5.4-mini, simulated by limitscope on its openai endpoint. You asked: Tell me a long story. " +
		"This request fit within its simulated limits and so it streams its answer word by word, as a provider does, until it ends here.")
	deltas := make([]string, len(words))
	for i, w := range words {
		deltas[i] = w + " "
	}
	b.ReportAllocs()
	for b.Loop() {
		r := NewRedactor(key)
		for _, d := range deltas {
			_ = r.Text(d)
		}
		_ = r.Flush()
	}
}
