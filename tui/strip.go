package tui

import (
	"time"

	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/theme"
)

// stripLegend is said once under the targets' strips.
const stripLegend = "strips: a column a response · R 429 · O overload · Q quota · B broken · X cancelled · → failover · t timeline"

// stripCol is one column of a target's strips: one response (or the
// failover after it).
type stripCol struct {
	req, tok, ttft, total cell
}

// stripData is a target's strips, ready to draw: its columns and the
// latest figures beside them.
type stripData struct {
	cols                    []stripCol
	hasReq, hasTok, hasTTFT bool
	hasTime                 bool // some response took measurable time
	reqNow, tokNow          string
	ttftNow, totalNow       string
}

// reqWindow is the requests window a strip draws, nil when none.
func reqWindow(l *stream.Limits) *stream.Window {
	if l == nil {
		return nil
	}
	return l.Requests
}

// tokWindow is the tokens window a strip draws: the total's, else the
// input tokens'.
func tokWindow(l *stream.Limits) *stream.Window {
	if l == nil {
		return nil
	}
	if l.Tokens != nil && l.Tokens.HasLimit {
		return l.Tokens
	}
	return l.InputTokens
}

// scaleOf is the range a strip's heights span: from nothing left to the
// limit, or, when every response in view left more than three quarters of
// it, zoomed to the range seen (a 500-a-minute limit drained by a few
// calls still shows the drain; the figures beside it stay exact).
type scaleOf struct{ lo, hi float64 }

func stripScale(atts []*tlAttempt, win func(*stream.Limits) *stream.Window) scaleOf {
	lo, hi, top := -1.0, 0.0, 0.0
	for _, x := range atts {
		if x.a.Class != stream.ClassOK || x.a.MidStream {
			continue // a failure is drawn as its mark, not a height
		}
		w := win(x.a.Limits)
		if w == nil || !w.HasRemaining || !w.HasLimit || w.Limit <= 0 {
			continue
		}
		r := float64(w.Remaining)
		if lo < 0 || r < lo {
			lo = r
		}
		hi, top = max(hi, float64(w.Limit)), max(top, r)
	}
	if lo < 0 || top == lo || hi-lo >= hi/4 {
		// Nothing seen, nothing changed, or a drain the whole height shows.
		return scaleOf{0, 1}
	}
	// Zoomed: the lowest seen sits at a third of the height.
	span := max(1, hi-lo)
	return scaleOf{(lo - span/2) / hi, 1}
}

// leftCell is a response's cell for what a window left: its height the
// share left (on the strip's scale), drawn low (warn) under a tenth of the
// limit; "·" when the response said nothing of it.
func leftCell(w *stream.Window, sc scaleOf) (cell, bool) {
	if w == nil || !w.HasRemaining || !w.HasLimit || w.Limit <= 0 {
		return cell{"·", cellSubtle}, false
	}
	f := float64(w.Remaining) / float64(w.Limit)
	s := cellStrip
	if f < 0.1 {
		s = cellStripLow
	}
	if sc.hi > sc.lo {
		f = (f - sc.lo) / (sc.hi - sc.lo)
	}
	return cell{level(f), s}, true
}

func windowWords(w *stream.Window) string {
	if w == nil || !w.HasRemaining {
		return ""
	}
	s := fmtCount(w.Remaining)
	if w.HasLimit {
		s += "/" + fmtCount(w.Limit)
	}
	return s
}

// stripOf builds a target's strips from its attempts, the newest n
// columns.
func stripOf(atts []*tlAttempt, n int) stripData {
	var d stripData
	var longest time.Duration
	for _, x := range atts[max(0, len(atts)-n):] {
		longest = max(longest, x.a.Duration)
	}
	d.hasTime = longest > 0
	lat := func(v time.Duration) cell {
		if v <= 0 || longest <= 0 {
			return cell{" ", cellPlain}
		}
		return cell{level(float64(v) / float64(longest)), cellStrip}
	}
	if len(atts) > n {
		atts = atts[len(atts)-n:] // each response is at least a column
	}
	reqScale, tokScale := stripScale(atts, reqWindow), stripScale(atts, tokWindow)
	for _, x := range atts {
		a := &x.a
		c := stripCol{ttft: lat(a.TTFT), total: lat(a.Duration), tok: cell{" ", cellPlain}}
		if a.Class == stream.ClassOK && !a.MidStream {
			var ok bool
			c.req, ok = leftCell(reqWindow(a.Limits), reqScale)
			d.hasReq = d.hasReq || ok
			if !ok {
				c.req = cell{"✓", classCell(stream.ClassOK)}
			}
			c.tok, ok = leftCell(tokWindow(a.Limits), tokScale)
			d.hasTok = d.hasTok || ok
			d.totalNow = fmtDur(a.Duration)
			if a.TTFT > 0 {
				d.ttftNow = fmtDur(a.TTFT)
			}
		} else {
			c.req = cell{markOf(a), classCell(a.Class)}
		}
		d.hasTTFT = d.hasTTFT || a.TTFT > 0
		if s := windowWords(reqWindow(a.Limits)); s != "" {
			d.reqNow = s
		}
		if s := windowWords(tokWindow(a.Limits)); s != "" {
			d.tokNow = s
		}
		d.cols = append(d.cols, c)
		if x.moved {
			sp := cell{" ", cellPlain}
			d.cols = append(d.cols, stripCol{req: cell{"→", cellJoin}, tok: sp, ttft: sp, total: sp})
		}
	}
	if len(d.cols) > n {
		d.cols = d.cols[len(d.cols)-n:]
	}
	return d
}

func (d *stripData) row(f func(stripCol) cell, n int) cells {
	r := make(cells, 0, n)
	for _, c := range d.cols {
		r = append(r, f(c))
	}
	for len(r) < n {
		r = append(r, cell{" ", cellPlain})
	}
	return r
}

// stripLines renders a target's strips in w cells under ind: what each
// response left of the requests and tokens limits, the marks of its
// failures and failovers, then latency (time to first token, total).
// short keeps requests and the total latency only.
func stripLines(atts []*tlAttempt, w int, st *theme.Styles, ind string, short bool) []string {
	if len(atts) == 0 || w < 20 {
		return nil
	}
	const lw, vw = 5, 9
	n := w - lw - vw - 1
	d := stripOf(atts, n)
	line := func(label string, f func(stripCol) cell, val string) string {
		return ind + fit(st.Subtle.Render(fit(label, lw))+d.row(f, n).render(st)+" "+st.Subtle.Render(val), w)
	}
	first := "resp"
	if d.hasReq {
		first = "req"
	}
	out := []string{line(first, func(c stripCol) cell { return c.req }, d.reqNow)}
	if d.hasTok && !short {
		out = append(out, line("tok", func(c stripCol) cell { return c.tok }, d.tokNow))
	}
	if d.hasTTFT && !short {
		out = append(out, line("ttft", func(c stripCol) cell { return c.ttft }, d.ttftNow))
	}
	if d.hasTime {
		out = append(out, line("time", func(c stripCol) cell { return c.total }, d.totalNow))
	}
	return out
}

// stripLine is a target's strips in one line, for a narrow terminal or a
// pane short of rows: requests left with the marks, then (when there is
// room for both) the total latency.
func stripLine(atts []*tlAttempt, w int, st *theme.Styles, ind string) string {
	const vw = 8 // "498/500", "2000/10k"
	room := w - len(ind) - 4 - 1 - vw
	withTime := room >= 40
	n := room
	if withTime {
		n = (room - 6 - 1 - 5) / 2
	}
	n = min(24, n)
	if len(atts) == 0 || n < 4 {
		return ""
	}
	d := stripOf(atts, n)
	first := "resp "
	if d.hasReq {
		first = "req "
	}
	s := ind + st.Subtle.Render(first) + d.row(func(c stripCol) cell { return c.req }, n).render(st) + " " + st.Subtle.Render(fit(d.reqNow, vw))
	if withTime && d.hasTime {
		s += st.Subtle.Render(" time ") + d.row(func(c stripCol) cell { return c.total }, n).render(st) + " " + st.Subtle.Render(d.totalNow)
	}
	return fit(s, w)
}

// The strips' forms in the long form of the pane: all of them, one line a
// target when the pane is short of rows, none when even that does not fit.
const (
	stripsFull  = iota
	stripsShort // requests and total latency
	stripsLine
	stripsNone
)

// stripKey is one drawing of a target's strips.
type stripKey struct {
	t         stream.Target
	form, w   int
	collapsed bool
	ver       int
}

// cachedStrips returns a target's strips as drawn for this version of the
// timeline, drawing them only when new data came (or the pane was
// invalidated: a resize, a theme).
func (p *targetsPane) cachedStrips(k stripKey, draw func([]*tlAttempt) []string) []string {
	if out, ok := p.stripCache[k]; ok {
		return out
	}
	if p.stripCache == nil {
		p.stripCache = map[stripKey][]string{}
	}
	out := draw(p.tl.of(k.t))
	p.stripCache[k] = out
	return out
}

// strips is a target's strips in the pane's long form.
func (p *targetsPane) strips(s *targetState, w int, st *theme.Styles, ind string) []string {
	if p.noStrips || p.tl == nil || !s.info.Available || p.stripForm == stripsNone {
		return nil
	}
	form := p.stripForm
	return p.cachedStrips(stripKey{t: s.info.Target, form: form, w: w, ver: p.tl.ver}, func(atts []*tlAttempt) []string {
		if form == stripsLine {
			if l := stripLine(atts, w+len(ind), st, ind); l != "" {
				return []string{l}
			}
			return nil
		}
		return stripLines(atts, w, st, ind, form == stripsShort)
	})
}

// stripLine is a target's strips in the collapsed form's one line.
func (p *targetsPane) stripLine(s *targetState, w int, st *theme.Styles) string {
	if p.noStrips || p.tl == nil || !s.info.Available || !p.wrapLong {
		return "" // a short terminal's rows are the conversation's
	}
	out := p.cachedStrips(stripKey{t: s.info.Target, w: w, collapsed: true, ver: p.tl.ver}, func(atts []*tlAttempt) []string {
		return []string{stripLine(atts, w, st, "    ")}
	})
	return out[0]
}

// stripsShown reports whether any target has a strip (the legend shows).
func (p *targetsPane) stripsShown() bool {
	return !p.noStrips && p.tl != nil && len(p.tl.atts) > 0
}
