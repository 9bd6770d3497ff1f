package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// Env gives each policy's run its Doer.
type Env interface {
	// Prepare returns the Doer one policy's run sends through, in a fresh
	// state: a new simulator, or a real account once the limits seen in prev
	// (the previous run's latest snapshot; nil for the first run) have
	// recovered. release is called when the run ends.
	Prepare(ctx context.Context, policy string, prev *stream.Limits) (doer retry.Doer, release func(), err error)
}

// Config is one bench run.
type Config struct {
	Chain       []stream.Target // primary first; only the limitscope policy fails over
	Requests    int             // calls per policy
	Concurrency int             // workers per policy
	Prompt      string
	MaxTokens   int
	Policies    []string     // in the order to run; nil: Policies()
	Retry       retry.Policy // the limitscope policy's knobs; zero fields take the defaults

	// NewPacer returns the limitscope policy's pacer, one per run; nil: a
	// new retry.Pacer with its defaults.
	NewPacer func() *retry.Pacer
	// Shared, when set, puts the limitscope policy's engine on shared state
	// (the fleet's, through Redis): it is given the run's Doer and local
	// pacer and returns the pacing and cooldowns to use.
	Shared func(doer retry.Doer, local *retry.Pacer) (retry.Pacing, retry.Cooldowns)
	// Clock measures elapsed time and latency, and runs every policy's waits;
	// nil: the wall clock.
	Clock retry.Clock
	// Rand returns values in [0,1) for the jitter of every policy; it must be
	// safe for concurrent use. nil: math/rand/v2.
	Rand func() float64
	// LimitPerSecond, when positive, is the limit goodput is compared with,
	// instead of the estimate from the response headers.
	LimitPerSecond float64
	// Progress, when set, is called (never concurrently, even when policies
	// run at once) when a policy starts, with done 0, and after each call
	// ends.
	Progress func(policy string, done, total int)
}

// Latency holds latency percentiles in milliseconds, waits included.
type Latency struct {
	P50 int64 `json:"p50"`
	P95 int64 `json:"p95"`
	P99 int64 `json:"p99"`
}

// PolicyResult is one policy's figures. Completed + Stopped + GaveUp ==
// Requests: GaveUp counts every call that neither completed nor stopped
// (gave up, failed, deferred or cancelled).
type PolicyResult struct {
	Policy             string   `json:"policy"`
	Requests           int      `json:"requests"`
	Completed          int      `json:"completed"`
	Stopped            int      `json:"stopped"`
	GaveUp             int      `json:"gave_up"`
	HTTPRequests       int      `json:"http_requests"`
	Rejected           int      `json:"rejected"`
	Wasted             int      `json:"wasted"`
	RequestsAfterQuota int      `json:"requests_after_quota"`
	ElapsedMs          int64    `json:"elapsed_ms"`
	GoodputPerS        float64  `json:"goodput_per_s"`
	LimitPerS          *float64 `json:"limit_per_s"`   // null when no header named it
	GoodputRatio       *float64 `json:"goodput_ratio"` // goodput over the limit; null when the limit is unknown
	LatencyMs          Latency  `json:"latency_ms"`

	// Outcomes counts the calls by outcome (ok, stopped, gave_up, failed,
	// deferred, cancelled), for the detail behind GaveUp.
	Outcomes map[retry.Outcome]int `json:"outcomes"`
	// Statuses counts the HTTP responses by status ("0": no response).
	Statuses map[int]int `json:"statuses"`
}

// Report is a whole bench run: `{"policies":[...]}`, with what was run.
type Report struct {
	Policies    []PolicyResult `json:"policies"`
	Chain       []string       `json:"chain"` // "provider/model", primary first
	Requests    int            `json:"requests"`
	Concurrency int            `json:"concurrency"`
	Simulated   bool           `json:"simulated"`
	Scenario    string         `json:"scenario,omitempty"` // the simulator's scenario
}

// Validate checks a configuration before anything is sent.
func (c Config) Validate() error {
	if len(c.Chain) == 0 {
		return errors.New("bench: no target: --model is required")
	}
	if c.Requests < 1 {
		return fmt.Errorf("bench: --requests must be at least 1, got %d", c.Requests)
	}
	if c.Concurrency < 1 {
		return fmt.Errorf("bench: --concurrency must be at least 1, got %d", c.Concurrency)
	}
	for _, p := range c.Policies {
		if !ValidPolicy(p) {
			return fmt.Errorf("bench: %w", unknownPolicy(p))
		}
		if _, _, err := withVariant(c, p); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	return nil
}

// Run runs every policy of cfg, each with a Doer fresh from env, and
// returns their figures in cfg's order: one after the other, or all at
// once where env is a ParallelEnv whose Parallel says its policies'
// providers are independent (a simulator each). It stops at the first
// policy whose set-up fails, or when ctx ends (returning the figures so far
// with ctx's error).
func Run(ctx context.Context, cfg Config, env Env) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	policies := cfg.Policies
	if len(policies) == 0 {
		policies = Policies()
	}
	rep := &Report{Policies: []PolicyResult{}, Requests: cfg.Requests, Concurrency: cfg.Concurrency}
	for _, t := range cfg.Chain {
		rep.Chain = append(rep.Chain, t.String())
	}
	if pe, ok := env.(ParallelEnv); ok && pe.Parallel() {
		return runParallel(ctx, cfg, env, policies, rep)
	}
	var prev *stream.Limits
	for _, p := range policies {
		if err := ctx.Err(); err != nil {
			return rep, fmt.Errorf("bench: %w", err)
		}
		doer, release, err := env.Prepare(ctx, p, prev)
		if err != nil {
			return rep, fmt.Errorf("bench: preparing %s: %w", p, err)
		}
		res, last := RunPolicy(ctx, cfg, p, doer)
		if release != nil {
			release()
		}
		rep.Policies = append(rep.Policies, res)
		if last != nil {
			prev = last
		}
		if err := ctx.Err(); err != nil {
			return rep, fmt.Errorf("bench: %w", err)
		}
	}
	return rep, nil
}

// ParallelEnv is an Env that can say its policies' runs are independent of
// each other: each gets a provider of its own (a fresh simulator), so no
// run's requests count against another's limits and Run may run them all
// at once. A real account is one provider for every policy: never parallel.
type ParallelEnv interface {
	Env
	Parallel() bool
}

// runParallel is Run with every policy at once: all set up first (a set-up
// that fails releases the others and fails the run), then run together,
// cfg.Progress still called never concurrently.
func runParallel(ctx context.Context, cfg Config, env Env, policies []string, rep *Report) (*Report, error) {
	doers := make([]retry.Doer, len(policies))
	releases := make([]func(), len(policies))
	defer func() {
		for _, r := range releases {
			if r != nil {
				r()
			}
		}
	}()
	for i, p := range policies {
		doer, release, err := env.Prepare(ctx, p, nil)
		if err != nil {
			return rep, fmt.Errorf("bench: preparing %s: %w", p, err)
		}
		doers[i], releases[i] = doer, release
	}
	if prog := cfg.Progress; prog != nil {
		var mu sync.Mutex
		cfg.Progress = func(policy string, done, total int) {
			mu.Lock()
			defer mu.Unlock()
			prog(policy, done, total)
		}
	}
	results := make([]PolicyResult, len(policies))
	var wg sync.WaitGroup
	for i, p := range policies {
		wg.Go(func() { results[i], _ = RunPolicy(ctx, cfg, p, doers[i]) })
	}
	wg.Wait()
	rep.Policies = append(rep.Policies, results...)
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("bench: %w", err)
	}
	return rep, nil
}

// callFunc runs call i of a policy.
type callFunc func(ctx context.Context, i int) retry.Outcome

// RunPolicy runs cfg.Requests calls of one policy at cfg.Concurrency through
// doer, and returns the policy's figures and the latest limits snapshot seen.
func RunPolicy(ctx context.Context, cfg Config, policy string, doer retry.Doer) (PolicyResult, *stream.Limits) {
	clock := cfg.Clock
	if clock == nil {
		clock = retry.WallClock{}
	}
	rnd := cfg.Rand
	if rnd == nil {
		rnd = rand.Float64
	}
	counter := NewCounter(doer)
	call := policyCall(cfg, policy, counter, clock, rnd)

	n, conc := max(cfg.Requests, 0), max(cfg.Concurrency, 1)
	outcomes := make([]retry.Outcome, n)
	latencies := make([]time.Duration, n)
	jobs := make(chan int)
	var (
		wg     sync.WaitGroup
		progMu sync.Mutex
		done   int
	)
	start := clock.Now()
	if cfg.Progress != nil {
		cfg.Progress(policy, 0, n) // shown at once, not after the first call
	}
	for range min(conc, max(n, 1)) {
		wg.Go(func() {
			for i := range jobs {
				t0 := clock.Now()
				outcomes[i] = call(ctx, i)
				latencies[i] = clock.Now().Sub(t0)
				if cfg.Progress != nil {
					progMu.Lock()
					done++
					cfg.Progress(policy, done, n)
					progMu.Unlock()
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case jobs <- i:
		case <-ctx.Done():
			for j := i; j < n; j++ {
				outcomes[j] = retry.OutcomeCancelled
			}
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	elapsed := clock.Now().Sub(start)

	counts := counter.Counts()
	r := PolicyResult{
		Policy:             policy,
		Requests:           n,
		HTTPRequests:       counts.Requests,
		Rejected:           counts.Rejected,
		Wasted:             counts.Wasted,
		RequestsAfterQuota: counts.RequestsAfterQuota,
		ElapsedMs:          elapsed.Milliseconds(),
		Outcomes:           map[retry.Outcome]int{},
		Statuses:           counts.ByStatus,
	}
	for _, o := range outcomes {
		r.Outcomes[o]++
		switch o {
		case retry.OutcomeOK:
			r.Completed++
		case retry.OutcomeStopped:
			r.Stopped++
		default:
			r.GaveUp++
		}
	}
	if elapsed > 0 {
		r.GoodputPerS = round3(float64(r.Completed) / elapsed.Seconds())
	}
	limit, ok := cfg.LimitPerSecond, cfg.LimitPerSecond > 0
	if !ok {
		limit, ok = LimitPerSecond(counts.Limits)
	}
	if ok {
		l := round3(limit)
		ratio := round3(r.GoodputPerS / limit)
		r.LimitPerS, r.GoodputRatio = &l, &ratio
	}
	r.LatencyMs = percentiles(latencies)
	return r, counts.Limits
}

// policyCall builds the function that runs one call of a policy.
func policyCall(cfg Config, policy string, doer retry.Doer, clock retry.Clock, rnd func() float64) callFunc {
	maxTokens := cfg.MaxTokens
	req := stream.Request{Prompt: cfg.Prompt, MaxTokens: maxTokens}
	if len(cfg.Chain) > 0 {
		req.Target = cfg.Chain[0]
	}
	l := loop{doer: doer, clock: clock, rand: rnd}
	cfg, kind, err := withVariant(cfg, policy)
	if err != nil {
		return func(context.Context, int) retry.Outcome { return retry.OutcomeFailed }
	}
	if len(cfg.Chain) > 0 {
		req.Target = cfg.Chain[0]
	}
	switch kind {
	case PolicySDKDefault:
		return func(ctx context.Context, _ int) retry.Outcome { return l.sdkDefault(ctx, req).outcome }
	case PolicyNaive:
		return func(ctx context.Context, _ int) retry.Outcome { return l.naive(ctx, req).outcome }
	case PolicyNested:
		return func(ctx context.Context, _ int) retry.Outcome { return l.nested(ctx, req).outcome }
	case PolicyLimitscope:
		var pacer *retry.Pacer
		if cfg.NewPacer != nil {
			pacer = cfg.NewPacer()
		} else {
			pacer = defaultPacer()
		}
		eng := &retry.Engine{Doer: doer, Clock: clock, Pacer: pacer, Rand: rnd}
		var cds retry.Cooldowns = retry.NewMemoryCooldowns()
		if cfg.Shared != nil {
			eng.Pacer, cds = cfg.Shared(doer, pacer)
			eng.Cooldowns = cds
		}
		if c, ok := doer.(*Counter); ok {
			c.learnsVia = true
			eng.Cooldowns = learningCooldowns{Cooldowns: cds, counter: c}
		}
		return func(ctx context.Context, i int) retry.Outcome {
			res := eng.Run(ctx, retry.Call{
				ID:        fmt.Sprintf("bench-%s-%d", policy, i+1),
				Chain:     cfg.Chain,
				Prompt:    cfg.Prompt,
				MaxTokens: maxTokens,
				Policy:    cfg.Retry,
			}, nil)
			return res.Outcome
		}
	}
	return func(context.Context, int) retry.Outcome { return retry.OutcomeFailed }
}

// percentiles returns nearest-rank p50, p95 and p99 of ds in milliseconds.
func percentiles(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) int64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		i = min(max(i, 0), len(s)-1)
		return s[i].Milliseconds()
	}
	return Latency{P50: at(0.50), P95: at(0.95), P99: at(0.99)}
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }
