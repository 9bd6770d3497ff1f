package fleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// Pacing is a retry.Pacing shared through Redis. Each process keeps its own
// retry.Pacer (Local: its concurrency slots, slow start, token holds, learned
// rates), and on top of it every process of the fleet shares, per target
// and account, in one Redis hash updated atomically by Lua scripts on
// Redis's clock:
//
//   - one request bucket (GCRA) at the rate the providers' limit headers
//     tell any process, so that together they stay at the limit;
//   - one hold: a server's delay (retry-after and kin) one process hears
//     holds every process on that target until it has passed;
//   - a rate_limit answer without a delay empties the shared bucket.
//
// A request waits for the later of its local and its shared place. While
// Redis is away only the local pacer acts.
type Pacing struct {
	f     *Fleet
	local *retry.Pacer
	scope func(stream.Target) string

	mu    sync.Mutex
	holds map[string]sharedHold // by key: the shared hold last read, for State

	gateWait func(s *slot) // called each time a request waits at the start gate (tests)
}

type sharedHold struct {
	until time.Time // local clock
	src   stream.DelaySource
	asked time.Duration
}

var _ retry.Pacing = (*Pacing)(nil)

// NewPacing returns f's shared pacing over local (nil: retry.NewPacer()).
// scope names a target's shared state (its account and model: the engine's
// Doer.Scope for the account, so simulated targets carry their simulator's
// instance and never share with real ones); nil: the target alone.
func NewPacing(f *Fleet, local *retry.Pacer, scope func(stream.Target) string) *Pacing {
	if local == nil {
		local = retry.NewPacer()
	}
	if scope == nil {
		scope = func(t stream.Target) string { return t.String() }
	}
	return &Pacing{f: f, local: local, scope: scope, holds: map[string]sharedHold{}}
}

// Local is the process's own pacer under the shared state.
func (p *Pacing) Local() *retry.Pacer { return p.local }

func (p *Pacing) key(t stream.Target) string { return p.f.key("pace:" + p.scope(t)) }

// Acquire takes a local concurrency slot (the fleet shares the rate, not the
// slots), passes the fleet's start gate, and wraps the slot with the shared
// bucket.
//
// The start gate: until some process's answer from a target is in the
// shared state (its rate, or that it has none), the fleet sends that
// target one request at a time (a request whose answer takes longer than
// Options.StartHold lets the next one through), so that processes starting
// together do not burst before anyone knows the limit.
func (p *Pacing) Acquire(ctx context.Context, t stream.Target) (*retry.Permit, error) {
	pm, err := p.local.Acquire(ctx, t)
	if err != nil {
		return nil, err
	}
	s := &slot{p: p, t: t, inner: pm}
	if err := p.gate(ctx, s); err != nil {
		pm.Cancel(p.f.opt.Now())
		return nil, err
	}
	return retry.NewPermit(s), nil
}

// gateScript takes a target's start gate. KEYS[1]: the hash. ARGV[1]: how
// long the gate is held at most (ms). Returns {0} when the gate is open (a
// first answer is in), {1} when this request took it, {2, ms} when another
// holds it for at most ms more.
var gateScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local h = redis.call('HMGET', KEYS[1], 'rate', 'opened', 'gate')
if (tonumber(h[1]) or 0) > 0 or h[2] then return {0, '0'} end
local gate = tonumber(h[3]) or 0
if gate > now then return {2, tostring(gate - now)} end
redis.call('HSET', KEYS[1], 'gate', tostring(now + tonumber(ARGV[1])))
redis.call('PEXPIRE', KEYS[1], 3600000)
return {1, '0'}
`)

// openScript opens or frees a start gate. KEYS[1]: the hash. ARGV: "1" when
// an answer came (open for good; else only free the gate for the next
// request), the rate it told (requests/s, 0: none), the burst. A known
// rate starts the bucket with the gate's request charged to it.
var openScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
redis.call('HDEL', KEYS[1], 'gate')
if ARGV[1] == '1' then
  redis.call('HSET', KEYS[1], 'opened', '1')
  local rate = tonumber(ARGV[2]) or 0
  if rate > 0 and not tonumber(redis.call('HGET', KEYS[1], 'rate')) then
    redis.call('HSET', KEYS[1], 'rate', ARGV[2], 'burst', ARGV[3])
    local tat = tonumber(redis.call('HGET', KEYS[1], 'tat')) or 0
    local at = now + 1000 / rate
    if at > tat then redis.call('HSET', KEYS[1], 'tat', tostring(at)) end
  end
end
redis.call('PEXPIRE', KEYS[1], 3600000)
return 1
`)

// gate waits at t's start gate (see Acquire) until it is open or s holds
// it. Redis away or failing: no gate.
func (p *Pacing) gate(ctx context.Context, s *slot) error {
	if st := p.local.State(s.t); st.Rate > 0 && st.Known && !st.RateLearned {
		return nil // this process knows the rate: the bucket paces it
	}
	k := p.key(s.t)
	for p.f.Up() {
		var res []any
		err := p.f.call(ctx, func(cctx context.Context) (err error) {
			res, err = gateScript.Run(cctx, p.f.rdb, []string{k}, p.f.opt.StartHold.Milliseconds()).Slice()
			return err
		})
		if p.f.failed(ctx, err) {
			p.badKey(k, err)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return nil
		}
		if len(res) != 2 {
			return nil
		}
		switch res[0] {
		case int64(0):
			return nil
		case int64(1):
			s.gated = true
			return nil
		}
		if p.gateWait != nil {
			p.gateWait(s)
		}
		wait := min(p.f.opt.StartPoll, time.Duration(num(res[1])*float64(time.Millisecond))+time.Millisecond)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// open opens (answered) or frees the start gate s holds.
func (s *slot) open(answered bool) {
	p := s.p
	if !p.f.Up() {
		return
	}
	var rate, burst float64
	if st := p.local.State(s.t); answered && st.Rate > 0 && st.Known && !st.RateLearned {
		rate = st.Rate * (1 - p.f.opt.RateMargin)
		burst = burstOf(st.Rate, 0)
	}
	a := "0"
	if answered {
		a = "1"
	}
	k := p.key(s.t)
	err := p.f.call(context.Background(), func(ctx context.Context) error {
		return openScript.Run(ctx, p.f.rdb, []string{k}, a, strconv.FormatFloat(rate, 'f', -1, 64), strconv.FormatFloat(burst, 'f', -1, 64)).Err()
	})
	if p.f.failed(context.Background(), err) {
		p.badKey(k, err)
	}
}

// badKey warns once about a pacing key Redis answers with an error (a key
// of another type, say).
func (p *Pacing) badKey(k string, err error) {
	var re redis.Error
	if errors.As(err, &re) && !isConnError(err) {
		p.f.warnKey(k, "gives an error ("+re.Error()+")")
	}
}

// State is the local pacer's state, with the shared hold last seen when it
// is later. It never waits on Redis.
func (p *Pacing) State(t stream.Target) retry.PaceState {
	st := p.local.State(t)
	p.mu.Lock()
	h, ok := p.holds[p.key(t)]
	p.mu.Unlock()
	if ok && h.until.After(st.HoldUntil) && h.until.After(p.f.opt.Now()) {
		st.HoldUntil, st.HoldSource, st.HoldAsked = h.until, h.src, h.asked
	}
	return st
}

func (p *Pacing) noteHold(k string, h sharedHold) {
	p.mu.Lock()
	if h.until.IsZero() {
		delete(p.holds, k)
	} else {
		p.holds[k] = h
	}
	p.mu.Unlock()
}

// burstOf is the shared bucket's burst at rate: one second's worth, within
// the window's limit, less one request left to the server (the local
// pacer's cushion) when the burst allows it.
func burstOf(rate float64, limit int64) float64 {
	b := math.Max(1, math.Floor(rate))
	if limit > 0 {
		b = math.Min(b, float64(limit))
	}
	if b > 1 {
		b--
	}
	return b
}

// reserveScript takes a request's place in the shared bucket. KEYS[1]: the
// hash. ARGV: rate (requests/s; 0: the fleet's, from the hash), burst.
// Returns {delay ms, why (0 none, 1 hold, 2 bucket), hold until ms, hold
// source, hold asked ms, reserved (1/0), rate}.
var reserveScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local h = redis.call('HMGET', KEYS[1], 'tat', 'hold', 'rate', 'burst', 'src', 'asked')
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
if rate > 0 then
  redis.call('HSET', KEYS[1], 'rate', ARGV[1], 'burst', ARGV[2])
else
  rate = tonumber(h[3]) or 0
  burst = tonumber(h[4]) or 1
end
local ready = now
local why = 0
local hold = tonumber(h[2]) or 0
if hold > ready then ready = hold; why = 1 end
local reserved = 0
if rate > 0 then
  local T = 1000 / rate
  local tat = tonumber(h[1]) or 0
  local r = tat - (burst - 1) * T
  if r > ready then ready = r; why = 2 end
  local base = tat
  if ready > base then base = ready end
  redis.call('HSET', KEYS[1], 'tat', tostring(base + T))
  reserved = 1
end
redis.call('PEXPIRE', KEYS[1], 3600000)
return {tostring(ready - now), why, tostring(hold), string.sub(h[5] or '', 1, 32), tostring(tonumber(h[6]) or 0), reserved, tostring(rate)}
`)

// cancelScript gives back a place not used. KEYS[1]: the hash.
var cancelScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local h = redis.call('HMGET', KEYS[1], 'tat', 'rate')
local tat, rate = tonumber(h[1]), tonumber(h[2])
if tat and rate and rate > 0 and tat > now then
  redis.call('HSET', KEYS[1], 'tat', tostring(tat - 1000 / rate))
end
return 1
`)

// feedScript feeds an answer. KEYS[1]: the hash. ARGV: kind ("hold": a
// server's delay of ARGV[2] ms from source ARGV[3]; "empty": a rate_limit
// answer without one).
var feedScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
if ARGV[1] == 'hold' then
  local untilms = now + tonumber(ARGV[2])
  local hold = tonumber(redis.call('HGET', KEYS[1], 'hold')) or 0
  if untilms > hold then
    redis.call('HSET', KEYS[1], 'hold', tostring(untilms), 'src', ARGV[3], 'asked', ARGV[2])
    local h = redis.call('HMGET', KEYS[1], 'tat', 'rate', 'burst')
    local tat, rate, burst = tonumber(h[1]) or 0, tonumber(h[2]) or 0, tonumber(h[3]) or 1
    if rate > 0 then
      local at = untilms + (burst - 1) * 1000 / rate
      if at > tat then redis.call('HSET', KEYS[1], 'tat', tostring(at)) end
    end
  end
elseif ARGV[1] == 'empty' then
  local h = redis.call('HMGET', KEYS[1], 'tat', 'rate', 'burst')
  local tat, rate, burst = tonumber(h[1]) or 0, tonumber(h[2]) or 0, tonumber(h[3]) or 1
  if rate > 0 then
    local at = now + burst * 1000 / rate
    if at > tat then redis.call('HSET', KEYS[1], 'tat', tostring(at)) end
  end
end
redis.call('PEXPIRE', KEYS[1], 3600000)
return tostring(now)
`)

// slot is a request's place: the local permit and the shared bucket's.
type slot struct {
	p        *Pacing
	t        stream.Target
	inner    *retry.Permit
	mu       sync.Mutex
	reserved bool // holds a place in the shared bucket
	gated    bool // holds the start gate
	closed   bool
}

// Reserve takes the local place, then the shared one, and returns the later
// wait. Redis away or slow: the local wait alone.
func (s *slot) Reserve(now time.Time) retry.Pace {
	pc := s.inner.Reserve(now)
	p := s.p
	if !p.f.Up() {
		return pc
	}
	st := p.local.State(s.t)
	var rate, burst float64
	if st.Rate > 0 && st.Known && !st.RateLearned {
		rate = st.Rate * (1 - p.f.opt.RateMargin)
		burst = burstOf(st.Rate, 0)
	}
	k := p.key(s.t)
	var res []any
	err := p.f.call(context.Background(), func(ctx context.Context) (err error) {
		res, err = reserveScript.Run(ctx, p.f.rdb, []string{k}, strconv.FormatFloat(rate, 'f', -1, 64), strconv.FormatFloat(burst, 'f', -1, 64)).Slice()
		return err
	})
	if p.f.failed(context.Background(), err) {
		p.badKey(k, err)
		return pc
	}
	if len(res) < 7 {
		return pc
	}
	delayMs := num(res[0])
	why, _ := res[1].(int64)
	holdMs := num(res[2])
	src := stream.DelaySource(str(res[3]))
	asked := time.Duration(num(res[4]) * float64(time.Millisecond))
	s.mu.Lock()
	s.reserved = res[5] == int64(1)
	s.mu.Unlock()
	if holdMs > 0 {
		redisHoldLocal := p.f.localTime(time.UnixMilli(int64(holdMs)))
		p.noteHold(k, sharedHold{until: redisHoldLocal, src: src, asked: asked})
	}
	d := time.Duration(delayMs * float64(time.Millisecond))
	if d <= pc.Delay {
		return pc
	}
	out := retry.Pace{Delay: d, Source: stream.SourceReset}
	if why == 1 {
		out.Source, out.Asked = src, asked
		out.Reason = fmt.Sprintf("%s asked another process of the fleet to wait %s (%s); every request to it waits", s.t, asked.Round(time.Millisecond), src)
	} else {
		out.Reason = fmt.Sprintf("the fleet shares %s's %.3g requests/s; next fits in %s", s.t, num(res[6]), d.Round(time.Millisecond))
	}
	return out
}

// Cancel gives back both places.
func (s *slot) Cancel(now time.Time) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	reserved := s.reserved
	s.mu.Unlock()
	s.inner.Cancel(now)
	if s.gated {
		s.open(false)
	}
	if !reserved || !s.p.f.Up() {
		return
	}
	err := s.p.f.call(context.Background(), func(ctx context.Context) error {
		return cancelScript.Run(ctx, s.p.f.rdb, []string{s.p.key(s.t)}).Err()
	})
	s.p.f.failed(context.Background(), err)
}

// Done feeds the local pacer and the shared state with the answer.
func (s *slot) Done(r *stream.Result, now time.Time) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	s.inner.Done(r, now)
	if s.gated {
		s.open(r != nil && r.Status > 0)
	}
	if r == nil || r.Err == nil || !s.p.f.Up() {
		return
	}
	e := r.Err
	var args []any
	switch {
	case e.Delay > 0 && serverSource(e.DelaySource) &&
		e.Class != stream.ClassQuota && e.Class != stream.ClassCaller:
		args = []any{"hold", strconv.FormatInt(e.Delay.Milliseconds(), 10), string(e.DelaySource)}
	case e.Class == stream.ClassRateLimit:
		args = []any{"empty"}
	default:
		return
	}
	k := s.p.key(s.t)
	err := s.p.f.call(context.Background(), func(ctx context.Context) error {
		return feedScript.Run(ctx, s.p.f.rdb, []string{k}, args...).Err()
	})
	if s.p.f.failed(context.Background(), err) {
		s.p.badKey(k, err)
	} else if args[0] == "hold" {
		s.p.noteHold(k, sharedHold{until: now.Add(e.Delay), src: e.DelaySource, asked: e.Delay})
	}
}

func num(v any) float64 {
	switch x := v.(type) {
	case string:
		f, _ := strconv.ParseFloat(x, 64)
		return f
	case int64:
		return float64(x)
	}
	return 0
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// serverSource reports whether s is a server's own delay (as retry's).
func serverSource(s stream.DelaySource) bool {
	switch s {
	case stream.SourceRetryAfterMs, stream.SourceRetryAfter, stream.SourceRetryInfo, stream.SourceMessage:
		return true
	}
	return false
}

// AccountScope names a target's shared pacing state by the Doer's account
// scope and the target (the scope carries a simulator's instance).
func AccountScope(d retry.Doer) func(stream.Target) string {
	return func(t stream.Target) string { return d.Scope(t, stream.ScopeAccount) + "|" + t.String() }
}

// Shared returns bench.Config.Shared's function on f: the shared pacing over
// the run's own pacer, and shared cooldowns.
func Shared(f *Fleet) func(d retry.Doer, local *retry.Pacer) (retry.Pacing, retry.Cooldowns) {
	return func(d retry.Doer, local *retry.Pacer) (retry.Pacing, retry.Cooldowns) {
		return NewPacing(f, local, AccountScope(d)), NewCooldowns(f, nil)
	}
}

// Progress passes the answer's first byte on to the local pacer's slot
// (slow start opens a slot on progress).
func (s *slot) Progress(now time.Time, lim *stream.Limits) { s.inner.Progress(now, lim) }
