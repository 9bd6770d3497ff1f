package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/limitscope/limitscope/internal/sanitize"
)

// Status is the simulator's state, as GET /_sim/status returns it.
type Status struct {
	Scenario  string           `json:"scenario"`
	Since     time.Time        `json:"since"` // when the scenario started
	Providers []ProviderStatus `json:"providers"`
	Pending   []Fault          `json:"pending_faults"` // injected, not yet spent (Count = what is left; 0: not counted)
	Armed     []ArmedFault     `json:"armed"`          // every armed fault, hold and degradation (see Server.Armed)
	Seed      int64            `json:"seed"`           // the seed in effect
	Instance  string           `json:"instance"`       // this simulator's id (x-limitscope-sim-instance)
}

// ProviderStatus is one simulated provider's live limits and counters.
type ProviderStatus struct {
	Provider      string        `json:"provider"`
	Requests      int64         `json:"requests"` // authenticated requests seen
	Errors        int64         `json:"errors"`   // of which answered with a failure
	Limits        []LimitStatus `json:"limits"`
	SpentUSD      float64       `json:"spent_usd"`
	BudgetUSD     float64       `json:"budget_usd"` // 0: no budget
	DegradedUntil *time.Time    `json:"degraded_until,omitempty"`
}

// LimitStatus is one limit's level.
type LimitStatus struct {
	Name      string `json:"name"` // requests/min, tokens/min, input_tokens/min, output_tokens/min, requests/day, tokens/day
	Limit     int64  `json:"limit"`
	Remaining int64  `json:"remaining"`
	ResetMS   int64  `json:"reset_ms"` // until fully replenished
}

// Status returns the simulator's current state.
func (s *Server) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	st := Status{Scenario: s.scen.Name, Since: s.started, Pending: []Fault{}}
	for _, p := range providerNames {
		ps := s.state[p]
		out := ProviderStatus{Provider: p, Requests: ps.requests, Errors: ps.errors, BudgetUSD: ps.cfg.BudgetUSD, Limits: []LimitStatus{}}
		if ps.cfg.BudgetUSD > 0 {
			s.rollSpend(ps, now)
		}
		out.SpentUSD = ps.spent
		for _, l := range []struct {
			name string
			l    limiter
		}{{"requests/min", ps.rpm}, {"tokens/min", ps.tpm}, {"input_tokens/min", ps.itpm},
			{"output_tokens/min", ps.otpm}, {"requests/day", ps.rpd}, {"tokens/day", ps.tpd}} {
			if l.l == nil {
				continue
			}
			out.Limits = append(out.Limits, LimitStatus{Name: l.name, Limit: l.l.Limit(),
				Remaining: int64(l.l.Remaining(now)), ResetMS: l.l.ResetIn(now).Milliseconds()})
		}
		if now.Before(ps.degradedUntil) {
			t := ps.degradedUntil
			out.DegradedUntil = &t
		}
		st.Providers = append(st.Providers, out)
	}
	for _, a := range s.armed {
		if a.hold || (!a.until.IsZero() && !now.Before(a.until)) || a.left == 0 {
			continue
		}
		f := a.f
		f.Count = max(a.left, 0)
		st.Pending = append(st.Pending, f)
	}
	st.Seed, st.Instance = int64(s.seed), s.instance
	st.Armed = s.armedLocked(now)
	return st
}

// faultJSON is a Fault on the wire: retry_after is a duration string
// ("20s") or retry_after_ms a number of milliseconds.
type faultJSON struct {
	Provider     string `json:"provider,omitempty"`
	Kind         string `json:"kind"`
	RetryAfter   string `json:"retry_after,omitempty"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
	Count        int    `json:"count,omitempty"`
	Code         string `json:"code,omitempty"`
	For          string `json:"for,omitempty"`
	ForMS        int64  `json:"for_ms,omitempty"`
}

// MarshalJSON writes {"provider","kind","retry_after":"20s","count","code"}.
func (f Fault) MarshalJSON() ([]byte, error) {
	j := faultJSON{Provider: f.Provider, Kind: f.Kind, Count: f.Count, Code: f.Code}
	if f.RetryAfter > 0 {
		j.RetryAfter = f.RetryAfter.String()
		j.RetryAfterMS = f.RetryAfter.Milliseconds()
	}
	if f.For > 0 {
		j.For, j.ForMS = f.For.String(), f.For.Milliseconds()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes; retry_after may instead be
// a number of seconds, or retry_after_ms milliseconds.
func (f *Fault) UnmarshalJSON(b []byte) error {
	var raw struct {
		faultJSON
		RetryAfter json.RawMessage `json:"retry_after"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("fault: %w", err)
	}
	*f = Fault{Provider: raw.Provider, Kind: raw.Kind, Count: raw.Count, Code: raw.Code}
	if raw.ForMS > 0 {
		f.For = time.Duration(raw.ForMS) * time.Millisecond
	}
	if raw.For != "" {
		d, err := parseDuration(raw.For)
		if err != nil {
			return fmt.Errorf("fault for: %w", err)
		}
		f.For = d
	}
	if raw.RetryAfterMS > 0 {
		f.RetryAfter = time.Duration(raw.RetryAfterMS) * time.Millisecond
	}
	if len(raw.RetryAfter) > 0 && string(raw.RetryAfter) != "null" {
		var str string
		var secs float64
		switch {
		case json.Unmarshal(raw.RetryAfter, &str) == nil:
			d, err := parseDuration(str)
			if err != nil {
				return fmt.Errorf("fault retry_after: %w", err)
			}
			f.RetryAfter = d
		case json.Unmarshal(raw.RetryAfter, &secs) == nil && secs >= 0:
			f.RetryAfter = time.Duration(secs * float64(time.Second))
		default:
			return fmt.Errorf("fault retry_after %s: want \"20s\" or a number of seconds", raw.RetryAfter)
		}
	}
	return nil
}

func writeAdminJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func adminError(w http.ResponseWriter, status int, err error) {
	writeAdminJSON(w, status, map[string]string{"error": err.Error()})
}

// adminAllowed refuses an admin request that a web page could have sent:
// a Host that is not a loopback name or address (a DNS-rebinding name), or
// an Origin other than the simulator's own (a page on another site, or on
// another local port, arming a fault). Tools (curl, the SDKs, limitscope)
// send no Origin.
func adminAllowed(r *http.Request) error {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if r.Host != "" && !loopbackName(host) {
		return fmt.Errorf("the admin endpoint answers only loopback Host names (localhost, 127.0.0.1, [::1]), not %q", sanitize.Printable(r.Host))
	}
	for _, o := range r.Header.Values("Origin") {
		if o != "http://"+r.Host {
			return fmt.Errorf("the admin endpoint refuses requests from another origin (%q)", sanitize.Printable(o))
		}
	}
	return nil
}

// loopbackName reports whether host is this machine: "localhost" (or a
// name under it) or a loopback address.
func loopbackName(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.Unmap().IsLoopback()
}

// serveAdmin answers /_sim/: POST scenario, POST fault, GET armed, POST
// clear, POST and GET seed, GET status, GET scenarios, GET faults.
func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	if err := adminAllowed(r); err != nil {
		adminError(w, http.StatusForbidden, err)
		return
	}
	route := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/_sim"), "/")
	body := func(v any) bool {
		b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err == nil {
			err = json.Unmarshal(b, v)
		}
		if err != nil {
			adminError(w, http.StatusBadRequest, fmt.Errorf("bad JSON body: %w", err))
			return false
		}
		return true
	}
	switch {
	case route == "/scenario" && r.Method == http.MethodPost:
		var in struct {
			Name string `json:"name"`
		}
		if !body(&in) {
			return
		}
		if err := s.SetScenario(in.Name); err != nil {
			adminError(w, http.StatusBadRequest, err)
			return
		}
		writeAdminJSON(w, http.StatusOK, map[string]string{"scenario": s.Scenario()})
	case route == "/scenario" && r.Method == http.MethodGet:
		writeAdminJSON(w, http.StatusOK, map[string]string{"scenario": s.Scenario()})
	case route == "/fault" && r.Method == http.MethodPost:
		var f Fault
		if !body(&f) {
			return
		}
		id, err := s.Arm(f)
		if err != nil {
			adminError(w, http.StatusBadRequest, err)
			return
		}
		writeAdminJSON(w, http.StatusOK, obj{"injected", f, "id", id})
	case route == "/armed" && r.Method == http.MethodGet:
		writeAdminJSON(w, http.StatusOK, s.Armed())
	case route == "/clear" && r.Method == http.MethodPost:
		var in struct {
			ID       int    `json:"id"`
			Provider string `json:"provider"`
		}
		if !body(&in) {
			return
		}
		if in.ID != 0 {
			if !s.ClearFault(in.ID) {
				adminError(w, http.StatusNotFound, fmt.Errorf("no armed fault %d", in.ID))
				return
			}
			writeAdminJSON(w, http.StatusOK, obj{"cleared", 1})
			return
		}
		if in.Provider != "" && !knownProvider(in.Provider) {
			adminError(w, http.StatusBadRequest, fmt.Errorf("unknown provider %q", in.Provider))
			return
		}
		writeAdminJSON(w, http.StatusOK, obj{"cleared", s.ClearFaults(in.Provider)})
	case route == "/seed" && r.Method == http.MethodPost:
		var in struct {
			Seed int64 `json:"seed"`
		}
		if !body(&in) {
			return
		}
		writeAdminJSON(w, http.StatusOK, obj{"seed", s.SetSeed(in.Seed)})
	case route == "/seed" && r.Method == http.MethodGet:
		writeAdminJSON(w, http.StatusOK, obj{"seed", s.Seed()})
	case route == "/status" && r.Method == http.MethodGet:
		writeAdminJSON(w, http.StatusOK, s.Status())
	case route == "/scenarios" && r.Method == http.MethodGet:
		writeAdminJSON(w, http.StatusOK, Scenarios())
	case route == "/faults" && r.Method == http.MethodGet:
		writeAdminJSON(w, http.StatusOK, Faults())
	default:
		adminError(w, http.StatusNotFound, fmt.Errorf("no admin route %s %s (POST /_sim/scenario, POST /_sim/fault, GET /_sim/armed, POST /_sim/clear, POST|GET /_sim/seed, GET /_sim/status, GET /_sim/scenarios, GET /_sim/faults)", r.Method, r.URL.Path))
	}
}

// Admin is a client of a running simulator's /_sim/ endpoint (the TUI's
// demo keys use it).
type Admin struct {
	URL  string       // the simulator's root, e.g. http://127.0.0.1:8787 (a trailing /_sim is accepted)
	HTTP *http.Client // nil: http.DefaultClient
}

func (a *Admin) do(ctx context.Context, method, route string, in, out any) error {
	base := strings.TrimSuffix(strings.TrimSuffix(a.URL, "/"), "/_sim")
	var rd io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("sim admin: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+"/_sim"+route, rd)
	if err != nil {
		return fmt.Errorf("sim admin: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c := a.HTTP
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("sim admin %s %s: %w", method, route, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("sim admin %s %s: %w", method, route, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return fmt.Errorf("sim admin %s %s: %s", method, route, e.Error)
		}
		return fmt.Errorf("sim admin %s %s: HTTP %d", method, route, resp.StatusCode)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("sim admin %s %s: %w", method, route, err)
		}
	}
	return nil
}

// SetScenario switches the running simulator's scenario.
func (a *Admin) SetScenario(ctx context.Context, name string) error {
	return a.do(ctx, http.MethodPost, "/scenario", map[string]string{"name": name}, nil)
}

// Inject queues one fault on the running simulator.
func (a *Admin) Inject(ctx context.Context, f Fault) error {
	_, err := a.Arm(ctx, f)
	return err
}

// Arm queues one fault on the running simulator and returns its id (for
// ClearFault).
func (a *Admin) Arm(ctx context.Context, f Fault) (int, error) {
	var out struct {
		ID int `json:"id"`
	}
	err := a.do(ctx, http.MethodPost, "/fault", f, &out)
	return out.ID, err
}

// Armed lists the running simulator's armed faults (Server.Armed).
func (a *Admin) Armed(ctx context.Context) ([]ArmedFault, error) {
	var out []ArmedFault
	err := a.do(ctx, http.MethodGet, "/armed", nil, &out)
	return out, err
}

// ClearFault disarms one armed fault by its id.
func (a *Admin) ClearFault(ctx context.Context, id int) error {
	return a.do(ctx, http.MethodPost, "/clear", map[string]int{"id": id}, nil)
}

// ClearFaults disarms every armed fault on provider ("" every provider)
// and returns how many it cleared.
func (a *Admin) ClearFaults(ctx context.Context, provider string) (int, error) {
	var out struct {
		Cleared int `json:"cleared"`
	}
	err := a.do(ctx, http.MethodPost, "/clear", map[string]string{"provider": provider}, &out)
	return out.Cleared, err
}

// SetSeed restarts the running simulator's ids and draws from seed (0: a
// random one) and returns the seed in effect.
func (a *Admin) SetSeed(ctx context.Context, seed int64) (int64, error) {
	var out struct {
		Seed int64 `json:"seed"`
	}
	err := a.do(ctx, http.MethodPost, "/seed", map[string]int64{"seed": seed}, &out)
	return out.Seed, err
}

// Status reads the running simulator's scenario and per-provider levels.
func (a *Admin) Status(ctx context.Context) (Status, error) {
	var st Status
	err := a.do(ctx, http.MethodGet, "/status", nil, &st)
	return st, err
}
