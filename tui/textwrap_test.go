package tui

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/limitscope/limitscope/internal/sanitize"
)

// wholeWrap is the reference: every paragraph of the whole text wrapped at
// once, as the console did before wrapping became incremental.
func wholeWrap(text string, w int) []string {
	var out []string
	for _, p := range strings.Split(strings.ReplaceAll(text, "\t", "    "), "\n") {
		out = wrapLines(out, p, w, nil, "")
	}
	return out
}

// TestTextWrapMatchesWholeWrap streams random texts in random pieces, the
// caller keeping the final lines (as block.render does), and checks that
// after every piece the lines equal the whole text's wrap.
func TestTextWrapMatchesWholeWrap(t *testing.T) {
	atoms := []string{"the", " ", "  ", "database", " failed over", "-", "日本語", "🙂", "\t", "x", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "\n"}
	for seed := uint64(0); seed < 100; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		w := 1 + r.IntN(40)
		var text strings.Builder
		var tw textWrap
		tw.reset(w, nil)
		var fixed []string
		for step := 0; step < 200; step++ {
			a := atoms[r.IntN(len(atoms))]
			if a == "\n" && r.IntN(8) != 0 {
				a = " "
			}
			text.WriteString(a)
			final, all := tw.lines(fixed, text.String())
			fixed = final
			if want := wholeWrap(text.String(), w); !slices.Equal(all, want) {
				t.Fatalf("seed %d step %d width %d:\ntext %q\ngot  %q\nwant %q", seed, step, w, text.String(), all, want)
			}
		}
	}
}

// FuzzTextWrap streams the fuzzer's text in pieces cut at the fuzzer's
// points and checks the incremental lines against the whole text's wrap.
func FuzzTextWrap(f *testing.F) {
	f.Add("The primary database failed over at 14:02; writes paused.", uint8(20), uint8(3))
	f.Add("aaaaaaaaaaaaaaaaaaaaaaaaa-bbbbbbbbbbb 日本語 🙂\tx - y", uint8(7), uint8(1))
	// Found by CI's fuzz run: a C1 introducer and an invalid byte. The
	// console never wraps those (below), and this keeps the case.
	f.Add("00\x9b\x1d00\xf400000", uint8(1), uint8(11))
	f.Fuzz(func(t *testing.T, text string, w, step uint8) {
		// What the wrapper is given in the console: valid UTF-8 (stream
		// guarantees it) through the feed's sanitize.Filter (no control
		// character or escape sequence), in whole runes (deltas are JSON
		// strings).
		text = sanitize.Text(strings.ToValidUTF8(text, "\uFFFD"))
		width := 2 + int(w)%60
		n := 1 + int(step)%16
		var tw textWrap
		tw.reset(width, nil)
		var fixed []string
		for end := 0; end < len(text); {
			end = min(len(text), end+n)
			for end < len(text) && !utf8.RuneStart(text[end]) {
				end++
			}
			final, all := tw.lines(fixed, text[:end])
			fixed = final
			if want := wholeWrap(text[:end], width); !slices.Equal(all, want) {
				t.Fatalf("width %d, %d bytes of %q:\ngot  %q\nwant %q", width, end, text, all, want)
			}
		}
	})
}
