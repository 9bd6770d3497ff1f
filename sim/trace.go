package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Trace mode (`mode = trace` at the top of a scenario file): each
// provider's `trace =` lines are the outcomes a history recorded for it,
// in order, and the n-th request the provider gets is answered with the
// n-th outcome, whatever its limits and schedule say; the rest of the
// section applies once the trace is used up. Times are shifted: a delay
// or a quota stop's reset counts from the replayed request, not from when
// it was recorded.
//
//	trace = OFFSET KIND [retry_after=D] [reset=D] [code=C] [ttft=D] [tps=N]
//
// OFFSET is when it was recorded, since the first recorded attempt (they
// must not decrease); KIND is ok or a fault kind.

// Scenario modes.
const (
	modeStatistical = "statistical"
	modeTrace       = "trace"
)

// maxTraceSteps bounds one provider's trace.
const maxTraceSteps = 500_000

// traceStep is one recorded outcome.
type traceStep struct {
	At         time.Duration // since the first recorded attempt
	Kind       string        // "ok" or a fault kind
	RetryAfter time.Duration
	Reset      time.Duration // a quota stop's reset, from the request
	Code       string
	TTFT       time.Duration
	TPS        float64
}

// parseMode reads the top-level `mode =`.
func parseMode(value string) (string, error) {
	switch value {
	case modeStatistical, modeTrace:
		return value, nil
	}
	return "", fmt.Errorf("mode %q: want statistical or trace", value)
}

// parseTraceStep parses one `trace =` value.
func parseTraceStep(value string) (traceStep, error) {
	f := strings.Fields(value)
	var st traceStep
	if len(f) < 2 {
		return st, fmt.Errorf("%q: want OFFSET KIND [retry_after=D] [reset=D] [code=C] [ttft=D] [tps=N]", value)
	}
	at, err := parseDuration(f[0])
	if err != nil {
		return st, fmt.Errorf("offset: %v", err)
	}
	st.At, st.Kind = at, f[1]
	if st.Kind != "ok" && (!knownFault(st.Kind) || st.Kind == FaultFailoverDemo) {
		return st, fmt.Errorf("unknown outcome %q (ok or a fault kind)", st.Kind)
	}
	for _, opt := range f[2:] {
		k, v, ok := strings.Cut(opt, "=")
		if !ok {
			return st, fmt.Errorf("option %q: want name=value", opt)
		}
		switch k {
		case "retry_after":
			st.RetryAfter, err = parseDuration(v)
		case "reset":
			st.Reset, err = parseDuration(v)
		case "ttft":
			st.TTFT, err = parseDuration(v)
		case "code":
			st.Code = v
		case "tps":
			st.TPS, err = rateValue(v)
		default:
			return st, fmt.Errorf("unknown option %q (known: retry_after, reset, code, ttft, tps)", k)
		}
		if err != nil {
			return st, err
		}
	}
	return st, nil
}

// addTraceStep appends one `trace =` line to c's trace.
func (c *providerConfig) addTraceStep(value string) error {
	st, err := parseTraceStep(value)
	if err != nil {
		return err
	}
	if n := len(c.Trace); n > 0 && st.At < c.Trace[n-1].At {
		return fmt.Errorf("offset %s is before the previous step's %s", st.At, c.Trace[n-1].At)
	}
	if len(c.Trace) >= maxTraceSteps {
		return fmt.Errorf("more than %s steps in one trace", strconv.Itoa(maxTraceSteps))
	}
	c.Trace = append(c.Trace, st)
	return nil
}

// nextTrace returns the provider's next recorded outcome in trace mode
// (false: not in trace mode, or the trace is used up). Called with s.mu
// held.
func (s *Server) nextTrace(st *provState) (traceStep, bool) {
	if s.scen == nil || s.scen.Mode != modeTrace || st.traceNext >= len(st.cfg.Trace) {
		return traceStep{}, false
	}
	step := st.cfg.Trace[st.traceNext]
	st.traceNext++
	return step, true
}

// replayStep answers a request with a recorded outcome: a clean answer at
// the recorded pace (the limits are spent, not checked), or the recorded
// failure with its delay, code and reset counted from now.
func (s *Server) replayStep(p *provider, st *provState, key string, step traceStep, now time.Time,
	in float64, maxOut, outTokens int, d *decision, fail func(kind, code string, retry time.Duration) decision) decision {
	if step.Kind == "ok" {
		s.account(p, st, now, in, maxOut, outTokens)
		p.d.limitHeaders(p, limitView{st: st, now: now}, d.header)
		d.firstToken, d.tps = step.TTFT, step.TPS
		return *d
	}
	retry := step.RetryAfter
	switch step.Kind {
	case FaultRateLimit, FaultSlowDown:
		if retry <= 0 {
			retry = defaultRetry(step.Kind)
		}
		s.hold(key, step.Kind, step.Code, retry, now)
	case FaultSpendCap, FaultDailyQuota:
		if step.Reset > 0 {
			d.info.resetAt = now.Add(step.Reset)
		}
		if retry <= 0 {
			retry = step.Reset
		}
	}
	return fail(step.Kind, step.Code, retry)
}
