package fleet

import (
	"context"
	"encoding/json"
	"errors"
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
			ctx, cancel := f.ctx(context.Background())
			err = f.rdb.XAdd(ctx, &redis.XAddArgs{
				Stream: f.key("events"),
				MaxLen: f.opt.StreamLen,
				Approx: true,
				Values: []any{"e", b},
			}).Err()
			cancel()
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

// Reader follows the fleet's stream from the moment it is made.
type Reader struct {
	f    *Fleet
	last string
}

// NewReader returns a Reader of the events published from now on.
func (f *Fleet) NewReader() *Reader { return &Reader{f: f, last: "$"} }

// Next waits up to wait for new events and returns them, oldest first (none
// when wait passed). While Redis is away it waits the same and returns none.
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
		ms := r.f.redisNow().UnixMilli()
		r.last = strconv.FormatInt(ms, 10) + "-0"
	}
	cctx, cancel := context.WithTimeout(ctx, wait+r.f.opt.Timeout)
	defer cancel()
	res, err := r.f.rdb.XRead(cctx, &redis.XReadArgs{Streams: []string{r.f.key("events"), r.last}, Count: 256, Block: wait}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r.f.failed(context.Background(), err)
		return nil, nil
	}
	var out []Event
	for _, s := range res {
		for _, m := range s.Messages {
			r.last = m.ID
			v, _ := m.Values["e"].(string)
			var ev Event
			if json.Unmarshal([]byte(v), &ev) != nil {
				continue
			}
			ev.ID = m.ID
			ev.At = r.f.localTime(idTime(m.ID))
			ev.Mine = ev.Proc == r.f.id
			out = append(out, ev)
		}
	}
	return out, nil
}

// idTime is when Redis took a stream entry (its id's milliseconds).
func idTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return time.UnixMilli(n)
}
