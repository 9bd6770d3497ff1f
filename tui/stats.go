package tui

import (
	"fmt"
	"slices"
	"time"
)

// maxLatencies bounds the latencies kept for p95 (the most recent ones).
const maxLatencies = 10000

// sessionStats are the session's numbers.
type sessionStats struct {
	calls    int
	proxied  int // of calls, those that came through the proxy
	retried  int // calls with more than one request
	requests int
	wasted   int // requests that did not serve an answer
	lat      []time.Duration
	p95      time.Duration
}

// addCall counts one finished call.
func (s *sessionStats) addCall(requests int, served bool, d time.Duration) {
	s.calls++
	s.requests += requests
	if requests > 1 {
		s.retried++
	}
	w := requests
	if served {
		w--
	}
	s.wasted += w
	s.lat = append(s.lat, d)
	if len(s.lat) > maxLatencies {
		s.lat = append(s.lat[:0], s.lat[len(s.lat)-maxLatencies:]...)
	}
	sorted := slices.Clone(s.lat)
	slices.Sort(sorted)
	i := (95*len(sorted)+99)/100 - 1
	s.p95 = sorted[max(0, i)]
}

// tiny renders the call count only, for a header with no room for more.
func (s *sessionStats) tiny() string {
	if s.proxied > 0 {
		return fmt.Sprintf("calls %d (%d proxied)", s.calls, s.proxied)
	}
	return fmt.Sprintf("calls %d", s.calls)
}

// format renders the numbers, in full or compact for a narrow header.
func (s *sessionStats) format(full bool) string {
	if s.calls == 0 {
		return "calls 0"
	}
	calls := fmt.Sprint(s.calls)
	if s.proxied > 0 {
		calls += fmt.Sprintf(" (%d proxied)", s.proxied)
	}
	if !full {
		return fmt.Sprintf("calls %s · retried %d%% · p95 %s", calls, 100*s.retried/s.calls, fmtDur(s.p95))
	}
	return fmt.Sprintf("calls %s · retried %d%% · req/call %.1f · wasted %d · p95 %s",
		calls, 100*s.retried/s.calls, float64(s.requests)/float64(s.calls), s.wasted, fmtDur(s.p95))
}
