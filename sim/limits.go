package sim

import (
	"math"
	"time"
)

// limiter is one rate limit: a budget of units (requests or tokens) over a
// period. All methods take the current time explicitly, so the arithmetic
// runs on any clock.
type limiter interface {
	// Limit is the configured budget per period.
	Limit() int64
	// Remaining is what can still be taken at now (never below 0).
	Remaining(now time.Time) float64
	// Wait is how long until n units fit (0: they fit now).
	Wait(now time.Time, n float64) time.Duration
	// Take spends n units (a negative n gives them back). The level may go
	// below zero: a request admitted on an estimate can overspend.
	Take(now time.Time, n float64)
	// ResetIn is how long until the limit is back to its initial state.
	ResetIn(now time.Time) time.Duration
}

// bucket is a continuously refilling token bucket (Anthropic's documented
// algorithm): limit units per period, refilled evenly at limit/period, and
// holding at most capacity units (the burst; the limit unless set), starting
// full.
type bucket struct {
	limit    float64 // per period: what the headers show, and the refill
	capacity float64 // the most it holds: the burst
	period   time.Duration
	level    float64
	last     time.Time
	started  bool
}

func newBucket(limit int64, period time.Duration) *bucket {
	return newBurstBucket(limit, limit, period)
}

// newBurstBucket is a bucket refilled at limit per period that holds at most
// burst units (60 RPM with burst 1 is one request a second, never two at
// once). A burst <= 0 or above the limit is the limit.
func newBurstBucket(limit, burst int64, period time.Duration) *bucket {
	if burst <= 0 || burst > limit {
		burst = limit
	}
	return &bucket{limit: float64(limit), capacity: float64(burst), period: period, level: float64(burst)}
}

func (b *bucket) rate() float64 { return b.limit / b.period.Seconds() } // units per second

func (b *bucket) refill(now time.Time) {
	if !b.started {
		b.started, b.last = true, now
		return
	}
	if now.After(b.last) {
		b.level = math.Min(b.capacity, b.level+now.Sub(b.last).Seconds()*b.rate())
		b.last = now
	}
}

func (b *bucket) Limit() int64 { return int64(b.limit) }

func (b *bucket) Remaining(now time.Time) float64 {
	b.refill(now)
	return math.Max(0, b.level)
}

func (b *bucket) Wait(now time.Time, n float64) time.Duration {
	b.refill(now)
	if b.level >= n {
		return 0
	}
	if n > b.capacity {
		n = b.capacity
	}
	return secondsToDuration((n - b.level) / b.rate())
}

func (b *bucket) Take(now time.Time, n float64) {
	b.refill(now)
	b.level = math.Min(b.capacity, b.level-n)
}

func (b *bucket) ResetIn(now time.Time) time.Duration {
	b.refill(now)
	if b.level >= b.capacity {
		return 0
	}
	return secondsToDuration((b.capacity - b.level) / b.rate())
}

// window is a fixed window: limit units per period, the window opening at
// the first use after the previous one closed, and everything coming back
// at its end.
type window struct {
	limit  float64
	period time.Duration
	start  time.Time
	used   float64
	open   bool
	shown  int64 // the limit the headers show when it is not limit (a quantized window)
}

func newWindow(limit int64, period time.Duration) *window {
	return &window{limit: float64(limit), period: period}
}

// newQuantizedWindow enforces limit per period as burst per the matching
// share of the period (OpenAI: "60,000 requests/minute may be enforced as
// 1,000 requests/second"); Limit still reports limit. A burst <= 0 or above
// the limit is a plain window.
func newQuantizedWindow(limit, burst int64, period time.Duration) *window {
	if burst <= 0 || burst >= limit {
		return newWindow(limit, period)
	}
	sub := time.Duration(float64(period) * float64(burst) / float64(limit))
	return &window{limit: float64(burst), period: sub, shown: limit}
}

func (w *window) roll(now time.Time) {
	if w.open && !now.Before(w.start.Add(w.period)) {
		w.open, w.used = false, 0
	}
}

func (w *window) Limit() int64 {
	if w.shown > 0 {
		return w.shown
	}
	return int64(w.limit)
}

func (w *window) Remaining(now time.Time) float64 {
	w.roll(now)
	return math.Max(0, w.limit-w.used)
}

func (w *window) Wait(now time.Time, n float64) time.Duration {
	w.roll(now)
	if w.used+n <= w.limit {
		return 0
	}
	return w.ResetIn(now)
}

func (w *window) Take(now time.Time, n float64) {
	w.roll(now)
	if !w.open {
		w.open, w.start = true, now
	}
	w.used = math.Max(0, w.used+n)
}

func (w *window) ResetIn(now time.Time) time.Duration {
	w.roll(now)
	if !w.open {
		return 0
	}
	return w.start.Add(w.period).Sub(now)
}

// daily is a per-day counter that resets at midnight in loc (Gemini resets
// its per-day quotas at midnight Pacific time).
type daily struct {
	limit float64
	loc   *time.Location
	day   time.Time // midnight starting the counted day
	used  float64
}

func newDaily(limit int64, loc *time.Location) *daily {
	if loc == nil {
		loc = time.UTC
	}
	return &daily{limit: float64(limit), loc: loc}
}

func midnight(t time.Time, loc *time.Location) time.Time {
	t = t.In(loc)
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
}

func (d *daily) roll(now time.Time) {
	if m := midnight(now, d.loc); !m.Equal(d.day) {
		d.day, d.used = m, 0
	}
}

func (d *daily) Limit() int64 { return int64(d.limit) }

func (d *daily) Remaining(now time.Time) float64 {
	d.roll(now)
	return math.Max(0, d.limit-d.used)
}

func (d *daily) Wait(now time.Time, n float64) time.Duration {
	d.roll(now)
	if d.used+n <= d.limit {
		return 0
	}
	return d.ResetIn(now)
}

func (d *daily) Take(now time.Time, n float64) {
	d.roll(now)
	d.used = math.Max(0, d.used+n)
}

// ResetIn is the time to the next midnight in the limiter's zone.
func (d *daily) ResetIn(now time.Time) time.Duration {
	d.roll(now)
	m := d.day
	next := time.Date(m.Year(), m.Month(), m.Day()+1, 0, 0, 0, 0, d.loc)
	return next.Sub(now)
}

func secondsToDuration(s float64) time.Duration {
	if s <= 0 {
		return 0
	}
	if s > float64(math.MaxInt64/int64(time.Second)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Ceil(s * float64(time.Second)))
}
