package stream

import (
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// MaxServerDelay caps any delay read from a server: a larger value is taken
// as this one (it still means "a long wait"), never as an overflow.
const MaxServerDelay = 400 * 24 * time.Hour

// clampSeconds turns a non-negative number of seconds into a duration,
// rejecting NaN, infinities and negatives.
func clampSeconds(f float64) (time.Duration, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, false
	}
	if f >= MaxServerDelay.Seconds() {
		return MaxServerDelay, true
	}
	return time.Duration(f * float64(time.Second)), true
}

// ParseRetryAfterMs parses a retry-after-ms header value (milliseconds,
// possibly fractional). Zero, negative and malformed values are rejected.
func ParseRetryAfterMs(v string) (time.Duration, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return 0, false
	}
	d, ok := clampSeconds(f / 1000)
	if !ok || d <= 0 {
		return 0, false
	}
	return d, true
}

// ParseRetryAfter parses a Retry-After header value: seconds (integer or
// fractional) or an HTTP-date, taken relative to now. Zero, negative, past
// and malformed values are rejected, as the official SDKs do.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		d, ok := clampSeconds(f)
		if !ok || d <= 0 {
			return 0, false
		}
		return d, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		if t, err = time.Parse(time.RFC1123, v); err != nil {
			if t, err = time.Parse(time.RFC1123Z, v); err != nil {
				return 0, false
			}
		}
	}
	d := t.Sub(now)
	if d <= 0 {
		return 0, false
	}
	return min(d, MaxServerDelay), true
}

// ParseDuration parses a Go-style or protobuf duration as servers send them:
// "1s", "6m0s", "2m59.56s", "20ms", "9m38.016s", "33740.910400305s". A bare
// number is taken as seconds. Negative and malformed values are rejected.
func ParseDuration(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" || s[0] == '-' {
		return 0, false
	}
	// A bare number is seconds; only one that ends like a number is tried
	// as one (a failed ParseFloat allocates its error, and "120ms" is common).
	if c := s[len(s)-1]; c == '.' || (c >= '0' && c <= '9') {
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return clampSeconds(f)
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		// time.ParseDuration overflows past ~292 years; a bigger seconds
		// value from a protobuf Duration is still "very long".
		if strings.HasSuffix(s, "s") && !strings.ContainsAny(s[:len(s)-1], "hmuµn") {
			if f, err := strconv.ParseFloat(s[:len(s)-1], 64); err == nil {
				return clampSeconds(f)
			}
		}
		return 0, false
	}
	if d < 0 {
		return 0, false
	}
	return min(d, MaxServerDelay), true
}

// maxDelayScan is how much of a message ParseMessageDelay reads.
const maxDelayScan = 8 << 10

var (
	// "Please try again in 1.984999999s.", "Please retry in 44.097740004s.",
	// "try again in 174ms", "try again in 9m38.016s".
	msgDelayRE = regexp.MustCompile(`(?i)(?:try\s+again|retry)\s+(?:in|after)\s+(?:about\s+|approximately\s+)?((?:[0-9]+(?:\.[0-9]+)?(?:ns|us|µs|ms|h|m|s))+)`)
	// "try again in 20 seconds", "retry after 2 minutes".
	msgDelayWordsRE = regexp.MustCompile(`(?i)(?:try\s+again|retry)\s+(?:in|after)\s+(?:about\s+|approximately\s+)?([0-9]+(?:\.[0-9]+)?)\s*(milliseconds?|ms|seconds?|secs?|minutes?|mins?|hours?)\b`)
)

// ParseMessageDelay finds a delay written in an error message ("Please try
// again in 1.984999999s.", "Please retry in 44.097740004s.", "try again in
// 174ms", "9m38.016s", "try again in 20 seconds").
func ParseMessageDelay(msg string) (time.Duration, bool) {
	if len(msg) > maxDelayScan { // the sentence is near the start; bound the work on a huge body
		msg = msg[:maxDelayScan]
	}
	if m := msgDelayRE.FindStringSubmatch(msg); m != nil {
		if d, ok := ParseDuration(strings.ToLower(m[1])); ok && d > 0 {
			return d, true
		}
	}
	if m := msgDelayWordsRE.FindStringSubmatch(msg); m != nil {
		f, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return 0, false
		}
		unit := strings.ToLower(m[2])
		switch {
		case strings.HasPrefix(unit, "ms"), strings.HasPrefix(unit, "milli"):
			f /= 1000
		case strings.HasPrefix(unit, "min"):
			f *= 60
		case strings.HasPrefix(unit, "h"):
			f *= 3600
		}
		if d, ok := clampSeconds(f); ok && d > 0 {
			return d, true
		}
	}
	return 0, false
}

// ServerDelay returns the server's delay and its source, first found wins:
// retry-after-ms, x-amz-retry-after (milliseconds, AWS), retry-after
// (relative to now), Gemini's RetryInfo, then the message text. It returns
// SourceNone when there is none.
func ServerDelay(h http.Header, b ErrorBody, now time.Time) (time.Duration, DelaySource) {
	if h != nil {
		if d, ok := ParseRetryAfterMs(h.Get("Retry-After-Ms")); ok {
			return d, SourceRetryAfterMs
		}
		// AWS's x-amz-retry-after is the same milliseconds, under the
		// same source name.
		if d, ok := ParseRetryAfterMs(h.Get("X-Amz-Retry-After")); ok {
			return d, SourceRetryAfterMs
		}
		if d, ok := ParseRetryAfter(h.Get("Retry-After"), now); ok {
			return d, SourceRetryAfter
		}
	}
	if b.HasRetryDelay && b.RetryDelay > 0 {
		return b.RetryDelay, SourceRetryInfo
	}
	if d, ok := ParseMessageDelay(b.Message); ok {
		return d, SourceMessage
	}
	return 0, SourceNone
}
