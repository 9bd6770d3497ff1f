package stream

import (
	"net/http"
	"testing"
	"time"
)

func TestDelaySources(t *testing.T) {
	gemRetry := `{"error":{"code":429,"message":"Quota exceeded. Please retry in 44.097740004s.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.6s"}]}}`
	for _, tc := range []struct {
		name     string
		provider string
		hdr      []string
		body     string
		want     time.Duration
		src      DelaySource
	}{
		{"retry-after-ms wins over all", "openai", []string{"retry-after-ms", "1500.5", "retry-after", "9"}, oaErr("tokens", "rate_limit_exceeded", "Please try again in 3s."), 1500500 * time.Microsecond, SourceRetryAfterMs},
		{"retry-after seconds", "anthropic", []string{"retry-after", "7"}, antErr("rate_limit_error", "slow down"), 7 * time.Second, SourceRetryAfter},
		{"retry-after fractional seconds", "groq", []string{"retry-after", "2.5"}, oaErr("tokens", "rate_limit_exceeded", "x"), 2500 * time.Millisecond, SourceRetryAfter},
		{"retry-after HTTP-date relative to Client.Now", "openai", []string{"retry-after", fixedNow.Add(90 * time.Second).Format(http.TimeFormat)}, oaErr("requests", "rate_limit_exceeded", "x"), 90 * time.Second, SourceRetryAfter},
		{"retry-after beats retry-info", "gemini", []string{"retry-after", "5"}, gemRetry, 5 * time.Second, SourceRetryAfter},
		{"retry-info beats the message", "gemini", nil, gemRetry, 1600 * time.Millisecond, SourceRetryInfo},
		{"gemini message", "gemini", nil, gemErr(429, "RESOURCE_EXHAUSTED", "Please retry in 44.097740004s."), 44097740004 * time.Nanosecond, SourceMessage},
		{"openai/groq message", "groq", nil, oaErr("tokens", "rate_limit_exceeded", "Please try again in 1.984999999s. Need more tokens?"), 1984999999 * time.Nanosecond, SourceMessage},
		{"milliseconds in the message", "openai", nil, oaErr("tokens", "rate_limit_exceeded", "Please try again in 174ms. Visit"), 174 * time.Millisecond, SourceMessage},
		{"go-style duration in the message", "groq", nil, oaErr("tokens", "rate_limit_exceeded", "on tokens per minute. Please try again in 9m38.016s. Visit"), 9*time.Minute + 38016*time.Millisecond, SourceMessage},
		{"negative and garbage headers ignored", "openai", []string{"retry-after-ms", "-5", "retry-after", "soon"}, oaErr("tokens", "rate_limit_exceeded", "Please try again in 2s."), 2 * time.Second, SourceMessage},
		{"past date ignored", "openai", []string{"retry-after", fixedNow.Add(-time.Hour).Format(http.TimeFormat)}, oaErr("tokens", "rate_limit_exceeded", "x"), 0, SourceNone},
		{"none", "anthropic", nil, string(fixture(t, "anthropic/error-529-overloaded.json")), 0, SourceNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status := 429
			if tc.src == SourceNone && tc.provider == "anthropic" {
				status = 529
			}
			c, ep := serve(t, tc.provider, errorHandler(status, tc.body, tc.hdr...))
			c.Now = func() time.Time { return fixedNow }
			res, _ := doReq(c, ep, "m")
			if res.Err == nil {
				t.Fatal("no error")
			}
			if res.Err.Delay != tc.want || res.Err.DelaySource != tc.src {
				t.Errorf("delay %v from %q, want %v from %q", res.Err.Delay, res.Err.DelaySource, tc.want, tc.src)
			}
		})
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"1s": time.Second, "6m0s": 6 * time.Minute, "2m59.56s": 2*time.Minute + 59560*time.Millisecond,
		"20ms": 20 * time.Millisecond, "7.66s": 7660 * time.Millisecond, "33740.910400305s": 33740910400305 * time.Nanosecond,
		"0.539477544s": 539477544 * time.Nanosecond, "12": 12 * time.Second, " 3s ": 3 * time.Second, "1h": time.Hour,
		"99999999999999s": MaxServerDelay, "1e30": MaxServerDelay,
	} {
		if got, ok := ParseDuration(in); !ok || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "-1s", "-3", "soon", "1x", "NaN", "Inf", "s", "."} {
		if got, ok := ParseDuration(bad); ok {
			t.Errorf("ParseDuration(%q) = %v, want rejected", bad, got)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	if d, ok := ParseRetryAfter("56", fixedNow); !ok || d != 56*time.Second {
		t.Errorf("56: %v %v", d, ok)
	}
	if d, ok := ParseRetryAfter(fixedNow.Add(time.Minute).Format(time.RFC1123), fixedNow); !ok || d != time.Minute {
		t.Errorf("date: %v %v", d, ok)
	}
	if d, ok := ParseRetryAfter("1e99", fixedNow); !ok || d != MaxServerDelay {
		t.Errorf("huge: %v %v", d, ok)
	}
	for _, bad := range []string{"0", "-1", "", "NaN", "tomorrow", "+Inf"} {
		if _, ok := ParseRetryAfter(bad, fixedNow); ok {
			t.Errorf("%q accepted", bad)
		}
	}
	if d, ok := ParseRetryAfterMs("250"); !ok || d != 250*time.Millisecond {
		t.Errorf("ms: %v %v", d, ok)
	}
	for _, bad := range []string{"0", "-1", "x", "NaN"} {
		if _, ok := ParseRetryAfterMs(bad); ok {
			t.Errorf("ms %q accepted", bad)
		}
	}
}

func TestParseMessageDelay(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"Please try again in 1.984999999s.":                 1984999999 * time.Nanosecond,
		"Please retry in 44.097740004s.":                    44097740004 * time.Nanosecond,
		"try again in 174ms":                                174 * time.Millisecond,
		"Please try again in 9m38.016s. Visit":              9*time.Minute + 38016*time.Millisecond,
		"Please try again in 20 seconds.":                   20 * time.Second,
		"retry after 2 minutes":                             2 * time.Minute,
		"\n* Quota exceeded\nPlease retry in 20.04466179s.": 20044661790 * time.Nanosecond,
	} {
		if got, ok := ParseMessageDelay(in); !ok || got != want {
			t.Errorf("ParseMessageDelay(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	for _, none := range []string{"", "Overloaded", "try again later", "Please try again in -3s", "retry in 0s"} {
		if got, ok := ParseMessageDelay(none); ok {
			t.Errorf("ParseMessageDelay(%q) = %v", none, got)
		}
	}
}
