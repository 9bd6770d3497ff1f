package learn

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

// The failure kinds learnt, named as the simulator's faults.
var faultKinds = []string{
	sim.FaultOverload, sim.FaultRateLimit, sim.FaultSlowDown, sim.FaultServerError,
	sim.FaultMidStream, sim.FaultCut, sim.FaultReset,
}

// Bounds on what is held per provider.
const (
	maxRecent = 50_000 // attempt times kept for the requests-per-minute count
	maxAt429  = 4096   // per-minute counts at 429s kept for the estimate
	maxStops  = 20     // quota stops written per provider
	maxQueue  = 200_000
)

// Source describes what was learnt from, for the provenance comments.
type Source struct {
	Scope   string // "session 3 (send, real)", "calls since 2h", ...
	Version string // limitscope's version
}

// Learner accumulates calls. Add them oldest first; then Write.
type Learner struct {
	src      Source
	provs    map[string]*provider
	queue    attemptQueue // attempts not yet in time order
	first    time.Time
	last     time.Time
	calls    int
	attempts int
	modes    map[string]int // calls by the recording session's mode
	skipped  int            // attempts of providers the simulator lacks
	accounts bool           // some target named an account: merged into its provider
	ignored  int            // attempts of classes that are not the provider's doing
	seq      uint64         // attempts observed, for their arrival order
	trace    bool           // keep each provider's outcomes in order (Trace)
}

// New returns an empty Learner.
func New(src Source) *Learner {
	return &Learner{src: src, provs: map[string]*provider{}, modes: map[string]int{}}
}

// obs is one attempt reduced to what is learnt from it.
type obs struct {
	t          time.Time
	seq        uint64 // arrival order: equal times keep it
	prov       *provider
	kind       string // "ok", a fault kind, "quota:spend_cap" / "quota:daily_quota", or "" (not learnt)
	code       string // a quota stop's code, when it is a plain word
	retryAfter time.Duration
	hasDelay   bool
	source     stream.DelaySource
	reset      time.Time // a quota stop's end, when known
	ttft       time.Duration
	tps        float64
	lim        *snapshot
}

// snapshot is what one response's limit headers said.
type snapshot struct {
	w [4]winSnap // requests, tokens, input tokens, output tokens
}

type winSnap struct {
	ok               bool
	limit, remaining int64
	hasLimit, hasRem bool
	perDay           bool
	resetIn          time.Duration
	hasReset         bool
}

func snap(l *stream.Limits) *snapshot {
	if l.Empty() {
		return nil
	}
	s := &snapshot{}
	for i, w := range []*stream.Window{l.Requests, l.Tokens, l.InputTokens, l.OutputTokens} {
		if w == nil {
			continue
		}
		s.w[i] = winSnap{ok: true, limit: w.Limit, remaining: w.Remaining, hasLimit: w.HasLimit, hasRem: w.HasRemaining,
			perDay: w.PerDay, hasReset: !w.Reset.IsZero()}
		if !w.Reset.IsZero() {
			s.w[i].resetIn = w.Reset.Sub(l.At)
		}
	}
	return s
}

// Add learns from one call and its attempts (store.Reader.Each, oldest
// first). The call's text, prompt, ids and messages are never read.
func (l *Learner) Add(c *store.Call) {
	l.calls++
	if c.Mode != "" {
		l.modes[c.Mode]++
	} else {
		l.modes[store.ModeReal]++
	}
	// Everything later starts at or after this call: what is queued before
	// it is in order now.
	l.release(c.Started)
	for i := range c.AttemptsList {
		a := &c.AttemptsList[i]
		o, ok := l.observe(c, a, i == len(c.AttemptsList)-1)
		if !ok {
			continue
		}
		l.queue.push(o)
		if l.queue.Len() > maxQueue {
			l.apply(l.queue.pop())
		}
	}
}

func (l *Learner) release(upTo time.Time) {
	for l.queue.Len() > 0 && l.queue[0].t.Before(upTo) {
		l.apply(l.queue.pop())
	}
}

// observe reduces an attempt; false for one the simulator cannot replay
// (another provider, no start time).
func (l *Learner) observe(c *store.Call, a *retry.Attempt, last bool) (obs, bool) {
	l.attempts++
	section, ok := sim.ScenarioSection(a.Target.Provider)
	if !ok || a.StartedAt.IsZero() {
		l.skipped++
		return obs{}, false
	}
	if a.Target.Account != "" {
		l.accounts = true
	}
	p := l.provs[section]
	if p == nil {
		p = newProvider(section)
		l.provs[section] = p
	}
	p.noteModel(a.Target.Model)
	l.seq++
	o := obs{t: a.StartedAt, seq: l.seq, prov: p, lim: snap(a.Limits), ttft: a.TTFT}
	if a.RetryAfter != nil {
		o.retryAfter, o.hasDelay, o.source = *a.RetryAfter, true, a.DelaySource
	}
	switch a.Class {
	case stream.ClassOK:
		o.kind = "ok"
		if last && c.Usage != nil && c.Usage.OutputTokens > 0 {
			if gen := a.Duration - a.TTFT; gen > 0 {
				o.tps = float64(c.Usage.OutputTokens) / gen.Seconds()
			}
		}
	case stream.ClassRateLimit:
		o.kind = sim.FaultRateLimit
		if strings.Contains(strings.ToLower(a.Code), "slow_down") {
			o.kind = sim.FaultSlowDown
		}
	case stream.ClassOverload:
		o.kind = sim.FaultOverload
	case stream.ClassServer:
		o.kind = sim.FaultServerError
		if a.MidStream {
			o.kind = sim.FaultMidStream
		}
	case stream.ClassConnection:
		o.kind = sim.FaultReset
		if a.MidStream {
			o.kind = sim.FaultCut
		}
	case stream.ClassQuota:
		o.kind = "quota:" + sim.FaultSpendCap
		if strings.Contains(a.QuotaID, "PerDay") || dayCode(a.Code) || dayUsedUp(a.Limits) {
			o.kind = "quota:" + sim.FaultDailyQuota
		}
		o.code = plainCode(a.Code)
		switch {
		case a.RetryAfter != nil && *a.RetryAfter > 0:
			o.reset = a.StartedAt.Add(*a.RetryAfter)
		case !c.CooldownUntil.IsZero():
			o.reset = c.CooldownUntil
		case !c.RetryAt.IsZero():
			o.reset = c.RetryAt
		}
	default:
		// caller, timeout, cancelled: not the provider's behaviour.
		l.ignored++
	}
	return o, true
}

func dayCode(code string) bool {
	c := strings.ToLower(code)
	return c == "rpd" || c == "tpd" || strings.Contains(c, "per_day") || strings.Contains(c, "daily")
}

// dayUsedUp reports whether a response's headers show a per-day window
// used up (a per-day requests or tokens window): its quota error is that
// limit's.
func dayUsedUp(l *stream.Limits) bool {
	if l == nil {
		return false
	}
	for _, w := range []*stream.Window{l.Requests, l.Tokens} {
		if w != nil && w.PerDay && w.HasRemaining && w.Remaining <= 0 {
			return true
		}
	}
	return false
}

// plainCode keeps a provider's error code when it is a plain word (letters
// and underscores, as the documented codes are), so that no id or name a
// code might carry is copied.
func plainCode(code string) string {
	if len(code) == 0 || len(code) > 48 {
		return ""
	}
	for _, r := range code {
		if (r < 'a' || r > 'z') && r != '_' {
			return ""
		}
	}
	return code
}

// apply learns from one attempt, in time order.
func (l *Learner) apply(o obs) {
	if l.first.IsZero() || o.t.Before(l.first) {
		l.first = o.t
	}
	if o.t.After(l.last) {
		l.last = o.t
	}
	o.prov.add(o)
	if l.trace {
		o.prov.record(o)
	}
}

// finish releases every queued attempt and closes the open episodes.
func (l *Learner) finish() {
	for l.queue.Len() > 0 {
		l.apply(l.queue.pop())
	}
	for _, p := range l.provs {
		p.finish()
	}
}

// providers returns the learnt providers by name.
func (l *Learner) providers() []*provider {
	out := make([]*provider, 0, len(l.provs))
	for _, p := range l.provs {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// attemptQueue orders attempts by start time, then arrival: a min-heap of
// values (no boxing: one allocation per growth, not per attempt).
type attemptQueue []obs

func (q attemptQueue) Len() int { return len(q) }

func (q attemptQueue) less(i, j int) bool {
	if q[i].t.Equal(q[j].t) {
		return q[i].seq < q[j].seq
	}
	return q[i].t.Before(q[j].t)
}

func (q *attemptQueue) push(o obs) {
	*q = append(*q, o)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *attemptQueue) pop() obs {
	h := *q
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h[n] = obs{}
	h = h[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && h.less(l, m) {
			m = l
		}
		if r < n && h.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// ErrNoAttempts is returned by Write when no attempt could be learnt.
var ErrNoAttempts = fmt.Errorf("no attempt on a provider the simulator has")
