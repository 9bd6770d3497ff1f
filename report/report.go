// Package report writes a session (or a time range) of limitscope's history
// as one self-contained HTML file: the timeline of every attempt per
// target, the limits over time, the waits with their sources, the failovers
// with their reasons, retries and wasted requests, a per-provider table and
// each call with its attempts one click away.
//
// The file needs nothing at view time: styles and drawings (SVG) are
// inlined, there is no script, and its Content-Security-Policy forbids
// every fetch. Prompts and answers are never written; every text that came
// from a provider passes sanitize.Printable (control bytes and anything
// shaped like a key are removed).
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

func build(in Input) view {
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
	for _, c := range []stream.Class{stream.ClassOK, stream.ClassRateLimit, stream.ClassOverload, stream.ClassQuota,
		stream.ClassServer, stream.ClassConnection, stream.ClassTimeout, stream.ClassCaller, stream.ClassCancelled} {
		a := retry.Attempt{Class: c}
		v.Legend = append(v.Legend, legendItem{Letter: letter(&a), Class: cssClass(&a), Name: strings.ReplaceAll(string(c), "_", " ")})
	}
	v.Legend = append(v.Legend, legendItem{Letter: theme.MarkLetter(string(stream.ClassServer), true), Class: "c-broken", Name: "broken stream (after HTTP 200)"})

	// The time axis: every call's first event to its last.
	var t0, t1 time.Time
	extend := func(t time.Time) {
		if t.IsZero() {
			return
		}
		if t0.IsZero() || t.Before(t0) {
			t0 = t
		}
		if t.After(t1) {
			t1 = t
		}
	}
	var targets []string
	seen := map[string]bool{}
	addTarget := func(s string) {
		if !seen[s] {
			seen[s] = true
			targets = append(targets, s)
		}
	}
	for i := range in.Calls {
		c := &in.Calls[i]
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
	if t1.Sub(t0) < time.Second {
		t1 = t0.Add(time.Second)
	}
	if !t0.IsZero() {
		v.From, v.To = t0.UTC().Format(time.RFC3339), t1.UTC().Format(time.RFC3339)
	}
	x := func(t time.Time) float64 {
		return plotLeft + float64(plotRight-plotLeft)*float64(t.Sub(t0))/float64(t1.Sub(t0))
	}
	laneOf := map[string]int{}
	for i, t := range targets {
		laneOf[t] = i
	}
	laneY := func(t string) float64 { return float64(laneTop + laneOf[t]*laneH + laneH/2) }
	tl := &v.Timeline
	tl.W, tl.PlotLeft, tl.PlotRight, tl.LaneTop = chartW, plotLeft, plotRight, laneTop
	tl.H = laneTop + len(targets)*laneH + 30
	tl.AxisY = laneTop + len(targets)*laneH + 4
	for i, t := range targets {
		y := laneTop + i*laneH
		tl.Lanes = append(tl.Lanes, lane{Y: y, TextY: y + laneH/2 + 4, Name: txt(t)})
	}
	tl.Ticks = ticks(t0, t1, x)

	prov := map[string]*provAcc{}
	var provOrder []string
	type snap struct {
		at       time.Time
		req, tok float64 // fraction left, NaN when unknown
		reqS     string
	}
	snaps := map[string][]snap{}
	limitMarks := map[string][]mark{}
	for i := range in.Calls {
		c := &in.Calls[i]
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
			p := prov[a.Target.Provider]
			if p == nil {
				p = &provAcc{}
				prov[a.Target.Provider] = p
				provOrder = append(provOrder, a.Target.Provider)
			}
			p.add(a, served)

			// Timeline mark.
			x1, x2 := x(a.StartedAt), x(a.StartedAt.Add(a.Duration))
			w := max(x2-x1, 12)
			y := laneY(tg)
			title := txt(fmt.Sprintf("call %d attempt %d · %s · %s · HTTP %d %s · %s", c.ID, a.N, tg, a.Class, a.Status, a.Code, dur(a.Duration)))
			tl.Marks = append(tl.Marks, mark{X: x1, Y: y - 9, W: w, H: 18, TextX: x1 + w/2, TextY: y + 4, Class: cssClass(a), Letter: letter(a), Title: title})
			if a.Paced > 0 {
				tl.Waits = append(tl.Waits, span{X1: x(a.StartedAt.Add(-a.Paced)), X2: x1, Y: y, Pacing: true,
					Title: fmt.Sprintf("paced %s before attempt %d (limits snapshot)", dur(a.Paced), a.N)})
			}
			end := a.StartedAt.Add(a.Duration)
			if a.Waited > 0 {
				src := cmp.Or(string(a.DelaySource), "none")
				tl.Waits = append(tl.Waits, span{X1: x2, X2: x(end.Add(a.Waited)), Y: y,
					Title: fmt.Sprintf("wait %s (%s) after attempt %d of call %d", dur(a.Waited), src, a.N, c.ID)})
			}
			if a.Waited > 0 || a.WaitPlanned > 0 {
				v.Totals.Waits++
				why := ""
				if a.RetryAfter != nil {
					why = "server asked " + dur(*a.RetryAfter)
				}
				if a.FailedOverByUser {
					why = strings.TrimSpace(why + " · " + a.FailoverNote())
				}
				v.Waits = append(v.Waits, waitRow{At: end.UTC().Format("15:04:05.000"), Call: fmt.Sprint(c.ID), Target: txt(tg),
					Source: cmp.Or(string(a.DelaySource), "none"), Planned: dur(planned(a)), Waited: dur(a.Waited), Why: txt(why)})
			}
			if a.Decision == retry.DecideFailover && j+1 < len(c.AttemptsList) {
				n := &c.AttemptsList[j+1]
				v.Totals.Failovers++
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
				v.Failovers = append(v.Failovers, failoverRow{At: end.UTC().Format("15:04:05.000"), Call: fmt.Sprint(c.ID),
					From: txt(tg), To: txt(n.Target.String()), Reason: txt(reason)})
				tl.Arrows = append(tl.Arrows, arrow{X1: x2, Y1: y, X2: x(n.StartedAt), Y2: laneY(n.Target.String()),
					Title: txt(fmt.Sprintf("call %d failed over: %s → %s", c.ID, tg, n.Target.String()))})
			}
			// Limits.
			if l := a.Limits; !l.Empty() {
				s := snap{at: cmp.Or(l.At, end), req: math.NaN(), tok: math.NaN()}
				if r := l.Requests; r != nil && r.HasLimit && r.HasRemaining && r.Limit > 0 {
					s.req = float64(r.Remaining) / float64(r.Limit)
					s.reqS = fmt.Sprintf("requests %d/%d", r.Remaining, r.Limit)
				}
				if t := cmp.Or(l.Tokens, l.InputTokens); t != nil && t.HasLimit && t.HasRemaining && t.Limit > 0 {
					s.tok = float64(t.Remaining) / float64(t.Limit)
					s.reqS = strings.TrimPrefix(s.reqS+fmt.Sprintf(" · tokens %d/%d", t.Remaining, t.Limit), " · ")
				}
				snaps[tg] = append(snaps[tg], s)
			}
			if a.Class != stream.ClassOK {
				limitMarks[tg] = append(limitMarks[tg], mark{X: x1, Class: cssClass(a), Letter: letter(a), Title: title})
			}
			row.Attempts = append(row.Attempts, attemptRowOf(a))
		}
		v.Calls = append(v.Calls, row)
	}
	var waited time.Duration
	for i := range in.Calls {
		waited += in.Calls[i].Waited
	}
	v.Totals.Waited = dur(waited)

	// Limits over time, one chart per target that reported any.
	const limH = 90
	for _, tg := range targets {
		ch := limitChart{Target: txt(tg), W: chartW, H: limH + 24, Ticks: ticks(t0, t1, x)}
		ss := snaps[tg]
		slices.SortStableFunc(ss, func(a, b snap) int { return a.at.Compare(b.at) })
		yOf := func(f float64) float64 { return 8 + (1-f)*float64(limH-16) }
		var rp, tp []string
		for _, s := range ss {
			if !math.IsNaN(s.req) {
				rp = append(rp, fmt.Sprintf("%.1f,%.1f", x(s.at), yOf(s.req)))
			}
			if !math.IsNaN(s.tok) {
				tp = append(tp, fmt.Sprintf("%.1f,%.1f", x(s.at), yOf(s.tok)))
			}
		}
		ch.Requests, ch.Tokens = strings.Join(rp, " "), strings.Join(tp, " ")
		if len(ss) > 0 {
			ch.Last = ss[len(ss)-1].reqS
		}
		if len(rp) == 0 && len(tp) == 0 {
			ch.Note = "no limit headers in this target's responses"
		}
		for _, m := range limitMarks[tg] {
			m.Y, m.H, m.W, m.TextX, m.TextY = 4, limH-8, 2, m.X+4, 16
			ch.Marks = append(ch.Marks, m)
		}
		v.Limits = append(v.Limits, ch)
	}
	for _, p := range provOrder {
		v.Providers = append(v.Providers, prov[p].row(p))
	}
	return v
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
