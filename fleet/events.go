package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// Event is one attempt as the fleet sees it: which process sent what to
// where and how it ended. It never carries a prompt, an answer or a key.
type Event struct {
	Proc     string        `json:"proc"`   // the sending process (Fleet.ID)
	Host     string        `json:"host"`   // its host
	Command  string        `json:"cmd"`    // what it runs: send, proxy, tui, bench
	Target   string        `json:"target"` // provider[:api][@account]/model
	Status   int           `json:"status"` // HTTP status, 0 when none
	Class    stream.Class  `json:"class"`  // ok, rate_limit, quota, ...
	Code     string        `json:"code"`   // the provider's error code, when any
	Duration time.Duration `json:"dur"`    // the attempt's duration
	Tokens   int64         `json:"tokens"` // input+output tokens reported
	At       time.Time     `json:"-"`      // when Redis took it (its stream id), on the local clock
	Mine     bool          `json:"-"`      // published by this process
	ID       string        `json:"-"`      // the stream entry id
	Backlog  bool          `json:"-"`      // published before the Reader was made
}

// publish writes queued events to the stream until Close.
func (f *Fleet) publish() {
	defer f.wg.Done()
	for {
		select {
		case <-f.done:
			return
		case ev := <-f.events:
			if !f.Up() {
				continue // dropped: the fleet view is live, not a log
			}
			b, err := json.Marshal(ev)
			if err != nil {
				continue
			}
			err = f.call(context.Background(), func(ctx context.Context) error {
				return f.rdb.XAdd(ctx, &redis.XAddArgs{
					Stream: f.key("events"),
					MaxLen: f.opt.StreamLen,
					Approx: true,
					Values: []any{"e", b},
				}).Err()
			})
			f.failed(context.Background(), err)
		}
	}
}

// Publish queues ev for the stream; it never waits (a full queue drops it).
func (f *Fleet) Publish(ev Event) {
	ev.Proc, ev.Host, ev.Command = f.id, f.opt.Host, f.opt.Command
	select {
	case f.events <- ev:
	default:
	}
}

// Doer wraps a retry.Doer so that every attempt it sends is published to the
// fleet's stream. Scope is the wrapped Doer's.
type Doer struct {
	Next  retry.Doer
	Fleet *Fleet
}

// Do sends req through Next and publishes the attempt.
func (d Doer) Do(ctx context.Context, req stream.Request, onText func(string)) stream.Result {
	start := d.Fleet.opt.Now()
	r := d.Next.Do(ctx, req, onText)
	ev := Event{Target: req.Target.String(), Status: r.Status, Class: r.Class(), Duration: d.Fleet.opt.Now().Sub(start)}
	if r.Err != nil {
		ev.Code = r.Err.Code
	}
	if r.Usage != nil {
		ev.Tokens = int64(r.Usage.InputTokens + r.Usage.OutputTokens)
	}
	d.Fleet.Publish(ev)
	return r
}

// Scope is Next's.
func (d Doer) Scope(t stream.Target, s stream.Scope) string { return d.Next.Scope(t, s) }

// Reader follows the fleet's stream, from a minute before it is made.
type Reader struct {
	f     *Fleet
	last  string
	start time.Time       // the first read, on Redis's clock: a minute back from it is where reading starts
	edge  string          // the stream's last id at the first read: it and earlier ids are the backlog
	live  map[string]bool // the processes alive at the last read
}

// Backlog is how far back a new Reader starts: the fleet view's window.
const Backlog = time.Minute

// NewReader returns a Reader of the events published from a minute ago
// (Backlog) on, so that a view of the last minute counts right from its
// first read.
func (f *Fleet) NewReader() *Reader { return &Reader{f: f, last: "$"} }

// Live reports which processes (Fleet.ID) were alive at the last read: a
// process says so every Heartbeat, and is taken off when it closes or
// after five missed heartbeats.
func (r *Reader) Live() map[string]bool { return r.live }

// Next waits up to wait for new events and returns them, oldest first (none
// when wait passed). While Redis is away it waits the same and returns none.
// An entry limitscope did not write (too large, not its JSON) is skipped,
// with one warning for the stream.
func (r *Reader) Next(ctx context.Context, wait time.Duration) ([]Event, error) {
	if !r.f.Up() {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
			return nil, nil
		}
	}
	if r.last == "$" {
		// Pin the start to an id, so that events between two reads are
		// never skipped.
		// Redis's own clock marks the backlog's end: an entry added after
		// this read has an id at or past it.
		r.start = r.f.redisNow()
		err := r.f.call(ctx, func(cctx context.Context) (err error) {
			t, err := r.f.rdb.Time(cctx).Result()
			if err != nil {
				return err
			}
			r.start = t
			// The backlog ends at the stream's last entry now, not at a
			// millisecond: an entry added in the same millisecond as this
			// read is backlog too.
			last, err := r.f.rdb.XRevRangeN(cctx, r.f.key("events"), "+", "-", 1).Result()
			if err == nil && len(last) == 1 {
				r.edge = last[0].ID
			}
			return err
		})
		if r.f.failed(ctx, err) {
			return nil, nil
		}
		ms := r.start.Add(-Backlog).UnixMilli()
		r.last = strconv.FormatInt(ms, 10) + "-0"
	}
	r.readLive(ctx)
	var res []redis.XStream
	err := r.f.callFor(ctx, wait+r.f.opt.Timeout, func(cctx context.Context) (err error) {
		res, err = r.f.rdb.XRead(cctx, &redis.XReadArgs{Streams: []string{r.f.key("events"), r.last}, Count: 256, Block: wait}).Result()
		return err
	})
	if errors.Is(err, redis.Nil) {
		r.f.answered()
		return nil, nil
	}
	if isBadReply(err) {
		// Too large or malformed: read the same entries again through a
		// script that leaves out what is too large; a server that sends a
		// bad reply to that too is taken for down.
		return r.bounded(ctx)
	}
	if err != nil {
		return nil, r.readFailed(ctx, err)
	}
	r.f.answered()
	var out []Event
	for _, s := range res {
		for _, m := range s.Messages {
			r.last = m.ID
			v, _ := m.Values["e"].(string)
			if ev, ok := r.decode(m.ID, v, int64(len(v))); ok {
				out = append(out, ev)
			}
		}
	}
	return out, nil
}

// readFailed handles a read's error: the caller's cancellation is
// returned; anything else is Redis away (or, for an error reply, a bad key
// warned about once) and reads as no events.
func (r *Reader) readFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if r.f.failed(context.Background(), err) {
		r.badKey(err)
	}
	return nil
}

func (r *Reader) badKey(err error) {
	var re redis.Error
	if errors.As(err, &re) && !isConnError(err) {
		r.f.warnKey(r.f.key("events"), "gives an error ("+re.Error()+")")
	}
}

// decode reads one entry's event; a bad one is warned about once (for the
// stream) and skipped.
func (r *Reader) decode(id, v string, size int64) (Event, bool) {
	var ev Event
	switch {
	case size > r.f.opt.MaxValue:
		r.f.warnKey(r.f.key("events"), fmt.Sprintf("has an entry of %d bytes, over the limit of %d (this and any later bad entry)", size, r.f.opt.MaxValue))
		return ev, false
	case json.Unmarshal([]byte(v), &ev) != nil || ev.Proc == "":
		r.f.warnKey(r.f.key("events"), "has an entry limitscope did not write (this and any later bad entry)")
		return ev, false
	}
	ev.ID = id
	ev.Backlog = r.edge != "" && !idAfter(id, r.edge)
	ev.At = r.f.localTime(idTime(id))
	ev.Mine = ev.Proc == r.f.id
	return ev, true
}

// rangeScript reads the stream's entries after an id without sending back
// any entry larger than a limit. KEYS[1]: the stream. ARGV: the id (read
// after it), how many, the largest entry. Returns {id, the "e" field ("" when
// none or too large), the entry's size} per entry.
var rangeScript = redis.NewScript(`
local r = redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+', 'COUNT', ARGV[2])
local max = tonumber(ARGV[3])
local out = {}
for i, m in ipairs(r) do
  local e = ''
  local size = 0
  local f = m[2]
  for j = 1, #f - 1, 2 do
    size = size + #f[j] + #f[j + 1]
    if f[j] == 'e' then e = f[j + 1] end
  end
  if size > max then e = '' end
  out[i] = {m[1], e, size}
end
return out
`)

// bounded reads the next entries through rangeScript.
func (r *Reader) bounded(ctx context.Context) ([]Event, error) {
	var res []any
	err := r.f.call(ctx, func(cctx context.Context) (err error) {
		res, err = rangeScript.Run(cctx, r.f.rdb, []string{r.f.key("events")}, r.last, 256, r.f.opt.MaxValue).Slice()
		return err
	})
	if err != nil {
		return nil, r.readFailed(ctx, err)
	}
	r.f.answered()
	var out []Event
	for _, x := range res {
		m, ok := x.([]any)
		if !ok || len(m) != 3 {
			continue
		}
		id, _ := m[0].(string)
		v, _ := m[1].(string)
		size, _ := m[2].(int64)
		if id == "" {
			continue
		}
		r.last = id
		if ev, ok := r.decode(id, v, size); ok {
			out = append(out, ev)
		}
	}
	return out, nil
}

// liveScript records a heartbeat. KEYS[1]: the processes' sorted set.
// ARGV: this process, how long a heartbeat lasts (ms), "1" to leave.
var liveScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[3] == '1' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], now, ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], 3600000)
return 1
`)

// liveListScript lists the processes alive. KEYS[1]: the sorted set. ARGV:
// how long a heartbeat lasts (ms), the longest id.
var liveListScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], now - tonumber(ARGV[1]), '+inf', 'LIMIT', 0, 1000)
local out = {}
for _, id in ipairs(ids) do
  if #id <= tonumber(ARGV[2]) then out[#out + 1] = id end
end
return out
`)

// lifetime is how long one heartbeat keeps a process counted live.
func (f *Fleet) lifetime() int64 { return (5 * f.opt.Heartbeat).Milliseconds() }

// heartbeat says every Heartbeat that this process is alive, and that it
// leaves at Close.
func (f *Fleet) heartbeat() {
	defer f.wg.Done()
	t := time.NewTicker(f.opt.Heartbeat)
	defer t.Stop()
	beat := f.beat
	for {
		select {
		case <-f.done:
			beat("1")
			return
		case <-t.C:
			beat("0")
		}
	}
}

// beat records this process alive ("0") or leaving ("1").
func (f *Fleet) beat(leave string) {
	if !f.Up() {
		return
	}
	err := f.call(context.Background(), func(ctx context.Context) error {
		return liveScript.Run(ctx, f.rdb, []string{f.key("procs")}, f.id, f.lifetime(), leave).Err()
	})
	f.failed(context.Background(), err)
}

// readLive reads the processes alive (kept when Redis does not answer).
func (r *Reader) readLive(ctx context.Context) {
	var res []any
	err := r.f.call(ctx, func(cctx context.Context) (err error) {
		res, err = liveListScript.Run(cctx, r.f.rdb, []string{r.f.key("procs")}, r.f.lifetime(), 256).Slice()
		return err
	})
	if r.f.failed(ctx, err) {
		return
	}
	live := make(map[string]bool, len(res))
	for _, x := range res {
		if id, ok := x.(string); ok {
			live[id] = true
		}
	}
	live[r.f.id] = true
	r.live = live
}

// idTime is when Redis took a stream entry (its id's milliseconds).
// idAfter reports whether stream id a comes after b ("MS-SEQ" each).
func idAfter(a, b string) bool {
	ams, aseq, _ := strings.Cut(a, "-")
	bms, bseq, _ := strings.Cut(b, "-")
	am, _ := strconv.ParseUint(ams, 10, 64)
	bm, _ := strconv.ParseUint(bms, 10, 64)
	if am != bm {
		return am > bm
	}
	as, _ := strconv.ParseUint(aseq, 10, 64)
	bs, _ := strconv.ParseUint(bseq, 10, 64)
	return as > bs
}

func idTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return time.UnixMilli(n)
}
