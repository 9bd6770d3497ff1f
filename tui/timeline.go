package tui

import (
	"slices"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// maxTimeline bounds the session's timeline (attempts and waits each), so
// memory stays flat over a long session; the history keeps everything.
const maxTimeline = 4000

// tlAttempt is one attempt on the session's timeline.
type tlAttempt struct {
	call  string
	at    time.Time // when it started
	end   time.Time
	a     retry.Attempt
	moved bool          // the call failed over after it (the engine's decision or the user's)
	to    stream.Target // where the call went, once its next attempt started
	toAt  time.Time
}

// tlWait is one wait on the timeline: the call's (the engine waited) or,
// when the call moved on at once, the delay the server asked of the target.
type tlWait struct {
	call    string
	target  stream.Target
	from    time.Time
	until   time.Time // planned end; the real end once it ended
	source  stream.DelaySource
	pacing  bool
	asked   bool // the server's delay only: the call moved on, no one waited
	open    bool // running now
	endedBy retry.WaitEnd
}

// tlog is what the strips and the timeline draw: every attempt and wait of
// the session, in order, and the lanes (targets) they happened on. ver
// changes with every new datum, so a chart redraws on new data (or a
// tick), never per token.
type tlog struct {
	lanes []stream.Target
	atts  []tlAttempt
	waits []tlWait
	ver   int
}

func newTlog(chain []stream.Target) *tlog {
	return &tlog{lanes: slices.Clone(chain)}
}

func (l *tlog) lane(t stream.Target) int {
	if i := slices.Index(l.lanes, t); i >= 0 {
		return i
	}
	l.lanes = append(l.lanes, t)
	return len(l.lanes) - 1
}

// attempt records an attempt that ended; at is when the event came when the
// attempt carries no start time.
func (l *tlog) attempt(call string, a *retry.Attempt, at time.Time) {
	l.lane(a.Target)
	start := a.StartedAt
	if start.IsZero() {
		start = at
	}
	end := start.Add(a.Duration)
	cp := *a
	cp.PartialText = "" // the charts never show it; do not keep it twice
	x := tlAttempt{call: call, at: start, end: end, a: cp}
	x.moved = a.Decision == retry.DecideFailover || a.FailedOverByUser
	// The call's previous attempt that failed over joins this one.
	for i := len(l.atts) - 1; i >= 0; i-- {
		p := &l.atts[i]
		if p.call != call {
			continue
		}
		if p.moved && p.to.Provider == "" && p.a.Target != a.Target {
			p.to, p.toAt = a.Target, start
		}
		break
	}
	if a.RetryAfter != nil && *a.RetryAfter > 0 && x.moved && !a.FailedOverByUser && a.Waited == 0 {
		// The call moved on at once: the target still rests for what its
		// server asked.
		l.addWait(tlWait{call: call, target: a.Target, from: end, until: end.Add(*a.RetryAfter),
			source: sourceOrRA(a.DelaySource), asked: true})
	}
	l.atts = append(l.atts, x)
	if n := len(l.atts) - maxTimeline; n > 0 {
		l.atts = slices.Delete(l.atts, 0, n)
	}
	l.ver++
}

func sourceOrRA(s stream.DelaySource) stream.DelaySource {
	if s == "" || s == stream.SourceBackoff {
		return stream.SourceRetryAfter
	}
	return s
}

func (l *tlog) addWait(w tlWait) {
	l.lane(w.target)
	l.waits = append(l.waits, w)
	if n := len(l.waits) - maxTimeline; n > 0 {
		l.waits = slices.Delete(l.waits, 0, n)
	}
	l.ver++
}

// wait records a wait the engine takes, from at.
func (l *tlog) wait(call string, w *retry.Wait, at time.Time) {
	until := w.Until
	if until.IsZero() {
		until = at.Add(w.Duration)
	}
	l.addWait(tlWait{call: call, target: w.Target, from: at, until: until, source: w.Source,
		pacing: w.Pacing || w.Source == stream.SourceReset, open: true})
}

// waitEnd ends the call's open wait on w's target at its real end, and
// marks the attempt before it as failed over when the user moved the call.
func (l *tlog) waitEnd(call string, w *retry.Wait, now time.Time) {
	for i := len(l.waits) - 1; i >= 0; i-- {
		x := &l.waits[i]
		if x.call == call && x.open && x.target == w.Target {
			x.open, x.endedBy = false, w.EndedBy
			if end := x.from.Add(w.Waited); w.Waited > 0 && end.Before(x.until) {
				x.until = end
			} else if now.Before(x.until) {
				x.until = now
			}
			break
		}
	}
	if w.EndedBy == retry.WaitFailover {
		for i := len(l.atts) - 1; i >= 0; i-- {
			if p := &l.atts[i]; p.call == call && p.a.Target == w.Target {
				p.moved = true
				break
			}
		}
	}
	l.ver++
}

// callEnd closes the call's waits still open (a cancelled call's).
func (l *tlog) callEnd(call string, now time.Time) {
	for i := range l.waits {
		if x := &l.waits[i]; x.call == call && x.open {
			x.open = false
			if now.Before(x.until) {
				x.until = now
			}
			l.ver++
		}
	}
}

// of returns the attempts on target t, oldest first.
func (l *tlog) of(t stream.Target) []*tlAttempt {
	var out []*tlAttempt
	for i := range l.atts {
		if l.atts[i].a.Target == t {
			out = append(out, &l.atts[i])
		}
	}
	return out
}

// span is the time from the first attempt or wait to the last end.
func (l *tlog) span() (from, to time.Time) {
	for i := range l.atts {
		x := &l.atts[i]
		if from.IsZero() || x.at.Before(from) {
			from = x.at
		}
		if x.end.After(to) {
			to = x.end
		}
	}
	for i := range l.waits {
		x := &l.waits[i]
		if from.IsZero() || x.from.Before(from) {
			from = x.from
		}
		if x.until.After(to) {
			to = x.until
		}
	}
	return from, to
}

// tlogOf builds a past session's timeline from its calls (oldest first),
// read from the history: the waits are each attempt's pacing before it and
// what was waited after it.
func tlogOf(calls []CallDetail) *tlog {
	l := &tlog{}
	slices.SortStableFunc(calls, func(a, b CallDetail) int { return a.Time.Compare(b.Time) })
	for _, c := range calls {
		for i := range c.Attempts {
			a := &c.Attempts[i]
			if a.Paced >= scales[0] && !a.StartedAt.IsZero() { // a shorter hold is no span at any zoom
				l.addWait(tlWait{call: c.ID, target: a.Target, from: a.StartedAt.Add(-a.Paced), until: a.StartedAt,
					source: stream.SourceReset, pacing: true})
			}
			l.attempt(c.ID, a, c.Time)
			if a.Waited > 0 {
				end := a.StartedAt.Add(a.Duration)
				w := tlWait{call: c.ID, target: a.Target, from: end, until: end.Add(a.Waited), source: a.DelaySource}
				if a.FailedOverByUser {
					w.endedBy = retry.WaitFailover
				}
				l.addWait(w)
			}
		}
	}
	return l
}

// record puts an event of call id on the session's timeline.
func (m *Model) record(id string, ev retry.Event) {
	at := ev.Time
	if at.IsZero() {
		at = m.now
	}
	switch ev.Kind {
	case retry.EventAttemptEnd:
		if ev.Attempt != nil {
			m.tl.attempt(id, ev.Attempt, at)
		}
	case retry.EventWait:
		if ev.Wait != nil {
			m.tl.wait(id, ev.Wait, at)
		}
	case retry.EventWaitEnd:
		if ev.Wait != nil {
			m.tl.waitEnd(id, ev.Wait, at)
		}
	case retry.EventCallEnd:
		m.tl.callEnd(id, at)
	}
}
