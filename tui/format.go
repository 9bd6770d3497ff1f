package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
)

// fmtDur renders a duration for people: 850ms, 23s, 2m40s, 6h12m.
func fmtDur(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 10*time.Second:
		s := d.Round(100 * time.Millisecond).Seconds()
		if s == float64(int(s)) {
			return fmt.Sprintf("%ds", int(s))
		}
		return fmt.Sprintf("%.1fs", s)
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Round(time.Second).Seconds()))
	case d < time.Hour:
		d = d.Round(time.Second)
		m, s := int(d/time.Minute), int(d%time.Minute/time.Second)
		if s == 0 {
			return fmt.Sprintf("%dm", m)
		}
		return fmt.Sprintf("%dm%02ds", m, s)
	default:
		d = d.Round(time.Minute)
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if h >= 48 {
			return fmt.Sprintf("%dd%dh", h/24, h%24)
		}
		return fmt.Sprintf("%dh%02dm", h, m)
	}
}

// fmtCountdown renders the time left until t, counted in whole seconds up
// (a countdown never shows 0s while time is left).
func fmtCountdown(now, t time.Time) string {
	left := t.Sub(now)
	if left <= 0 {
		return "0s"
	}
	if left < time.Minute {
		return fmt.Sprintf("%ds", int((left+time.Second-1)/time.Second))
	}
	return fmtDur(left)
}

// fmtCount renders a count compactly: 950, 148k, 2.0M.
func fmtCount(n int64) string {
	switch {
	case n < 0:
		return "-" + fmtCount(-n)
	case n < 10_000:
		return fmt.Sprintf("%d", n)
	case n < 1_000_000:
		return fmt.Sprintf("%dk", n/1000)
	default:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	}
}

// fit cuts or pads s (which may hold ANSI styles) to exactly w cells.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	sw := ansi.StringWidth(s)
	if sw > w {
		s = ansi.Truncate(s, w, "…")
		sw = ansi.StringWidth(s)
	}
	if sw < w {
		s += strings.Repeat(" ", w-sw)
	}
	return s
}

// wrap word-wraps plain text to w cells, breaking long words; it keeps the
// text's own line breaks.
func wrap(s string, w int) []string {
	if w < 1 {
		w = 1
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\t", "    ")
	out := strings.Split(ansi.Wrap(s, w, ""), "\n")
	for i, l := range out {
		out[i] = strings.TrimRight(l, " ")
	}
	return out
}

// oneLine flattens text to one line (newlines become spaces).
func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\r", " ")
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// bar renders a gauge of n cells filled to frac (0..1).
func bar(frac float64, n int, full, empty func(...string) string) string {
	if frac < 0 {
		frac = 0
	}
	if frac > 1 {
		frac = 1
	}
	f := int(frac*float64(n) + 0.5)
	return full(strings.Repeat("█", f)) + empty(strings.Repeat("░", n-f))
}

// padFitted pads lines already exactly w cells wide to h lines.
func padFitted(lines []string, w, h int) []string {
	if len(lines) >= h {
		return lines[:h]
	}
	out := make([]string, 0, h)
	out = append(out, lines...)
	blank := strings.Repeat(" ", w)
	for len(out) < h {
		out = append(out, blank)
	}
	return out
}

// chrome is a box's styled frame, cached per title, width and focus.
type chrome struct {
	top, side, bottom, blank string
}

type chromeKey struct {
	title   string
	w       int
	focused bool
}

// box frames lines (exactly w-2 cells each when fitted) in the cached
// chrome, giving exactly h lines of w cells.
func (m *Model) box(title string, lines []string, w, h int, fitted, focused bool) []string {
	if w < 4 || h < 2 {
		return nil
	}
	k := chromeKey{title, w, focused}
	c, ok := m.chrome[k]
	if !ok {
		border := m.st.Border.Render
		if focused {
			border = m.st.BorderFocused.Render
		}
		g := lightFrame
		if focused {
			g = heavyFrame // the focus shows without colour too (NO_COLOR)
		}
		b := drawFrame(title, nil, w, 3, false, border, m.st.PaneTitle.Render, g)
		c = &chrome{top: b[0], side: border(g.side), bottom: b[2], blank: strings.Repeat(" ", w-2)}
		if len(m.chrome) > 64 {
			clear(m.chrome)
		}
		m.chrome[k] = c
	}
	out := make([]string, 0, h)
	out = append(out, c.top)
	for i := 0; i < h-2; i++ {
		l := c.blank
		if i < len(lines) {
			l = lines[i]
			if !fitted {
				l = fit(l, w-2)
			}
		}
		out = append(out, c.side+l+c.side)
	}
	return append(out, c.bottom)
}

// frameGlyphs are a frame's box-drawing characters.
type frameGlyphs struct{ tl, tr, bl, br, h, side string }

var (
	lightFrame = frameGlyphs{"┌", "┐", "└", "┘", "─", "│"}
	heavyFrame = frameGlyphs{"┏", "┓", "┗", "┛", "━", "┃"} // the focused pane
)

// drawFrame frames lines with the given glyphs and a title, giving exactly
// h lines of w cells. With fitted, the lines are known to be exactly w-2
// cells already.
func drawFrame(title string, lines []string, w, h int, fitted bool, border, titleStyle func(...string) string, g frameGlyphs) []string {
	if w < 4 || h < 2 {
		return nil
	}
	inner := w - 2
	out := make([]string, 0, h)
	t := ""
	if title != "" {
		t = " " + title + " "
		if ansi.StringWidth(t) > inner-1 {
			t = ansi.Truncate(t, inner-1, "…")
		}
	}
	tw := ansi.StringWidth(t)
	out = append(out, border(g.tl)+titleStyle(t)+border(strings.Repeat(g.h, inner-tw)+g.tr))
	side := border(g.side)
	blank := strings.Repeat(" ", inner)
	for i := 0; i < h-2; i++ {
		l := blank
		if i < len(lines) {
			l = lines[i]
			if !fitted {
				l = fit(l, inner)
			}
		}
		out = append(out, side+l+side)
	}
	out = append(out, border(g.bl+strings.Repeat(g.h, inner)+g.br))
	return out
}

// widthOf is the cell width of s.
func widthOf(s string) int { return ansi.StringWidth(s) }
