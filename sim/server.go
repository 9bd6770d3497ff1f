package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // Gemini's per-day quotas reset at midnight Pacific, wherever this runs
)

// Clock is time as the simulator sees it: token buckets, windows, per-day
// resets, budgets and timed fault windows all run on it. Streaming pace and
// hangs use real timers.
type Clock interface{ Now() time.Time }

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// Options configure a simulator.
type Options struct {
	Scenario string // default "calm"; a preset name, or the name of the scenario in ScenarioFile
	Seed     int64  // seeds the answers' text and the scenario's fault draws
	Clock    Clock  // nil: the wall clock
	// TokensPerSecond is the streaming pace; 0 takes each provider's pace
	// from the scenario. Tests set it very high.
	TokensPerSecond float64
	// FirstTokenDelay is the wait before the first text. When
	// TokensPerSecond is 0 (realistic pacing) a zero FirstTokenDelay takes
	// the scenario's per-provider delay; when TokensPerSecond is set, it is
	// taken literally (tests set 0: no delay).
	FirstTokenDelay time.Duration
	// ScenarioFile is a scenario file to load (see README.md). Its scenario
	// becomes selectable by its name and is the default when Scenario is "".
	ScenarioFile string
	// HangLimit bounds a "hang" fault (default 10 minutes, as DeepSeek closes
	// a request that has not started after 10 minutes).
	HangLimit time.Duration
	// Answer shapes the answers' text (see README.md: length and shape, e.g.
	// "words", "paragraph:1MB", "paragraphs", "code"); "" takes the default.
	Answer string
}

// Server is the simulated providers as one http.Handler: each provider under
// /{provider}/ with its real paths, and the admin endpoint under /_sim/. It
// is safe for concurrent use.
type Server struct {
	opts   Options
	clock  Clock
	loc    *time.Location // Gemini's per-day reset zone
	file   *scenario      // from Options.ScenarioFile, or nil
	closed chan struct{}
	once   sync.Once

	mu      sync.Mutex
	scen    *scenario
	started time.Time
	state   map[string]*provState
	pending []*pendingFault
	rng     *rand.Rand // fault draws and ids; under mu
	seq     uint64
}

type pendingFault struct {
	f    Fault
	left int
}

// provState is one provider's live limits and counters.
type provState struct {
	cfg                            *providerConfig
	rpm, tpm, itpm, otpm, rpd, tpd limiter // nil: unlimited
	spent                          float64
	spendKey                       int64
	recent                         []time.Time // request times in the last minute (acceleration limit)
	requests, errors               int64
	degradedUntil                  time.Time
}

// New builds a simulator. An unknown scenario or a bad scenario file is an
// error.
func New(opts Options) (*Server, error) {
	s := &Server{opts: opts, clock: opts.Clock, closed: make(chan struct{})}
	if s.clock == nil {
		s.clock = wallClock{}
	}
	if s.opts.HangLimit <= 0 {
		s.opts.HangLimit = 10 * time.Minute
	}
	if s.opts.TokensPerSecond < 0 || math.IsNaN(s.opts.TokensPerSecond) {
		return nil, fmt.Errorf("sim: tokens per second %v is negative", s.opts.TokensPerSecond)
	}
	loc, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		loc = time.FixedZone("PST", -8*3600)
	}
	s.loc = loc
	s.rng = rand.New(rand.NewPCG(uint64(opts.Seed), 0x5eed))
	if opts.ScenarioFile != "" {
		f, err := loadScenarioFile(opts.ScenarioFile)
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		s.file = f
	}
	name := opts.Scenario
	if name == "" {
		name = "calm"
		if s.file != nil {
			name = s.file.Name
		}
	}
	if err := s.SetScenario(name); err != nil {
		return nil, err
	}
	return s, nil
}

// Close releases every hung or stalled request. The server still answers
// afterwards; Close is for shutting down.
func (s *Server) Close() {
	s.once.Do(func() { close(s.closed) })
}

// Scenario returns the name of the scenario in effect.
func (s *Server) Scenario() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scen.Name
}

// SetScenario switches to the named scenario: its limits start afresh (full
// buckets, empty windows, nothing spent) and its timed windows count from
// now. Pending injected faults are kept.
func (s *Server) SetScenario(name string) error {
	var sc *scenario
	if s.file != nil && name == s.file.Name {
		sc = s.file
	} else {
		p, err := preset(name)
		if err != nil {
			if s.file != nil {
				return fmt.Errorf("sim: %w (or %q from %s)", err, s.file.Name, s.opts.ScenarioFile)
			}
			return fmt.Errorf("sim: %w", err)
		}
		sc = p
	}
	now := s.clock.Now()
	state := make(map[string]*provState, len(providerNames))
	for _, p := range providerNames {
		state[p] = s.newState(p, sc.Providers[p])
	}
	s.mu.Lock()
	s.scen, s.started, s.state = sc, now, state
	s.mu.Unlock()
	return nil
}

func (s *Server) newState(provider string, c *providerConfig) *provState {
	st := &provState{cfg: c}
	perMin := func(n, burst int64) limiter {
		if n <= 0 {
			return nil
		}
		if c.LimitKind == "bucket" {
			return newBurstBucket(n, burst, time.Minute)
		}
		return newQuantizedWindow(n, burst, time.Minute)
	}
	perDay := func(n int64) limiter {
		if n <= 0 {
			return nil
		}
		if provider == "gemini" {
			return newDaily(n, s.loc)
		}
		// Groq's per-day headers reset like a bucket refilling over a day
		// (its documented example: 30 used of 14400, reset in 2m59.56s).
		return newBucket(n, 24*time.Hour)
	}
	st.rpm = perMin(c.RPM, c.Burst) // the burst is the requests limit's
	st.tpm, st.itpm, st.otpm = perMin(c.TPM, 0), perMin(c.ITPM, 0), perMin(c.OTPM, 0)
	st.rpd, st.tpd = perDay(c.RPD), perDay(c.TPD)
	return st
}

// Inject queues a fault. It hits the next Count requests to its provider
// (any provider when Provider is ""), before anything the scenario does.
// A failover-demo fault instead degrades its provider (the scenario's
// primary when Provider is "") for RetryAfter (default 60s).
func (s *Server) Inject(f Fault) error {
	if err := f.validate(); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Kind == FaultFailoverDemo {
		p := f.Provider
		if p == "" {
			p = s.scen.Primary
		}
		d := f.RetryAfter
		if d <= 0 {
			d = time.Minute
		}
		s.state[p].degradedUntil = s.clock.Now().Add(d)
		return nil
	}
	n := f.Count
	if n == 0 {
		n = 1
	}
	s.pending = append(s.pending, &pendingFault{f: f, left: n})
	return nil
}

// ServeHTTP routes /_sim/ to the admin endpoint and /{provider}/... to that
// provider's simulated API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if path == "/_sim" || strings.HasPrefix(path, "/_sim/") {
		s.serveAdmin(w, r)
		return
	}
	rest := strings.TrimPrefix(path, "/")
	provider, sub, _ := strings.Cut(rest, "/")
	sub = "/" + sub
	if !knownProvider(provider) {
		writeReply(w, jsonReply(404, mustJSON(map[string]any{"error": map[string]any{
			"message": fmt.Sprintf("simulator: no provider at %q; providers are mounted at /%s", path, strings.Join(providerNames, ", /")),
			"type":    "not_found"}})))
		return
	}
	s.serveProvider(w, r, provider, sub)
}

func writeReply(w http.ResponseWriter, rp reply) {
	for k, vs := range rp.header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(rp.body)))
	w.WriteHeader(rp.status)
	_, _ = w.Write(rp.body)
}

// ---- decisions ----------------------------------------------------------

// decision is what the simulator does with one admitted request.
type decision struct {
	reply     *reply // an HTTP error to send instead of an answer
	kind      string // "" (a clean answer), FaultReset, FaultCut, FaultHang, FaultMidStream
	code      string
	header    http.Header // rate-limit headers and request id, on every answer
	requestID string
	idSeed    uint64 // for message/response ids
}

// fits the request into the provider's state at now. Called with s.mu held.
func (s *Server) decide(req *simRequest, outTokens int) decision {
	now := s.clock.Now()
	st := s.state[req.provider]
	cfg := st.cfg
	d := decision{header: http.Header{}}
	s.seq++
	d.idSeed = s.rng.Uint64()
	d.requestID = requestID(req.provider, d.idSeed)
	st.requests++

	maxOut := req.maxTokens
	if maxOut <= 0 {
		maxOut = outTokens
	}
	in := float64(req.inputTokens)

	// OpenAI counts failed requests against its per-minute limit; Gemini
	// counts even 503s against the daily quota.
	var rpmWait time.Duration
	if st.rpm != nil {
		rpmWait = st.rpm.Wait(now, 1)
		if req.provider == "openai" {
			st.rpm.Take(now, 1)
		}
	}
	var rpdWait time.Duration
	if st.rpd != nil {
		rpdWait = st.rpd.Wait(now, 1)
		if req.provider == "gemini" {
			st.rpd.Take(now, 1)
		}
	}
	rampWait := s.ramp(st, now)

	info := errorInfo{provider: req.provider, model: req.model, requestID: d.requestID}
	fail := func(kind, code string, retry time.Duration) decision {
		info.kind, info.code, info.retryAfter = kind, code, retry
		switch kind {
		case FaultReset, FaultCut, FaultHang, FaultMidStream:
			d.kind, d.code = kind, code
			if kind == FaultCut || kind == FaultMidStream || (kind == FaultHang && code == "stall") {
				s.account(st, req, now, in, maxOut, outTokens) // the model ran
			}
			st.errors++
		default:
			if info.limit == 0 {
				s.fillLimitInfo(&info, st, kind)
			}
			if kind == FaultSpendCap || kind == FaultDailyQuota {
				info.resetAt = s.spendReset(st, now)
			}
			rp := errorReply(info)
			d.reply = &rp
			st.errors++
		}
		s.limitHeaders(req.provider, st, now, d.header)
		return d
	}

	// Injected faults first, oldest first.
	for i, p := range s.pending {
		if p.f.Provider != "" && p.f.Provider != req.provider {
			continue
		}
		p.left--
		if p.left <= 0 {
			s.pending = append(s.pending[:i], s.pending[i+1:]...)
		}
		return fail(p.f.Kind, p.f.Code, p.f.RetryAfter)
	}
	// A failover-demo degradation.
	if now.Before(st.degradedUntil) {
		if s.rng.Float64() < 0.6 {
			return fail(FaultOverload, "", 0)
		}
		return fail(FaultRateLimit, "", 30*time.Second)
	}
	// The scenario's schedule.
	elapsed := now.Sub(s.started)
	for _, r := range cfg.Faults {
		if !r.active(elapsed) {
			continue
		}
		if r.Prob >= 1 || s.rng.Float64() < r.Prob {
			return fail(r.Kind, r.Code, r.RetryAfter)
		}
	}

	// The documented limits.
	if cfg.ContextWindow > 0 && int64(req.inputTokens) > cfg.ContextWindow {
		info.limit, info.requested = cfg.ContextWindow, int64(req.inputTokens)
		return fail(FaultContextLength, "", 0)
	}
	if (req.provider == "openai" || req.provider == "groq") && st.tpm != nil && int64(req.inputTokens+maxOut) > st.tpm.Limit() {
		info.limit, info.requested = st.tpm.Limit(), int64(req.inputTokens+maxOut)
		return fail(FaultRequestTooLarge, "", 0)
	}
	if cfg.BudgetUSD > 0 {
		s.rollSpend(st, now)
		if st.spent >= cfg.BudgetUSD {
			return fail(FaultSpendCap, cfg.SpendCode, 0)
		}
	}
	if rpdWait > 0 {
		info.metric, info.limit, info.used = "requests", st.rpd.Limit(), st.rpd.Limit()
		return fail(FaultDailyQuota, "rpd", rpdWait)
	}
	if st.tpd != nil {
		if w := st.tpd.Wait(now, in+float64(outTokens)); w > 0 {
			info.metric, info.limit = "tokens", st.tpd.Limit()
			info.used = st.tpd.Limit() - int64(st.tpd.Remaining(now))
			info.requested = int64(in) + int64(outTokens)
			return fail(FaultDailyQuota, "tpd", w)
		}
	}
	type check struct {
		l      limiter
		n      float64
		metric string
	}
	checks := []check{{st.itpm, in, "input tokens"}, {st.otpm, float64(maxOut), "output tokens"}}
	if req.provider == "openai" || req.provider == "groq" {
		checks = append(checks, check{st.tpm, in + float64(maxOut), "tokens"})
	} else {
		checks = append(checks, check{st.tpm, in, "tokens"})
	}
	if rpmWait > 0 {
		info.metric, info.limit, info.used, info.requested = "requests", st.rpm.Limit(), st.rpm.Limit(), 1
		return fail(FaultRateLimit, "", rpmWait)
	}
	for _, c := range checks {
		if c.l == nil {
			continue
		}
		if w := c.l.Wait(now, c.n); w > 0 {
			info.metric, info.limit = c.metric, c.l.Limit()
			info.used = c.l.Limit() - int64(c.l.Remaining(now))
			info.requested = int64(c.n)
			return fail(FaultRateLimit, "", w)
		}
	}
	if rampWait > 0 {
		return fail(FaultSlowDown, "", rampWait)
	}

	s.account(st, req, now, in, maxOut, outTokens)
	s.limitHeaders(req.provider, st, now, d.header)
	return d
}

// account spends an admitted request's units and cost.
func (s *Server) account(st *provState, req *simRequest, now time.Time, in float64, maxOut, out int) {
	if st.rpm != nil && req.provider != "openai" {
		st.rpm.Take(now, 1)
	}
	if st.rpd != nil && req.provider != "gemini" {
		st.rpd.Take(now, 1)
	}
	if st.tpm != nil {
		if req.provider == "openai" || req.provider == "groq" {
			st.tpm.Take(now, in+float64(maxOut)) // counted at admission on max_tokens
		} else {
			st.tpm.Take(now, in+float64(out))
		}
	}
	if st.itpm != nil {
		st.itpm.Take(now, in)
	}
	if st.otpm != nil {
		st.otpm.Take(now, float64(out))
	}
	if st.tpd != nil {
		st.tpd.Take(now, in+float64(out))
	}
	s.rollSpend(st, now)
	st.spent += in*st.cfg.PriceIn/1e6 + float64(out)*st.cfg.PriceOut/1e6
}

// rollSpend starts a new budget period when the current one is over.
func (s *Server) rollSpend(st *provState, now time.Time) {
	var key int64
	if st.cfg.BudgetPeriod > 0 {
		key = int64(now.Sub(s.started) / st.cfg.BudgetPeriod)
	} else {
		u := now.UTC()
		key = int64(u.Year())*12 + int64(u.Month())
	}
	if key != st.spendKey {
		st.spendKey, st.spent = key, 0
	}
}

// spendReset is when the budget period ends.
func (s *Server) spendReset(st *provState, now time.Time) time.Time {
	if st.cfg.BudgetPeriod > 0 {
		n := now.Sub(s.started)/st.cfg.BudgetPeriod + 1
		return s.started.Add(n * st.cfg.BudgetPeriod)
	}
	u := now.UTC()
	return time.Date(u.Year(), u.Month()+1, 1, 0, 0, 0, 0, time.UTC)
}

// ramp applies the acceleration limit: it records the request and returns
// how long to slow down (0: fine).
func (s *Server) ramp(st *provState, now time.Time) time.Duration {
	cut := now.Add(-time.Minute)
	i := 0
	for i < len(st.recent) && st.recent[i].Before(cut) {
		i++
	}
	st.recent = st.recent[i:]
	if len(st.recent) >= 10000 {
		st.recent = st.recent[1:]
	}
	cfg := st.cfg
	var wait time.Duration
	if cfg.RampFloor > 0 && cfg.RampWindow > 0 {
		winStart := now.Add(-cfg.RampWindow)
		recent, earlier := 1, 0 // this request counts as recent
		var oldestRecent time.Time
		for _, t := range st.recent {
			if t.After(winStart) {
				if recent == 1 {
					oldestRecent = t
				}
				recent++
			} else {
				earlier++
			}
		}
		base := float64(earlier) * cfg.RampWindow.Seconds() / (time.Minute - cfg.RampWindow).Seconds()
		allowed := math.Max(float64(cfg.RampFloor), cfg.RampFactor*base)
		if float64(recent) > allowed {
			wait = oldestRecent.Add(cfg.RampWindow).Sub(now)
			if wait < time.Second {
				wait = time.Second
			}
		}
	}
	st.recent = append(st.recent, now)
	return wait
}

// fillLimitInfo fills a rate-limit body's numbers from the state.
func (s *Server) fillLimitInfo(info *errorInfo, st *provState, kind string) {
	now := s.clock.Now()
	switch kind {
	case FaultRateLimit, FaultSlowDown:
		if st.rpm != nil {
			info.metric, info.limit = "requests", st.rpm.Limit()
			info.used, info.requested = info.limit, 1
		}
	case FaultDailyQuota:
		if st.rpd != nil {
			info.metric, info.limit = "requests", st.rpd.Limit()
			info.used, info.requested = info.limit, 1
		}
	case FaultRequestTooLarge:
		if st.tpm != nil {
			info.limit = st.tpm.Limit()
			info.requested = info.limit + int64(math.Max(1, st.tpm.Remaining(now)/10))
		}
	case FaultContextLength:
		info.limit = st.cfg.ContextWindow
	}
}

// limitHeaders sets the provider's rate-limit headers, in its format and
// units, from the state at now.
func (s *Server) limitHeaders(provider string, st *provState, now time.Time, h http.Header) {
	switch provider {
	case "openai", "groq":
		req := st.rpm
		if provider == "groq" {
			req = st.rpd // Groq: requests are per day, tokens per minute
		}
		if req != nil {
			h.Set("x-ratelimit-limit-requests", fmt.Sprint(req.Limit()))
			h.Set("x-ratelimit-remaining-requests", fmt.Sprint(int64(req.Remaining(now))))
			h.Set("x-ratelimit-reset-requests", goDuration(req.ResetIn(now)))
		}
		if st.tpm != nil {
			h.Set("x-ratelimit-limit-tokens", fmt.Sprint(st.tpm.Limit()))
			h.Set("x-ratelimit-remaining-tokens", fmt.Sprint(int64(st.tpm.Remaining(now))))
			h.Set("x-ratelimit-reset-tokens", goDuration(st.tpm.ResetIn(now)))
		}
	case "anthropic":
		set := func(name string, l limiter, round bool) {
			if l == nil {
				return
			}
			rem := int64(l.Remaining(now))
			if round {
				rem = int64(math.Round(float64(rem)/1000) * 1000)
			}
			h.Set("anthropic-ratelimit-"+name+"-limit", fmt.Sprint(l.Limit()))
			h.Set("anthropic-ratelimit-"+name+"-remaining", fmt.Sprint(rem))
			h.Set("anthropic-ratelimit-"+name+"-reset", rfc3339Reset(now, l.ResetIn(now)))
		}
		set("requests", st.rpm, false)
		set("input-tokens", st.itpm, true)
		set("output-tokens", st.otpm, true)
		// tokens-* shows the most restrictive limit in effect.
		var tight limiter
		frac := 2.0
		for _, l := range []limiter{st.tpm, st.itpm, st.otpm} {
			if l == nil || l.Limit() == 0 {
				continue
			}
			if f := l.Remaining(now) / float64(l.Limit()); f < frac {
				tight, frac = l, f
			}
		}
		set("tokens", tight, true)
	}
}

// rfc3339Reset formats now+d in RFC 3339, UTC, to the second (rounded up).
func rfc3339Reset(now time.Time, d time.Duration) string {
	t := now.Add(d).UTC()
	if t.Truncate(time.Second) != t {
		t = t.Truncate(time.Second).Add(time.Second)
	}
	return t.Format(time.RFC3339)
}

// requestID makes a provider-shaped request id.
func requestID(provider string, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, 0x1d))
	switch provider {
	case "anthropic":
		return "req_011C" + randChars(r, base58, 20)
	case "groq":
		return "req_01" + randChars(r, lowerAlnum, 24)
	}
	return "req_" + randChars(r, hexDigits, 32)
}

const (
	base58     = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
	hexDigits  = "0123456789abcdef"
	lowerAlnum = "0123456789abcdefghjkmnpqrstvwxyz"
	alnum      = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

func randChars(r *rand.Rand, set string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = set[r.IntN(len(set))]
	}
	return string(b)
}
