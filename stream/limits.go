package stream

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ParseLimits reads a rate-limit snapshot from any response's headers:
// OpenAI-style x-ratelimit-{limit,remaining,reset}-{requests,tokens} (resets
// are durations; on Groq the request window is per day) and Anthropic's
// anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
// {limit,remaining,reset} (RFC 3339 resets; token counts rounded). Odd values
// are skipped field by field. It returns nil when no window was sent.
func ParseLimits(provider string, h http.Header, now time.Time) *Limits {
	if h == nil {
		return nil
	}
	l := &Limits{At: now}
	l.Requests = xWindow(h, "requests", now)
	l.Tokens = xWindow(h, "tokens", now)
	if l.Requests != nil && provider == "groq" {
		l.Requests.PerDay = true
	}
	if l.Requests == nil {
		l.Requests = anthropicWindow(h, "requests", now, false)
	}
	if l.Tokens == nil {
		l.Tokens = anthropicWindow(h, "tokens", now, true)
	}
	l.InputTokens = anthropicWindow(h, "input-tokens", now, true)
	l.OutputTokens = anthropicWindow(h, "output-tokens", now, true)
	if l.Empty() {
		return nil
	}
	return l
}

func xWindow(h http.Header, kind string, now time.Time) *Window {
	lim, okL := parseCount(h.Get("X-Ratelimit-Limit-" + kind))
	rem, okR := parseCount(h.Get("X-Ratelimit-Remaining-" + kind))
	reset, okT := parseReset(h.Get("X-Ratelimit-Reset-"+kind), now)
	if !okL && !okR && !okT {
		return nil
	}
	return &Window{Limit: lim, Remaining: rem, HasLimit: okL, HasRemaining: okR, Reset: reset}
}

func anthropicWindow(h http.Header, kind string, now time.Time, rounded bool) *Window {
	p := "Anthropic-Ratelimit-" + kind + "-"
	lim, okL := parseCount(h.Get(p + "Limit"))
	rem, okR := parseCount(h.Get(p + "Remaining"))
	reset, okT := parseReset(h.Get(p+"Reset"), now)
	if !okL && !okR && !okT {
		return nil
	}
	return &Window{Limit: lim, Remaining: rem, HasLimit: okL, HasRemaining: okR, Reset: reset, Rounded: rounded}
}

// parseCount reads a non-negative count, tolerating spaces, a fractional
// part and exponent notation; negative values read as 0.
func parseCount(v string) (int64, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return max(n, 0), true
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) {
		return 0, false
	}
	switch {
	case f <= 0:
		return 0, true
	case f >= math.MaxInt64/2:
		return math.MaxInt64 / 2, true
	}
	return int64(f), true
}

// parseReset reads a reset as an RFC 3339 time, a duration ("6m0s",
// "2m59.56s", "20ms") or a bare number of seconds, relative to now.
func parseReset(v string, now time.Time) (time.Time, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, false
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, true
	}
	if d, ok := ParseDuration(v); ok {
		return now.Add(d), true
	}
	return time.Time{}, false
}
