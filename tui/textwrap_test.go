package tui

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
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
	for seed := uint64(0); seed < 150; seed++ {
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
