package tui

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

// textWrap wraps a growing answer incrementally, so the cost of a token does
// not grow with the answer: the lines of finished paragraphs, and the
// finished lines of the paragraph still streaming, are wrapped once; a frame
// wraps only the open paragraph's last lines and what arrived since.
//
// It gives the same lines as wrapLines over each paragraph of the whole text
// (the word wrapper is a left-to-right machine whose emitted line breaks are
// final, and a line after the first starts in its initial state), which
// TestTextWrapMatchesWholeWrap checks on random texts and random chunkings.
type textWrap struct {
	w     int
	style func(...string) string

	src    strings.Builder // the text as wrapped (tabs expanded), appended to
	srcEnd int             // bytes of the block's text copied into src
	done   int             // bytes of src whose lines are final
}

// openKeep is how many of the open paragraph's last lines are wrapped again
// each frame: appending text can change only the last one.
const openKeep = 2

func (tw *textWrap) reset(w int, style func(...string) string) {
	tw.w, tw.style = w, style
	tw.src.Reset()
	tw.srcEnd, tw.done = 0, 0
}

// lines appends to dst the lines that became final since the last call, and
// returns dst with them (final) and then the open lines (to be redone).
func (tw *textWrap) lines(dst []string, text string) (withFinal []string, all []string) {
	if len(text) > tw.srcEnd {
		add := text[tw.srcEnd:]
		if strings.IndexByte(add, '\t') >= 0 {
			add = strings.ReplaceAll(add, "\t", "    ")
		}
		tw.src.WriteString(add)
		tw.srcEnd = len(text)
	}
	src := tw.src.String() // no copy
	open := src[tw.done:]
	// Finished paragraphs.
	for {
		i := strings.IndexByte(open, '\n')
		if i < 0 {
			break
		}
		dst = wrapLines(dst, open[:i], tw.w, tw.style, "")
		tw.done += i + 1
		open = open[i+1:]
	}
	raw := strings.Split(ansi.Wrap(open, max(1, tw.w), ""), "\n")
	if n := len(raw) - openKeep; n > 0 && tw.w >= 2 {
		if k, pos := restartPoint(open, raw, n); k > 0 {
			for _, l := range raw[:k] {
				dst = append(dst, styleLine(strings.TrimRight(l, " "), tw.w, tw.style, ""))
			}
			tw.done += pos
			raw = raw[k:]
		}
	}
	final := dst
	for _, l := range raw {
		dst = append(dst, styleLine(strings.TrimRight(l, " "), tw.w, tw.style, ""))
	}
	return final, dst
}

// restartPoint walks the source past the wrapped lines (the wrapper only
// drops the spaces at each break) and returns the last line k <= n where
// wrapping may restart, with its byte offset in src; k is 0 when there is
// none (then nothing is made final: correct, only slower). A restart is safe
// where the wrapper is in its initial state: the line starts with a word
// (not a space) and that first word holds no hyphen (a hyphen's placement
// depends on the line before).
func restartPoint(src string, raw []string, n int) (k, at int) {
	pos := 0
	for i := 0; i < n && i+1 < len(raw); i++ {
		l := raw[i]
		if !strings.HasPrefix(src[pos:], l) {
			return
		}
		pos += len(l)
		for pos < len(src) {
			r, sz := utf8.DecodeRuneInString(src[pos:])
			if r == utf8.RuneError || !unicode.IsSpace(r) || r == '\u00a0' {
				break
			}
			pos += sz
		}
		next := raw[i+1]
		first := next
		if j := strings.IndexByte(first, ' '); j >= 0 {
			first = first[:j]
		}
		if next == "" || next[0] == ' ' || strings.Contains(first, "-") || !strings.HasPrefix(src[pos:], next) {
			continue
		}
		k, at = i+1, pos
	}
	return
}
