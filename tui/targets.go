package tui

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/theme"
)

// targetState is what the console knows about one target.
type targetState struct {
	info TargetInfo

	// inflight is "SENDING" or "STREAMING" for each call with an attempt in
	// flight on this target (typed and proxied calls run at once).
	inflight map[string]string
	proxied  bool // a proxied call used it: shown even outside the chain

	wait targetWait // the current wait: what every countdown of the target reads

	overloaded bool
	overWhy    string

	circuitUntil time.Time // the engine's circuit breaker skips it until then (retry.BreakerState)
	circuitWhy   string

	stopped   bool
	stopWords string // the provider's own words
	stopUntil time.Time

	cooldown *retry.Cooldown // the cooldown that stops it, when known (never parsed from a message)

	lastErr  string    // the last failure, for context
	tier     tierState // what its last answer said of its service tier
	limits   *stream.Limits
	answered bool // an answer came without limit headers: the provider sends none
	pace     retry.PaceState
	hasPace  bool
}

// targetWait is a target's current wait, the one value the targets pane's
// countdown and a call's countdown in the conversation read. The server's
// delay at an attempt's end, the engine's wait, its end and the pacer's
// hold each set it, and nothing else keeps when a wait ends.
type targetWait struct {
	from, until time.Time
	why         string // "429 slow_down · retry-after 20s"
	paused      bool   // pacing until a reset
}

// on reports whether the wait runs at now.
func (w *targetWait) on(now time.Time) bool { return now.Before(w.until) }

// end ends the wait at now when it runs longer (the engine ended it early:
// a fail over, a cancel).
func (w *targetWait) end(now time.Time) {
	if w.on(now) {
		w.until = now
	}
}

// asked is the wait a server's delay sets at an attempt's end (the call may
// move on; the target still waits).
func asked(a *retry.Attempt, end time.Time) targetWait {
	return targetWait{from: end, until: end.Add(*a.RetryAfter),
		why: statusCode(a) + " · " + sourceOr(a.DelaySource, "retry-after") + " " + fmtDur(*a.RetryAfter)}
}

// state returns the state word and its style.
func (s *targetState) state(now time.Time, st *theme.Styles) (string, func(...string) string) {
	switch {
	case !s.info.Available:
		return "NO KEY", st.Unavailable.Render
	case s.stopped && (s.stopUntil.IsZero() || now.Before(s.stopUntil)):
		return "STOPPED", st.Stopped.Render
	case s.busy() != "":
		return s.busy(), st.Busy.Render
	case s.wait.on(now) && s.wait.paused:
		return "PAUSED", st.Paused.Render
	case s.wait.on(now):
		return "WAITING", st.Waiting.Render
	case now.Before(s.circuitUntil), s.overloaded:
		return "OVERLOADED", st.Overloaded.Render
	}
	return "READY", st.Ready.Render
}

// busy is "STREAMING" when any call streams on the target, "SENDING" when
// any call waits for its answer, else "".
func (s *targetState) busy() string {
	b := ""
	for _, v := range s.inflight {
		if v == "STREAMING" {
			return v
		}
		b = v
	}
	return b
}

func (s *targetState) setBusy(callID, v string) {
	if v == "" {
		delete(s.inflight, callID)
		return
	}
	if s.inflight == nil {
		s.inflight = map[string]string{}
	}
	s.inflight[callID] = v
}

// targetsPane lists the chain (numbered, in order), then the other pickable
// targets; the user picks and reorders them here.
type targetsPane struct {
	list    []*targetState // chain first, in order, then the rest
	inChain int            // how many of list are in the chain
	cursor  int
	focused bool
	// wrapLong lets a collapsed status wrap onto more lines (off on short
	// terminals, where the conversation needs the rows).
	wrapLong bool
	fleet    func(t stream.Target, now time.Time) string // fleet-wide usage (tui/fleet.go); nil: no fleet

	cache    []string
	cacheKey string

	tl        *tlog // the session's attempts, drawn as each target's strips (strip.go)
	noStrips  bool  // strips off (benchmarks compare)
	rows      int   // the long form's rows: strips shrink to fit them (0: no bound)
	stripForm int   // the strips' form this render: stripsFull, stripsLine, stripsNone
	// stripCache holds each target's strips as drawn, by target, form and
	// width, for the timeline's version: a tick redraws the pane, not them.
	stripCache map[stripKey][]string
	fitForm    int // the richest form that fit at the last render since new data: a tick starts there
}

func newTargetsPane(infos []TargetInfo, chain []stream.Target) *targetsPane {
	p := &targetsPane{}
	byName := map[stream.Target]TargetInfo{}
	for _, ti := range infos {
		byName[ti.Target] = ti
	}
	seen := map[stream.Target]bool{}
	for _, t := range chain {
		ti, ok := byName[t]
		if !ok {
			ti = TargetInfo{Target: t, Available: true}
		}
		p.list = append(p.list, &targetState{info: ti})
		seen[t] = true
	}
	p.inChain = len(p.list)
	for _, ti := range infos {
		if !seen[ti.Target] {
			p.list = append(p.list, &targetState{info: ti})
			seen[ti.Target] = true
		}
	}
	return p
}

func (p *targetsPane) invalidate() { p.cacheKey, p.stripCache, p.fitForm = "", nil, stripsFull }

func (p *targetsPane) get(t stream.Target) *targetState {
	for _, s := range p.list {
		if s.info.Target == t {
			return s
		}
	}
	s := &targetState{info: TargetInfo{Target: t, Available: true}}
	p.list = append(p.list, s)
	return s
}

func (p *targetsPane) info(t stream.Target) (TargetInfo, bool) {
	for _, s := range p.list {
		if s.info.Target == t {
			return s.info, true
		}
	}
	return TargetInfo{}, false
}

func (p *targetsPane) chain() []stream.Target {
	out := make([]stream.Target, 0, p.inChain)
	for _, s := range p.list[:p.inChain] {
		out = append(out, s.info.Target)
	}
	return out
}

func (p *targetsPane) moveCursor(d int) {
	p.cursor = min(max(0, p.cursor+d), len(p.list)-1)
	p.invalidate()
}

// toggle puts the target under the cursor in or out of the chain.
func (p *targetsPane) toggle() ([]stream.Target, string) {
	if len(p.list) == 0 {
		return p.chain(), ""
	}
	s := p.list[p.cursor]
	p.invalidate()
	if p.cursor < p.inChain {
		p.list = slices.Delete(p.list, p.cursor, p.cursor+1)
		p.inChain--
		p.list = slices.Insert(p.list, p.inChain, s)
		p.cursor = p.inChain
		return p.chain(), s.info.Target.String() + " left the chain."
	}
	if !s.info.Available {
		return p.chain(), s.info.Target.String() + " has no key: set " + s.info.Missing + "."
	}
	p.list = slices.Delete(p.list, p.cursor, p.cursor+1)
	p.list = slices.Insert(p.list, p.inChain, s)
	p.cursor = p.inChain
	p.inChain++
	return p.chain(), s.info.Target.String() + fmt.Sprintf(" joined the chain at %d.", p.inChain)
}

// reorder moves the chain target under the cursor up or down the chain.
func (p *targetsPane) reorder(d int) ([]stream.Target, string) {
	j := p.cursor + d
	if p.cursor >= p.inChain || j < 0 || j >= p.inChain {
		return p.chain(), ""
	}
	p.list[p.cursor], p.list[j] = p.list[j], p.list[p.cursor]
	p.cursor = j
	p.invalidate()
	return p.chain(), ""
}

// counting reports whether a countdown shown in the pane is running (a wait,
// or a limit reset within the hour).
func (p *targetsPane) counting(now time.Time) bool {
	for _, s := range p.list {
		if s.wait.on(now) {
			return true
		}
		if l := s.limits; l != nil {
			for _, w := range []*stream.Window{l.Requests, l.Tokens, l.InputTokens, l.OutputTokens} {
				if w != nil && now.Before(w.Reset) && w.Reset.Sub(now) < time.Hour {
					return true
				}
			}
		}
	}
	return false
}

// attemptStart marks the target busy for call callID.
func (p *targetsPane) attemptStart(a *retry.Attempt, callID string) {
	s := p.get(a.Target)
	s.setBusy(callID, "SENDING")
	if isExt(callID) {
		s.proxied = true
	}
	p.invalidate()
}

func (p *targetsPane) text(t stream.Target, callID string) {
	s := p.get(t)
	if s.inflight[callID] != "STREAMING" {
		s.setBusy(callID, "STREAMING")
		p.invalidate()
	}
}

// attemptEnd applies an attempt's outcome to its target's state.
func (p *targetsPane) attemptEnd(a *retry.Attempt, now time.Time, callID string) {
	s := p.get(a.Target)
	s.setBusy(callID, "")
	if a.Status != 0 {
		// An answer without headers: the provider sends none (an error
		// response may lack them for other reasons).
		s.answered = s.answered || (a.Class == stream.ClassOK && (a.Limits == nil || a.Limits.Empty()))
		// Always the latest response's headers: a response without any
		// keeps the last snapshot (its numbers still hold until reset).
		if a.Limits != nil && !a.Limits.Empty() {
			s.limits = a.Limits
		}
	}
	end := a.StartedAt.Add(a.Duration)
	if end.IsZero() || a.StartedAt.IsZero() {
		end = now
	}
	s.noteTier(a)
	switch a.Class {
	case stream.ClassOK:
		s.overloaded, s.lastErr = false, ""
		s.stopped = false
	case stream.ClassRateLimit:
		s.lastErr = statusCode(a)
		if a.RetryAfter != nil {
			s.wait = asked(a, end)
		}
	case stream.ClassOverload:
		s.overloaded = true
		s.overWhy = statusCode(a)
		s.lastErr = statusCode(a)
		if a.RetryAfter != nil {
			s.wait = asked(a, end)
		}
	case stream.ClassQuota:
		s.stopped = true
		s.stopWords = a.Message
		if s.stopWords == "" {
			s.stopWords = a.Code
		}
		s.stopUntil = time.Time{}
		if cd := a.Cooldown; cd != nil {
			c := *cd
			s.cooldown, s.stopUntil = &c, cd.Until
		}
	case stream.ClassCancelled:
	case stream.ClassFlexCapacity:
		s.lastErr = statusCode(a) + " · flex capacity short"
	default:
		s.lastErr = statusCode(a)
	}
	p.invalidate()
}

// waitEnds is when the current wait of target t ends: what every countdown
// of it reads.
func (p *targetsPane) waitEnds(t stream.Target) time.Time { return p.get(t).wait.until }

// wait shows a wait the engine takes on its target.
func (p *targetsPane) wait(w *retry.Wait, now time.Time) {
	s := p.get(w.Target)
	cur := targetWait{from: now, until: w.Until, paused: w.Pacing || w.Source == stream.SourceReset}
	if w.Until.IsZero() {
		cur.until = now.Add(w.Duration)
	}
	cur.why = string(w.Source)
	if w.Asked > 0 {
		cur.why = fmt.Sprintf("asked %s (%s)", fmtDur(w.Asked), w.Source)
	}
	if s.lastErr != "" && !cur.paused {
		cur.why = s.lastErr + " · " + cur.why
	}
	if cur.paused {
		cur.why = "pacing until the limit resets"
	}
	s.wait = cur
	p.invalidate()
}

// waitEnd ends a target's wait when the engine says it ended (early, when
// the user failed over or cancelled).
func (p *targetsPane) waitEnd(w *retry.Wait, now time.Time) {
	p.get(w.Target).wait.end(now)
	p.invalidate()
}

// states applies what the engine knows of each target now (its active
// cooldown, its pacer), read by a command: the truth for STOPPED and PAUSED.
func (p *targetsPane) states(sts map[stream.Target]retry.TargetState, now time.Time) {
	for t, ts := range sts {
		s := p.get(t)
		s.pace, s.hasPace = ts.Pace, ts.HasPacer
		s.circuitUntil, s.circuitWhy = time.Time{}, ""
		if b := ts.Breaker; b.Open() {
			s.circuitUntil = b.OpenUntil
			s.circuitWhy = fmt.Sprintf("circuit open after %d overloads, timeouts or connection failures in a row; calls skip it, then one probe", b.Failures)
		}
		switch cd := ts.Cooldown; {
		case cd != nil && cd.Active(now):
			c := *cd
			s.cooldown = &c
			s.stopped, s.stopUntil = true, cd.Until
			if s.stopWords = cd.Message; s.stopWords == "" {
				s.stopWords = cd.Code
			}
		case s.stopped:
			// Cleared (or ended) in the store: no longer stopped.
			s.stopped, s.cooldown = false, nil
		}
		if h := ts.Pace.HoldUntil; h.After(now) && h.After(s.wait.until) && s.busy() == "" {
			server := ts.Pace.HoldSource != stream.SourceReset && ts.Pace.HoldSource != stream.SourceNone
			switch {
			case server && s.wait.on(now):
				// The server's own delay, already shown from the call's
				// events: keep its words, extend to the pacer's hold.
				s.wait.until = h
			case server:
				s.wait = targetWait{from: now, until: h, why: "the server asked to wait (" + string(ts.Pace.HoldSource) + ")"}
				if a := ts.Pace.HoldAsked; a > 0 && h.Add(-a).Before(now) {
					s.wait.from = h.Add(-a) // the bar shows how much of the server's wait is left
				}
			default:
				s.wait = targetWait{from: now, until: h, paused: true, why: "pacing: no request before its limit resets"}
			}
		}
	}
	p.invalidate()
}

// cursorStopped reports whether the target under the cursor is STOPPED.
func (p *targetsPane) cursorStopped(now time.Time) bool {
	if !p.focused || p.cursor >= len(p.list) {
		return false
	}
	s := p.list[p.cursor]
	return s.info.Available && s.stopped && (s.stopUntil.IsZero() || now.Before(s.stopUntil))
}

// unstop clears the stops of the cooldown with the given scope.
func (p *targetsPane) unstop(scope string) {
	for _, s := range p.list {
		if s.cooldown != nil && s.cooldown.Scope == scope {
			s.stopped, s.cooldown = false, nil
		}
	}
	p.invalidate()
}

// stopLines is how many lines of a stop's words the targets pane shows.
const stopLines = 2

// stopBrief is how many columns of a stop's words the collapsed pane shows.
const stopBrief = 100

// clipWords cuts s to n columns, marking the cut with "…".
func clipWords(s string, n int) string {
	if widthOf(s) <= n {
		return s
	}
	return ansi.Truncate(s, n, "…")
}

// clipLines keeps the first n of lines, the last of them ending in "…"
// when some were left out.
func clipLines(lines []string, n, w int) []string {
	if len(lines) <= n {
		return lines
	}
	lines = lines[:n:n]
	last := lines[n-1]
	if widthOf(last) >= w {
		last = ansi.Truncate(last, max(0, w-1), "")
	}
	lines[n-1] = last + "…"
	return lines
}

// stop marks a target stopped (a quota or a cooldown).
func (p *targetsPane) stop(t stream.Target, words string, until time.Time) {
	s := p.get(t)
	s.stopped, s.stopWords, s.stopUntil = true, words, until
	p.invalidate()
}

// cooldowns marks the targets that active cooldowns block.
func (p *targetsPane) cooldowns(cds []retry.Cooldown, now time.Time) {
	for _, c := range cds {
		if !c.Active(now) {
			continue
		}
		ct, err := stream.ParseTarget(c.Target)
		words := c.Message
		if words == "" {
			words = c.Code
		}
		for _, s := range p.list {
			t := s.info.Target
			switch {
			case strings.HasSuffix(c.Scope, t.String()),
				err == nil && sameAccount(ct.Provider, t.Provider) && ct.Account == t.Account && !strings.Contains(c.Scope, "/"):
				p.stop(t, words, c.Until)
				cp := c
				s.cooldown = &cp
			}
		}
	}
}

// sameAccount reports whether two providers' targets share one account
// (the provider table's Account column: an API variant shares its
// provider's key, so an account stop met through one stops both).
func sameAccount(a, b string) bool {
	pa, oka := stream.Provider(a)
	pb, okb := stream.Provider(b)
	if !oka || !okb {
		return a == b
	}
	return pa.AccountName() == pb.AccountName()
}

// callEnd applies a call's end: a cooldown stop and the end of the call's
// busy states (other calls' stay).
func (p *targetsPane) callEnd(r *retry.Result, chain []stream.Target, callID string) {
	for _, s := range p.list {
		s.setBusy(callID, "")
	}
	if cd := r.Cooldown; cd != nil {
		// The engine names the cooldown and its target: no message parsing.
		if t, err := stream.ParseTarget(cd.Target); err == nil {
			s := p.get(t)
			words := cd.Message
			if words == "" {
				words = cd.Code
			}
			s.stopped, s.stopWords, s.stopUntil = true, words, cd.Until
			c := *cd
			s.cooldown = &c
		}
	}
	if r.Outcome == retry.OutcomeStopped && r.Err != nil {
		var t stream.Target
		if n := len(r.Attempts); n > 0 {
			t = r.Attempts[n-1].Target
		}
		if t.Provider != "" {
			s := p.get(t)
			s.stopped = true
			if r.Err.Message != "" {
				s.stopWords = r.Err.Message
			}
			if !r.Err.ResetAt.IsZero() {
				s.stopUntil = r.Err.ResetAt
			} else if !r.CooldownUntil.IsZero() {
				s.stopUntil = r.CooldownUntil
			}
		}
	}
	p.invalidate()
}

func statusCode(a *retry.Attempt) string {
	var parts []string
	if a.Status != 0 {
		parts = append(parts, fmt.Sprint(a.Status))
	}
	if a.Code != "" {
		parts = append(parts, a.Code)
	} else {
		parts = append(parts, string(a.Class))
	}
	return strings.Join(parts, " ")
}

func sourceOr(s stream.DelaySource, def string) string {
	if s == "" || s == stream.SourceBackoff {
		return def
	}
	return string(s)
}

// view renders the pane's inner lines for width w (full form) or, collapsed,
// one line a target.
func (p *targetsPane) view(w int, collapsed bool, now time.Time, st *theme.Styles) []string {
	// Countdowns round up to whole seconds from sub-second ends, so the key
	// follows the clock tick (250ms), not the wall second.
	key := fmt.Sprintf("%d/%v/%d/%v/%v/%d", w, collapsed, now.UnixMilli()/250, p.focused, p.wrapLong, p.rows)
	if key == p.cacheKey {
		return p.cache
	}
	out := p.render(w, collapsed, now, st, p.fitForm)
	for !collapsed && p.rows > 0 && len(out) > p.rows && p.fitForm < stripsNone {
		p.fitForm++
		out = p.render(w, collapsed, now, st, p.fitForm) // the strips give way to the states
	}
	p.cache, p.cacheKey = out, key
	return out
}

// render is the pane's lines with the strips in the given form.
func (p *targetsPane) render(w int, collapsed bool, now time.Time, st *theme.Styles, form int) []string {
	p.stripForm = form
	var out []string
	hidden := 0
	for i, s := range p.list {
		if !p.focused && i >= p.inChain && (collapsed || s.info.Available) && !s.proxied {
			hidden++
			continue
		}
		if collapsed {
			out = append(out, p.line(i, s, w, now, st)...)
			if l := p.stripLine(s, w, st); l != "" {
				out = append(out, l)
			}
			continue
		}
		out = append(out, p.full(i, s, w, now, st)...)
		if i < len(p.list)-1 {
			out = append(out, "")
		}
	}
	if len(out) == 0 {
		out = append(out, st.Subtle.Render("No target in the chain: tab here, space adds one."))
	}
	if !collapsed && p.stripsShown() && form == stripsFull { // short of rows: the strips before their legend
		if n := len(out); n > 0 && out[n-1] != "" {
			out = append(out, "")
		}
		for _, l := range wrap(stripLegend, w) {
			out = append(out, st.Subtle.Render(l))
		}
	}
	if hidden > 0 && !collapsed {
		if n := len(out); n > 0 && out[n-1] != "" {
			out = append(out, "")
		}
		out = append(out, st.Subtle.Render(fmt.Sprintf("  +%d more: tab here, space adds", hidden)))
	}
	for i := range out {
		out[i] = fit(out[i], w)
	}
	return out
}

func (p *targetsPane) label(i int, s *targetState) string {
	mark := " "
	if p.focused && i == p.cursor {
		mark = ">"
	}
	n := "  "
	if i < p.inChain {
		n = fmt.Sprintf("%d ", i+1)
	}
	return mark + n + s.info.Target.String()
}

// line is the collapsed form: "1 openai/gpt-5.4-mini  WAITING 12s · 429
// slow_down", its words wrapped (never cut) onto indented lines.
func (p *targetsPane) line(i int, s *targetState, w int, now time.Time, st *theme.Styles) []string {
	word, style := s.state(now, st)
	extra := ""
	switch word {
	case "WAITING", "PAUSED":
		extra = " " + fmtCountdown(now, s.wait.until) + " · " + s.wait.why
	case "STOPPED":
		// When it resets first, then the provider's words, cut short: the
		// conversation has them whole.
		if !s.stopUntil.IsZero() {
			extra = " · resets " + s.stopUntil.Local().Format("15:04") + " (in " + fmtCountdown(now, s.stopUntil) + ")"
		}
		extra += " · " + clipWords(oneLine(s.stopWords), stopBrief)
	case "NO KEY":
		extra = " · set " + s.info.Missing
	case "OVERLOADED":
		extra = " · " + s.overWhy
		if now.Before(s.circuitUntil) {
			extra = " " + fmtCountdown(now, s.circuitUntil) + " · " + s.circuitWhy
		}
	default:
		if g := gaugeBrief(s.limits, now); g != "" {
			extra = " · " + g
		} else if s.answered && s.limits == nil {
			extra = " · " + noHeaders(s)
		}
	}
	if tb := tierBrief(s.info.Target, s.tier); tb != "" {
		extra += " · " + tb
	}
	if s.proxied && i >= p.inChain {
		extra += " · via proxy"
	}
	if s.hasPace && s.pace.Queued > 0 {
		// Calls (the proxy's among them) waiting for a concurrency slot.
		extra += fmt.Sprintf(" · %d queued, %d/%d slots busy", s.pace.Queued, s.pace.InFlight, s.pace.Concurrency)
	}
	if u := p.fleetUsage(s.info.Target, now); u != "" {
		extra += " · " + u
	}
	nw := min(36, w/2)
	name := fit(p.label(i, s), nw)
	if p.focused && i == p.cursor {
		name = st.Selected.Render(name)
	}
	room := w - nw - 1 - len(word)
	if widthOf(extra) <= room || !p.wrapLong {
		return []string{fit(name+" "+style(word)+st.Subtle.Render(extra), w)}
	}
	// As much as fits beside the state (the countdown first), the rest
	// wrapped under it.
	const ind = "    "
	head, rest := "", strings.TrimPrefix(extra, " ")
	if room > 2 {
		parts := wrap(rest, room-1)
		head = " " + parts[0]
		rest = strings.TrimSpace(strings.TrimPrefix(rest, parts[0]))
	}
	out := []string{fit(name+" "+style(word)+st.Subtle.Render(head), w)}
	if rest != "" {
		for _, l := range wrap(rest, w-len(ind)) {
			out = append(out, ind+st.Subtle.Render(l))
		}
	}
	return out
}

func gaugeBrief(l *stream.Limits, now time.Time) string {
	if l == nil || l.Requests == nil || !l.Requests.HasRemaining {
		return ""
	}
	r := l.Requests
	s := "req " + fmtCount(r.Remaining)
	if r.HasLimit {
		s += "/" + fmtCount(r.Limit)
	}
	s += " left"
	if r.PerDay {
		s += " per day"
	}
	if now.Before(r.Reset) {
		s += " reset " + fmtCountdown(now, r.Reset)
	}
	return s
}

// full is the long form: name and state, why, countdown bar, gauges.
func (p *targetsPane) full(i int, s *targetState, w int, now time.Time, st *theme.Styles) []string {
	word, style := s.state(now, st)
	name := p.label(i, s)
	nw := w - len(word) - 1
	head := fit(name, nw) + " " + style(word)
	if p.focused && i == p.cursor {
		head = st.Selected.Render(fit(name, nw)) + " " + style(word)
	}
	out := []string{head}
	ind := "  "
	iw := w - 2
	if s.proxied && i >= p.inChain {
		out = append(out, ind+st.Subtle.Render(fit("via proxy (not in your chain)", iw)))
	}
	switch word {
	case "NO KEY":
		out = append(out, ind+st.Subtle.Render(fit("unavailable: set "+s.info.Missing, iw)))
	case "STOPPED":
		// The provider's words, clipped to two lines: the conversation and
		// the attempt's detail have them whole.
		for _, l := range clipLines(wrap("quota: "+oneLine(s.stopWords), iw), stopLines, iw) {
			out = append(out, ind+st.Error.Render(l))
		}
		if !s.stopUntil.IsZero() {
			// The window that stopped the target, empty, and when it resets.
			out = append(out, ind+st.Error.Render("quota ")+bar(0, 8, st.Error.Render, st.GaugeEmpty.Render)+st.Error.Render(" 0 left"),
				ind+st.Error.Render(fit("resets "+s.stopUntil.Local().Format("15:04")+" (in "+fmtCountdown(now, s.stopUntil)+")", iw)))
		} else {
			out = append(out, ind+st.Subtle.Render(fit("needs a person", iw)))
		}
	case "WAITING", "PAUSED":
		for _, l := range wrap(s.wait.why, iw) {
			out = append(out, ind+st.Wait.Render(l))
		}
		total := s.wait.until.Sub(s.wait.from)
		left := s.wait.until.Sub(now)
		frac := 0.0
		if total > 0 {
			frac = float64(left) / float64(total)
		}
		cd := fmtCountdown(now, s.wait.until) + " left"
		bw := max(4, min(20, iw-len(cd)-1))
		out = append(out, ind+bar(frac, bw, st.Wait.Render, st.GaugeEmpty.Render)+" "+st.Wait.Render(cd))
	case "OVERLOADED":
		why := s.overWhy + " · the provider is at capacity"
		if now.Before(s.circuitUntil) {
			why = s.circuitWhy
		}
		for _, l := range wrap(why, iw) {
			out = append(out, ind+st.Warn.Render(l))
		}
		if now.Before(s.circuitUntil) {
			out = append(out, ind+st.Warn.Render(fit(fmtCountdown(now, s.circuitUntil)+" left, then one probe", iw)))
		}
	default:
		if s.lastErr != "" && word == "READY" {
			out = append(out, ind+st.Subtle.Render(fit("last: "+s.lastErr, iw)))
		}
	}
	if tb := tierBrief(s.info.Target, s.tier); tb != "" {
		style := st.Subtle.Render
		if s.tier.downgraded {
			style = st.Warn.Render
		}
		out = append(out, ind+style(fit(tb, iw)))
	}
	if g := gauges(s.limits, iw, now, st, ind); len(g) > 0 {
		out = append(out, g...)
	} else if s.answered && word != "NO KEY" {
		for _, l := range wrap(noHeaders(s), iw) {
			out = append(out, ind+st.Subtle.Render(l))
		}
	}
	if u := p.fleetUsage(s.info.Target, now); u != "" {
		out = append(out, ind+st.Subtle.Render(fit(u, iw)))
	}
	return append(out, p.strips(s, iw, st, ind)...)
}

// gauges renders a limits snapshot, one line a window, under a legend: a
// bar shows what is LEFT of each limit (full: all of it left), an exhausted
// window is drawn empty in the warning colour, and "(rounded)" is said once.
// The priority tier's windows (Anthropic's) follow under a heading of
// their own.
func gauges(l *stream.Limits, w int, now time.Time, st *theme.Styles, ind string) []string {
	if l == nil {
		return nil
	}
	var out []string
	rounded := false
	one := func(name string, win *stream.Window) {
		if win == nil || (!win.HasRemaining && !win.HasLimit) {
			return
		}
		rounded = rounded || win.Rounded
		bw := 8
		if w < 30 {
			bw = 4
		}
		cells := bw
		if win.HasLimit && win.Limit > 0 {
			cells = int(float64(win.Remaining)/float64(win.Limit)*float64(bw) + 0.5)
			// Never full while some is used, never empty while some is left.
			if win.Remaining < win.Limit {
				cells = min(cells, bw-1)
			}
			if win.Remaining > 0 {
				cells = max(cells, 1)
			}
		}
		nums := fmtCount(win.Remaining)
		if win.HasLimit {
			nums += "/" + fmtCount(win.Limit)
		}
		if win.PerDay {
			nums += " per day"
		}
		tail := ""
		if now.Before(win.Reset) {
			tail = " reset " + fmtCountdown(now, win.Reset)
		}
		full, empty, numStyle := st.GaugeFull.Render, st.GaugeEmpty.Render, fmt.Sprint
		if win.HasRemaining && win.Remaining <= 0 {
			cells, empty, numStyle = 0, st.Warn.Render, func(a ...any) string { return st.Warn.Render(fmt.Sprint(a...)) }
		}
		g := full(strings.Repeat("█", cells)) + empty(strings.Repeat("░", bw-cells))
		line := fmt.Sprintf("%-4s", name) + g + " " + numStyle(nums) + st.Subtle.Render(tail)
		out = append(out, ind+fit(line, w))
	}
	one("req", l.Requests)
	one("tok", l.Tokens)
	one("in", l.InputTokens)
	one("out", l.OutputTokens)
	regular := len(out)
	one("in", l.PriorityInputTokens)
	one("out", l.PriorityOutputTokens)
	if len(out) == 0 {
		return nil
	}
	if len(out) > regular {
		out = slices.Insert(out, regular, ind+st.Subtle.Render(fit("priority tier", w)))
	}
	legend := "left of each limit"
	if rounded {
		legend += " (rounded)"
	}
	return append([]string{ind + st.Subtle.Render(fit(legend, w))}, out...)
}

// noHeaders says why a target that answered shows no gauge, and what the
// pacer learned instead.
func noHeaders(s *targetState) string {
	t := s.info.Target.Provider + " sends no limit headers"
	if s.hasPace && s.pace.RateLearned && s.pace.Rate > 0 {
		return t + "; learned from its 429s: " + fmtRate(s.pace.Rate)
	}
	return t + "; its rate is learned from its 429s"
}

// fmtRate renders a request rate: "0.5 req/s", "12 req/min".
func fmtRate(r float64) string {
	if r >= 1 {
		return fmt.Sprintf("%.1f req/s", r)
	}
	return fmt.Sprintf("%.0f req/min", r*60)
}
