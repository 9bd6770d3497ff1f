package sim

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// do sends req over the loopback server and reads the answer whole; a
// transport or body error is returned as is.
func do(t *testing.T, ts interface{ Client() *http.Client }, req *http.Request) (raw, error) {
	t.Helper()
	res, err := ts.Client().Do(req)
	if err != nil {
		return raw{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return raw{status: res.StatusCode, header: res.Header, body: b}, err
}

func mustDo(t *testing.T, ts interface{ Client() *http.Client }, req *http.Request) raw {
	t.Helper()
	r, err := do(t, ts, req)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A 429 from a fault says the same in headers and body, and keeps refusing
// until its Retry-After has passed.
func TestRateLimitHeadersAgreeAndHold(t *testing.T) {
	s, ts, clk := newTestSim(t, Options{})
	if err := s.Inject(Fault{Provider: "openai", Kind: FaultRateLimit, RetryAfter: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	r := mustDo(t, ts, request(t, ts.URL, "openai", false))
	msg, _ := path(jsonOf(t, r.body), "error.message").(string)
	if r.status != 429 || r.header.Get("retry-after") != "20" || !strings.Contains(msg, "Limit 500, Used 500") {
		t.Fatalf("%d retry-after %q: %s", r.status, r.header.Get("retry-after"), r.body)
	}
	if got := r.header.Get("x-ratelimit-remaining-requests"); got != "0" {
		t.Errorf("remaining-requests %q beside a body saying the limit is used up", got)
	}
	if d, err := time.ParseDuration(r.header.Get("x-ratelimit-reset-requests")); err != nil || d < 20*time.Second {
		t.Errorf("reset-requests %q, want at least the 20s Retry-After", r.header.Get("x-ratelimit-reset-requests"))
	}
	for _, after := range []time.Duration{time.Millisecond, 10 * time.Second} {
		clk.Advance(after)
		r := mustDo(t, ts, request(t, ts.URL, "openai", true))
		if r.status != 429 {
			t.Fatalf("a retry %v into the wait got %d, want 429", after, r.status)
		}
	}
	if r := mustDo(t, ts, request(t, ts.URL, "openai", true)); r.header.Get("retry-after") != "10" {
		t.Errorf("retry-after %q 10s into a 20s wait, want 10", r.header.Get("retry-after"))
	}
	clk.Advance(10 * time.Second)
	if r := mustDo(t, ts, request(t, ts.URL, "openai", true)); r.status != 200 {
		t.Fatalf("after the Retry-After: %d", r.status)
	}

	// Anthropic: the requests-remaining header agrees too.
	if err := s.Inject(Fault{Provider: "anthropic", Kind: FaultRateLimit, RetryAfter: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	r = mustDo(t, ts, request(t, ts.URL, "anthropic", true))
	if r.status != 429 || r.header.Get("anthropic-ratelimit-requests-remaining") != "0" {
		t.Errorf("anthropic %d requests-remaining %q", r.status, r.header.Get("anthropic-ratelimit-requests-remaining"))
	}
}

// The busy scenario's random 429s hold too: a retry before the named wait
// is refused.
func TestScenario429Holds(t *testing.T) {
	f := scenarioFile(t, "[openai]\nfault = rate_limit 1 retry_after=3s\n")
	s, ts, clk := newTestSim(t, Options{ScenarioFile: f})
	if r := mustDo(t, ts, request(t, ts.URL, "openai", true)); r.status != 429 {
		t.Fatalf("%d", r.status)
	}
	if err := s.SetScenario("calm"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if r := mustDo(t, ts, request(t, ts.URL, "openai", true)); r.status != 429 || r.header.Get("retry-after") != "2" {
		t.Fatalf("a retry 1s into a 3s wait: %d retry-after %q", r.status, r.header.Get("retry-after"))
	}
	clk.Advance(2 * time.Second)
	if r := mustDo(t, ts, request(t, ts.URL, "openai", true)); r.status != 200 {
		t.Fatalf("after the wait: %d", r.status)
	}
}

// Quota and billing faults persist, streamed or not, until cleared (or
// their documented reset); the armed list says so.
func TestQuotaFaultPersists(t *testing.T) {
	s, ts, clk := newTestSim(t, Options{})
	id, err := s.Arm(Fault{Provider: "openai", Kind: FaultSpendCap})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		r := mustDo(t, ts, request(t, ts.URL, "openai", i%2 == 0))
		if r.status != 429 || path(jsonOf(t, r.body), "error.code") != "insufficient_quota" {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
		clk.Advance(time.Hour)
	}
	armed := s.Armed()
	if len(armed) != 1 || armed[0].ID != id || armed[0].Provider != "openai" || armed[0].Kind != FaultSpendCap ||
		!armed[0].UntilCleared || armed[0].Hits != 5 || armed[0].Left != -1 {
		t.Fatalf("armed %+v", armed)
	}
	if !s.ClearFault(id) || len(s.Armed()) != 0 {
		t.Fatal("not cleared")
	}
	if r := mustDo(t, ts, request(t, ts.URL, "openai", true)); r.status != 200 {
		t.Fatalf("after clearing: %d", r.status)
	}

	// Gemini's per-day quota lasts until midnight Pacific.
	if err := s.Inject(Fault{Provider: "gemini", Kind: FaultDailyQuota}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if r := mustDo(t, ts, request(t, ts.URL, "gemini", false)); r.status != 429 {
			t.Fatalf("gemini request %d: %d", i, r.status)
		}
		clk.Advance(time.Hour)
	}
	clk.Advance(24 * time.Hour)
	if r := mustDo(t, ts, request(t, ts.URL, "gemini", false)); r.status != 200 {
		t.Fatalf("after the daily reset: %d %s", r.status, r.body)
	}
}

// "request too large" and "context length" are deterministic for the
// request they hit; another request passes.
func TestDeterministicFaultsRepeatForTheSameRequest(t *testing.T) {
	s, ts, _ := newTestSim(t, Options{})
	if err := s.Inject(Fault{Provider: "openai", Kind: FaultContextLength}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if r := mustDo(t, ts, request(t, ts.URL, "openai", true)); r.status != 400 {
			t.Fatalf("the same request, try %d: %d", i, r.status)
		}
	}
	other := request(t, ts.URL, "openai", true)
	other.Body = io.NopCloser(strings.NewReader(`{"model":"gpt-5.4-mini","messages":[{"role":"user","content":"a shorter prompt"}]}`))
	other.ContentLength = -1
	if r := mustDo(t, ts, other); r.status != 200 {
		t.Fatalf("another request: %d", r.status)
	}
}

// Cut streams break as real disconnects do: an unexpected EOF by default,
// a reset with code=reset, a clean end (no end event) only as code=clean.
func TestCutVariants(t *testing.T) {
	s, ts, _ := newTestSim(t, Options{})
	for _, c := range []struct {
		code  string
		check func(error) bool
	}{
		{"", func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		{"reset", func(err error) bool { return errors.Is(err, syscall.ECONNRESET) }},
		{"clean", func(err error) bool { return err == nil }},
	} {
		if err := s.Inject(Fault{Provider: "anthropic", Kind: FaultCut, Code: c.code}); err != nil {
			t.Fatal(err)
		}
		r, err := do(t, ts, request(t, ts.URL, "anthropic", true))
		if !c.check(err) {
			t.Errorf("cut %q: body error %v", c.code, err)
		}
		if strings.Contains(string(r.body), "message_stop") {
			t.Errorf("cut %q sent the end event", c.code)
		}
		if err := s.Inject(Fault{Provider: "openai", Kind: FaultCut, Code: c.code}); err != nil {
			t.Fatal(err)
		}
		if _, err := do(t, ts, request(t, ts.URL, "openai", false)); c.code != "clean" && !c.check(err) {
			t.Errorf("cut %q of a plain answer: %v", c.code, err)
		}
	}
}

// The mid-stream scenario never resets a plain (non-streaming) request: it
// gets the HTTP error the stream's error stands for.
func TestMidStreamScenarioSparesPlainRequests(t *testing.T) {
	_, ts, _ := newTestSim(t, Options{Scenario: "mid-stream", Seed: 3})
	codes := map[int]int{}
	for i := 0; i < 20; i++ {
		r, err := do(t, ts, request(t, ts.URL, "anthropic", false))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		codes[r.status]++
	}
	if codes[529] == 0 || codes[200] == 0 || len(codes) != 2 {
		t.Errorf("statuses %v, want 200s and 529s only", codes)
	}
}

// ids: two random-seed simulators share none; one fixed seed reproduces a
// run exactly, faults drawn included.
func TestSeedsAndIDs(t *testing.T) {
	run := func(opts Options) (ids []string, statuses []int, seed string) {
		_, ts, _ := newTestSim(t, opts)
		for i := 0; i < 30; i++ {
			p := providerNames[i%len(providerNames)]
			r, _ := do(t, ts, request(t, ts.URL, p, i%3 == 0))
			statuses = append(statuses, r.status)
			for _, h := range []string{"x-request-id", "request-id"} {
				if v := r.header.Get(h); v != "" {
					ids = append(ids, v)
				}
			}
			if v := jsonIDs(r.body); v != "" {
				ids = append(ids, v)
			}
			if v := r.header.Get(HeaderSeed); v != "" {
				seed = v
			}
		}
		return ids, statuses, seed
	}
	a, _, seedA := run(Options{})
	b, _, seedB := run(Options{})
	if seedA == seedB || seedA == "" {
		t.Errorf("random seeds %q and %q", seedA, seedB)
	}
	seen := map[string]bool{}
	for _, id := range a {
		seen[id] = true
	}
	for _, id := range b {
		if seen[id] {
			t.Fatalf("two random-seed simulators both sent id %q", id)
		}
	}
	x, sx, _ := run(Options{Seed: 42, Scenario: "flaky"})
	y, sy, seedY := run(Options{Seed: 42, Scenario: "flaky"})
	if fmtInts(sx) != fmtInts(sy) || seedY != "42" || len(x) != len(y) {
		t.Fatalf("seed 42 did not reproduce the run: statuses %v and %v, %d and %d ids", sx, sy, len(x), len(y))
	}
	for i := range x {
		if x[i] != y[i] {
			t.Fatalf("seed 42 did not reproduce the run: id %d is %s and %s", i, x[i], y[i])
		}
	}
}

// jsonIDs picks a body's message id ("id" at the top), if any.
func jsonIDs(b []byte) string {
	s := string(b)
	i := strings.Index(s, `"id":"`)
	if i < 0 {
		return ""
	}
	rest := s[i+6:]
	return rest[:strings.IndexByte(rest, '"')]
}

func fmtInts(v []int) string {
	var b strings.Builder
	for _, n := range v {
		b.WriteString(" " + http.StatusText(n))
	}
	return b.String()
}

// Every response names the simulator instance; instances differ.
func TestInstanceHeader(t *testing.T) {
	s, ts, _ := newTestSim(t, Options{})
	_, ts2, _ := newTestSim(t, Options{})
	bad := request(t, ts.URL, "openai", true)
	bad.Header.Set("Authorization", "Bearer wrong")
	for _, req := range []*http.Request{request(t, ts.URL, "openai", true), bad, request(t, ts.URL, "gemini", false)} {
		if r := mustDo(t, ts, req); r.header.Get(HeaderInstance) != s.Instance() || !strings.HasPrefix(s.Instance(), "sim_") {
			t.Errorf("%d: instance %q, want %q", r.status, r.header.Get(HeaderInstance), s.Instance())
		}
	}
	if r := mustDo(t, ts2, request(t, ts2.URL, "openai", true)); r.header.Get(HeaderInstance) == s.Instance() {
		t.Error("two simulators share an instance id")
	}
}

// OpenAI's reset headers are the time to full replenishment.
func TestOpenAIResetIsTimeToFull(t *testing.T) {
	_, ts, _ := newTestSim(t, Options{})
	r := mustDo(t, ts, request(t, ts.URL, "openai", true))
	if got := r.header.Get("x-ratelimit-reset-requests"); got != "120ms" {
		t.Errorf("reset-requests %q after 1 of 500 RPM, want 120ms", got)
	}
}

// Overload episodes: each provider in its own windows; the outage
// scenario hits all at once.
func TestOverloadWindowsPerProvider(t *testing.T) {
	pattern := func(scenario string) map[string]string {
		_, ts, clk := newTestSim(t, Options{Scenario: scenario, Seed: 5})
		out := map[string]string{}
		for step := 0; step < 30; step++ {
			for _, p := range []string{"openai", "anthropic", "gemini", "mistral"} {
				r := mustDo(t, ts, request(t, ts.URL, p, false))
				mark := "."
				if r.status >= 500 {
					mark = "x"
				}
				out[p] += mark
			}
			clk.Advance(time.Second)
		}
		return out
	}
	out := pattern("outage")
	if out["openai"] != out["anthropic"] || out["openai"] != out["gemini"] || !strings.Contains(out["openai"], "x") {
		t.Errorf("outage not shared: %v", out)
	}
	// 90% in the windows, 15% outside: compare where the long runs fall.
	ov := pattern("overloaded")
	if ov["openai"] == ov["anthropic"] && ov["anthropic"] == ov["gemini"] && ov["gemini"] == ov["mistral"] {
		t.Errorf("overloaded windows identical across providers: %v", ov)
	}
}

// An overload episode bounded by For ends on time and cannot leak into a
// later call.
func TestOverloadEpisodeFor(t *testing.T) {
	s, ts, clk := newTestSim(t, Options{})
	if err := s.Inject(Fault{Provider: "openai", Kind: FaultOverload, For: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if r := mustDo(t, ts, request(t, ts.URL, "openai", true)); r.status != 503 {
			t.Fatalf("inside the episode: %d", r.status)
		}
		clk.Advance(400 * time.Millisecond)
	}
	clk.Advance(time.Second)
	if r := mustDo(t, ts, request(t, ts.URL, "openai", true)); r.status != 200 {
		t.Fatalf("after the episode: %d", r.status)
	}
	if len(s.Armed()) != 0 {
		t.Errorf("still armed: %+v", s.Armed())
	}
}

// Demo faults do what their names say on each provider.
func TestDemoFaultsPerProvider(t *testing.T) {
	s, ts, _ := newTestSim(t, Options{})
	if err := s.Inject(Fault{Provider: "openai", Kind: FaultDailyQuota}); err != nil {
		t.Fatal(err)
	}
	r := mustDo(t, ts, request(t, ts.URL, "openai", true))
	if msg, _ := path(jsonOf(t, r.body), "error.message").(string); r.status != 429 || !strings.Contains(msg, "requests per day (RPD)") || path(jsonOf(t, r.body), "error.code") == "insufficient_quota" {
		t.Errorf("openai daily quota: %d %s", r.status, r.body)
	}
	s.ClearFaults("")
	if err := s.Inject(Fault{Provider: "groq", Kind: FaultSpendCap}); err != nil {
		t.Fatal(err)
	}
	r = mustDo(t, ts, request(t, ts.URL, "groq", true))
	if msg, _ := path(jsonOf(t, r.body), "error.message").(string); strings.Contains(msg, "per day") || path(jsonOf(t, r.body), "error.code") != "organization_spend_limit_exceeded" {
		t.Errorf("groq spend cap: %d %s", r.status, r.body)
	}
	if n := s.ClearFaults("groq"); n != 1 {
		t.Errorf("cleared %d", n)
	}
}

// Anthropic takes the key as x-api-key or as a bearer token, and checks
// anthropic-version as the API does.
func TestAnthropicAuthForms(t *testing.T) {
	_, ts, _ := newTestSim(t, Options{})
	with := func(set func(h http.Header)) raw {
		req := request(t, ts.URL, "anthropic", false)
		req.Header.Del("x-api-key")
		set(req.Header)
		return mustDo(t, ts, req)
	}
	cases := []struct {
		name   string
		set    func(h http.Header)
		status int
		msg    string
	}{
		{"bearer, new version", func(h http.Header) {
			h.Set("Authorization", "Bearer "+FakeKey)
			h.Set("anthropic-version", "2026-10-21")
		}, 200, ""},
		{"x-api-key", func(h http.Header) { h.Set("x-api-key", FakeKey) }, 200, ""},
		{"none", func(h http.Header) {}, 401, "x-api-key header is required"},
		{"bad x-api-key", func(h http.Header) { h.Set("x-api-key", "nope") }, 401, "invalid x-api-key"},
		{"bad bearer", func(h http.Header) { h.Set("Authorization", "Bearer nope") }, 401, ""},
		{"no version", func(h http.Header) {
			h.Set("x-api-key", FakeKey)
			h.Del("anthropic-version")
		}, 400, "anthropic-version: header is required"},
		{"doubled version", func(h http.Header) {
			h.Set("x-api-key", FakeKey)
			h.Add("anthropic-version", "2023-06-01")
		}, 400, `anthropic-version: "2023-06-01, 2023-06-01" is not a valid version`},
	}
	for _, c := range cases {
		r := with(c.set)
		msg, _ := path(jsonOf(t, r.body), "error.message").(string)
		if r.status != c.status || c.msg != "" && msg != c.msg || strings.Contains(string(r.body), FakeKey) {
			t.Errorf("%s: %d %s", c.name, r.status, r.body)
		}
	}
	// 2026-10-21 removed the sampling parameters.
	req := request(t, ts.URL, "anthropic", false)
	req.Header.Set("anthropic-version", "2026-10-21")
	req.Body = io.NopCloser(strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":10,"temperature":0.5,"messages":[{"role":"user","content":"hi"}]}`))
	req.ContentLength = -1
	if r := mustDo(t, ts, req); r.status != 400 {
		t.Errorf("temperature under 2026-10-21: %d", r.status)
	}
}

// Answers read like answers and take the shapes asked for; bodies carry
// the fields the real ones do.
func TestAnswersAndBodies(t *testing.T) {
	_, ts, _ := newTestSim(t, Options{})
	r := mustDo(t, ts, request(t, ts.URL, "openai", false))
	b := jsonOf(t, r.body)
	text, _ := path(b, "choices").([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	if !strings.Contains(text, "gpt-5.4-mini") || !strings.Contains(text, "hello there") {
		t.Errorf("answer %q does not name the model and the prompt", text)
	}
	for _, p := range []string{"system_fingerprint", "service_tier", "usage.prompt_tokens_details.cached_tokens", "usage.completion_tokens_details.reasoning_tokens"} {
		if path(b, p) == nil {
			t.Errorf("openai body lacks %s: %s", p, r.body)
		}
	}
	b = jsonOf(t, mustDo(t, ts, request(t, ts.URL, "anthropic", false)).body)
	for _, p := range []string{"usage.cache_creation_input_tokens", "usage.cache_read_input_tokens", "usage.service_tier"} {
		if path(b, p) == nil {
			t.Errorf("anthropic body lacks %s", p)
		}
	}
	b = jsonOf(t, mustDo(t, ts, request(t, ts.URL, "gemini", false)).body)
	if path(b, "usageMetadata.promptTokensDetails") == nil {
		t.Error("gemini body lacks promptTokensDetails")
	}

	for _, c := range []struct {
		spec  string
		check func(string) bool
	}{
		{"code", func(s string) bool { return strings.HasPrefix(s, "```go\n") && strings.HasSuffix(s, "```") }},
		{"paragraphs:3KB", func(s string) bool { return strings.Count(s, "\n\n") >= 2 && len(s) >= 3000 }},
		{"paragraph:1MB", func(s string) bool { return len(s) == 1<<20 && !strings.Contains(s, "\n") }},
		{"words:100t", func(s string) bool { return len(s) == 400 && !strings.Contains(s, ".") }},
	} {
		s, _, _ := newTestSim(t, Options{Answer: c.spec})
		pieces, _ := s.answerText(&simRequest{provider: "openai", model: "m", prompt: "p"})
		if text := strings.Join(pieces, ""); !c.check(text) {
			t.Errorf("answer %s: %d bytes %.80q", c.spec, len(text), text)
		}
	}
	if _, err := New(Options{Answer: "sonnet"}); err == nil {
		t.Error("a bad answer shape was accepted")
	}
}

// The control API lists armed faults, clears them, and sets the seed.
func TestControlAPIArmedClearSeed(t *testing.T) {
	s, ts, _ := newTestSim(t, Options{})
	a := &Admin{URL: ts.URL}
	ctx := t.Context()
	id, err := a.Arm(ctx, Fault{Provider: "openai", Kind: FaultOverload, Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Arm(ctx, Fault{Provider: "anthropic", Kind: FaultSpendCap}); err != nil {
		t.Fatal(err)
	}
	armed, err := a.Armed(ctx)
	if err != nil || len(armed) != 2 || armed[0].ID != id || armed[0].Left != 3 || armed[0].Label != "next 3 requests" ||
		armed[1].Label != "until cleared" || !armed[1].UntilCleared {
		t.Fatalf("armed %+v %v", armed, err)
	}
	if err := a.ClearFault(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := a.ClearFault(ctx, id); err == nil {
		t.Error("cleared a fault twice")
	}
	if n, err := a.ClearFaults(ctx, ""); err != nil || n != 1 {
		t.Errorf("clear all: %d %v", n, err)
	}
	if _, err := a.Arm(ctx, Fault{Provider: "openai", Kind: FaultOverload, For: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if armed, _ := a.Armed(ctx); len(armed) != 1 || armed[0].Label != "for 2s from its first hit" || armed[0].Left != -1 {
		t.Errorf("armed episode %+v", armed)
	}
	s.ClearFaults("")
	if seed, err := a.SetSeed(ctx, 99); err != nil || seed != 99 || s.Seed() != 99 {
		t.Errorf("seed %d %v", seed, err)
	}
	r := mustDo(t, ts, request(t, ts.URL, "openai", true))
	if r.header.Get(HeaderSeed) != "99" {
		t.Errorf("seed header %q", r.header.Get(HeaderSeed))
	}
	sc := bufio.NewScanner(strings.NewReader(string(r.body)))
	if !sc.Scan() {
		t.Error("empty stream")
	}
}
