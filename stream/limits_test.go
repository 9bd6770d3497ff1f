package stream

import (
	"bufio"
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"
)

func headerFixture(t testing.TB, path string) http.Header {
	t.Helper()
	h := http.Header{}
	sc := bufio.NewScanner(bytes.NewReader(fixture(t, path)))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	return h
}

func TestParseLimitsOpenAI(t *testing.T) {
	l := ParseLimits("openai", headerFixture(t, "openai/ratelimit-headers-doc.txt"), fixedNow)
	if l == nil || l.Requests == nil || l.Tokens == nil {
		t.Fatalf("limits %+v", l)
	}
	want := Window{Limit: 60, Remaining: 59, HasLimit: true, HasRemaining: true, Reset: fixedNow.Add(time.Second)}
	if *l.Requests != want {
		t.Errorf("requests %+v, want %+v", *l.Requests, want)
	}
	want = Window{Limit: 150000, Remaining: 149984, HasLimit: true, HasRemaining: true, Reset: fixedNow.Add(6 * time.Minute)}
	if *l.Tokens != want {
		t.Errorf("tokens %+v, want %+v", *l.Tokens, want)
	}
	if !l.At.Equal(fixedNow) || l.InputTokens != nil || l.OutputTokens != nil {
		t.Errorf("limits %+v", l)
	}
}

func TestParseLimitsGroqPerDay(t *testing.T) {
	l := ParseLimits("groq", headerFixture(t, "groq/ratelimit-headers-doc.txt"), fixedNow)
	if l == nil || l.Requests == nil || !l.Requests.PerDay || l.Tokens.PerDay {
		t.Fatalf("limits %+v", l)
	}
	if l.Requests.Limit != 14400 || l.Requests.Remaining != 14370 || !l.Requests.Reset.Equal(fixedNow.Add(2*time.Minute+59560*time.Millisecond)) {
		t.Errorf("requests %+v", *l.Requests)
	}
	if l.Tokens.Limit != 18000 || l.Tokens.Remaining != 17997 || !l.Tokens.Reset.Equal(fixedNow.Add(7660*time.Millisecond)) {
		t.Errorf("tokens %+v", *l.Tokens)
	}
}

func TestParseLimitsAnthropic(t *testing.T) {
	l := ParseLimits("anthropic", headerFixture(t, "anthropic/ratelimit-headers-recorded-200.txt"), fixedNow)
	if l == nil || l.Requests == nil || l.Tokens == nil || l.InputTokens == nil || l.OutputTokens == nil {
		t.Fatalf("limits %+v", l)
	}
	reset := time.Date(2025, 8, 21, 12, 40, 59, 0, time.UTC)
	if w := *l.Requests; w.Limit != 1000 || w.Remaining != 999 || !w.Reset.Equal(reset) || w.Rounded {
		t.Errorf("requests %+v", w)
	}
	if w := *l.Tokens; w.Limit != 96000 || !w.Rounded || !w.Reset.Equal(reset) {
		t.Errorf("tokens %+v", w)
	}
	if w := *l.OutputTokens; w.Limit != 16000 || w.Remaining != 16000 || !w.Rounded || !w.Reset.Equal(reset.Add(time.Second)) {
		t.Errorf("output %+v", w)
	}
}

func TestParseLimitsOddValues(t *testing.T) {
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", "abc")
	h.Set("x-ratelimit-remaining-requests", "-4")
	h.Set("x-ratelimit-reset-requests", "-1s")
	h.Set("x-ratelimit-limit-tokens", "1.5e3")
	h.Set("x-ratelimit-reset-tokens", "later")
	l := ParseLimits("openai", h, fixedNow)
	if l == nil || l.Requests == nil || l.Requests.HasLimit || !l.Requests.HasRemaining || l.Requests.Remaining != 0 || !l.Requests.Reset.IsZero() {
		t.Fatalf("requests %+v", l)
	}
	if l.Tokens == nil || l.Tokens.Limit != 1500 || l.Tokens.HasRemaining {
		t.Errorf("tokens %+v", l.Tokens)
	}
	if ParseLimits("gemini", http.Header{"Content-Type": {"text/event-stream"}}, fixedNow) != nil {
		t.Error("limits from no headers")
	}
	if ParseLimits("openai", nil, fixedNow) != nil {
		t.Error("limits from nil headers")
	}
}

func TestLimitsOnEveryResponse(t *testing.T) {
	hdr := []string{"x-ratelimit-limit-requests", "10", "x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "20ms"}
	c, ep := serve(t, "openai", errorHandler(429, oaErr("requests", "rate_limit_exceeded", "x"), hdr...))
	c.Now = func() time.Time { return fixedNow }
	res, _ := doReq(c, ep, "m")
	if res.Limits == nil || res.Limits.Requests.Remaining != 0 || !res.Limits.Requests.Reset.Equal(fixedNow.Add(20*time.Millisecond)) {
		t.Errorf("limits on a 429: %+v", res.Limits)
	}
	c, ep = serve(t, "anthropic", sseHandler(fixture(t, "anthropic/messages-stream-doc-basic.sse"),
		"anthropic-ratelimit-requests-remaining", "41", "request-id", "req_hdr"))
	res, _ = doReq(c, ep, "m")
	if res.Err != nil || res.Limits == nil || res.Limits.Requests.Remaining != 41 || res.RequestID != "req_hdr" {
		t.Errorf("limits on a 200: %+v %v %q", res.Limits, res.Err, res.RequestID)
	}
}

// Reading the limit headers allocates only what it returns: the header
// names are looked up in canonical form, never built per response (every
// response without one dialect's headers is tried for the other's).
func TestParseLimitsAllocatesOnlyItsResult(t *testing.T) {
	p, _ := lookupProvider("openai")
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", "500")
	h.Set("x-ratelimit-remaining-requests", "499")
	h.Set("x-ratelimit-reset-requests", "120ms")
	now := time.Now()
	if n := testing.AllocsPerRun(100, func() { _ = parseLimits(&p, h, now) }); n > 2 { // the Limits and its one window
		t.Errorf("%v allocations per response with OpenAI's headers, want 2", n)
	}
	plain := http.Header{"Content-Type": {"text/event-stream"}}
	if n := testing.AllocsPerRun(100, func() { _ = parseLimits(&p, plain, now) }); n > 2 {
		t.Errorf("%v allocations per response without limit headers, want at most 2 (the two dialects' empty Limits)", n)
	}
}
