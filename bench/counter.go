package bench

import (
	"context"
	"sync"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// Counter is a retry.Doer that counts what reaches the wire, so every policy
// is measured the same way whatever it reports about itself. It is safe for
// concurrent use.
type Counter struct {
	next retry.Doer

	mu          sync.Mutex
	requests    int
	rejected    int
	wasted      int
	afterQuota  int
	byStatus    map[int]int
	quotaScopes map[string]bool
	// learnsVia, when set, means the policy learns of a quota stop through
	// its cooldowns (MarkQuota), not at the moment the answer returns: a
	// request it had already decided to send when another worker's quota
	// answer came back is in flight, not sent "after" the error was seen.
	learnsVia bool
	seen      map[string]bool // learnsVia: scopes whose quota answer came back
	afterSeen int             // learnsVia: requests sent after such an answer
	last      *stream.Limits
}

// Counts is a Counter's tally.
type Counts struct {
	Requests           int            // HTTP requests sent
	Rejected           int            // responses with status 429
	Wasted             int            // requests that did not produce an answer
	RequestsAfterQuota int            // requests sent to a scope after a quota error was seen on it
	ByStatus           map[int]int    // responses by HTTP status (0: no response)
	Limits             *stream.Limits // the latest limits snapshot seen (nil: none)
}

// NewCounter wraps next.
func NewCounter(next retry.Doer) *Counter {
	return &Counter{next: next, byStatus: map[int]int{}, quotaScopes: map[string]bool{}, seen: map[string]bool{}}
}

// Do counts the request, sends it through the wrapped Doer and counts the
// answer.
func (c *Counter) Do(ctx context.Context, req stream.Request, onText func(string)) stream.Result {
	acct := c.next.Scope(req.Target, stream.ScopeAccount)
	tgt := c.next.Scope(req.Target, stream.ScopeTarget)
	c.mu.Lock()
	c.requests++
	if c.quotaScopes[acct] || c.quotaScopes[tgt] {
		c.afterQuota++
	}
	if c.seen[acct] || c.seen[tgt] {
		c.afterSeen++
	}
	c.mu.Unlock()

	res := c.next.Do(ctx, req, onText)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.byStatus[res.Status]++
	if res.Status == 429 {
		c.rejected++
	}
	if res.Err != nil {
		c.wasted++
		if res.Err.Class == stream.ClassQuota {
			scope := acct // an account-wide stop, or one whose scope is unknown: the safe reading
			if res.Err.Scope == stream.ScopeTarget {
				scope = tgt
			}
			if c.learnsVia {
				c.seen[scope] = true
			} else {
				c.quotaScopes[scope] = true
			}
		}
	}
	if !res.Limits.Empty() && (c.last == nil || !res.Limits.At.Before(c.last.At)) {
		c.last = res.Limits
	}
	return res
}

// Scope passes through to the wrapped Doer.
func (c *Counter) Scope(t stream.Target, s stream.Scope) string { return c.next.Scope(t, s) }

// Counts returns the tally so far.
func (c *Counter) Counts() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	by := make(map[int]int, len(c.byStatus))
	for k, v := range c.byStatus {
		by[k] = v
	}
	after := c.afterQuota
	for scope := range c.seen {
		if !c.quotaScopes[scope] {
			// A quota answer the policy never recorded: it did not learn,
			// so count from the moment the answer came back.
			after = c.afterSeen
			break
		}
	}
	return Counts{
		Requests:           c.requests,
		Rejected:           c.rejected,
		Wasted:             c.wasted,
		RequestsAfterQuota: after,
		ByStatus:           by,
		Limits:             c.last,
	}
}

// LimitPerSecond estimates a target's request rate limit from a limits
// snapshot: the requests window's limit over its unit (a minute, or a day for
// a per-day window). It reports false when the snapshot names no limit.
func LimitPerSecond(l *stream.Limits) (float64, bool) {
	if l == nil || l.Requests == nil || !l.Requests.HasLimit || l.Requests.Limit <= 0 {
		return 0, false
	}
	unit := time.Minute
	if l.Requests.PerDay {
		unit = 24 * time.Hour
	}
	return float64(l.Requests.Limit) / unit.Seconds(), true
}

// MarkQuota records that the policy has learned of a quota stop on scope
// (as its cooldowns name it): every request sent to that scope from now on
// counts as sent after the quota error.
func (c *Counter) MarkQuota(scope string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.quotaScopes[scope] = true
}

// learningCooldowns tells the counter when the engine learns of a quota stop.
type learningCooldowns struct {
	retry.Cooldowns
	counter *Counter
}

func (l learningCooldowns) Set(cd retry.Cooldown) error {
	l.counter.MarkQuota(cd.Scope)
	return l.Cooldowns.Set(cd)
}
