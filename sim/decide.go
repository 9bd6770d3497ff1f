package sim

import (
	"math"
	"math/rand/v2"
	"net/http"
	"time"
)

// decision is what the simulator does with one admitted request.
type decision struct {
	reply     *reply // an HTTP error to send instead of an answer
	kind      string // "" (a clean answer), FaultReset, FaultCut, FaultHang, FaultMidStream
	code      string
	info      errorInfo   // what an error (also a mid-stream one) names
	header    http.Header // rate-limit headers and request id, on every answer
	requestID string
	idSeed    uint64 // for message/response ids
	// Drawn from a learnt scenario's distributions (0: the fixed pace).
	firstToken time.Duration
	tps        float64
	// served is the service tier the answer names ("": none).
	served string
}

// limitView reads a provider's limits at one instant, with the refusals
// in force: while a 429 holds the provider, its requests limit shows
// nothing left until the hold ends, so headers and body agree.
type limitView struct {
	st   *provState
	now  time.Time
	hold time.Time // a 429 hold's end; zero: none
}

// level is what l has left and how long until it is full again; hold
// applies the 429 hold (the requests limit only).
func (v limitView) level(l limiter, hold bool) (int64, time.Duration) {
	rem, reset := int64(l.Remaining(v.now)), l.ResetIn(v.now)
	if hold && v.now.Before(v.hold) {
		rem = 0
		reset = max(reset, v.hold.Sub(v.now))
	}
	return rem, reset
}

// decide fits the request into the provider's state at now: the armed
// faults first, then a failover-demo degradation, the scenario's
// schedule, and the documented limits. Called with s.mu held.
func (s *Server) decide(p *provider, req *simRequest, outTokens int) decision {
	now := s.clock.Now()
	st := s.stateOf(p.name, req.account)
	ad := &admission{s: s, p: p, req: req, st: st, now: now, outTokens: outTokens,
		key: stateKey(p.name, req.account)} // armed faults and holds: per account
	d := &ad.d
	d.header = http.Header{}
	d.idSeed = s.nextSeed()
	d.requestID = p.newID(idRand(d.idSeed))
	st.requests++

	ad.maxOut = req.maxTokens
	if ad.maxOut <= 0 {
		ad.maxOut = outTokens
	}
	ad.in = float64(req.inputTokens)
	ad.count()
	d.info = errorInfo{provider: p.name, model: req.model, requestID: d.requestID}
	d.served = servedTier(p, req, false)
	ad.priorityTier()
	defer tierHeader(p, d)
	defer ad.priorityAnswer()

	if out, ok := ad.injected(); ok {
		return out
	}
	if out, ok := ad.overLimit(); ok {
		return out
	}
	s.account(p, st, now, ad.in, ad.maxOut, outTokens)
	p.d.limitHeaders(p, limitView{st: st, now: now}, d.header)
	d.firstToken, d.tps = drawPace(s.rng, st.cfg)
	return *d
}

// admission is one request being decided: its provider's state at now and
// the decision so far. Its methods run with s.mu held.
type admission struct {
	s         *Server
	p         *provider
	req       *simRequest
	st        *provState
	key       string // armed faults and holds: per account
	now       time.Time
	in        float64 // input tokens
	maxOut    int     // the output tokens the request may take
	outTokens int     // the output tokens of the answer
	// How long the request must wait for the per-minute and per-day
	// request limits and the capacity ramp (0: none).
	rpmWait, rpdWait, rampWait time.Duration
	d                          decision
}

// count reads the request limits and the ramp. OpenAI counts failed
// requests against its per-minute limit; Gemini counts even 503s against
// the daily quota.
func (ad *admission) count() {
	st, p, now := ad.st, ad.p, ad.now
	if st.rpm != nil {
		ad.rpmWait = st.rpm.Wait(now, 1)
		if p.failuresCount {
			st.rpm.Take(now, 1)
		}
	}
	if st.rpd != nil {
		ad.rpdWait = st.rpd.Wait(now, 1)
		if p.dayCountsFailures {
			st.rpd.Take(now, 1)
		}
	}
	ad.rampWait = ad.s.ramp(st, now)
}

// fail is the decision to answer with fault kind (code, retry-after
// retry) instead of a clean answer.
func (ad *admission) fail(kind, code string, retry time.Duration) decision {
	s, p, st, now, d := ad.s, ad.p, ad.st, ad.now, &ad.d
	info := &d.info
	info.kind, info.code, info.retryAfter = kind, code, retry
	switch kind {
	case FaultTierDowngrade:
		// Not an error: a premium request answered at the lower tier.
		d.served = servedTier(p, ad.req, true)
		s.account(p, st, now, ad.in, ad.maxOut, ad.outTokens)
		p.d.limitHeaders(p, limitView{st: st, now: now}, d.header)
		d.firstToken, d.tps = drawPace(s.rng, st.cfg)
		return *d
	case FaultReset, FaultCut, FaultHang, FaultMidStream:
		d.kind, d.code = kind, code
		if kind == FaultCut || kind == FaultMidStream || (kind == FaultHang && code == "stall") {
			s.account(p, st, now, ad.in, ad.maxOut, ad.outTokens) // the model ran
		}
		st.errors++
	default:
		if info.limit == 0 {
			s.fillLimitInfo(info, st, kind)
		}
		if info.resetAt.IsZero() && (kind == FaultSpendCap || kind == FaultDailyQuota) {
			info.resetAt = s.spendReset(st, now)
		}
		rp := errorReply(*info)
		d.reply = &rp
		st.errors++
	}
	p.d.limitHeaders(p, limitView{st: st, now: now, hold: s.holdEnd(ad.key, now)}, d.header)
	return *d
}

// injected is the decision of a fault that does not come from the limits:
// an armed one (injected, or the hold one left), a failover-demo
// degradation, a trace's next outcome, or the scenario's schedule. ok is
// false when none applies.
func (ad *admission) injected() (decision, bool) {
	s, st, key, now := ad.s, ad.st, ad.key, ad.now
	// Armed faults first: injected ones and the holds they left.
	if a := s.armedFor(key, ad.req, now); a != nil {
		ad.d.info.resetAt = a.resetAt
		return ad.fail(a.kind, a.code, a.retryAfter), true
	}
	// A failover-demo degradation.
	if now.Before(st.degradedUntil) {
		if s.rng.Float64() < 0.6 {
			return ad.fail(FaultOverload, "", 0), true
		}
		// A 429 with retry-after 30s (or until the degradation ends), and
		// refusing until then.
		retry := min(30*time.Second, st.degradedUntil.Sub(now))
		s.hold(key, FaultRateLimit, "", retry, now)
		return ad.fail(FaultRateLimit, "", retry), true
	}
	// Trace mode: the provider's next recorded outcome.
	if step, ok := s.nextTrace(st); ok {
		return s.replayStep(ad.p, st, key, step, now, ad.in, ad.maxOut, ad.outTokens, &ad.d, ad.fail), true
	}
	// The scenario's schedule.
	elapsed := now.Sub(s.started)
	for i, r := range st.cfg.Faults {
		if !r.active(elapsed+st.phase[i]) || !tierFaultApplies(r.Kind, ad.req) {
			continue
		}
		if r.Prob >= 1 || s.rng.Float64() < r.Prob {
			if r.Kind == FaultRateLimit || r.Kind == FaultSlowDown {
				retry := r.RetryAfter
				if retry <= 0 {
					retry = defaultRetry(r.Kind)
				}
				s.hold(key, r.Kind, r.Code, retry, now)
				return ad.fail(r.Kind, r.Code, retry), true
			}
			ad.d.info.resetAt = s.windowReset(r, elapsed+st.phase[i])
			return ad.fail(r.Kind, r.Code, r.RetryAfter), true
		}
	}
	return decision{}, false
}

// overLimit is the refusal of a request past one of the documented
// limits: the context window, the request size, the budget, the daily
// and per-minute limits, the ramp. ok is false when the request fits.
func (ad *admission) overLimit() (decision, bool) {
	st, p, req, now, info := ad.st, ad.p, ad.req, ad.now, &ad.d.info
	in, maxOut, cfg := ad.in, ad.maxOut, st.cfg
	if cfg.ContextWindow > 0 && int64(req.inputTokens) > cfg.ContextWindow {
		info.limit, info.requested = cfg.ContextWindow, int64(req.inputTokens)
		return ad.fail(FaultContextLength, "", 0), true
	}
	if p.tokensAtAdmission && st.tpm != nil && int64(req.inputTokens+maxOut) > st.tpm.Limit() {
		info.limit, info.requested = st.tpm.Limit(), int64(req.inputTokens+maxOut)
		return ad.fail(FaultRequestTooLarge, "", 0), true
	}
	if cfg.BudgetUSD > 0 {
		ad.s.rollSpend(st, now)
		if st.spent >= cfg.BudgetUSD {
			return ad.fail(FaultSpendCap, cfg.SpendCode, 0), true
		}
	}
	if ad.rpdWait > 0 {
		info.metric, info.limit, info.used = "requests", st.rpd.Limit(), st.rpd.Limit()
		info.resetAt = now.Add(ad.rpdWait)
		return ad.fail(FaultDailyQuota, "rpd", ad.rpdWait), true
	}
	if st.tpd != nil {
		if w := st.tpd.Wait(now, in+float64(ad.outTokens)); w > 0 {
			info.metric, info.limit = "tokens", st.tpd.Limit()
			info.used = st.tpd.Limit() - int64(st.tpd.Remaining(now))
			info.requested = int64(in) + int64(ad.outTokens)
			info.resetAt = now.Add(w)
			return ad.fail(FaultDailyQuota, "tpd", w), true
		}
	}
	if ad.rpmWait > 0 {
		info.metric, info.limit, info.used, info.requested = "requests", st.rpm.Limit(), st.rpm.Limit(), 1
		return ad.fail(FaultRateLimit, "", ad.rpmWait), true
	}
	tpmIn := in // tokens counted against the per-minute tokens limit
	if p.tokensAtAdmission {
		tpmIn = in + float64(maxOut)
	}
	for _, c := range [...]struct {
		l      limiter
		n      float64
		metric string
	}{{st.itpm, in, "input tokens"}, {st.otpm, float64(maxOut), "output tokens"}, {st.tpm, tpmIn, "tokens"}} {
		if c.l == nil {
			continue
		}
		if w := c.l.Wait(now, c.n); w > 0 {
			info.metric, info.limit = c.metric, c.l.Limit()
			info.used = c.l.Limit() - int64(c.l.Remaining(now))
			info.requested = int64(c.n)
			return ad.fail(FaultRateLimit, "", w), true
		}
	}
	if ad.rampWait > 0 {
		return ad.fail(FaultSlowDown, "", ad.rampWait), true
	}
	return decision{}, false
}

// defaultRetry is the delay a rate_limit or slow_down fault names when it
// is given none.
func defaultRetry(kind string) time.Duration {
	if kind == FaultSlowDown {
		return 5 * time.Second
	}
	return 2 * time.Second
}

// account spends an admitted request's units and cost.
func (s *Server) account(p *provider, st *provState, now time.Time, in float64, maxOut, out int) {
	if st.rpm != nil && !p.failuresCount {
		st.rpm.Take(now, 1)
	}
	if st.rpd != nil && !p.dayCountsFailures {
		st.rpd.Take(now, 1)
	}
	if st.tpm != nil {
		if p.tokensAtAdmission {
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

// fillLimitInfo fills a rate-limit body's numbers from the state: a
// refused request names the limit as used up, as the headers show it.
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

// rfc3339Reset formats now+d in RFC 3339, UTC, to the second (rounded up).
func rfc3339Reset(now time.Time, d time.Duration) string {
	t := now.Add(d).UTC()
	if t.Truncate(time.Second) != t {
		t = t.Truncate(time.Second).Add(time.Second)
	}
	return t.Format(time.RFC3339)
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
