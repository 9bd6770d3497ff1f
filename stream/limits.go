package stream

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ParseLimits reads a rate-limit snapshot from any response's headers, by
// the provider's dialect (openaiLimits, anthropicLimits; Gemini sends
// none). When the dialect's own headers are absent the other families are
// tried, for a gateway in front of a provider that speaks another dialect.
// Odd values are skipped field by field. It returns nil when no window was
// sent.
func ParseLimits(provider string, h http.Header, now time.Time) *Limits {
	p := providerRow(provider)
	return parseLimits(&p, h, now)
}

func parseLimits(p *ProviderInfo, h http.Header, now time.Time) *Limits {
	if h == nil {
		return nil
	}
	own := p.spec()
	if own.limits != nil {
		if l := own.limits(p, h, now); l != nil {
			priorityWindows(p, h, now, l)
			return l
		}
	}
	for _, d := range [...]*dialectSpec{openaiDialect, anthropicDialect} {
		if d != own && d.limits != nil {
			if l := d.limits(p, h, now); l != nil {
				return l
			}
		}
	}
	return nil
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
	// Only what starts like a date is tried as one: a failed time.Parse
	// allocates its error, and OpenAI's resets ("120ms") are durations.
	if len(v) >= len("2006-01-02T15:04:05Z") && v[4] == '-' {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t, true
		}
	}
	if d, ok := ParseDuration(v); ok {
		return now.Add(d), true
	}
	return time.Time{}, false
}
