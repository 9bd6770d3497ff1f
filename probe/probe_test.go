package probe

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// fakeClock is the simulator's clock, standing still unless advanced: its
// per-minute windows never refill behind a probe's back.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// simProbe runs a probe of target on a fresh simulator in scenario and
// returns the card and the requests the simulator received.
func simProbe(t *testing.T, scenario string, target stream.Target, budget int) (*Card, int64) {
	t.Helper()
	clk := &fakeClock{t: time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)}
	s, err := sim.New(sim.Options{Scenario: scenario, Seed: 1, Clock: clk, TokensPerSecond: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	eps := map[string]stream.Endpoint{}
	for _, p := range stream.Providers() {
		eps[p.Name] = stream.Endpoint{Provider: p.Name, BaseURL: sim.BaseURL(ts.URL, p.Name), Key: stream.Secret(sim.FakeKey)}
	}
	router := stream.Router{Client: &stream.Client{}, Endpoints: eps}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	card, err := Run(ctx, Options{Target: target, Budget: budget, Do: router.Do, Simulated: true, Scenario: scenario})
	if err != nil {
		t.Fatal(err)
	}
	return card, n.Load()
}

// want is a scenario's configured limits for one provider, as the
// probe should find them.
type want struct {
	windows map[string]int64 // header windows: "requests/minute" -> limit
	est     int              // no headers: the requests per est per (0: none configured)
	per     string
	exact   bool // the 429 names its limit: the estimate is exact
}

// expectation is what the probe should find for p given the simulator's
// limits for its account: the windows its headers announce, else the
// first request limit a probe meets (per day when that is the lower one),
// exact where the dialect's 429 names its limit (the Gemini API's
// QuotaFailure; the Interactions API's 429 names none).
func expectation(p stream.ProviderInfo, l sim.Limits) want {
	if l.Headers {
		w := want{windows: map[string]int64{}}
		switch {
		case p.RequestsPerDay:
			w.windows["requests/day"] = l.RPD
		case l.RPM > 0:
			w.windows["requests/minute"] = l.RPM
		}
		switch {
		case l.ITPM > 0 || l.OTPM > 0:
			w.windows["input_tokens/minute"] = l.ITPM
			w.windows["output_tokens/minute"] = l.OTPM
		case l.TPM > 0:
			w.windows["tokens/minute"] = l.TPM
		}
		return w
	}
	w := want{exact: p.Dialect == stream.DialectGemini}
	switch {
	case l.RPD > 0 && (l.RPM == 0 || l.RPD < l.RPM):
		w.est, w.per = int(l.RPD), "day"
	case l.RPM > 0:
		w.est, w.per = int(l.RPM), "minute"
	default:
		w.exact = false
	}
	return w
}

// On the simulator the probe finds each scenario's configured limits, for
// every provider (the Responses API is openai's account), and the
// simulator never receives more requests than the budget.
func TestProbeFindsScenarioLimits(t *testing.T) {
	const budget = DefaultBudget
	for _, sc := range []string{"calm", "busy", "daily-quota"} {
		limits, err := sim.ScenarioLimits(sc)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range stream.Providers() {
			l, ok := limits[p.AccountName()]
			if !ok {
				t.Fatalf("%s: the simulator has no limits for %s", sc, p.AccountName())
			}
			w := expectation(p, l)
			t.Run(sc+"/"+p.Name, func(t *testing.T) {
				c, n := simProbe(t, sc, stream.Target{Provider: p.Name, Model: p.DefaultModel}, budget)
				if n > budget || int64(c.Budget.Sent) != n || c.Budget.Requests != budget {
					t.Errorf("the simulator got %d requests, the card says %d sent of %d; the budget is %d", n, c.Budget.Sent, c.Budget.Requests, budget)
				}
				checkCard(t, c, w)
			})
		}
	}
}

func checkCard(t *testing.T, c *Card, w want) {
	t.Helper()
	if w.windows != nil {
		got := map[string]int64{}
		for _, win := range c.Limits.Windows {
			if win.Limit != nil && win.Kind != "tokens" { // tokens: Anthropic's most restrictive, OpenAI's only
				got[win.Kind+"/"+win.Per] = *win.Limit
			}
			if win.Kind == "tokens" && win.Limit != nil {
				if _, split := w.windows["input_tokens/minute"]; !split {
					got["tokens/"+win.Per] = *win.Limit
				}
			}
			if win.Semantics == "" {
				t.Errorf("window %s without its reset semantics", win.Kind)
			}
		}
		if c.Limits.Source != SourceHeaders || len(got) != len(w.windows) {
			t.Errorf("limits %s %v, want headers %v", c.Limits.Source, got, w.windows)
		}
		for k, v := range w.windows {
			if got[k] != v {
				t.Errorf("%s: %d, want %d", k, got[k], v)
			}
		}
		if c.Estimate != nil {
			t.Errorf("an estimate beside the headers: %+v", c.Estimate)
		}
		return
	}
	e := c.Estimate
	if c.Limits.Source != SourceEstimate || e == nil || e.Basis == "" || len(c.Limits.Windows) != 0 {
		t.Fatalf("no headers: source %s, estimate %+v", c.Limits.Source, e)
	}
	switch {
	case w.exact:
		if e.Requests != w.est || e.Per != w.per || e.LowerBound || !e.FromMessage {
			t.Errorf("estimate %+v, want exactly %d a %s from the 429", e, w.est, w.per)
		}
	case w.est == 0: // no limit configured: a lower bound only
		if !e.LowerBound {
			t.Errorf("estimate %+v, want a lower bound", e)
		}
	default: // the limit is beyond the budget, or the 429 names none: a lower bound at most the limit
		if !(e.LowerBound && e.Requests <= w.est && e.Per == w.per) && !(e.FromMessage && e.Requests == w.est) {
			t.Errorf("estimate %+v, want at most %d a %s, said as a lower bound, or exactly %d from the 429", e, w.est, w.per, w.est)
		}
	}
}

// With a budget above the limit, the probe finds the per-minute limit of a
// provider that sends no headers: from xAI's 429 message, and from the
// count before Mistral's, which names none (a lower bound, equal to the
// limit on the still simulator).
func TestProbeFindsLimitWithinBudget(t *testing.T) {
	for _, p := range []string{"xai", "mistral"} {
		c, n := simProbe(t, "calm", stream.Target{Provider: p, Model: map[string]string{"xai": "grok-4", "mistral": "mistral-small-latest"}[p]}, 70)
		if n > 70 || c.Estimate == nil || c.Estimate.Requests != 60 || c.FirstStop == nil || c.FirstStop.AfterRequests != 60 {
			t.Errorf("%s: %d requests, estimate %+v", p, n, c.Estimate)
		}
	}
}
