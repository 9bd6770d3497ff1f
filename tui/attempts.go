package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/theme"
)

// maxLogRows bounds the attempt log so memory stays flat over a long session;
// the history keeps everything.
const maxLogRows = 2000

// logRow is one attempt or wait in the attempt log.
type logRow struct {
	callID  string
	at      time.Time
	attempt retry.Attempt // zero for a wait row
	wait    *retry.Wait
	ended   *retry.Wait // a wait row: how the wait ended (EventWaitEnd), nil while it runs
	line    string      // cached, for width w
	w       int
}

// attemptLog is the timeline: one row per attempt and wait, newest at the
// bottom, scrollable.
type attemptLog struct {
	rows    []*logRow
	sel     int // selected row when focused; -1 follows the newest
	focused bool
	pw      int // the provider column's width: the longest label so far, at least minProviderColumn
}

// minProviderColumn is the provider column's narrowest width ("anthropic").
const minProviderColumn = 9

// providerLabel is a row's provider column: the provider (with its API
// variant), the account and the service tier asked, so that two accounts'
// (or two tiers') rows never read alike: "openai@team+flex".
func providerLabel(t stream.Target) string {
	if t.Tier != "" {
		return t.EndpointKey() + stream.TierSep + t.Tier
	}
	return t.EndpointKey()
}

// providerTier is the provider a sentence names, with the service tier
// asked when there is one: "openai+flex", so that a chain of one
// provider's tiers reads which tier retried, waited or failed.
func providerTier(t stream.Target) string {
	if t.Tier != "" {
		return t.Provider + stream.TierSep + t.Tier
	}
	return t.Provider
}

func newAttemptLog() *attemptLog { return &attemptLog{sel: -1, pw: minProviderColumn} }

func (l *attemptLog) invalidate() {
	for _, r := range l.rows {
		r.w = 0
	}
}

func (l *attemptLog) add(r *logRow) {
	t := r.attempt.Target
	if r.wait != nil {
		t = r.wait.Target
	}
	if n := len([]rune(providerLabel(t))); n > l.pw {
		l.pw = n // every row is drawn again at the new width: the columns stay aligned
		l.invalidate()
	}
	l.rows = append(l.rows, r)
	if len(l.rows) > maxLogRows {
		n := len(l.rows) - maxLogRows
		l.rows = append(l.rows[:0], l.rows[n:]...)
		if l.sel >= 0 {
			l.sel = max(0, l.sel-n)
		}
	}
}

// waitEnd puts what a wait really took on its row and on the row of the
// attempt it followed (the newest of that call on that target).
func (l *attemptLog) waitEnd(callID string, w *retry.Wait) {
	waitDone, attDone := false, false
	for i := len(l.rows) - 1; i >= 0 && !(waitDone && attDone); i-- {
		r := l.rows[i]
		if r.callID != callID {
			continue
		}
		switch {
		case r.wait != nil && !waitDone && r.ended == nil && r.wait.Target == w.Target:
			cp := *w
			r.ended, r.w = &cp, 0
			waitDone = true
		case r.wait == nil && !attDone && r.attempt.Target == w.Target:
			if !w.Pacing {
				r.attempt.Waited = w.Waited
				if w.EndedBy == retry.WaitFailover {
					r.attempt.FailedOverByUser = true
				}
				r.w = 0
			}
			attDone = true
		}
	}
}

// waitWords says how a wait ended: "failed over by you after 7.2s of a 20s
// wait".
func waitWords(w *retry.Wait) string {
	switch w.EndedBy {
	case retry.WaitFailover:
		return "failed over by you after " + fmtDur(w.Waited) + " of a " + fmtDur(w.Duration) + " wait"
	case retry.WaitCancelled:
		return "cancelled after " + fmtDur(w.Waited) + " of a " + fmtDur(w.Duration) + " wait"
	}
	return "waited " + fmtDur(w.Waited)
}

func (l *attemptLog) move(d int) {
	if len(l.rows) == 0 {
		return
	}
	if l.sel < 0 {
		l.sel = len(l.rows) - 1
	}
	l.sel = min(max(0, l.sel+d), len(l.rows)-1)
	if l.sel == len(l.rows)-1 && d > 0 {
		l.sel = -1 // back to following the newest
	}
}

// newer counts the rows below the visible window of h rows (the user
// scrolled up); 0 while the log follows the newest.
func (l *attemptLog) newer(h int) int {
	if l.sel < 0 {
		return 0
	}
	return len(l.rows) - min(len(l.rows), max(l.sel+1, h))
}

// selected returns the selected attempt row, or the newest attempt.
func (l *attemptLog) selected() *logRow {
	i := l.sel
	if i < 0 {
		i = len(l.rows) - 1
	}
	for ; i >= 0; i-- {
		if l.rows[i].wait == nil {
			return l.rows[i]
		}
	}
	return nil
}

// view renders the h visible rows, w cells wide.
func (l *attemptLog) view(w, h int, st *theme.Styles) []string {
	if len(l.rows) == 0 {
		return padLines([]string{st.Subtle.Render("No attempts yet. Each request and each wait of a call shows here, newest at the bottom.")}, w, h)
	}
	end := len(l.rows)
	if l.sel >= 0 {
		end = min(len(l.rows), max(l.sel+1, h))
	}
	start := max(0, end-h)
	out := make([]string, 0, h)
	for i := start; i < end; i++ {
		r := l.rows[i]
		if r.w != w {
			r.line = r.render(w, l.pw, st)
			r.w = w
		}
		line := r.line
		if l.focused && (i == l.sel || (l.sel < 0 && i == len(l.rows)-1)) {
			line = st.Selected.Render(fit(rowText(r, w < 98, l.pw), w))
		}
		out = append(out, line)
	}
	return padFitted(out, w, h)
}

// rowText is a row as plain text; narrow is the compact form for terminals
// under 100 columns.
func rowText(r *logRow, narrow bool, pw int) string {
	ts := r.at.Local().Format("15:04:05.000")
	if narrow {
		return compactRow(r, pw)
	}
	if r.wait != nil {
		w := r.wait
		what := "wait " + fmtDur(w.Duration)
		if w.Pacing {
			what = "pace " + fmtDur(w.Duration)
		}
		src := string(w.Source)
		if w.Asked > 0 {
			src = "asked " + fmtDur(w.Asked) + " (" + src + ")"
		}
		tail := oneLine(w.Reason)
		if e := r.ended; e != nil {
			what += " -> " + waitWords(e)
			if e.EndedBy != retry.WaitElapsed && e.EndedBy != "" {
				tail = ""
			}
		}
		if tail != "" {
			src += " · " + tail
		}
		return fmt.Sprintf("%s  %-*s %-35s %s%s", ts, pw, providerLabel(w.Target), what, proxyTag(r), src)
	}
	a := &r.attempt
	status := "-"
	if a.Status != 0 {
		status = fmt.Sprint(a.Status)
	}
	code := a.Code
	if a.Class == stream.ClassOK {
		code = ""
		if a.TTFT > 0 {
			code = "ttft " + fmtDur(a.TTFT)
			if a.TTFText > a.TTFT {
				// A model that thought first: its first token is reasoning;
				// the first visible text came later.
				code += " text " + fmtDur(a.TTFText)
			}
		}
	}
	if a.MidStream {
		code = strings.TrimSpace(code + " mid-stream")
	}
	if tc := tierCode(a); tc != "" {
		code = strings.TrimSpace(code + " " + tc)
	}
	delay := ""
	if a.RetryAfter != nil {
		delay = "asked " + fmtDur(*a.RetryAfter) + " (" + sourceOr(a.DelaySource, "retry-after") + ")"
	}
	if a.Waited > 0 {
		delay = strings.TrimSpace(delay + " waited " + fmtDur(a.Waited))
	}
	if a.Class == stream.ClassOK {
		delay = fmtDur(a.Duration)
	}
	dec := ""
	if a.Decision != "" && a.Decision != retry.DecideDone {
		dec = "-> " + string(a.Decision)
	}
	if a.FailedOverByUser {
		dec = "-> failed over by you"
	}
	rid := a.RequestID
	if rid == "" {
		rid = "-"
	}
	rid = proxyTag(r) + rid
	return fmt.Sprintf("%s  %-*s %-3s %-10s %-20s %-28s %-12s %s", ts, pw, providerLabel(a.Target), status, a.Class, code, delay, dec, rid)
}

// compactRow is a row for a narrow terminal: time, target, what happened,
// the delay asked and the decision.
func compactRow(r *logRow, pw int) string {
	ts := r.at.Local().Format("15:04:05")
	if w := r.wait; w != nil {
		what := "wait "
		if w.Pacing {
			what = "pace "
		}
		s := fmt.Sprintf("%s %s%-*s %s%s (%s)", ts, proxyTag(r), pw, providerLabel(w.Target), what, fmtDur(w.Duration), w.Source)
		if r.ended != nil {
			s += " -> " + waitWords(r.ended)
		}
		return s
	}
	a := &r.attempt
	s := fmt.Sprintf("%s %s%-*s ", ts, proxyTag(r), pw, providerLabel(a.Target))
	if a.Status != 0 {
		s += fmt.Sprint(a.Status) + " "
	}
	s += string(a.Class)
	if a.MidStream {
		s += " mid-stream"
	}
	if a.RetryAfter != nil {
		s += " asked " + fmtDur(*a.RetryAfter)
	}
	if a.Class == stream.ClassOK {
		s += " " + fmtDur(a.Duration)
		if a.TTFText > a.TTFT && a.TTFT > 0 {
			s += " text " + fmtDur(a.TTFText) // after thinking
		}
	}
	if tc := tierCode(a); tc != "" {
		s += " " + tc
	}
	if a.Waited > 0 {
		s += " waited " + fmtDur(a.Waited)
	}
	switch {
	case a.FailedOverByUser:
		s += " -> failed over by you"
	case a.Decision != "" && a.Decision != retry.DecideDone:
		s += " -> " + string(a.Decision)
	}
	if a.RequestID != "" {
		s += " " + a.RequestID
	}
	return s
}

func (r *logRow) render(w, pw int, st *theme.Styles) string {
	t := fit(rowText(r, w < 98, pw), w)
	switch {
	case r.wait != nil:
		return st.Wait.Render(t)
	case r.attempt.Class == stream.ClassOK && r.attempt.Downgraded:
		return st.Warn.Render(t)
	case r.attempt.Class == stream.ClassOK:
		return t
	case r.attempt.Class == stream.ClassQuota:
		return st.Error.Render(t)
	case r.attempt.Class == stream.ClassCancelled:
		return st.Subtle.Render(t)
	default:
		return st.Warn.Render(t)
	}
}

// proxyTag marks a proxied call's row: "proxy 88cff6f3 " (its id, short);
// "" for a typed call's.
func proxyTag(r *logRow) string {
	if t := fleetTag(r); t != "" {
		return t // another process of the fleet's (tui/fleet.go)
	}
	if !isExt(r.callID) {
		return ""
	}
	return "proxy " + shortID(strings.TrimPrefix(r.callID, extPrefix)) + " "
}
