package fleet

import (
	"context"
	"encoding/json"
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
	cctx, cancel := c.f.ctx(ctx)
	defer cancel()
	k := c.key(scope)
	pipe := c.f.rdb.Pipeline()
	get := pipe.Get(cctx, k)
	ttl := pipe.PTTL(cctx, k)
	_, err := pipe.Exec(cctx)
	if err == redis.Nil {
		return retry.Cooldown{}, false, nil
	}
	if c.f.failed(ctx, err) {
		return c.local.Get(scope)
	}
	cd, ok := c.decode(get.Val(), ttl.Val())
	return cd, ok, nil
}

// decode reads a stored cooldown whose key has left ttl.
func (c *Cooldowns) decode(v string, ttl time.Duration) (retry.Cooldown, bool) {
	var s stored
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return retry.Cooldown{}, false
	}
	cd := s.Cooldown
	switch {
	case s.Untimed:
		cd.Until = time.Time{}
	case ttl > 0:
		cd.Until = c.f.opt.Now().Add(ttl)
	}
	return cd, true
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
	cctx, cancel := c.f.ctx(ctx)
	defer cancel()
	err = c.f.rdb.Set(cctx, c.key(cd.Scope), b, ttl).Err()
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
		cctx, cancel := c.f.ctx(context.Background())
		err := c.f.rdb.Del(cctx, c.key(scope)).Err()
		cancel()
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
	ctx, cancel := c.f.ctx(context.Background())
	defer cancel()
	var keys []string
	iter := c.f.rdb.Scan(ctx, 0, c.f.key("cd:*"), 200).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if c.f.failed(context.Background(), iter.Err()) {
		return c.local.List()
	}
	pipe := c.f.rdb.Pipeline()
	gets := make([]*redis.StringCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	for i, k := range keys {
		gets[i], ttls[i] = pipe.Get(ctx, k), pipe.PTTL(ctx, k)
	}
	if len(keys) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil && c.f.failed(context.Background(), err) {
			return c.local.List()
		}
	}
	out := make([]retry.Cooldown, 0, len(keys))
	for i := range keys {
		if gets[i].Err() != nil {
			continue // expired between the scan and the read
		}
		if cd, ok := c.decode(gets[i].Val(), ttls[i].Val()); ok && strings.HasPrefix(keys[i], c.f.key("cd:")) {
			out = append(out, cd)
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
		cctx, cancel := c.f.ctx(ctx)
		var err error
		if !set {
			err = c.f.rdb.Del(cctx, c.key(scope)).Err()
		} else if cd, ok, lerr := c.local.Get(scope); lerr == nil && ok && cd.Active(c.f.opt.Now()) {
			s := stored{Cooldown: cd, Untimed: cd.Until.IsZero()}
			var ttl time.Duration
			if !s.Untimed {
				ttl = max(cd.Until.Sub(c.f.opt.Now()), time.Millisecond)
			}
			b, _ := json.Marshal(s)
			err = c.f.rdb.SetNX(cctx, c.key(scope), b, ttl).Err()
		}
		cancel()
		if err != nil && err != redis.Nil {
			failed = true
			c.mark(scope, set)
		}
	}
}
