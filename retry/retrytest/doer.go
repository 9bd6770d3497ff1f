package retrytest

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// Step is one scripted answer: a Result, or a function computing one (which
// may block on ctx, stream text through onText, or count calls).
type Step struct {
	Result stream.Result
	Func   func(ctx context.Context, req stream.Request, onText func(string)) stream.Result
}

// Doer is a scripted retry.Doer: per target ("provider/model") a queue of
// answers, handed out in order, counting every request. A target with an
// empty queue answers a connection error with no response. Text of a
// scripted Result is sent to onText word by word before it returns. It is
// safe for concurrent use.
type Doer struct {
	mu     sync.Mutex
	queues map[string][]Step
	counts map[string]int
	reqs   []stream.Request
	// Repeat, when set for a target, answers it after its queue is empty.
	repeat map[string]Step
}

var _ retry.Doer = (*Doer)(nil)

// NewDoer returns a Doer with nothing scripted.
func NewDoer() *Doer {
	return &Doer{queues: map[string][]Step{}, counts: map[string]int{}, repeat: map[string]Step{}}
}

// Script appends answers to target's queue and returns d.
func (d *Doer) Script(target string, rs ...stream.Result) *Doer {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range rs {
		d.queues[target] = append(d.queues[target], Step{Result: r})
	}
	return d
}

// ScriptFunc appends a computed answer to target's queue and returns d.
func (d *Doer) ScriptFunc(target string, f func(ctx context.Context, req stream.Request, onText func(string)) stream.Result) *Doer {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.queues[target] = append(d.queues[target], Step{Func: f})
	return d
}

// Always makes target answer r whenever its queue is empty, and returns d.
func (d *Doer) Always(target string, r stream.Result) *Doer {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.repeat[target] = Step{Result: r}
	return d
}

// Do answers the next scripted step of req.Target.
func (d *Doer) Do(ctx context.Context, req stream.Request, onText func(string)) stream.Result {
	k := req.Target.String()
	d.mu.Lock()
	d.counts[k]++
	d.reqs = append(d.reqs, req)
	var st Step
	var ok bool
	if q := d.queues[k]; len(q) > 0 {
		st, ok = q[0], true
		d.queues[k] = q[1:]
	} else {
		st, ok = d.repeat[k]
	}
	d.mu.Unlock()
	if !ok {
		return stream.Result{Err: &stream.Error{Class: stream.ClassConnection, Message: "retrytest: nothing scripted for " + k}}
	}
	if st.Func != nil {
		if onText == nil {
			onText = func(string) {}
		}
		return st.Func(ctx, req, onText)
	}
	r := st.Result
	if onText != nil && r.Text != "" {
		for _, w := range splitWords(r.Text) {
			onText(w)
		}
	}
	return r
}

func splitWords(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// Scope returns "account:<provider>" for ScopeAccount and
// "target:<provider/model>" for ScopeTarget.
func (d *Doer) Scope(t stream.Target, s stream.Scope) string {
	if s == stream.ScopeTarget {
		return "target:" + t.String()
	}
	return "account:" + t.Provider
}

// Count returns how many requests target received.
func (d *Doer) Count(target string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.counts[target]
}

// Total returns how many requests were made in all.
func (d *Doer) Total() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.reqs)
}

// Requests returns every request made, in order.
func (d *Doer) Requests() []stream.Request {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]stream.Request(nil), d.reqs...)
}

// OK returns a successful Result with text, finish reason "stop" and
// status 200.
func OK(text string) stream.Result {
	return stream.Result{Status: 200, Text: text, FinishReason: "stop"}
}

// Fail returns a failed Result with the given status, class and code.
func Fail(status int, class stream.Class, code string) stream.Result {
	return stream.Result{Status: status, Err: &stream.Error{Class: class, Status: status, Code: code, Message: code}}
}

// RateLimited returns a 429 rate_limit Result whose server delay is d from
// a retry-after header.
func RateLimited(d time.Duration) stream.Result {
	return WithDelay(Fail(429, stream.ClassRateLimit, "rate_limit_error"), d, stream.SourceRetryAfter)
}

// Quota returns a 429 quota Result with code and the given cooldown scope.
func Quota(code string, scope stream.Scope, resetAt time.Time) stream.Result {
	r := Fail(429, stream.ClassQuota, code)
	r.Err.Scope = scope
	r.Err.ResetAt = resetAt
	return r
}

// WithDelay returns r (which must carry an error) with the server delay d
// from source.
func WithDelay(r stream.Result, d time.Duration, source stream.DelaySource) stream.Result {
	if r.Err != nil {
		e := *r.Err
		e.Delay, e.DelaySource = d, source
		r.Err = &e
	}
	return r
}

// WithLimits returns r carrying limits.
func WithLimits(r stream.Result, l *stream.Limits) stream.Result {
	r.Limits = l
	return r
}
