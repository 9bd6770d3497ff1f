package tui

import (
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/theme"
)

// scales are the timeline's zoom steps: the time one column covers.
var scales = []time.Duration{100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second,
	2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute,
	15 * time.Minute, time.Hour}

const defaultZoom = 3 // one second a column

// tickSteps are the axis's label spacings, the first at least 12 columns
// wide is used.
var tickSteps = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second,
	30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute,
	30 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}

// timelineView draws a tlog: one lane a target on a shared time axis, each
// attempt a lettered mark, waits as spans with their source, failovers as
// arrows between lanes; a cursor picks an attempt, shown in full below.
type timelineView struct {
	cursor int       // index into the tlog's attempts; -1: the newest
	follow bool      // the window ends at now: new data scrolls it
	end    time.Time // the window's end when not following
	zoom   int       // index into scales
	pw     int       // the plot's width in columns, as last drawn
	lead   int       // following: columns drawn after now (a wait planned ahead)

	key   string
	lines []string
}

func newTimelineView() *timelineView {
	return &timelineView{cursor: -1, follow: true, zoom: defaultZoom}
}

func (v *timelineView) invalidate() { v.key = "" }

// fitTo zooms so the whole span fits the plot, and ends the window at its
// end (a past session).
func (v *timelineView) fitTo(l *tlog, pw int) {
	from, to := l.span()
	v.follow, v.end = false, to.Add(scales[0])
	v.zoom = len(scales) - 1
	for i, s := range scales {
		if time.Duration(pw-2)*s >= to.Sub(from) {
			v.zoom = i
			break
		}
	}
	v.end = from.Add(time.Duration(pw-1) * scales[v.zoom])
}

func (v *timelineView) scale() time.Duration { return scales[v.zoom] }

// window is the time range drawn, from the window's end back pw columns.
func (v *timelineView) window(now time.Time) (start, end time.Time) {
	end = v.end
	if v.follow {
		end = now.Truncate(v.scale()).Add(time.Duration(max(2, v.lead)) * v.scale())
	}
	return end.Add(-time.Duration(max(1, v.pw)) * v.scale()), end
}

func (v *timelineView) sel(l *tlog) int {
	if len(l.atts) == 0 {
		return -1
	}
	if v.cursor < 0 || v.cursor >= len(l.atts) {
		return len(l.atts) - 1
	}
	return v.cursor
}

// show scrolls the window so t is on it.
func (v *timelineView) show(t, now time.Time) {
	start, end := v.window(now)
	if !t.Before(start) && t.Before(end.Add(-v.scale())) {
		return
	}
	v.follow = false
	v.end = t.Add(time.Duration(v.pw/2) * v.scale())
	if v.end.After(now) && !now.IsZero() {
		v.follow = true
	}
}

// keyTimeline moves the cursor, scrolls and zooms; it reports whether it
// used the key.
func (v *timelineView) keyTimeline(msg tea.KeyPressMsg, k TimelineKeys, l *tlog, now time.Time) bool {
	i := v.sel(l)
	switch {
	case key.Matches(msg, k.Left):
		if i > 0 {
			v.cursor = i - 1
			v.show(l.atts[v.cursor].at, now)
		}
	case key.Matches(msg, k.Right):
		if i >= 0 && i < len(l.atts)-1 {
			v.cursor = i + 1
			v.show(l.atts[v.cursor].at, now)
		}
	case key.Matches(msg, k.Up), key.Matches(msg, k.Down):
		if i < 0 {
			return true
		}
		d := 1
		if key.Matches(msg, k.Up) {
			d = -1
		}
		cur := &l.atts[i]
		lane := indexOf(l.lanes, cur.a.Target) + d
		best, bestD := -1, time.Duration(0)
		for ; lane >= 0 && lane < len(l.lanes) && best < 0; lane += d {
			for j := range l.atts {
				if l.atts[j].a.Target != l.lanes[lane] {
					continue
				}
				dd := l.atts[j].at.Sub(cur.at)
				if dd < 0 {
					dd = -dd
				}
				if best < 0 || dd < bestD {
					best, bestD = j, dd
				}
			}
		}
		if best >= 0 {
			v.cursor = best
			v.show(l.atts[best].at, now)
		}
	case key.Matches(msg, k.PageUp):
		start, _ := v.window(now)
		v.follow, v.end = false, start.Add(time.Duration(v.pw/2)*v.scale())
	case key.Matches(msg, k.PageDown):
		_, end := v.window(now)
		v.end = end.Add(time.Duration(v.pw/2) * v.scale())
		if !now.IsZero() && !v.end.Before(now) {
			v.follow = true
		}
	case key.Matches(msg, k.ZoomIn):
		v.zoomBy(-1, l, now)
	case key.Matches(msg, k.ZoomOut):
		v.zoomBy(1, l, now)
	case key.Matches(msg, k.Newest):
		v.cursor = -1
		if now.IsZero() {
			v.fitTo(l, v.pw)
		} else {
			v.follow = true
		}
	default:
		return false
	}
	v.invalidate()
	return true
}

// zoomBy changes the scale, keeping the cursor's attempt on the window.
func (v *timelineView) zoomBy(d int, l *tlog, now time.Time) {
	v.zoom = min(max(0, v.zoom+d), len(scales)-1)
	if i := v.sel(l); i >= 0 {
		v.show(l.atts[i].at, now)
	}
}

func indexOf(ts []stream.Target, t stream.Target) int {
	for i, x := range ts {
		if x == t {
			return i
		}
	}
	return -1
}

// floorDiv is d/s rounded down (a time before the window's start is a
// negative column).
func floorDiv(d, s time.Duration) int {
	q := d / s
	if d < 0 && d%s != 0 {
		q--
	}
	return int(q)
}

// view renders the timeline in w x h cells. now is the live session's
// clock; zero for a past session (the window stays where it is).
func (v *timelineView) view(l *tlog, w, h int, now time.Time, st *theme.Styles) []string {
	lw := min(30, max(14, w/4))
	v.pw = max(10, w-lw-1)
	if v.end.IsZero() && !v.follow {
		v.fitTo(l, v.pw)
	}
	if _, to := l.span(); v.follow && to.After(now) {
		// A wait planned ahead: up to a third of the plot after now.
		v.lead = min(v.pw/3, floorDiv(to.Sub(now), v.scale())+2)
	} else {
		v.lead = 2
	}
	start, _ := v.window(now)
	key := fmt.Sprintf("%d/%d/%d/%d/%v/%d/%d/%d", l.ver, w, h, v.cursor, v.follow, v.end.UnixMilli(), v.zoom, start.UnixMilli())
	if key == v.key {
		return v.lines
	}
	out := v.render(l, w, h, lw, start, now, st)
	v.key, v.lines = key, out
	return out
}

func (v *timelineView) render(l *tlog, w, h, lw int, start, now time.Time, st *theme.Styles) []string {
	if len(l.atts) == 0 && len(l.waits) == 0 {
		out := []string{st.Subtle.Render(fit("Nothing on the timeline yet: each attempt of each call shows here, one lane a target.", w))}
		return padLines(out, w, h)
	}
	sel := v.sel(l)
	legend := wrap(markLegend+" · ↓ failover · ━ the call waited · ┄ the server asked, the call moved on", w)
	detail := v.detail(l, sel, w, st)
	room := h - 1 - len(legend) - 1 - len(detail) - 1
	lanes := l.lanes
	more := 0
	if n := max(1, room/2); len(lanes) > n {
		more = len(lanes) - n
		lanes = lanes[:n]
	}
	p := newPlot(v.pw, start, v.scale(), lanes)
	axis := p.axis()
	labels := p.drawWaits(l)
	p.drawAttempts(l, sel)
	p.drawFailovers(l)
	p.placeLabels(labels)

	selLane := -1
	if sel >= 0 {
		selLane = p.lane(l.atts[sel].a.Target)
	}
	pad := strings.Repeat(" ", lw+1)
	scaleWords := fmt.Sprintf("1 col = %s", fmtDur(p.scale))
	out := []string{st.Subtle.Render(fit(scaleWords, lw)) + " " + axis.render(st)}
	for i, t := range lanes {
		name := fit(t.String(), lw)
		if i == selLane {
			name = st.Accent.Render(name)
		}
		out = append(out, name+" "+p.rows[2*i].render(st), pad+p.rows[2*i+1].render(st))
	}
	if more > 0 {
		out = append(out, st.Subtle.Render(fmt.Sprintf("+%d more lanes (a taller terminal shows them)", more)))
	}
	out = append(out, "")
	for _, x := range legend {
		out = append(out, st.Subtle.Render(x))
	}
	out = append(out, "")
	out = append(out, detail...)
	return padLines(out, w, h)
}

// plot is one drawing of the timeline's lanes: two rows of cells a lane
// (the lane, and the row under it for labels and arrows), pw columns from
// start, scale a column.
type plot struct {
	pw    int
	start time.Time
	scale time.Duration
	lanes []stream.Target
	rows  []cells
	ticks []int // the axis's tick columns
}

// spanLabel is a wait's label to place on its lane: on its span, or under
// it.
type spanLabel struct {
	li, c0, c1 int
	text       string
	s          cellStyle
}

func newPlot(pw int, start time.Time, scale time.Duration, lanes []stream.Target) *plot {
	return &plot{pw: pw, start: start, scale: scale, lanes: lanes}
}

// col is the column of time t (negative before the window).
func (p *plot) col(t time.Time) int { return floorDiv(t.Sub(p.start), p.scale) }

// lane is the lane of target t, -1 when it is not drawn.
func (p *plot) lane(t stream.Target) int { return indexOf(p.lanes, t) }

// emptyCell reports whether a cell holds nothing drawn (the axis's dots
// are background).
func emptyCell(c cell) bool { return c.s == cellPlain || c.s == cellAxis }

// axis draws the time axis (a label at each tick) and dots each tick's
// column in every lane.
func (p *plot) axis() cells {
	step := tickSteps[len(tickSteps)-1]
	for _, s := range tickSteps {
		if s >= 12*p.scale {
			step = s
			break
		}
	}
	format := "15:04:05"
	if step >= time.Minute {
		format = "15:04"
	}
	axis := newCells(p.pw, cell{" ", cellAxis})
	for t := p.start.Truncate(step); t.Before(p.start.Add(time.Duration(p.pw) * p.scale)); t = t.Add(step) {
		c := p.col(t)
		if c < 0 {
			continue
		}
		p.ticks = append(p.ticks, c)
		axis.put(c, "╵"+t.Local().Format(format), cellAxis)
	}
	p.rows = make([]cells, 2*len(p.lanes))
	for i := range p.rows {
		p.rows[i] = newCells(p.pw, cell{" ", cellPlain})
		if i%2 == 0 {
			for _, c := range p.ticks {
				p.rows[i][c] = cell{"·", cellAxis}
			}
		}
	}
	return axis
}

// drawWaits draws each wait as a span on its lane and returns their labels
// (placed last, where they fit).
func (p *plot) drawWaits(l *tlog) []spanLabel {
	var labels []spanLabel
	for i := range l.waits {
		x := &l.waits[i]
		li := p.lane(x.target)
		if li < 0 {
			continue
		}
		c0, c1 := p.col(x.from), max(p.col(x.until), p.col(x.from)+1)
		if c1 < 0 || c0 >= p.pw {
			continue
		}
		g, s := "━", cellWait
		if x.asked {
			g, s = "┄", cellAsked
		}
		for c := max(0, c0); c < min(p.pw, c1); c++ {
			p.rows[2*li][c] = cell{g, s}
		}
		labels = append(labels, spanLabel{li, c0, c1, waitLabel(x), s})
	}
	return labels
}

// drawAttempts draws each attempt's time in flight as ─, then its mark (a
// failure in the same column shows over an ok; the cursor's shows always).
func (p *plot) drawAttempts(l *tlog, sel int) {
	for i := range l.atts {
		x := &l.atts[i]
		li := p.lane(x.a.Target)
		if li < 0 {
			continue
		}
		c, ce := p.col(x.at), p.col(x.end)
		for cc := max(0, c+1); cc < min(p.pw, ce); cc++ {
			if emptyCell(p.rows[2*li][cc]) {
				p.rows[2*li][cc] = cell{"─", cellSubtle}
			}
		}
	}
	for i := range l.atts {
		x := &l.atts[i]
		li := p.lane(x.a.Target)
		c := p.col(x.at)
		if li < 0 || c < 0 || c >= p.pw {
			continue
		}
		if prev := p.rows[2*li][c]; prev.s >= cellClass && x.a.Class == stream.ClassOK && i != sel {
			continue // a failure in the same column shows over an ok
		}
		s := classCell(x.a.Class)
		if i == sel {
			s = cellSelected
		}
		p.rows[2*li][c] = cell{markOf(&x.a), s}
	}
}

// drawFailovers draws an arrow from the lane that failed to the one that
// took over, in the column where the call landed.
func (p *plot) drawFailovers(l *tlog) {
	for i := range l.atts {
		x := &l.atts[i]
		if !x.moved || x.to.Provider == "" {
			continue
		}
		a, b, c := p.lane(x.a.Target), p.lane(x.to), p.col(x.toAt)
		if a < 0 || b < 0 || a == b || c < 0 || c >= p.pw {
			continue
		}
		lo, hi, end := 2*a+1, 2*b-1, 2*b-1
		g := "↓"
		if b < a {
			lo, hi, end, g = 2*b+1, 2*a-1, 2*b+1, "↑"
		}
		for r := lo; r <= hi; r++ {
			if r%2 == 1 || emptyCell(p.rows[r][c]) {
				gl := "│"
				if r == end {
					gl = g
				}
				p.rows[r][c] = cell{gl, cellJoin}
			}
		}
	}
}

// placeLabels writes the waits' labels: on the span when it is long
// enough, else under it (or just before it) where nothing else is drawn;
// the whole label, else its length alone ("wait 20s").
func (p *plot) placeLabels(labels []spanLabel) {
	free := func(r cells, from, n int) bool {
		if from < 0 || from+n > len(r) {
			return false
		}
		for c := from; c < from+n; c++ {
			if !emptyCell(r[c]) {
				return false
			}
		}
		return true
	}
	for _, lb := range labels {
		lane, under := p.rows[2*lb.li], p.rows[2*lb.li+1]
		for _, text := range []string{lb.text, strings.Join(strings.Fields(lb.text)[:2], " ")} {
			if placeLabel(lane, under, lb.c0, lb.c1, text, lb.s, free) {
				break
			}
		}
	}
}

// placeLabel writes a wait's label on its span when the span is long
// enough, else under it (or just before it) where nothing else is drawn.
func placeLabel(lane, under cells, c0, c1 int, text string, s cellStyle, free func(cells, int, int) bool) bool {
	n := len([]rune(text))
	pw := len(lane)
	inline := n+2 <= c1-c0 && c0+1 >= 0 && c0+n+2 < pw
	for c := c0 + 1; inline && c < c0+n+3 && c < pw; c++ {
		inline = lane[c].s == s
	}
	if inline {
		lane.put(c0+1, " "+text+" ", s)
		return true
	}
	for c := max(0, c0); c < max(c0, c1); c++ {
		if free(under, c, n) {
			under.put(c, text, s)
			return true
		}
	}
	if free(under, c0-n-1, n) {
		under.put(c0-n-1, text, s)
		return true
	}
	return false
}

// waitLabel is a wait's length and source: "wait 20s retry-after",
// "asked 30s retry-after", "paced 4s".
func waitLabel(x *tlWait) string {
	d := fmtDur(x.until.Sub(x.from))
	switch {
	case x.pacing:
		return "paced " + d
	case x.asked:
		return "asked " + d + " " + string(x.source)
	case x.endedBy == retry.WaitFailover:
		return "wait " + d + " " + orDash(string(x.source)) + ", you failed over"
	}
	return "wait " + d + " " + orDash(string(x.source))
}

// detail is the attempt under the cursor, in full.
func (v *timelineView) detail(l *tlog, sel, w int, st *theme.Styles) []string {
	if sel < 0 {
		return nil
	}
	x := &l.atts[sel]
	a := &x.a
	head := fmt.Sprintf("▸ %s  %s · attempt %d of call %s · %s", x.at.Local().Format("15:04:05.000"), a.Target, a.N, orDash(x.call), markOf(a))
	parts := []string{}
	if a.Status != 0 {
		parts = append(parts, fmt.Sprint(a.Status))
	}
	parts = append(parts, string(a.Class))
	if a.Code != "" && a.Class != stream.ClassOK {
		parts = append(parts, a.Code)
	}
	if a.MidStream {
		parts = append(parts, "mid-stream")
	}
	line := strings.Join(parts, " ")
	if a.TTFT > 0 {
		line += " · ttft " + fmtDur(a.TTFT)
		if a.TTFText > a.TTFT {
			line += " · first text " + fmtDur(a.TTFText)
		}
	}
	line += " · took " + fmtDur(a.Duration)
	if a.RetryAfter != nil {
		line += " · asked " + fmtDur(*a.RetryAfter) + " (" + sourceOr(a.DelaySource, "retry-after") + ")"
	}
	if a.Waited > 0 {
		line += " · waited " + fmtDur(a.Waited)
	}
	switch {
	case x.moved && x.to.Provider != "":
		line += " · -> failed over to " + x.to.String()
		if a.FailedOverByUser {
			line += " (by you)"
		}
	case a.Decision != "" && a.Decision != retry.DecideDone:
		line += " · -> " + string(a.Decision)
	}
	if a.RequestID != "" {
		line += " · " + a.RequestID
	}
	out := []string{st.Accent.Render(fit(head, w))}
	style := st.Class(string(a.Class)).Render
	for _, s := range wrap(line, w-2) {
		out = append(out, "  "+style(s))
	}
	if a.Message != "" {
		for _, s := range wrap(oneLine(a.Message), w-2) {
			out = append(out, "  "+st.Detail.Render(s))
		}
	}
	if g := limitWords(a.Limits); g != "" {
		out = append(out, "  "+st.Subtle.Render(fit("left after it: "+g, w-2)))
	}
	return out
}

// limitWords says what a snapshot left: "req 498/500 · tok 198k/200k".
func limitWords(l *stream.Limits) string {
	if l == nil {
		return ""
	}
	var parts []string
	for _, x := range []struct {
		n string
		w *stream.Window
	}{{"req", l.Requests}, {"tok", l.Tokens}, {"in", l.InputTokens}, {"out", l.OutputTokens}} {
		if x.w == nil || !x.w.HasRemaining {
			continue
		}
		s := x.n + " " + fmtCount(x.w.Remaining)
		if x.w.HasLimit {
			s += "/" + fmtCount(x.w.Limit)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " · ")
}
