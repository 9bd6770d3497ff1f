package sim

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
)

// armedFault is a fault as state: what the simulator will refuse with, for
// how many requests or until when. Injected faults, and the 429 holds a
// rate-limit fault leaves behind, are armed faults.
type armedFault struct {
	id       int
	f        Fault
	provider string    // the target ("" every provider)
	left     int       // requests it still hits; -1: no count (until its reset, its For, or cleared)
	until    time.Time // it disarms at this time (zero: not by time)
	hold     bool      // a 429 hold: every request to provider is refused until `until`
	hits     int
	first    time.Time       // its first hit
	seen     map[uint64]bool // deterministic kinds: the requests it answered, answered alike again
}

// fired is what an armed fault answers one request with.
type fired struct {
	kind, code string
	retryAfter time.Duration
	resetAt    time.Time
}

func deterministic(kind string) bool {
	return kind == FaultContextLength || kind == FaultRequestTooLarge
}

func persistent(kind string) bool { return kind == FaultSpendCap || kind == FaultDailyQuota }

// Arm queues a fault and returns its id (for ClearFault). It hits the
// next Count requests to its provider (any provider when Provider is ""),
// before anything the scenario does, with these kinds of state:
//   - rate_limit, slow_down: the hit starts a hold, and every request to
//     that provider is refused with the same 429 until its Retry-After has
//     passed (the remaining time named each time);
//   - spend_cap, daily_quota with Count 0: every request is refused until
//     the documented reset (the month's end, the day's end) or ClearFault;
//   - context_length, request_too_large: a request it answered gets the
//     same answer again (the same provider, model and prompt), until
//     cleared; other requests pass once Count is spent;
//   - For > 0: the fault disarms For after its first hit (with Count 0 it
//     hits every request until then: an overload episode).
//
// A failover-demo fault instead degrades its provider (the scenario's
// primary when Provider is "") for RetryAfter (default 60s).
func (s *Server) Arm(f Fault) (int, error) {
	if base, acct, ok := strings.Cut(f.Provider, "@"); ok {
		f.Provider = stateKey(accountName(base), acct) // a named account's faults are its own
	} else {
		f.Provider = accountName(f.Provider) // an API variant's faults are its provider's
	}
	if err := f.validate(); err != nil {
		return 0, fmt.Errorf("sim: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextArm++
	id := s.nextArm
	if f.Kind == FaultFailoverDemo {
		p := f.Provider
		if p == "" {
			p = s.scen.Primary
		}
		d := f.RetryAfter
		if d <= 0 {
			d = time.Minute
		}
		base, acct, _ := strings.Cut(p, "@")
		st := s.stateOf(base, acct)
		st.degradedUntil, st.degradeID = s.clock.Now().Add(d), id
		return id, nil
	}
	a := &armedFault{id: id, f: f, provider: f.Provider, left: f.Count}
	if a.left == 0 {
		a.left = 1
		if persistent(f.Kind) || f.For > 0 {
			a.left = -1
		}
	}
	if deterministic(f.Kind) {
		a.seen = map[uint64]bool{}
	}
	s.armed = append(s.armed, a)
	return id, nil
}

// fingerprint identifies a request for the deterministic faults.
func fingerprint(req *simRequest) uint64 {
	h := fnv.New64a()
	for _, p := range []string{req.provider, req.model, req.prompt, strconv.Itoa(req.maxTokens)} {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// quotaReset is when a persistent quota fault on provider lifts by itself.
func (s *Server) quotaReset(key string, a *armedFault, now time.Time) time.Time {
	p, acct, _ := strings.Cut(key, "@")
	st := s.stateOf(p, acct)
	if a.f.Kind == FaultSpendCap {
		return s.spendReset(st, now)
	}
	if providerOf(p).dayAtMidnight {
		m := midnight(now, s.loc)
		return time.Date(m.Year(), m.Month(), m.Day()+1, 0, 0, 0, 0, s.loc)
	}
	if a.f.RetryAfter > 0 {
		return a.first.Add(a.f.RetryAfter)
	}
	u := now.UTC()
	return time.Date(u.Year(), u.Month(), u.Day()+1, 0, 0, 0, 0, time.UTC)
}

// armedFor finds the armed fault that answers req, spending it. Called
// with s.mu held.
func (s *Server) armedFor(p string, req *simRequest, now time.Time) *fired {
	fp := fingerprint(req)
	keep := s.armed[:0]
	var out *fired
	for _, a := range s.armed {
		expired := !a.until.IsZero() && !now.Before(a.until)
		if expired || out != nil || (a.provider != "" && a.provider != p) || !tierFaultApplies(a.f.Kind, req) {
			if !expired {
				keep = append(keep, a)
			}
			continue
		}
		switch {
		case a.hold:
			a.hits++
			out = &fired{kind: a.f.Kind, code: a.f.Code, retryAfter: a.until.Sub(now)}
		case a.seen != nil && a.seen[fp]:
			a.hits++
			out = &fired{kind: a.f.Kind, code: a.f.Code}
		case a.left == 0:
			// spent; a deterministic fault stays to answer its requests alike
		default:
			out = s.fire(a, p, fp, now)
		}
		if a.left != 0 || a.hold || a.seen != nil {
			keep = append(keep, a)
		}
	}
	clear(s.armed[len(keep):])
	s.armed = keep
	if out != nil && (out.kind == FaultRateLimit || out.kind == FaultSlowDown) && !s.holding(p, now) {
		s.hold(p, out.kind, out.code, out.retryAfter, now)
	}
	return out
}

// fire spends one hit of a.
func (s *Server) fire(a *armedFault, p string, fp uint64, now time.Time) *fired {
	a.hits++
	if a.first.IsZero() {
		a.first = now
		if a.f.For > 0 {
			a.until = now.Add(a.f.For)
		}
	}
	if a.left > 0 {
		a.left--
	}
	out := &fired{kind: a.f.Kind, code: a.f.Code, retryAfter: a.f.RetryAfter}
	switch {
	case a.f.Kind == FaultRateLimit || a.f.Kind == FaultSlowDown:
		if out.retryAfter <= 0 {
			out.retryAfter = defaultRetry(a.f.Kind)
		}
	case deterministic(a.f.Kind):
		a.seen[fp] = true
	case persistent(a.f.Kind):
		out.resetAt = s.quotaReset(p, a, now)
		if a.left < 0 && a.provider != "" && a.until.IsZero() {
			a.until = out.resetAt
		}
		if a.f.Kind == FaultDailyQuota {
			out.retryAfter = out.resetAt.Sub(now)
		}
	}
	return out
}

// hold refuses every request to provider with kind until retry has passed.
func (s *Server) hold(p, kind, code string, retry time.Duration, now time.Time) {
	s.nextArm++
	h := &armedFault{id: s.nextArm, f: Fault{Provider: p, Kind: kind, Code: code, RetryAfter: retry},
		provider: p, left: -1, until: now.Add(retry), hold: true, first: now}
	s.armed = append([]*armedFault{h}, s.armed...)
}

func (s *Server) holding(p string, now time.Time) bool { return now.Before(s.holdEnd(p, now)) }

// holdEnd is when the 429 hold on provider ends (zero: none).
func (s *Server) holdEnd(p string, now time.Time) time.Time {
	var end time.Time
	for _, a := range s.armed {
		if a.hold && a.provider == p && now.Before(a.until) && a.until.After(end) {
			end = a.until
		}
	}
	return end
}

// ArmedFault is one armed fault, as the console shows it: what it injects,
// on which target, and for how long.
type ArmedFault struct {
	ID       int    `json:"id"`       // for ClearFault
	Provider string `json:"provider"` // the target; "" every provider
	Kind     string `json:"kind"`
	Code     string `json:"code,omitempty"`
	// Left is how many more requests it hits; -1 when it is not counted
	// (it lasts until Until, or until cleared).
	Left int `json:"left"`
	// UntilCleared: it stays until ClearFault (or its documented reset,
	// Until, when one is known).
	UntilCleared bool       `json:"until_cleared"`
	Until        *time.Time `json:"until,omitempty"` // when it ends by itself
	Hold         bool       `json:"hold"`            // a 429 refusing every request until Until (its Retry-After)
	Hits         int        `json:"hits"`            // requests it answered so far
	Label        string     `json:"label"`           // e.g. "next 2 requests", "until cleared", "refusing until 12:00:20 UTC"
}

// Armed lists the armed faults, oldest first after the holds, with each
// failover-demo degradation in force.
func (s *Server) Armed() []ArmedFault {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.armedLocked(s.clock.Now())
}

func (s *Server) armedLocked(now time.Time) []ArmedFault {
	out := []ArmedFault{}
	for _, a := range s.armed {
		if !a.until.IsZero() && !now.Before(a.until) {
			continue
		}
		af := ArmedFault{ID: a.id, Provider: a.provider, Kind: a.f.Kind, Code: a.f.Code, Left: a.left, Hits: a.hits, Hold: a.hold}
		if !a.until.IsZero() {
			t := a.until
			af.Until = &t
		}
		switch {
		case a.hold:
			af.Label = "refusing until " + a.until.UTC().Format("15:04:05") + " UTC (its Retry-After)"
		case a.seen != nil && a.left == 0:
			af.UntilCleared, af.Label = true, "the same request again, until cleared"
		case a.left > 0:
			af.Label = fmt.Sprintf("next %d request", a.left)
			if a.left > 1 {
				af.Label += "s"
			}
			if a.seen != nil {
				af.UntilCleared = true
				af.Label += ", then the same request again until cleared"
			}
		case !a.until.IsZero():
			af.UntilCleared = persistent(a.f.Kind)
			af.Label = "until " + a.until.UTC().Format("2006-01-02 15:04 UTC")
			if af.UntilCleared {
				af.Label += " or cleared"
			}
		default:
			af.UntilCleared = true
			af.Label = "until cleared"
			if a.f.For > 0 {
				af.UntilCleared = false
				af.Label = fmt.Sprintf("for %s from its first hit", a.f.For)
			}
		}
		out = append(out, af)
	}
	for _, p := range providerNames {
		st := s.state[p]
		if now.Before(st.degradedUntil) {
			t := st.degradedUntil
			out = append(out, ArmedFault{ID: st.degradeID, Provider: p, Kind: FaultFailoverDemo, Left: -1, Until: &t,
				Label: "degraded until " + t.UTC().Format("15:04:05") + " UTC"})
		}
	}
	return out
}

// ClearFault disarms the armed fault with this id (and the hold it left,
// if any); false when there is none.
func (s *Server) ClearFault(id int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	found := false
	keep := s.armed[:0]
	var target *armedFault
	for _, a := range s.armed {
		if a.id == id {
			found, target = true, a
			continue
		}
		keep = append(keep, a)
	}
	clear(s.armed[len(keep):])
	s.armed = keep
	if target != nil && (target.f.Kind == FaultRateLimit || target.f.Kind == FaultSlowDown) && !target.hold {
		s.dropHolds(target.provider)
	}
	for _, st := range s.state {
		if st.degradeID == id && !st.degradedUntil.IsZero() {
			st.degradedUntil, found = time.Time{}, true
		}
	}
	return found
}

// ClearFaults disarms every armed fault, hold and degradation on provider
// ("" every provider) and returns how many it cleared.
func (s *Server) ClearFaults(provider string) int {
	provider = accountName(provider)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	keep := s.armed[:0]
	for _, a := range s.armed {
		if provider == "" || a.provider == provider || a.provider == "" {
			n++
			continue
		}
		keep = append(keep, a)
	}
	clear(s.armed[len(keep):])
	s.armed = keep
	for p, st := range s.state {
		if (provider == "" || p == provider) && !st.degradedUntil.IsZero() {
			st.degradedUntil = time.Time{}
			n++
		}
	}
	return n
}

// dropHolds removes the 429 holds on provider ("" every provider). Called
// with s.mu held.
func (s *Server) dropHolds(provider string) {
	keep := s.armed[:0]
	for _, a := range s.armed {
		if a.hold && (provider == "" || a.provider == provider) {
			continue
		}
		keep = append(keep, a)
	}
	clear(s.armed[len(keep):])
	s.armed = keep
}
