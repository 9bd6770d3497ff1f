package tui

import (
	"strings"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/theme"
)

// A chart row is built cell by cell, each cell a glyph and a style, then
// rendered with one Render call per run of cells of one style (a strip of
// 40 cells costs a handful of Render calls, not 40).

// cellStyle names a chart cell's style; cellClass+class picks a mark's.
type cellStyle uint8

const (
	cellPlain cellStyle = iota
	cellAxis
	cellStrip
	cellStripLow
	cellWait
	cellAsked
	cellJoin
	cellSubtle
	cellSelected
	cellClass // + classIndex: a mark
)

// classes are the attempt classes in mark-style order (cellClass + i).
var classes = []stream.Class{stream.ClassOK, stream.ClassRateLimit, stream.ClassOverload, stream.ClassQuota,
	stream.ClassCaller, stream.ClassServer, stream.ClassConnection, stream.ClassTimeout, stream.ClassCancelled,
	stream.ClassFlexCapacity}

func classCell(c stream.Class) cellStyle {
	for i, k := range classes {
		if k == c {
			return cellClass + cellStyle(i)
		}
	}
	return cellPlain
}

type cell struct {
	g string // one cell wide
	s cellStyle
}

// cells is one chart row.
type cells []cell

func newCells(n int, fill cell) cells {
	c := make(cells, n)
	for i := range c {
		c[i] = fill
	}
	return c
}

// put writes s from column at, clipped to the row.
func (c cells) put(at int, s string, st cellStyle) {
	for _, r := range s {
		if at >= 0 && at < len(c) {
			c[at] = cell{string(r), st}
		}
		at++
	}
}

// render draws the row with st's styles, one Render a run of one style.
func (c cells) render(st *theme.Styles) string {
	var b, run strings.Builder
	cur := cellStyle(255)
	flush := func() {
		if run.Len() > 0 {
			b.WriteString(styleOf(cur, st)(run.String()))
			run.Reset()
		}
	}
	for _, x := range c {
		if x.s != cur {
			flush()
			cur = x.s
		}
		run.WriteString(x.g)
	}
	flush()
	return b.String()
}

func styleOf(s cellStyle, st *theme.Styles) func(...string) string {
	switch s {
	case cellAxis:
		return st.Axis.Render
	case cellStrip:
		return st.Strip.Render
	case cellStripLow:
		return st.StripLow.Render
	case cellWait:
		return st.SpanWait.Render
	case cellAsked:
		return st.SpanAsked.Render
	case cellJoin:
		return st.Join.Render
	case cellSubtle:
		return st.Subtle.Render
	case cellSelected:
		return st.Selected.Render
	}
	if s >= cellClass && int(s-cellClass) < len(classes) {
		return st.Mark(string(classes[s-cellClass])).Render
	}
	return st.Base.Render
}

// markOf is an attempt's mark (theme.MarkLetter): a letter by class, so
// NO_COLOR loses nothing.
func markOf(a *retry.Attempt) string { return theme.MarkLetter(string(a.Class), a.MidStream) }

// markLegend says what each mark means.
const markLegend = theme.MarkLegend

// levels are a strip's eight heights, lowest first.
var levels = []string{"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"}

// level is the cell of frac (0..1) of the full height: never the lowest
// while some is left, never the highest while some is used.
func level(frac float64) string {
	switch {
	case frac <= 0:
		return levels[0]
	case frac >= 1:
		return levels[len(levels)-1]
	}
	i := int(frac*float64(len(levels)-1) + 0.5)
	return levels[min(max(i, 1), len(levels)-2)]
}
