package learn

import (
	"slices"
	"sort"
	"time"

	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// The limit windows a snapshot holds, in order.
const (
	wRequests = iota
	wTokens
	wInput
	wOutput
)

// winLearn is what one limit window's headers showed over the session.
type winLearn struct {
	seen         bool
	limit        int64 // the last limit shown
	lo, hi       int64 // the smallest and largest shown
	perDay       bool
	bucketLike   int // resets as a bucket refilling evenly would show
	windowLike   int // resets that a refilling bucket would not show
	snapshots    int
	lowRemaining bool // the last snapshot showed it (nearly) used up
}

// stop is a quota stop: quota errors from start until reset.
type stop struct {
	start, last, reset time.Time
	kind, code         string
	n                  int
}

// provider is what is learnt of one simulated provider.
type provider struct {
	name     string
	attempts int
	counts   map[string]int // by kind
	win      [4]winLearn
	headers  bool // some response carried limit headers

	limitCaused int // 429s the limits explain (the last headers showed them used up)

	recent   []minuteEntry // attempts in the last minute
	recentOK int           // of which answered
	peakRPM  int
	at429    []int // answered requests in the minute before each 429 (no headers)

	det    map[string]*detector
	delays map[string]*hist
	named  map[string]int // failures that named a delay, by kind
	srcs   map[stream.DelaySource]int

	stops        []stop
	droppedStops int

	ttft, tps hist

	trace        []traceRec // Learner.Trace: the outcomes in order
	traceDropped int
	codes        []string // the quota codes the trace names

	models []string // the models the attempts named, first seen first (at most maxModels)
}

// maxModels caps the models one provider's section names.
const maxModels = 64

// noteModel keeps a model name an attempt used, once.
func (p *provider) noteModel(m string) {
	if m == "" || len(p.models) >= maxModels || slices.Contains(p.models, m) {
		return
	}
	p.models = append(p.models, m)
}

func newProvider(name string) *provider {
	p := &provider{name: name, counts: map[string]int{}, det: map[string]*detector{}, delays: map[string]*hist{},
		named: map[string]int{}, srcs: map[stream.DelaySource]int{}}
	for _, k := range faultKinds {
		p.det[k] = &detector{}
	}
	return p
}

func (p *provider) add(o obs) {
	if o.kind == "" {
		return
	}
	p.attempts++
	p.counts[o.kind]++
	p.countMinute(o.t, o.kind == "ok")

	// A 429 the limits explain: the previous response showed a window
	// used up. Those come back from the limits themselves on replay.
	limitCaused := false
	if o.kind == sim.FaultRateLimit {
		for i := range p.win {
			if p.win[i].lowRemaining {
				limitCaused = true
			}
		}
		if !p.headers && len(p.at429) < maxAt429 {
			p.at429 = append(p.at429, p.recentOK)
		}
		if limitCaused {
			p.limitCaused++
		}
	}
	if o.lim != nil {
		// A 429's own headers show the refusal (nothing left while it
		// holds), not the level that led to it.
		p.learnLimits(o.lim, o.kind != sim.FaultRateLimit && o.kind != sim.FaultSlowDown)
	}
	for k, d := range p.det {
		d.add(o.t, o.kind == k && !limitCaused)
	}
	if isFault(o.kind) && !limitCaused {
		if o.hasDelay {
			p.named[o.kind]++
			h := p.delays[o.kind]
			if h == nil {
				h = &hist{}
				p.delays[o.kind] = h
			}
			h.add(o.retryAfter.Seconds())
			p.srcs[o.source]++
		}
	}
	switch {
	case o.kind == "ok":
		if o.ttft > 0 {
			p.ttft.add(o.ttft.Seconds())
		}
		if o.tps > 0 {
			p.tps.add(o.tps)
		}
	case len(o.kind) > 6 && o.kind[:6] == "quota:":
		p.addStop(o)
	}
}

func isFault(kind string) bool {
	for _, k := range faultKinds {
		if k == kind {
			return true
		}
	}
	return false
}

// minuteEntry is one attempt in the last minute.
type minuteEntry struct {
	t  time.Time
	ok bool
}

// countMinute keeps the attempts of the last minute (how many were
// answered) and the peak.
func (p *provider) countMinute(t time.Time, ok bool) {
	cut := t.Add(-time.Minute)
	i := 0
	for i < len(p.recent) && (!p.recent[i].t.After(cut) || len(p.recent)-i >= maxRecent) {
		if p.recent[i].ok {
			p.recentOK--
		}
		i++
	}
	if i > 0 {
		p.recent = append(p.recent[:0], p.recent[i:]...)
	}
	p.recent = append(p.recent, minuteEntry{t, ok})
	if ok {
		p.recentOK++
	}
	p.peakRPM = max(p.peakRPM, len(p.recent))
}

func (p *provider) learnLimits(s *snapshot, level bool) {
	for i, w := range s.w {
		if !w.ok || !w.hasLimit || w.limit <= 0 {
			continue
		}
		p.headers = true
		l := &p.win[i]
		if !l.seen {
			l.lo, l.hi = w.limit, w.limit
		}
		l.seen, l.limit, l.perDay = true, w.limit, w.perDay
		l.lo, l.hi = min(l.lo, w.limit), max(l.hi, w.limit)
		l.snapshots++
		if w.hasRem && level {
			l.lowRemaining = w.remaining <= max(0, w.limit/100)
			if i != wRequests {
				l.lowRemaining = w.remaining <= 0
			}
		}
		// How it resets: a bucket refilling evenly is full again after
		// (limit-remaining)/limit of its period.
		if w.hasRem && w.hasReset && w.remaining < w.limit && w.remaining >= 0 {
			period := time.Minute
			if w.perDay {
				period = 24 * time.Hour
			}
			want := time.Duration(float64(period) * float64(w.limit-w.remaining) / float64(w.limit))
			if diff := w.resetIn - want; diff.Abs() <= max(1500*time.Millisecond, want/4) {
				l.bucketLike++
			} else {
				l.windowLike++
			}
		}
	}
}

// addStop extends the last quota stop or starts another.
func (p *provider) addStop(o obs) {
	kind := o.kind[6:]
	if n := len(p.stops); n > 0 {
		s := &p.stops[n-1]
		if s.kind == kind && (s.reset.IsZero() || o.t.Before(s.reset)) {
			s.last, s.n = o.t, s.n+1
			if o.reset.After(s.reset) {
				s.reset = o.reset
			}
			return
		}
	}
	if len(p.stops) >= maxStops {
		p.droppedStops++
		return
	}
	p.stops = append(p.stops, stop{start: o.t, last: o.t, reset: o.reset, kind: kind, code: o.code, n: 1})
}

func (p *provider) finish() {
	for _, d := range p.det {
		d.finish()
	}
}

// estimateRPM guesses a requests-per-minute limit from where 429s began on
// a provider without limit headers: the requests answered in the minute
// before each 429, when they agree (the 10th percentile is at least 60% of the median).
// 0: no estimate (too few 429s, or they came at any rate: faults).
func (p *provider) estimateRPM() int {
	if p.headers || len(p.at429) < 5 {
		return 0
	}
	c := append([]int(nil), p.at429...)
	sort.Ints(c)
	lo, med := c[len(c)/10], c[len(c)/2]
	if med == 0 || float64(lo) < 0.6*float64(med) {
		return 0
	}
	return lo
}
