package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limitscope/limitscope/retry"
)

// Cooldowns are quota stops shared through Redis: a stop any process sets
// blocks its scope in every process from that moment, one with a known
// reset expires at it (a Redis expiry, so on Redis's clock), one that needs
// a person stays until any process clears it.
//
// Every Set and Clear also goes to Local (the process's own cooldowns: the
// history file, or memory), which answers while Redis is away. The stops
// set or cleared meanwhile are pushed to Redis when it is back.
type Cooldowns struct {
	f     *Fleet
	local retry.Cooldowns

	mu    sync.Mutex
	dirty map[string]bool // scope => set (true) or cleared (false) while Redis was away
}

var _ retry.ContextCooldowns = (*Cooldowns)(nil)

// NewCooldowns returns f's shared cooldowns over local (nil: in memory).
// The stops local already holds are shared at once (unless Redis has its
// own for that scope).
func NewCooldowns(f *Fleet, local retry.Cooldowns) *Cooldowns {
	if local == nil {
		local = retry.NewMemoryCooldowns()
	}
	c := &Cooldowns{f: f, local: local, dirty: map[string]bool{}}
	if list, err := local.List(); err == nil {
		now := f.opt.Now()
		for _, cd := range list {
			if cd.Active(now) {
				c.dirty[cd.Scope] = true
			}
		}
	}
	f.onResync(c.push)
	if f.Up() {
		c.push(context.Background())
	}
	return c
}

func (c *Cooldowns) key(scope string) string { return c.f.key("cd:" + scope) }

// stored is a cooldown as Redis keeps it: Until is kept as the key's expiry,
// so that every process reads it on Redis's clock.
type stored struct {
	retry.Cooldown
	Untimed bool `json:"untimed,omitempty"` // until cleared
}

// Get returns scope's cooldown (see GetContext).
func (c *Cooldowns) Get(scope string) (retry.Cooldown, bool, error) {
	return c.GetContext(context.Background(), scope)
}

// GetContext returns scope's cooldown: Redis's when it answers within the
// timeout, else the local one. An expiring stop's Until is this machine's
// clock plus what Redis has left of it, so a skewed clock reads the same
// moment as every other process.
func (c *Cooldowns) GetContext(ctx context.Context, scope string) (retry.Cooldown, bool, error) {
	if !c.f.Up() {
		return c.local.Get(scope)
	}
	k := c.key(scope)
	var res []any
	err := c.f.call(ctx, func(cctx context.Context) (err error) {
		res, err = readScript.Run(cctx, c.f.rdb, []string{k}, c.f.opt.MaxValue).Slice()
		return err
	})
	if c.f.failed(ctx, err) {
		c.badKey(k, err)
		return c.local.Get(scope)
	}
	if len(res) != 1 {
		return c.local.Get(scope)
	}
	cd, st := c.decode(k, res[0])
	switch st {
	case readNone:
		return retry.Cooldown{}, false, nil
	case readBad:
		return c.local.Get(scope)
	}
	return cd, true, nil
}

// readScript reads stored stops without ever sending a large value back.
// KEYS: the stops' keys. ARGV[1]: the largest value to send. Returns, per
// key, {status, value, ttl ms}: status 0 none, 1 the value, 2 too large
// (value: its size), 3 not a string (value: Redis's error).
var readScript = redis.NewScript(`
local out = {}
for i, k in ipairs(KEYS) do
  local v = redis.pcall('GET', k)
  if type(v) == 'table' and v.err then
    out[i] = {3, string.sub(v.err, 1, 200), 0}
  elseif not v then
    out[i] = {0, '', 0}
  elseif #v > tonumber(ARGV[1]) then
    out[i] = {2, tostring(#v), 0}
  else
    out[i] = {1, v, redis.call('PTTL', k)}
  end
end
return out
`)

type readStatus int

const (
	readNone readStatus = iota
	readOK
	readBad
)

// badKey warns once about a key whose command Redis answered with an error
// (a key of another type, say).
func (c *Cooldowns) badKey(k string, err error) {
	var re redis.Error
	if errors.As(err, &re) && !isConnError(err) {
		c.f.warnKey(k, "gives an error ("+re.Error()+")")
	}
}

// decode reads one of readScript's answers for key k. A value limitscope
// did not write (too large, another type, not a stop) is warned about once
// and reported bad.
func (c *Cooldowns) decode(k string, v any) (retry.Cooldown, readStatus) {
	r, ok := v.([]any)
	if !ok || len(r) != 3 {
		return retry.Cooldown{}, readBad
	}
	st, ok := r[0].(int64)
	val, _ := r[1].(string)
	if !ok || st < 0 || st > 3 {
		c.f.warnKey(k, "comes back in a shape limitscope does not know")
		return retry.Cooldown{}, readBad
	}
	switch st {
	case 0:
		return retry.Cooldown{}, readNone
	case 2:
		c.f.warnKey(k, fmt.Sprintf("is %s bytes, over the limit of %d", val, c.f.opt.MaxValue))
		return retry.Cooldown{}, readBad
	case 3:
		c.f.warnKey(k, "is not a stop limitscope wrote ("+val+")")
		return retry.Cooldown{}, readBad
	}
	ttl, _ := r[2].(int64)
	var s stored
	if err := json.Unmarshal([]byte(val), &s); err != nil || s.Scope == "" {
		c.f.warnKey(k, "is not a stop limitscope wrote (not its JSON)")
		return retry.Cooldown{}, readBad
	}
	cd := s.Cooldown
	switch {
	case s.Untimed:
		cd.Until = time.Time{}
	case ttl > 0:
		cd.Until = c.f.opt.Now().Add(time.Duration(ttl) * time.Millisecond)
	}
	return cd, readOK
}

// Set records cd locally and in Redis (pushed later when Redis is away). A
// stop whose reset has passed is only recorded locally.
func (c *Cooldowns) Set(cd retry.Cooldown) error {
	lerr := c.local.Set(cd)
	if !c.f.Up() || c.write(context.Background(), cd) != nil {
		c.mark(cd.Scope, true)
	}
	if lerr != nil {
		return fmt.Errorf("local cooldowns: %w", lerr)
	}
	return nil
}

// write stores cd in Redis.
func (c *Cooldowns) write(ctx context.Context, cd retry.Cooldown) error {
	s := stored{Cooldown: cd, Untimed: cd.Until.IsZero()}
	var ttl time.Duration
	if !s.Untimed {
		ttl = cd.Until.Sub(c.f.opt.Now())
		if ttl <= 0 {
			return nil
		}
		// Stored as an expiry on Redis's clock; a millisecond at least.
		ttl = max(ttl, time.Millisecond)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encoding cooldown: %w", err)
	}
	err = c.f.call(ctx, func(cctx context.Context) error {
		return c.f.rdb.Set(cctx, c.key(cd.Scope), b, ttl).Err()
	})
	if c.f.failed(ctx, err) {
		return fmt.Errorf("shared cooldowns: %w", err)
	}
	return nil
}

func (c *Cooldowns) mark(scope string, set bool) {
	c.mu.Lock()
	c.dirty[scope] = set
	c.mu.Unlock()
}

// Clear removes scope's cooldown locally and in Redis, for every process.
func (c *Cooldowns) Clear(scope string) error {
	lerr := c.local.Clear(scope)
	ok := false
	if c.f.Up() {
		err := c.f.call(context.Background(), func(cctx context.Context) error {
			return c.f.rdb.Del(cctx, c.key(scope)).Err()
		})
		ok = !c.f.failed(context.Background(), err)
	}
	if !ok {
		c.mark(scope, false)
	} else {
		c.mu.Lock()
		delete(c.dirty, scope)
		c.mu.Unlock()
	}
	if lerr != nil {
		return fmt.Errorf("local cooldowns: %w", lerr)
	}
	return nil
}

// List returns every cooldown, Redis's when it answers, sorted by scope.
func (c *Cooldowns) List() ([]retry.Cooldown, error) {
	if !c.f.Up() {
		return c.local.List()
	}
	var keys []string
	err := c.f.call(context.Background(), func(ctx context.Context) error {
		iter := c.f.rdb.Scan(ctx, 0, c.f.key("cd:*"), 200).Iterator()
		for iter.Next(ctx) {
			if k := iter.Val(); strings.HasPrefix(k, c.f.key("cd:")) {
				keys = append(keys, k)
			}
		}
		return iter.Err()
	})
	if c.f.failed(context.Background(), err) {
		return c.local.List()
	}
	// Read in batches whose answers fit a reply even when every value is
	// as large as limitscope reads.
	batch := max(1, int(c.f.opt.MaxReply/(2*c.f.opt.MaxValue+64)))
	out := make([]retry.Cooldown, 0, len(keys))
	for len(keys) > 0 {
		part := keys[:min(batch, len(keys))]
		keys = keys[len(part):]
		var res []any
		err := c.f.call(context.Background(), func(ctx context.Context) (err error) {
			res, err = readScript.Run(ctx, c.f.rdb, part, c.f.opt.MaxValue).Slice()
			return err
		})
		if c.f.failed(context.Background(), err) {
			return c.local.List()
		}
		for i := range min(len(part), len(res)) {
			if cd, st := c.decode(part[i], res[i]); st == readOK {
				out = append(out, cd)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Scope < out[j].Scope })
	return out, nil
}

// push writes the stops set and clears made while Redis was away. A stop is
// written only where Redis has none for its scope (another process's newer
// word wins).
func (c *Cooldowns) push(ctx context.Context) {
	c.mu.Lock()
	todo := c.dirty
	c.dirty = map[string]bool{}
	c.mu.Unlock()
	var failed bool
	for scope, set := range todo {
		if failed {
			c.mark(scope, set)
			continue
		}
		err := c.f.call(ctx, func(cctx context.Context) error {
			if !set {
				return c.f.rdb.Del(cctx, c.key(scope)).Err()
			}
			if cd, ok, lerr := c.local.Get(scope); lerr == nil && ok && cd.Active(c.f.opt.Now()) {
				s := stored{Cooldown: cd, Untimed: cd.Until.IsZero()}
				var ttl time.Duration
				if !s.Untimed {
					ttl = max(cd.Until.Sub(c.f.opt.Now()), time.Millisecond)
				}
				b, _ := json.Marshal(s)
				return c.f.rdb.SetNX(cctx, c.key(scope), b, ttl).Err()
			}
			return nil
		})
		if err != nil && err != redis.Nil {
			failed = true
			c.mark(scope, set)
		}
	}
}
