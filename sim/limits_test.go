package sim

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestBucketRefillAndBurst(t *testing.T) {
	now := t0
	b := newBucket(60, time.Minute) // one a second
	// A full bucket takes a burst of its whole capacity at once.
	for i := 0; i < 60; i++ {
		if w := b.Wait(now, 1); w != 0 {
			t.Fatalf("request %d of the burst waits %v", i, w)
		}
		b.Take(now, 1)
	}
	if w := b.Wait(now, 1); w != time.Second {
		t.Fatalf("empty bucket: wait %v, want 1s", w)
	}
	if r := b.ResetIn(now); r != time.Minute {
		t.Fatalf("reset %v, want 1m", r)
	}
	// It refills continuously: half a second is half a request.
	now = now.Add(500 * time.Millisecond)
	if rem := b.Remaining(now); rem != 0.5 {
		t.Fatalf("remaining %v after 0.5s, want 0.5", rem)
	}
	if w := b.Wait(now, 1); w != 500*time.Millisecond {
		t.Fatalf("wait %v, want 500ms", w)
	}
	now = now.Add(30 * time.Second)
	if rem := b.Remaining(now); rem != 30.5 {
		t.Fatalf("remaining %v, want 30.5", rem)
	}
	// Never above capacity.
	now = now.Add(time.Hour)
	if rem := b.Remaining(now); rem != 60 {
		t.Fatalf("remaining %v after an hour, want 60", rem)
	}
	if r := b.ResetIn(now); r != 0 {
		t.Fatalf("reset %v when full, want 0", r)
	}
	// Overspending (an estimate that was too low) goes into debt.
	b.Take(now, 90)
	if rem := b.Remaining(now); rem != 0 {
		t.Fatalf("remaining %v in debt, want 0", rem)
	}
	if w := b.Wait(now, 1); w != 31*time.Second {
		t.Fatalf("wait %v from -30, want 31s", w)
	}
	// Giving back (a negative take) refunds, up to capacity.
	b.Take(now, -1000)
	if rem := b.Remaining(now); rem != 60 {
		t.Fatalf("remaining %v after refund, want 60", rem)
	}
}

func TestWindowReset(t *testing.T) {
	now := t0
	w := newWindow(3, time.Minute)
	if r := w.ResetIn(now); r != 0 {
		t.Fatalf("unused window resets in %v, want 0", r)
	}
	for i := 0; i < 3; i++ {
		if d := w.Wait(now, 1); d != 0 {
			t.Fatalf("request %d waits %v", i, d)
		}
		w.Take(now, 1)
		now = now.Add(10 * time.Second)
	}
	// The window opened at t0; now is t0+30s.
	if d := w.Wait(now, 1); d != 30*time.Second {
		t.Fatalf("full window: wait %v, want 30s", d)
	}
	if r := w.Remaining(now); r != 0 {
		t.Fatalf("remaining %v, want 0", r)
	}
	now = t0.Add(time.Minute)
	if r := w.Remaining(now); r != 3 {
		t.Fatalf("remaining %v at the window's end, want 3 (all back at once)", r)
	}
	w.Take(now, 1)
	if r := w.ResetIn(now); r != time.Minute {
		t.Fatalf("a new window opens at its first use: reset %v, want 1m", r)
	}
}

func TestDailyResetsAtMidnightPacific(t *testing.T) {
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	d := newDaily(2, la)
	// 23:30 Pacific on Nov 14 is 07:30 UTC on Nov 15.
	now := time.Date(2026, 11, 14, 23, 30, 0, 0, la)
	d.Take(now, 1)
	d.Take(now, 1)
	if w := d.Wait(now, 1); w != 30*time.Minute {
		t.Fatalf("wait %v, want 30m to midnight Pacific", w)
	}
	if r := d.ResetIn(now); r != 30*time.Minute {
		t.Fatalf("reset %v, want 30m", r)
	}
	// Midnight UTC is not the reset.
	if d.Remaining(time.Date(2026, 11, 15, 0, 10, 0, 0, time.UTC)) != 0 {
		t.Fatal("reset at midnight UTC")
	}
	now = time.Date(2026, 11, 15, 0, 0, 0, 0, la)
	if r := d.Remaining(now); r != 2 {
		t.Fatalf("remaining %v after midnight Pacific, want 2", r)
	}
}

// The limits as the simulator serves them, on a fake clock.

func TestOpenAIWindowHeadersAndFailedRequestsCount(t *testing.T) {
	f := scenarioFile(t, "[openai]\nlimit_kind = bucket\nrpm = 2\ntpm = 100000\n")
	s, _, clk := newTestSim(t, Options{ScenarioFile: f})
	for i := 0; i < 2; i++ {
		if r := call(t, s, "openai", true); r.status != 200 {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
	}
	r := call(t, s, "openai", true)
	if r.status != 429 || r.header.Get("retry-after") == "" {
		t.Fatalf("third request: %d retry-after %q, want 429 with retry-after", r.status, r.header.Get("retry-after"))
	}
	if got := r.header.Get("x-ratelimit-remaining-requests"); got != "0" {
		t.Errorf("remaining-requests %q, want 0", got)
	}
	if got := r.header.Get("x-ratelimit-reset-requests"); got != "1m30s" {
		t.Errorf("reset-requests %q, want 1m30s (a bucket 1.5 requests in debt, refilling one per 30s)", got)
	}
	// 31 s later a bucket that had not counted the failure would hold one
	// request again; OpenAI counts failed requests, so it is still short.
	clk.Advance(31 * time.Second)
	if r := call(t, s, "openai", true); r.status != 429 {
		t.Fatalf("after 31s: %d, want 429 (the failed request counted)", r.status)
	}
	clk.Advance(2 * time.Minute)
	r = call(t, s, "openai", true)
	if r.status != 200 {
		t.Fatalf("after the refill: %d", r.status)
	}
	for _, h := range []string{"x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"} {
		if _, err := time.ParseDuration(r.header.Get(h)); err != nil {
			t.Errorf("%s %q is not a Go duration", h, r.header.Get(h))
		}
	}
}

func TestOpenAIWindow(t *testing.T) {
	f := scenarioFile(t, "[openai]\nlimit_kind = window\nrpm = 2\n")
	s, _, clk := newTestSim(t, Options{ScenarioFile: f})
	call(t, s, "openai", true)
	clk.Advance(20 * time.Second)
	r := call(t, s, "openai", true)
	if got := r.header.Get("x-ratelimit-reset-requests"); got != "40s" {
		t.Errorf("reset %q, want 40s (the window opened 20s ago)", got)
	}
	r = call(t, s, "openai", true)
	if r.status != 429 || r.header.Get("retry-after") != "40" {
		t.Fatalf("%d retry-after %q, want 429 and 40", r.status, r.header.Get("retry-after"))
	}
	body := jsonOf(t, r.body)
	if msg, _ := path(body, "error.message").(string); !strings.Contains(msg, "requests per min (RPM): Limit 2") || !strings.Contains(msg, "Please try again in 40s") {
		t.Errorf("message %q", msg)
	}
	clk.Advance(40 * time.Second)
	if r := call(t, s, "openai", true); r.status != 200 {
		t.Fatalf("after the window: %d", r.status)
	}
}

func TestAnthropicBucketHeaders(t *testing.T) {
	f := scenarioFile(t, "[anthropic]\nrpm = 2\nitpm = 30000\notpm = 8000\n")
	s, _, clk := newTestSim(t, Options{ScenarioFile: f})
	r := call(t, s, "anthropic", true)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	for _, name := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
		reset := r.header.Get("anthropic-ratelimit-" + name + "-reset")
		ts, err := time.Parse(time.RFC3339, reset)
		if err != nil || !strings.HasSuffix(reset, "Z") {
			t.Errorf("%s reset %q is not RFC 3339 UTC", name, reset)
		}
		if ts.Before(t0) || ts.After(t0.Add(time.Minute)) {
			t.Errorf("%s reset %v out of the minute", name, ts)
		}
		rem, err := strconv.Atoi(r.header.Get("anthropic-ratelimit-" + name + "-remaining"))
		if err != nil {
			t.Errorf("%s remaining: %v", name, err)
		}
		if name != "requests" && rem%1000 != 0 {
			t.Errorf("%s remaining %d is not rounded to thousands", name, rem)
		}
	}
	if got := r.header.Get("anthropic-ratelimit-requests-reset"); got != "2026-11-15T12:00:30Z" {
		t.Errorf("requests reset %q, want 30s on (one request at 2/min)", got)
	}
	call(t, s, "anthropic", true)
	r = call(t, s, "anthropic", true)
	if r.status != 429 || r.header.Get("retry-after") != "30" || r.header.Get("x-should-retry") != "true" {
		t.Fatalf("%d retry-after %q x-should-retry %q", r.status, r.header.Get("retry-after"), r.header.Get("x-should-retry"))
	}
	// Anthropic does not count the refused request: 30 s refill one.
	clk.Advance(30 * time.Second)
	if r := call(t, s, "anthropic", true); r.status != 200 {
		t.Fatalf("after 30s: %d %s", r.status, r.body)
	}
}

func TestGroqPerDayRequestsHeaders(t *testing.T) {
	s, _, _ := newTestSim(t, Options{})
	r := call(t, s, "groq", true)
	if r.header.Get("x-ratelimit-limit-requests") != "14400" || r.header.Get("x-ratelimit-remaining-requests") != "14399" {
		t.Errorf("requests headers %q/%q, want the per-day 14400/14399", r.header.Get("x-ratelimit-limit-requests"), r.header.Get("x-ratelimit-remaining-requests"))
	}
	if got := r.header.Get("x-ratelimit-reset-requests"); got != "6s" {
		t.Errorf("reset-requests %q, want 6s (one of 14400 a day)", got)
	}
	if r.header.Get("x-ratelimit-limit-tokens") != "12000" {
		t.Errorf("limit-tokens %q, want the per-minute 12000", r.header.Get("x-ratelimit-limit-tokens"))
	}
	if r.header.Get("x-request-id") == "" {
		t.Error("no x-request-id")
	}
}

func TestGeminiDailyQuotaAndReset(t *testing.T) {
	f := scenarioFile(t, "[gemini]\nrpd = 2\nrpm = 0\n")
	s, _, clk := newTestSim(t, Options{ScenarioFile: f})
	for i := 0; i < 2; i++ {
		if r := call(t, s, "gemini", true); r.status != 200 {
			t.Fatalf("request %d: %d", i, r.status)
		}
	}
	r := call(t, s, "gemini", true)
	if r.status != 429 {
		t.Fatalf("third: %d %s", r.status, r.body)
	}
	if len(r.header.Values("retry-after")) != 0 || r.header.Get("x-ratelimit-limit-requests") != "" {
		t.Errorf("gemini sent rate-limit headers: %v", r.header)
	}
	body := jsonOf(t, r.body)
	b, _ := json.Marshal(body)
	if !strings.Contains(string(b), "GenerateRequestsPerDayPerProjectPerModel-FreeTier") || !strings.Contains(string(b), "google.rpc.RetryInfo") {
		t.Errorf("body lacks the PerDay QuotaFailure or RetryInfo: %s", b)
	}
	// t0 is 04:00 Pacific; midnight Pacific is 20 h on.
	clk.Advance(19 * time.Hour)
	if r := call(t, s, "gemini", true); r.status != 429 {
		t.Fatalf("before midnight Pacific: %d", r.status)
	}
	clk.Advance(time.Hour)
	if r := call(t, s, "gemini", true); r.status != 200 {
		t.Fatalf("after midnight Pacific: %d %s", r.status, r.body)
	}
}

func TestSpendBudget(t *testing.T) {
	f := scenarioFile(t, "[anthropic]\nbudget_usd = 0.0001\n[openai]\nbudget_usd = 0.000001\nspend_code = credit_balance_exhausted\n")
	s, _, clk := newTestSim(t, Options{ScenarioFile: f})
	if r := call(t, s, "anthropic", true); r.status != 200 {
		t.Fatalf("first: %d", r.status)
	}
	var r raw
	for i := 0; i < 50; i++ {
		if r = call(t, s, "anthropic", true); r.status != 200 {
			break
		}
	}
	body := jsonOf(t, r.body)
	if r.status != 429 || path(body, "error.details.error_code") != "enforced_spend_limit_reached" {
		t.Fatalf("spent: %d %s", r.status, r.body)
	}
	if r.header.Get("retry-after") != "" {
		t.Error("the spend cap sent retry-after")
	}
	if msg, _ := path(body, "error.message").(string); !strings.Contains(msg, "You will regain access on 2026-12-01 at 00:00 UTC.") {
		t.Errorf("message %q", msg)
	}
	call(t, s, "openai", true)
	r = call(t, s, "openai", true)
	if r.status != 429 || path(jsonOf(t, r.body), "error.code") != "credit_balance_exhausted" {
		t.Fatalf("openai spent: %d %s", r.status, r.body)
	}
	if st := s.Status(); st.Providers[1].SpentUSD < 0.0001 || st.Providers[1].BudgetUSD != 0.0001 {
		t.Errorf("status %+v", st.Providers[1])
	}
	// A new month, a new budget.
	clk.Advance(16 * 24 * time.Hour)
	if r := call(t, s, "anthropic", true); r.status != 200 {
		t.Fatalf("next month: %d %s", r.status, r.body)
	}
}

func TestAccelerationLimit(t *testing.T) {
	f := scenarioFile(t, "[openai]\nramp = 2 3 10s\n")
	s, _, clk := newTestSim(t, Options{ScenarioFile: f})
	for i := 0; i < 3; i++ {
		if r := call(t, s, "openai", true); r.status != 200 {
			t.Fatalf("request %d: %d", i, r.status)
		}
		clk.Advance(time.Second)
	}
	r := call(t, s, "openai", true)
	if r.status != 429 || path(jsonOf(t, r.body), "error.code") != "slow_down" || r.header.Get("retry-after") != "7" {
		t.Fatalf("ramp: %d retry-after %q %s", r.status, r.header.Get("retry-after"), r.body)
	}
	// Steady traffic at the earlier pace is fine.
	clk.Advance(10 * time.Second)
	if r := call(t, s, "openai", true); r.status != 200 {
		t.Fatalf("after the window: %d %s", r.status, r.body)
	}
}

func TestRequestTooLargeAndContextWindow(t *testing.T) {
	f := scenarioFile(t, "[openai]\ntpm = 50\n[anthropic]\ncontext_window = 2\n")
	s, _, _ := newTestSim(t, Options{ScenarioFile: f})
	r := call(t, s, "openai", true) // 64 max tokens + input > 50
	if msg, _ := path(jsonOf(t, r.body), "error.message").(string); r.status != 429 || !strings.HasPrefix(msg, "Request too large for gpt-5.4-mini") {
		t.Fatalf("%d %s", r.status, r.body)
	}
	r = call(t, s, "anthropic", true)
	if msg, _ := path(jsonOf(t, r.body), "error.message").(string); r.status != 400 || !strings.HasPrefix(msg, "prompt is too long") {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

func TestTimedWindowsAndRepeats(t *testing.T) {
	f := scenarioFile(t, "[openai]\nwindow = 5s-10s overload every=20s\n")
	s, _, clk := newTestSim(t, Options{ScenarioFile: f})
	at := func(d time.Duration) int {
		clk.t = t0.Add(d)
		return call(t, s, "openai", true).status
	}
	for _, c := range []struct {
		at     time.Duration
		status int
	}{{0, 200}, {5 * time.Second, 503}, {9 * time.Second, 503}, {10 * time.Second, 200}, {26 * time.Second, 503}, {31 * time.Second, 200}} {
		if got := at(c.at); got != c.status {
			t.Errorf("at %v: %d, want %d", c.at, got, c.status)
		}
	}
}

func TestMistralRejectsOpenAIOnlyFields(t *testing.T) {
	s, _, _ := newTestSim(t, Options{})
	req := request(t, "http://sim.test", "mistral", true)
	req2 := request(t, "http://sim.test", "openai", true) // carries stream_options
	req2.URL = req.URL
	r := exchange(s, req2)
	body := jsonOf(t, r.body)
	if r.status != 422 || path(body, "type") != "invalid_request_error" || !strings.Contains(string(r.body), `"loc":["body","stream_options"]`) {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

// A bucket with a burst refills at its per-minute limit but holds only the
// burst: 300 RPM with burst 5 takes 5 at once, then one every 200ms.
func TestBurstBucket(t *testing.T) {
	now := t0
	b := newBurstBucket(300, 5, time.Minute)
	if b.Limit() != 300 {
		t.Fatalf("limit %d, want 300 (the per-minute figure the headers show)", b.Limit())
	}
	for i := 0; i < 5; i++ {
		if w := b.Wait(now, 1); w != 0 {
			t.Fatalf("request %d of the burst waits %v", i, w)
		}
		b.Take(now, 1)
	}
	if w := b.Wait(now, 1); w != 200*time.Millisecond {
		t.Fatalf("after the burst: wait %v, want 200ms", w)
	}
	if r := b.ResetIn(now); r != time.Second {
		t.Fatalf("reset %v, want 1s (5 at 5 a second)", r)
	}
	// An hour idle fills it to the burst, not to the limit.
	now = now.Add(time.Hour)
	if rem := b.Remaining(now); rem != 5 {
		t.Fatalf("remaining %v after an hour, want 5", rem)
	}
	// Over a minute of steady demand it admits the limit (plus the first burst).
	admitted := 0
	for end := now.Add(time.Minute); now.Before(end); now = now.Add(10 * time.Millisecond) {
		for b.Wait(now, 1) == 0 {
			b.Take(now, 1)
			admitted++
		}
	}
	if admitted < 300 || admitted > 306 {
		t.Fatalf("%d admitted in a minute, want 300 plus the burst", admitted)
	}
	// A burst of zero or above the limit is the limit.
	for _, burst := range []int64{0, 400} {
		if c := newBurstBucket(300, burst, time.Minute).capacity; c != 300 {
			t.Errorf("burst %d: capacity %v, want 300", burst, c)
		}
	}
}

// A window with a burst is quantized: 300 a minute enforced as 5 a second.
func TestQuantizedWindow(t *testing.T) {
	now := t0
	w := newQuantizedWindow(300, 5, time.Minute)
	if w.Limit() != 300 {
		t.Fatalf("limit %d, want 300", w.Limit())
	}
	for i := 0; i < 5; i++ {
		if d := w.Wait(now, 1); d != 0 {
			t.Fatalf("request %d waits %v", i, d)
		}
		w.Take(now, 1)
	}
	if d := w.Wait(now.Add(300*time.Millisecond), 1); d != 700*time.Millisecond {
		t.Fatalf("sixth: wait %v, want 700ms (the 1s sub-window's end)", d)
	}
	if rem := w.Remaining(now.Add(time.Second)); rem != 5 {
		t.Fatalf("remaining %v in the next sub-window, want 5", rem)
	}
	if pw := newQuantizedWindow(300, 0, time.Minute); pw.period != time.Minute || pw.Limit() != 300 {
		t.Errorf("no burst: %+v, want a plain 1m window", pw)
	}
}

// The bench preset as served, on the fake clock: 5 at once, the sixth a 429
// with a short wait, one more every 200ms; the headers name 300 a minute.
func TestBenchPresetBurst(t *testing.T) {
	for _, provider := range []string{"openai", "anthropic"} {
		t.Run(provider, func(t *testing.T) {
			s, _, clk := newTestSim(t, Options{Scenario: "bench"})
			var r raw
			for i := 0; i < 5; i++ {
				if r = call(t, s, provider, true); r.status != 200 {
					t.Fatalf("request %d: %d %s", i, r.status, r.body)
				}
			}
			limit := map[string]string{"openai": "x-ratelimit-limit-requests", "anthropic": "anthropic-ratelimit-requests-limit"}[provider]
			if got := r.header.Get(limit); got != "300" {
				t.Errorf("%s %q, want 300", limit, got)
			}
			if provider == "openai" {
				if got := r.header.Get("x-ratelimit-reset-requests"); got != "1s" {
					t.Errorf("reset-requests %q, want 1s (5 back at 5 a second)", got)
				}
			}
			r = call(t, s, provider, true)
			if r.status != 429 {
				t.Fatalf("sixth at once: %d, want 429", r.status)
			}
			if ra, err := strconv.Atoi(r.header.Get("retry-after")); err != nil || ra > 1 {
				t.Errorf("retry-after %q, want at most 1s", r.header.Get("retry-after"))
			}
			// OpenAI counted the failed request: 400ms to get one back.
			step := 200 * time.Millisecond
			if provider == "openai" {
				step = 400 * time.Millisecond
			}
			clk.Advance(step)
			if r = call(t, s, provider, true); r.status != 200 {
				t.Fatalf("after %v: %d, want 200", step, r.status)
			}
			for i := 0; i < 10; i++ {
				clk.Advance(200 * time.Millisecond)
				if r = call(t, s, provider, true); r.status != 200 {
					t.Fatalf("steady request %d: %d, want 200", i, r.status)
				}
			}
		})
	}
}
