package probe

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// Doer sends one request (stream.Router.Do).
type Doer func(ctx context.Context, req stream.Request, onText func(string)) stream.Result

// Defaults.
const (
	DefaultBudget    = 12 // requests
	DefaultMaxTokens = 16 // output tokens per request
	DefaultPrompt    = "Reply with one short sentence."
	MaxBudget        = 1000
)

// Options configure a probe.
type Options struct {
	Target    stream.Target
	Budget    int    // requests at most (0: DefaultBudget)
	MaxTokens int    // output tokens per request (0: DefaultMaxTokens)
	Prompt    string // "" : DefaultPrompt
	Do        Doer
	Now       func() time.Time // nil: time.Now
	Simulated bool
	Scenario  string // the simulator's scenario, for the card
}

func (o *Options) defaults() {
	if o.Budget <= 0 {
		o.Budget = DefaultBudget
	}
	o.Budget = min(o.Budget, MaxBudget)
	if o.MaxTokens <= 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	if o.Prompt == "" {
		o.Prompt = DefaultPrompt
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Plan is what a probe will spend at most: requests and about how many
// tokens (each request's prompt, about four characters a token, and its
// output cap).
func Plan(o Options) (requests, tokens int) {
	o.defaults()
	per := (len(o.Prompt)+3)/4 + 8 + o.MaxTokens // the prompt, the message framing, the output cap
	return o.Budget, o.Budget * per
}

// Run probes o.Target. It never sends more than o.Budget requests. An
// error is returned only for a call that cannot be made at all (no key,
// unknown provider); failed answers are findings on the card.
func Run(ctx context.Context, o Options) (*Card, error) {
	o.defaults()
	if o.Do == nil {
		return nil, fmt.Errorf("probe %s: no Doer", o.Target)
	}
	p := &prober{o: o, card: &Card{
		Target: o.Target.String(), Provider: o.Target.Provider, Account: o.Target.Account, Model: o.Target.Model,
		Simulated: o.Simulated, Scenario: o.Scenario, At: o.Now().UTC(),
		Budget: Budget{Requests: o.Budget}, Concurrency: Concurrency{StoppedBy: StopBudget},
	}}
	p.start = o.Now()
	first := p.batch(ctx, 1)
	if e := first[0].res.Err; e != nil && (e.Class == stream.ClassCaller || e.Class == stream.ClassCancelled) && first[0].res.Status == 0 {
		return nil, fmt.Errorf("probe %s: %w", o.Target, e)
	}
	// The concurrency ramp: 1, 2, 4, ... parallel requests, while the
	// budget allows the whole level, until the first 429 or overload.
	if !p.stopped {
		p.card.Concurrency.Reached = 1
		for level := 2; !p.stopped && p.sent+level <= o.Budget && ctx.Err() == nil; level *= 2 {
			p.card.Concurrency.Tried = level
			p.batch(ctx, level)
			if !p.stopped {
				p.card.Concurrency.Reached = level
			}
		}
	}
	// Without limit headers, the rest of the budget one at a time: the
	// count before the first 429 estimates the per-minute limit.
	if p.limits == nil {
		for !p.stopped && p.sent < o.Budget && ctx.Err() == nil {
			p.batch(ctx, 1)
		}
	}
	p.finish()
	return p.card, nil
}

type outcome struct {
	res   stream.Result
	took  time.Duration
	start time.Time
}

type prober struct {
	o       Options
	card    *Card
	start   time.Time
	sent    int
	okSent  int // successful requests before the first stop
	stopped bool
	stopRes *stream.Result // the first 429, overload or quota answer
	limits  *stream.Limits // the last header snapshot
	ttft    []time.Duration
	tps     []float64
}

// batch sends n requests at once and notes what they found.
func (p *prober) batch(ctx context.Context, n int) []outcome {
	out := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := p.o.Now()
			res := p.o.Do(ctx, stream.Request{Target: p.o.Target, Prompt: p.o.Prompt, MaxTokens: p.o.MaxTokens}, nil)
			out[i] = outcome{res: res, took: p.o.Now().Sub(start), start: start}
		}()
	}
	wg.Wait()
	p.sent += n
	p.card.Budget.Sent = p.sent
	// Answers first, then the refusals: requests sent together were all
	// sent before the first refusal came.
	for i := range out {
		if out[i].res.Err == nil {
			p.note(&out[i])
		}
	}
	for i := range out {
		if out[i].res.Err != nil {
			p.note(&out[i])
		}
	}
	return out
}

// stopClass is an answer that ends the ramp: the account's or the
// provider's limit reached.
func stopClass(c stream.Class) string {
	switch c {
	case stream.ClassRateLimit:
		return StopRateLimit
	case stream.ClassOverload:
		return StopOverload
	case stream.ClassQuota:
		return StopQuota
	}
	return ""
}

func (p *prober) note(oc *outcome) {
	r := &oc.res
	if !r.Limits.Empty() {
		p.limits = r.Limits
	}
	p.card.Answers = append(p.card.Answers, string(r.Class()))
	if r.Err == nil {
		if !p.stopped {
			p.okSent++
		}
		if r.TTFT > 0 {
			p.ttft = append(p.ttft, r.TTFT)
			if r.Usage != nil && r.Usage.OutputTokens > 0 && oc.took > r.TTFT {
				p.tps = append(p.tps, float64(r.Usage.OutputTokens)/(oc.took-r.TTFT).Seconds())
			}
		}
		return
	}
	if s := stopClass(r.Err.Class); s != "" && !p.stopped {
		p.stopped = true
		p.stopRes = r
		p.card.Concurrency.StoppedBy = s
		p.card.FirstStop = &Stop{Class: string(r.Err.Class), Status: r.Err.Status, Code: r.Err.Code,
			Message: r.Err.Message, QuotaID: r.Err.QuotaID, AfterRequests: p.okSent}
		if r.Err.DelaySource != stream.SourceNone {
			p.card.FirstStop.RetryAfterMs = r.Err.Delay.Milliseconds()
		}
	}
}

// finish fills the card's limits, estimate and latency.
func (p *prober) finish() {
	c := p.card
	c.Elapsed = p.o.Now().Sub(p.start).Milliseconds()
	info, _ := stream.Provider(p.o.Target.Provider)
	if p.limits != nil {
		c.Limits.Source = SourceHeaders
		for _, w := range []struct {
			kind string
			w    *stream.Window
		}{{"requests", p.limits.Requests}, {"tokens", p.limits.Tokens}, {"input_tokens", p.limits.InputTokens}, {"output_tokens", p.limits.OutputTokens}} {
			if w.w == nil {
				continue
			}
			c.Limits.Windows = append(c.Limits.Windows, window(w.kind, w.w, p.limits.At, info.Dialect))
		}
	} else {
		c.Limits.Source = SourceNone
		c.Estimate = p.estimate()
		if c.Estimate != nil {
			c.Limits.Source = SourceEstimate
		}
	}
	c.Latency = Latency{Samples: len(p.ttft), TTFTMs: spreadDur(p.ttft), OutputTokensPerSecond: spread(p.tps)}
}

// window describes one header window, with its reset semantics.
func window(kind string, w *stream.Window, at time.Time, d stream.Dialect) Window {
	out := Window{Kind: kind, Per: "minute", Rounded: w.Rounded}
	if w.PerDay {
		out.Per = "day"
	}
	if w.HasLimit {
		v := w.Limit
		out.Limit = &v
	}
	if w.HasRemaining {
		v := w.Remaining
		out.Remaining = &v
	}
	if !w.Reset.IsZero() {
		v := max(w.Reset.Sub(at), 0).Milliseconds()
		out.ResetInMs = &v
	}
	switch {
	case w.PerDay:
		out.Semantics = "per day: the reset is when the day's allowance is whole again"
	case d == stream.DialectAnthropic:
		out.Semantics = "a token bucket refilling continuously; the reset (RFC 3339) is when it is full again"
	default:
		out.Semantics = "replenishes continuously; the reset is the time until the window is full again"
	}
	if w.Rounded {
		out.Semantics += "; remaining is rounded to thousands"
	}
	return out
}

// limitInMessage finds a 429 message's stated limit: "limit: 10"
// (Gemini's QuotaFailure text), "Limit 20, Used 20" (OpenAI's and Groq's
// wording), "(actual/limit): 13/12" (xAI's).
var limitInMessage = []*regexp.Regexp{
	regexp.MustCompile(`(?i)actual/limit\)?:\s*\d[\d,]*/(\d[\d,]*)`),
	regexp.MustCompile(`(?i)\blimit:?\s+(\d[\d,]*)`),
}

// messageLimit is the limit a 429 message states, if any.
func messageLimit(msg string) (int, bool) {
	for _, re := range limitInMessage {
		if m := re.FindStringSubmatch(msg); m != nil {
			if n, err := strconv.Atoi(strings.ReplaceAll(m[1], ",", "")); err == nil && n > 0 {
				return n, true
			}
		}
	}
	return 0, false
}

// estimate is what the answers say without headers: a 429 naming its
// limit, else the count of successes before the first 429, else a lower
// bound.
func (p *prober) estimate() *Estimate {
	secs := float64(p.o.Now().Sub(p.start)) / float64(time.Second)
	e := &Estimate{Requests: p.okSent, Per: "minute"}
	r := p.stopRes
	switch {
	case r != nil && r.Err.Class == stream.ClassOverload:
		e.Basis = fmt.Sprintf("no limit headers; an overload after %d requests is the provider's capacity, not the account's limit: at least %d requests a minute", p.okSent, p.okSent)
		e.LowerBound = true
	case r != nil:
		perDay := strings.Contains(strings.ToLower(r.Err.QuotaID), "perday") || r.Err.Class == stream.ClassQuota
		if perDay {
			e.Per = "day"
		}
		if n, ok := messageLimit(r.Err.Message); ok {
			e.Requests, e.FromMessage = n, true
			e.Basis = fmt.Sprintf("no limit headers; the 429 after %d answered requests names its limit: %d requests a %s", p.okSent, n, e.Per)
			return e
		}
		e.LowerBound = true
		e.Basis = fmt.Sprintf("no limit headers; %d requests were answered in %.1fs before the first 429, whose message names no limit: at least %d requests a %s (about that many, if nothing else used the account meanwhile)", p.okSent, secs, p.okSent, e.Per)
	case p.okSent == 0:
		return nil
	default:
		e.LowerBound = true
		e.Basis = fmt.Sprintf("no limit headers and no 429 within the budget: at least %d requests a minute (%d answered in %.1fs)", p.okSent, p.okSent, secs)
	}
	return e
}

func spreadDur(ds []time.Duration) *Spread {
	fs := make([]float64, len(ds))
	for i, d := range ds {
		fs[i] = float64(d) / float64(time.Millisecond)
	}
	return spread(fs)
}

// spread is the minimum, median and maximum of vs (nil when empty).
func spread(vs []float64) *Spread {
	if len(vs) == 0 {
		return nil
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	round := func(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }
	return &Spread{Min: round(s[0]), Median: round(med), Max: round(s[len(s)-1])}
}
