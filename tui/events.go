package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// applyEvent applies one engine event. Events of a run that is no longer the
// one in flight (a late event after a fail-over-now) are dropped. A proxied
// call's events (tagged ids) reach only that call's run and turn.
func (m *Model) applyEvent(ev retry.Event) {
	var x *extCall
	r, t := m.call, m.turn
	if isExt(ev.CallID) {
		if x = m.ext[ev.CallID]; x == nil {
			return
		}
		r, t = x.run, x.turn
	}
	if r == nil || t == nil || ev.CallID != r.id {
		return
	}
	ev = cleanEvent(ev, &r.text) // no escape sequence from a server reaches the screen
	m.record(r.id, ev)           // the strips' and the timeline's data (timeline.go)
	switch ev.Kind {
	case retry.EventAttemptStart:
		if ev.Attempt != nil {
			m.attemptStart(r, t, x, ev.Attempt)
		}
	case retry.EventThinking:
		m.thinking(r, t, ev)
	case retry.EventText:
		m.text(r, t, ev)
	case retry.EventAttemptEnd:
		if ev.Attempt != nil {
			m.attemptEnd(r, t, ev.Attempt, ev.Time)
		}
	case retry.EventWait:
		if ev.Wait != nil {
			m.waitStart(r, x, ev)
		}
	case retry.EventWaitEnd:
		if w := ev.Wait; w != nil {
			m.waitEnd(r, t, w)
		}
		if x != nil {
			m.extWaitOver(x)
		}
	case retry.EventCallEnd:
		m.callEndEvent(r, t, x, ev.Result)
	}
}

// attemptStart opens the attempt's block in the turn; the target is busy.
func (m *Model) attemptStart(r *run, t *turn, x *extCall, a *retry.Attempt) {
	m.targets.attemptStart(a, r.id)
	if x != nil {
		m.extWaitOver(x)
	}
	r.wait = nil
	b := &block{kind: blockText, header: fmt.Sprintf("%s · attempt %d", a.Target, a.N), dirty: true}
	t.blocks = append(t.blocks, b)
	t.current = b
	t.currentTarget = a.Target
}

// thinking marks when the current attempt began to think (before its
// first text).
func (m *Model) thinking(r *run, t *turn, ev retry.Event) {
	b := t.current
	if b == nil || b.text != "" || !b.thinkingAt.IsZero() {
		return
	}
	b.thinkingAt = ev.Time
	if b.thinkingAt.IsZero() || b.thinkingAt.After(m.now) {
		b.thinkingAt = m.now
	}
	if t.currentTarget.Provider != "" {
		m.targets.thinking(t.currentTarget, r.id)
	}
}

// text appends a text delta to the current attempt's block.
func (m *Model) text(r *run, t *turn, ev retry.Event) {
	if b := t.current; b != nil && b.text == "" && !b.thinkingAt.IsZero() {
		b.thought = " · thought " + fmtElapsed(m.now.Sub(b.thinkingAt))
		b.header += b.thought // the header shows with the text
	}
	if t.current == nil {
		b := &block{kind: blockText, dirty: true}
		t.blocks = append(t.blocks, b)
		t.current = b
	}
	t.current.appendText(ev.Text)
	if t.currentTarget.Provider != "" {
		m.targets.text(t.currentTarget, r.id)
	}
}

// waitStart applies a wait the engine takes: its target's current wait,
// a row in the log, a countdown.
func (m *Model) waitStart(r *run, x *extCall, ev retry.Event) {
	w := ev.Wait
	r.wait = w
	m.targets.wait(w, m.now)
	at := ev.Time
	if at.IsZero() {
		at = m.now
	}
	m.log.add(&logRow{callID: r.id, at: at, wait: w})
	if x != nil {
		m.extWait(x)
	}
}

// callEndEvent ends a run's call (a proxied call's run ends with it).
func (m *Model) callEndEvent(r *run, t *turn, x *extCall, res *retry.Result) {
	if x != nil {
		m.extWaitOver(x)
		delete(m.ext, r.id)
		m.stats.proxied++
	}
	if res != nil {
		m.callEnd(r, t, res)
	} else if x != nil {
		m.targets.callEnd(&retry.Result{}, r.chain, r.id)
		t.done = true
	}
}

func (m *Model) attemptEnd(r *run, t *turn, a *retry.Attempt, evTime time.Time) {
	m.targets.attemptEnd(a, m.now, r.id)
	at := a.StartedAt
	if at.IsZero() {
		at = evTime
	}
	m.log.add(&logRow{callID: r.id, at: at, attempt: *a})
	cp := *a
	m.lastAttempt = &cp
	b := t.current
	t.current = nil
	if b != nil && b.text == "" && a.PartialText != "" {
		b.setText(a.PartialText)
	}
	if a.Class == stream.ClassOK {
		return
	}
	if b != nil && b.text != "" {
		b.broken = true
		b.dirty = true
	}
	if a.FailedOverByUser && (a.Class == stream.ClassCancelled || b != nil && b.text != "") {
		// ctrl+f during the stream: the engine ended it and moves on.
		s := "You failed over during " + a.Target.String() + "'s answer"
		if next := nextTarget(r.chain, a.Target); next != "" {
			s += "; trying " + next
		}
		t.note(noteWarn, s+".")
		if a.Target == t.primary && t.primaryWhy == "" {
			t.primaryWhy = "you failed over during its answer"
		}
		return
	}
	if a.Class == stream.ClassCancelled {
		return
	}
	if a.Target == t.primary && t.primaryWhy == "" {
		t.primaryWhy = shortWhy(a)
	}
	sentence := errSentence(a)
	kind := noteWarn
	if a.Class == stream.ClassQuota || a.MidStream {
		kind = noteError
	}
	var s string
	if a.MidStream || (b != nil && b.text != "") {
		s = "✗ The stream broke here: " + sentence + "."
	} else {
		s = "✗ " + sentence + "."
	}
	if next := decisionWords(a, r.chain); next != "" {
		s += " " + next
	}
	t.note(kind, s)
	d := rawDetail(a)
	if a.RequestID != "" {
		d += " · request " + a.RequestID
	}
	t.detail(d)
}

func (m *Model) callEnd(r *run, t *turn, res *retry.Result) {
	r.wait = nil
	m.statesStale = true
	m.targets.callEnd(res, r.chain, r.id)
	t.requests += len(res.Attempts)
	t.done = true
	end := res.Ended
	if end.IsZero() {
		end = m.now
	}
	m.stats.addCall(t.requests, res.Outcome == retry.OutcomeOK, end.Sub(t.started))
	switch res.Outcome {
	case retry.OutcomeOK:
		m.lastAnswer = res.Text
		served(t, res)
	case retry.OutcomeStopped:
		t.note(noteError, m.stoppedWords(res))
		errDetail(t, res)
	case retry.OutcomeDeferred:
		s := "Deferred: the server asked for a wait longer than max-wait, with no fallback left."
		if !res.RetryAt.IsZero() {
			s += " Try again at " + res.RetryAt.Local().Format("15:04:05") + " (in " + fmtCountdown(m.now, res.RetryAt) + ")."
		}
		t.note(noteWarn, s)
		errDetail(t, res)
	case retry.OutcomeGaveUp:
		t.note(noteError, fmt.Sprintf("Gave up after %d requests: the retry budget or the deadline is spent.", t.requests))
		errDetail(t, res)
	case retry.OutcomeFailed:
		t.note(noteError, "Failed: the request itself is wrong; retrying will not help.")
		errDetail(t, res)
	case retry.OutcomeCancelled:
		if isExt(r.id) {
			t.note(noteInfo, "Cancelled: the client went away, or the proxy stopped.")
		} else {
			t.note(noteInfo, "Cancelled by you.")
		}
	}
}

// errDetail puts the call's error under its note when no attempt says it.
func errDetail(t *turn, res *retry.Result) {
	if res.Err != nil && len(res.Attempts) == 0 {
		t.detail(res.Err.Error())
	}
}

// served badges the answer that served the call: who served it and, for a
// fallback, why the primary did not.
func served(t *turn, res *retry.Result) {
	var by stream.Target
	if n := len(res.Attempts); n > 0 {
		by = res.Attempts[n-1].Target
	}
	name := by.String()
	if res.ServedBy != nil {
		name = res.ServedBy.String()
		if by.Provider == "" {
			by = *res.ServedBy
		}
	}
	badge := "served by " + name
	if n := len(res.Attempts); n > 0 && res.Attempts[n-1].Downgraded {
		badge += " · " + res.Attempts[n-1].TierNote()
	}
	fallback := ""
	if by.Provider != "" && by != t.primary {
		fallback = "fallback: primary " + t.primary.String() + " " + primaryWhy(t, res)
	}
	for i := len(t.blocks) - 1; i >= 0; i-- {
		if b := t.blocks[i]; b.kind == blockText && !b.broken {
			b.header, b.badgeOK, b.fallback, b.dirty = badge+b.thought, true, fallback, true
			break
		}
	}
}

// primaryWhy says why the primary did not serve the call.
func primaryWhy(t *turn, res *retry.Result) string {
	why := moveWhy(res.Attempts)
	if why == "" {
		why = t.primaryWhy
	}
	for _, sk := range res.Skips {
		if why == "" && sk.Target == t.primary {
			why = "skipped: its limits need a " + fmtDur(sk.Wait) + " wait (pacing)"
		}
	}
	if why == "" {
		why = "did not answer"
	}
	return why
}

// stoppedWords says why a call stopped: a cooldown that blocked it, or the
// quota it met, and when it ends.
func (m *Model) stoppedWords(res *retry.Result) string {
	if !res.CooldownHit {
		if cd := res.Cooldown; cd != nil && !cd.Until.IsZero() {
			// The time, not a countdown: the transcript does not move (the
			// targets pane counts down).
			return "The call stopped: the quota resets at " + cd.Until.Local().Format("15:04") + "; the targets pane counts down. No retry, no failover."
		}
		return "The call stopped: a quota or billing limit needs a person. No retry, no failover."
	}
	until := "until cleared"
	cdUntil := res.CooldownUntil
	if res.Cooldown != nil {
		cdUntil = res.Cooldown.Until
	}
	if !cdUntil.IsZero() {
		until = "until " + cdUntil.Local().Format("15:04") + " (in " + fmtCountdown(m.now, cdUntil) + ")"
	}
	how := "tab to the targets pane and press x on it, or run limitscope cooldowns clear"
	if m.opts.ClearCooldown == nil {
		how = "limitscope cooldowns clear"
	}
	if cd := res.Cooldown; cd != nil {
		return "Not sent: a quota stop on " + orDash(cd.Target) + " (" + orDash(cd.Code) + ") blocks it " + until + ". A person must act (" + how + ")."
	}
	return "Not sent: a quota cooldown blocks this target " + until + ". A person must act (" + how + ")."
}

// waitEnd applies the end of a wait: the time actually waited goes on the
// wait's row and its attempt's row in the log, and into the transcript.
func (m *Model) waitEnd(r *run, t *turn, w *retry.Wait) {
	r.wait = nil
	m.targets.waitEnd(w, m.now)
	m.log.waitEnd(r.id, w)
	planned := w.Duration
	switch w.EndedBy {
	case retry.WaitFailover:
		s := fmt.Sprintf("You failed over after %s of a %s wait on %s", fmtDur(w.Waited), fmtDur(planned), w.Target)
		if next := nextTarget(r.chain, w.Target); next != "" {
			s += "; trying " + next
		}
		t.note(noteWarn, s+".")
		if w.Target == t.primary && t.primaryWhy != "" {
			t.primaryWhy += "; you failed over during its wait"
		}
	case retry.WaitCancelled:
		t.note(noteInfo, fmt.Sprintf("Waited %s of %s, then cancelled.", fmtDur(w.Waited), fmtDur(planned)))
	default:
		what := "waited " + fmtDur(w.Waited)
		if w.Pacing {
			what = "paced " + fmtDur(w.Waited)
		}
		t.note(noteInfo, "⏳ "+what+" ("+orDash(string(w.Source))+").")
	}
}

// nextTarget is the target after t in the chain, "" when none.
func nextTarget(chain []stream.Target, t stream.Target) string {
	for i, c := range chain {
		if c == t && i+1 < len(chain) {
			return chain[i+1].String()
		}
	}
	return ""
}

// moveWhy says what moved the call off its primary: the first attempt that
// failed over (by the engine's decision or the user's ctrl+f), "" when none.
func moveWhy(as []retry.Attempt) string {
	for i := range as {
		a := &as[i]
		switch {
		case a.FailedOverByUser && a.Class == stream.ClassCancelled:
			return "you failed over during its answer"
		case a.FailedOverByUser:
			s := shortWhy(a) + "; you failed over"
			if a.Waited > 0 && a.RetryAfter != nil {
				s += " after " + fmtDur(a.Waited) + " of its " + fmtDur(*a.RetryAfter) + " wait"
			}
			return s
		case a.Decision == retry.DecideFailover:
			return shortWhy(a)
		}
	}
	return ""
}

// shortWhy says briefly why an attempt failed: "429 rate_limit, asked 20s".
func shortWhy(a *retry.Attempt) string {
	s := string(a.Class)
	if a.Status != 0 {
		s = fmt.Sprintf("%d %s", a.Status, a.Class)
	}
	if a.MidStream {
		s += " mid-stream"
	}
	if a.RetryAfter != nil {
		s += ", asked " + fmtDur(*a.RetryAfter)
	}
	return s
}

// decisionWords says what the engine does next.
func decisionWords(a *retry.Attempt, chain []stream.Target) string {
	switch a.Decision {
	case retry.DecideRetry:
		return "Retrying " + providerTier(a.Target) + " after a wait."
	case retry.DecideFailover:
		for i, t := range chain {
			if t == a.Target && i+1 < len(chain) {
				next := chain[i+1]
				if next.Provider == t.Provider && next.Model == t.Model {
					// One model at another tier: name both ends.
					return "Failing over from " + t.String() + " to " + next.String() + "."
				}
				return "Failing over to " + next.String() + "."
			}
		}
		return "Failing over."
	case retry.DecideStop:
		return "Stopping: no retry, no failover."
	case retry.DecideFail:
		return "Not retrying: fix the request."
	case retry.DecideDefer:
		return "Deferring: the wait is longer than max-wait."
	case retry.DecideGiveUp:
		return "Giving up."
	}
	return ""
}

// liveWait is the countdown under the current turn while the engine waits,
// or the line that says a request is on its way.
func (m *Model) liveWait() []string {
	if m.call != nil && !m.waiting() && m.turn != nil {
		if b := m.turn.current; b != nil && b.text == "" && m.conv.isLast(m.turn) {
			if !b.thinkingAt.IsZero() {
				return []string{m.st.Countdown.Render("✻ " + b.header + ": thinking " + fmtElapsed(m.now.Sub(b.thinkingAt)) + "…")}
			}
			return []string{m.st.Subtle.Render("→ " + b.header + ": sent, waiting for the first token…")}
		}
		return nil
	}
	if !m.waiting() {
		return nil
	}
	w := m.call.wait
	st := &m.st
	head := waitHead(w, m.targets.waitEnds(w.Target), m.now)
	if m.turn != nil && !m.conv.isLast(m.turn) {
		head = "⏳ your prompt: " + strings.TrimPrefix(head, "⏳ ")
	}
	out := []string{st.CountdownHead.Render(head)}
	if w.Reason != "" {
		out = append(out, st.Detail.Render("  "+oneLine(w.Reason)))
	}
	if m.canFailOver() {
		out = append(out, st.Subtle.Render("  ctrl+f fails over now · esc cancels"))
	} else {
		out = append(out, st.Subtle.Render("  esc cancels"))
	}
	return out
}

// waitHead says what a wait is, where its number came from, and what is
// left until it ends (its target's current wait): "⏳ openai says 20s
// (retry-after) · 12s left; deadline in 2m40s".
func waitHead(w *retry.Wait, until, now time.Time) string {
	var head string
	switch {
	case w.Pacing:
		head = fmt.Sprintf("⏳ pacing %s: waiting %s for its limit to reset", providerTier(w.Target), fmtDur(w.Duration))
	case w.Asked > 0:
		head = fmt.Sprintf("⏳ %s says %s (%s)", providerTier(w.Target), fmtDur(w.Asked), w.Source)
	default:
		head = fmt.Sprintf("⏳ backing off %s before retrying %s (%s)", fmtDur(w.Duration), providerTier(w.Target), orDash(string(w.Source)))
	}
	head += " · " + fmtCountdown(now, until) + " left"
	if !w.Deadline.IsZero() {
		head += "; deadline in " + fmtCountdown(now, w.Deadline)
	}
	return head
}
