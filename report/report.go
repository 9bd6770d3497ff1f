package report

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/limitscope/limitscope/internal/sanitize"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/theme"
)

// Input is what a report shows.
type Input struct {
	Title     string          // "" => "limitscope report"
	Scope     string          // what was selected, one line ("session 12", "since 2h")
	Sessions  []store.Session // the sessions the calls belong to
	Calls     []store.Call    // in full (store.Reader.Each), oldest first
	Generated time.Time
	Version   string
}

// letter is an attempt's mark letter, the console's (theme.MarkLetter).
func letter(a *retry.Attempt) string { return theme.MarkLetter(string(a.Class), a.MidStream) }

// broken reports whether a's stream broke after HTTP 200: a cancel is
// not a break.
func broken(a *retry.Attempt) bool {
	return a.MidStream && a.Class != stream.ClassOK && a.Class != stream.ClassCancelled
}

func cssClass(a *retry.Attempt) string {
	if broken(a) {
		return "c-broken"
	}
	return "c-" + strings.ReplaceAll(string(a.Class), "_", "-")
}

// Write writes the report of in to w.
func Write(w io.Writer, in Input) error {
	v := build(in)
	if err := page.Execute(w, v); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// txt is text from elsewhere (a provider, a caller), made safe to show.
func txt(s string) string { return sanitize.Printable(s) }

func dur(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute && d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

type view struct {
	Title, Scope, Generated, Version string
	From, To                         string
	Sessions                         []sessionRow
	Totals                           totals
	Timeline                         svg
	Limits                           []limitChart
	Waits                            []waitRow
	Failovers                        []failoverRow
	Providers                        []providerRow
	Calls                            []callRow
	Legend                           []legendItem
}

type sessionRow struct{ ID, Started, Ended, Command, Mode, Version string }

type totals struct {
	Calls, Attempts, Retries, Wasted, Failovers, Waits, Quota, Broken, OK int
	Waited                                                                string
}

type legendItem struct{ Letter, Class, Name string }

type svg struct {
	W, H                                int
	Lanes                               []lane
	Marks                               []mark
	Waits                               []span
	Arrows                              []arrow
	Ticks                               []tick
	PlotLeft, PlotRight, AxisY, LaneTop int
}

type lane struct {
	Y, TextY int
	Name     string
}

type mark struct {
	X, Y, W, H, TextX, TextY float64
	Class, Letter, Title     string
}

type span struct {
	X1, X2, Y float64
	Title     string
	Pacing    bool
}

type arrow struct {
	X1, Y1, X2, Y2 float64
	Title          string
}

type tick struct {
	X     float64
	Label string
}

type limitChart struct {
	Target   string
	W, H     int
	Requests string // polyline points
	Tokens   string
	Marks    []mark
	Ticks    []tick
	Note     string
	Last     string
}

type waitRow struct{ At, Call, Target, Source, Planned, Waited, Why string }

type failoverRow struct{ At, Call, From, To, Reason string }

type providerRow struct {
	Provider                                                        string
	Requests, OK, RateLimit, Overload, Quota, Server, Broken, Other int
	Wasted                                                          int
	P50, P95, TTFT, Waited                                          string
}

type callRow struct {
	ID, Started, Chain, ServedBy, Outcome, OutcomeClass, Tries, Waited, Latency, Route string
	Err                                                                                string
	Attempts                                                                           []attemptRow
}

type attemptRow struct {
	N, Target, Started, Status, Class, CSS, Letter, Code, Message, RetryAfter, Source, Waited, Paced, TTFT, Duration, Decision, RequestID, Limits string
}

const (
	chartW    = 1100
	plotLeft  = 230
	plotRight = chartW - 20
	laneH     = 30
	laneTop   = 30
)

// build turns the report's input into the view its template renders.
func build(in Input) view {
	b := &builder{
		v:          header(in),
		ax:         newAxis(in.Calls),
		prov:       map[string]*provAcc{},
		snaps:      map[string][]snap{},
		limitMarks: map[string][]mark{},
	}
	b.timeline()
	for i := range in.Calls {
		b.call(&in.Calls[i])
	}
	var waited time.Duration
	for i := range in.Calls {
		waited += in.Calls[i].Waited
	}
	b.v.Totals.Waited = dur(waited)
	b.limitCharts()
	for _, p := range b.provOrder {
		b.v.Providers = append(b.v.Providers, b.prov[p].row(p))
	}
	return b.v
}

// header is the view's title, sessions and legend.
func header(in Input) view {
	v := view{Title: cmp.Or(in.Title, "limitscope report"), Scope: txt(in.Scope), Version: txt(in.Version)}
	if !in.Generated.IsZero() {
		v.Generated = in.Generated.UTC().Format(time.RFC3339)
	}
	for _, s := range in.Sessions {
		r := sessionRow{ID: fmt.Sprint(s.ID), Started: s.Started.UTC().Format(time.RFC3339), Command: txt(s.Command), Mode: txt(s.Mode), Version: txt(s.Version)}
		if !s.Ended.IsZero() {
			r.Ended = s.Ended.UTC().Format(time.RFC3339)
		}
		v.Sessions = append(v.Sessions, r)
	}
	for _, c := range []stream.Class{stream.ClassOK, stream.ClassRateLimit, stream.ClassOverload, stream.ClassFlexCapacity, stream.ClassQuota,
		stream.ClassServer, stream.ClassConnection, stream.ClassTimeout, stream.ClassCaller, stream.ClassCancelled} {
		a := retry.Attempt{Class: c}
		v.Legend = append(v.Legend, legendItem{Letter: letter(&a), Class: cssClass(&a), Name: strings.ReplaceAll(string(c), "_", " ")})
	}
	v.Legend = append(v.Legend, legendItem{Letter: theme.MarkLetter(string(stream.ClassServer), true), Class: "c-broken", Name: "broken stream (after HTTP 200)"})
	return v
}

// axis is the charts' time axis (every call's first event to its last) and
// their lanes, one per target in the order first met.
type axis struct {
	t0, t1  time.Time
	targets []string
	laneOf  map[string]int
}

func newAxis(calls []store.Call) axis {
	var ax axis
	extend := func(t time.Time) {
		if t.IsZero() {
			return
		}
		if ax.t0.IsZero() || t.Before(ax.t0) {
			ax.t0 = t
		}
		if t.After(ax.t1) {
			ax.t1 = t
		}
	}
	seen := map[string]bool{}
	addTarget := func(s string) {
		if !seen[s] {
			seen[s] = true
			ax.targets = append(ax.targets, s)
		}
	}
	for i := range calls {
		c := &calls[i]
		extend(c.Started)
		extend(c.Ended)
		for _, t := range c.Chain {
			addTarget(t.String())
		}
		for j := range c.AttemptsList {
			a := &c.AttemptsList[j]
			addTarget(a.Target.String())
			extend(a.StartedAt.Add(-a.Paced))
			extend(a.StartedAt.Add(a.Duration + a.Waited))
		}
	}
	if ax.t1.Sub(ax.t0) < time.Second {
		ax.t1 = ax.t0.Add(time.Second)
	}
	ax.laneOf = map[string]int{}
	for i, t := range ax.targets {
		ax.laneOf[t] = i
	}
	return ax
}

// x is t's abscissa on a chart.
func (ax *axis) x(t time.Time) float64 {
	return plotLeft + float64(plotRight-plotLeft)*float64(t.Sub(ax.t0))/float64(ax.t1.Sub(ax.t0))
}

// laneY is the middle of target t's lane on the timeline.
func (ax *axis) laneY(t string) float64 { return float64(laneTop + ax.laneOf[t]*laneH + laneH/2) }

// snap is one limits snapshot of a target.
type snap struct {
	at       time.Time
	req, tok float64 // fraction left, NaN when unknown
	reqS     string
}

// builder gathers the view across the calls.
type builder struct {
	v          view
	ax         axis
	prov       map[string]*provAcc
	provOrder  []string
	snaps      map[string][]snap
	limitMarks map[string][]mark
}

// timeline lays out the timeline's frame: its size, lanes and ticks.
func (b *builder) timeline() {
	ax, targets := &b.ax, b.ax.targets
	if !ax.t0.IsZero() {
		b.v.From, b.v.To = ax.t0.UTC().Format(time.RFC3339), ax.t1.UTC().Format(time.RFC3339)
	}
	tl := &b.v.Timeline
	tl.W, tl.PlotLeft, tl.PlotRight, tl.LaneTop = chartW, plotLeft, plotRight, laneTop
	tl.H = laneTop + len(targets)*laneH + 30
	tl.AxisY = laneTop + len(targets)*laneH + 4
	for i, t := range targets {
		y := laneTop + i*laneH
		tl.Lanes = append(tl.Lanes, lane{Y: y, TextY: y + laneH/2 + 4, Name: txt(t)})
	}
	tl.Ticks = ticks(ax.t0, ax.t1, ax.x)
}

// call adds c: its row, its totals, and each attempt's marks.
func (b *builder) call(c *store.Call) {
	v := &b.v
	v.Totals.Calls++
	if c.Outcome == retry.OutcomeOK {
		v.Totals.OK++
	}
	v.Totals.Attempts += len(c.AttemptsList)
	v.Totals.Retries += c.Retries()
	row := callRow{ID: fmt.Sprint(c.ID), Started: c.Started.UTC().Format("15:04:05.000"), Outcome: string(c.Outcome),
		OutcomeClass: "o-" + strings.ReplaceAll(string(c.Outcome), "_", "-"), Tries: fmt.Sprint(c.Attempts),
		Waited: dur(c.Waited), Latency: dur(c.Latency()), Route: txt(c.Route)}
	var chain []string
	for _, t := range c.Chain {
		chain = append(chain, txt(t.String()))
	}
	row.Chain = strings.Join(chain, " → ")
	if c.ServedBy != nil {
		row.ServedBy = txt(c.ServedBy.String())
	}
	if c.Err != nil {
		row.Err = txt(fmt.Sprintf("%s %d %s %s", c.Err.Class, c.Err.Status, c.Err.Code, c.Err.Message))
	}
	for j := range c.AttemptsList {
		b.attempt(c, j)
		row.Attempts = append(row.Attempts, attemptRowOf(&c.AttemptsList[j]))
	}
	v.Calls = append(v.Calls, row)
}

// attempt adds c's attempt j: its totals, its provider's, its timeline
// mark, its wait, its failover and its limits.
func (b *builder) attempt(c *store.Call, j int) {
	v, ax := &b.v, &b.ax
	a := &c.AttemptsList[j]
	tg := a.Target.String()
	served := a.Class == stream.ClassOK && c.ServedBy != nil
	if !served {
		v.Totals.Wasted++
	}
	if a.Class == stream.ClassQuota {
		v.Totals.Quota++
	}
	if broken(a) {
		v.Totals.Broken++
	}
	p := b.prov[a.Target.Provider]
	if p == nil {
		p = &provAcc{}
		b.prov[a.Target.Provider] = p
		b.provOrder = append(b.provOrder, a.Target.Provider)
	}
	p.add(a, served)

	// Timeline mark.
	tl := &v.Timeline
	x1, x2 := ax.x(a.StartedAt), ax.x(a.StartedAt.Add(a.Duration))
	w := max(x2-x1, 12)
	y := ax.laneY(tg)
	title := txt(fmt.Sprintf("call %d attempt %d · %s · %s · HTTP %d %s · %s%s", c.ID, a.N, tg, a.Class, a.Status, a.Code, dur(a.Duration), tierTitle(a)))
	tl.Marks = append(tl.Marks, mark{X: x1, Y: y - 9, W: w, H: 18, TextX: x1 + w/2, TextY: y + 4, Class: cssClass(a), Letter: letter(a), Title: title})
	if a.Paced > 0 {
		tl.Waits = append(tl.Waits, span{X1: ax.x(a.StartedAt.Add(-a.Paced)), X2: x1, Y: y, Pacing: true,
			Title: fmt.Sprintf("paced %s before attempt %d (limits snapshot)", dur(a.Paced), a.N)})
	}
	end := a.StartedAt.Add(a.Duration)
	if a.Waited > 0 {
		src := cmp.Or(string(a.DelaySource), "none")
		tl.Waits = append(tl.Waits, span{X1: x2, X2: ax.x(end.Add(a.Waited)), Y: y,
			Title: fmt.Sprintf("wait %s (%s) after attempt %d of call %d", dur(a.Waited), src, a.N, c.ID)})
	}
	if a.Waited > 0 || a.WaitPlanned > 0 {
		b.waitRow(c, a, end)
	}
	if a.Decision == retry.DecideFailover && j+1 < len(c.AttemptsList) {
		b.failover(c, a, &c.AttemptsList[j+1], x2, y)
	}
	if l := a.Limits; !l.Empty() {
		b.snaps[tg] = append(b.snaps[tg], snapOf(l, end))
	}
	if a.Class != stream.ClassOK {
		b.limitMarks[tg] = append(b.limitMarks[tg], mark{X: x1, Class: cssClass(a), Letter: letter(a), Title: title})
	}
}

// waitRow adds the wait after c's attempt a, which ended at end.
func (b *builder) waitRow(c *store.Call, a *retry.Attempt, end time.Time) {
	b.v.Totals.Waits++
	why := ""
	if a.RetryAfter != nil {
		why = "server asked " + dur(*a.RetryAfter)
	}
	if a.FailedOverByUser {
		why = strings.TrimSpace(why + " · " + a.FailoverNote())
	}
	b.v.Waits = append(b.v.Waits, waitRow{At: end.UTC().Format("15:04:05.000"), Call: fmt.Sprint(c.ID), Target: txt(a.Target.String()),
		Source: cmp.Or(string(a.DelaySource), "none"), Planned: dur(planned(a)), Waited: dur(a.Waited), Why: txt(why)})
}

// failover adds c's move from attempt a (its mark ending at x2 on lane y)
// to attempt n: its row and its timeline arrow.
func (b *builder) failover(c *store.Call, a, n *retry.Attempt, x2, y float64) {
	tg := a.Target.String()
	end := a.StartedAt.Add(a.Duration)
	b.v.Totals.Failovers++
	reason := fmt.Sprintf("%s (HTTP %d", a.Class, a.Status)
	if a.Code != "" {
		reason += " " + a.Code
	}
	reason += ")"
	if broken(a) {
		reason += ", the stream broke mid-way"
	}
	if a.RetryAfter != nil {
		reason += fmt.Sprintf(", the server asked %s, more than the failover wait", dur(*a.RetryAfter))
	}
	if a.FailedOverByUser {
		reason += ", " + a.FailoverNote()
	}
	if a.Message != "" {
		reason += ": " + sanitize.Truncate(a.Message, 200)
	}
	b.v.Failovers = append(b.v.Failovers, failoverRow{At: end.UTC().Format("15:04:05.000"), Call: fmt.Sprint(c.ID),
		From: txt(tg), To: txt(n.Target.String()), Reason: txt(reason)})
	b.v.Timeline.Arrows = append(b.v.Timeline.Arrows, arrow{X1: x2, Y1: y, X2: b.ax.x(n.StartedAt), Y2: b.ax.laneY(n.Target.String()),
		Title: txt(fmt.Sprintf("call %d failed over: %s → %s", c.ID, tg, n.Target.String()))})
}

// snapOf is the limits snapshot l, taken at end when it says no time.
func snapOf(l *stream.Limits, end time.Time) snap {
	s := snap{at: cmp.Or(l.At, end), req: math.NaN(), tok: math.NaN()}
	if r := l.Requests; r != nil && r.HasLimit && r.HasRemaining && r.Limit > 0 {
		s.req = float64(r.Remaining) / float64(r.Limit)
		s.reqS = fmt.Sprintf("requests %d/%d", r.Remaining, r.Limit)
	}
	if t := cmp.Or(l.Tokens, l.InputTokens); t != nil && t.HasLimit && t.HasRemaining && t.Limit > 0 {
		s.tok = float64(t.Remaining) / float64(t.Limit)
		s.reqS = strings.TrimPrefix(s.reqS+fmt.Sprintf(" · tokens %d/%d", t.Remaining, t.Limit), " · ")
	}
	return s
}

// limitCharts adds the limits over time, one chart per target that
// reported any.
func (b *builder) limitCharts() {
	const limH = 90
	ax := &b.ax
	for _, tg := range ax.targets {
		ch := limitChart{Target: txt(tg), W: chartW, H: limH + 24, Ticks: ticks(ax.t0, ax.t1, ax.x)}
		ss := b.snaps[tg]
		slices.SortStableFunc(ss, func(a, b snap) int { return a.at.Compare(b.at) })
		yOf := func(f float64) float64 { return 8 + (1-f)*float64(limH-16) }
		var rp, tp []string
		for _, s := range ss {
			if !math.IsNaN(s.req) {
				rp = append(rp, fmt.Sprintf("%.1f,%.1f", ax.x(s.at), yOf(s.req)))
			}
			if !math.IsNaN(s.tok) {
				tp = append(tp, fmt.Sprintf("%.1f,%.1f", ax.x(s.at), yOf(s.tok)))
			}
		}
		ch.Requests, ch.Tokens = strings.Join(rp, " "), strings.Join(tp, " ")
		if len(ss) > 0 {
			ch.Last = ss[len(ss)-1].reqS
		}
		if len(rp) == 0 && len(tp) == 0 {
			ch.Note = "no limit headers in this target's responses"
		}
		for _, m := range b.limitMarks[tg] {
			m.Y, m.H, m.W, m.TextX, m.TextY = 4, limH-8, 2, m.X+4, 16
			ch.Marks = append(ch.Marks, m)
		}
		b.v.Limits = append(b.v.Limits, ch)
	}
}

// planned is the wait announced after a: the history keeps WaitPlanned only
// for a wait the user cut short; any other was waited in full.
func planned(a *retry.Attempt) time.Duration {
	if a.WaitPlanned > 0 {
		return a.WaitPlanned
	}
	return a.Waited
}

func attemptRowOf(a *retry.Attempt) attemptRow {
	r := attemptRow{N: fmt.Sprint(a.N), Target: txt(a.Target.String()), Status: fmt.Sprint(a.Status), Class: string(a.Class),
		CSS: cssClass(a), Letter: letter(a), Code: txt(a.Code), Message: txt(sanitize.Truncate(a.Message, 300)),
		Source: string(a.DelaySource), Waited: dur(a.Waited), Paced: dur(a.Paced), TTFT: dur(a.TTFT), Duration: dur(a.Duration),
		Decision: string(a.Decision), RequestID: txt(a.RequestID)}
	if !a.StartedAt.IsZero() {
		r.Started = a.StartedAt.UTC().Format("15:04:05.000")
	}
	if broken(a) {
		r.Class += " (mid-stream)"
	}
	if a.RetryAfter != nil {
		r.RetryAfter = dur(*a.RetryAfter)
	}
	if l := a.Limits; !l.Empty() {
		var parts []string
		for _, w := range []struct {
			n string
			w *stream.Window
		}{{"req", l.Requests}, {"tok", l.Tokens}, {"in", l.InputTokens}, {"out", l.OutputTokens}} {
			if w.w != nil && w.w.HasRemaining {
				parts = append(parts, fmt.Sprintf("%s %d/%d", w.n, w.w.Remaining, w.w.Limit))
			}
		}
		r.Limits = strings.Join(parts, " · ")
	}
	return r
}

// ticks are about eight labelled times on the axis.
func ticks(t0, t1 time.Time, x func(time.Time) float64) []tick {
	if t0.IsZero() {
		return nil
	}
	span := t1.Sub(t0)
	steps := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour,
		2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if span/s <= 8 {
			step = s
			break
		}
	}
	format := "15:04:05"
	if step < time.Second {
		format = "15:04:05.0"
	}
	if step >= time.Hour {
		format = "Jan 2 15:04"
	}
	var out []tick
	for t := t0.Truncate(step).Add(step); t.Before(t1) && len(out) < 40; t = t.Add(step) {
		out = append(out, tick{X: x(t), Label: t.UTC().Format(format)})
	}
	return out
}

type provAcc struct {
	requests, ok, rate, over, quota, server, broken, other, wasted int
	durs, ttfts                                                    []time.Duration
	waited                                                         time.Duration
}

func (p *provAcc) add(a *retry.Attempt, served bool) {
	p.requests++
	if !served {
		p.wasted++
	}
	switch {
	case broken(a):
		p.broken++
	case a.Class == stream.ClassOK:
		p.ok++
	case a.Class == stream.ClassRateLimit:
		p.rate++
	case a.Class == stream.ClassOverload:
		p.over++
	case a.Class == stream.ClassQuota:
		p.quota++
	case a.Class == stream.ClassServer:
		p.server++
	default:
		p.other++
	}
	p.durs = append(p.durs, a.Duration)
	if a.TTFT > 0 {
		p.ttfts = append(p.ttfts, a.TTFT)
	}
	p.waited += a.Waited + a.Paced
}

func pct(ds []time.Duration, q float64) string {
	if len(ds) == 0 {
		return "–"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return dur(s[max(0, min(i, len(s)-1))])
}

func (p *provAcc) row(name string) providerRow {
	return providerRow{Provider: txt(name), Requests: p.requests, OK: p.ok, RateLimit: p.rate, Overload: p.over, Quota: p.quota,
		Server: p.server, Broken: p.broken, Other: p.other, Wasted: p.wasted,
		P50: pct(p.durs, 0.5), P95: pct(p.durs, 0.95), TTFT: pct(p.ttfts, 0.5), Waited: dur(p.waited)}
}

// tierTitle is what a mark's title says of the attempt's service tier:
// " · served standard, downgraded from priority", or "".
func tierTitle(a *retry.Attempt) string {
	if n := a.TierNote(); n != "" {
		return " · " + n
	}
	return ""
}
