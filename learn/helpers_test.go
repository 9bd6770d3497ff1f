package learn

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

var t0 = time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// learnText learns calls and returns the scenario text.
func learnText(t *testing.T, calls []store.Call) string {
	t.Helper()
	l := New(Source{Scope: "test", Version: "test"})
	for i := range calls {
		l.Add(&calls[i])
	}
	var b bytes.Buffer
	if err := l.Write(&b, "learnt"); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// section returns the key = value lines of a section, a key's values in
// order.
func section(text, name string) map[string][]string {
	out := map[string][]string{}
	in := false
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			in = line == "["+name+"]"
			continue
		}
		if !in || line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		out[k] = append(out[k], v)
	}
	return out
}

// faultProb returns the probability of a `fault = KIND P` line.
func faultProb(t *testing.T, sec map[string][]string, kind string) float64 {
	t.Helper()
	for _, v := range sec["fault"] {
		f := strings.Fields(v)
		if f[0] == kind {
			p, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	return 0
}

// windowOf returns the start and end of `window = S-E KIND ...` lines.
func windowsOf(t *testing.T, sec map[string][]string, kind string) [][2]time.Duration {
	t.Helper()
	var out [][2]time.Duration
	for _, v := range sec["window"] {
		f := strings.Fields(v)
		if f[1] != kind {
			continue
		}
		a, b, _ := strings.Cut(f[0], "-")
		s, err := time.ParseDuration(a)
		if err != nil {
			t.Fatal(err)
		}
		var e time.Duration
		if b != "" {
			if e, err = time.ParseDuration(b); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, [2]time.Duration{s, e})
	}
	return out
}

// distMedian reads p50 of a distribution line.
func distMedian(t *testing.T, sec map[string][]string, key string, dur bool) float64 {
	t.Helper()
	if len(sec[key]) == 0 {
		t.Fatalf("no %s", key)
	}
	for _, q := range strings.Fields(sec[key][0]) {
		if v, ok := strings.CutPrefix(q, "p50="); ok {
			if dur {
				d, err := time.ParseDuration(v)
				if err != nil {
					t.Fatal(err)
				}
				return d.Seconds()
			}
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("%s has no p50", key)
	return 0
}

func within(got, want, rel float64) bool { return math.Abs(got-want) <= rel*want }

// genSpec is a synthetic account: one attempt per call at a fixed pace,
// failures drawn from background rates and one episode, latencies from
// log-normal distributions, limit headers on every answer.
type genSpec struct {
	target     stream.Target
	n          int
	step       time.Duration
	bg         map[stream.Class]float64 // background failure rates by class
	epClass    stream.Class
	epFrom     time.Duration
	epTo       time.Duration
	epP        float64
	ttftMedian time.Duration
	tpsMedian  float64
	headers    bool
	seed       uint64
}

func (g genSpec) calls() []store.Call {
	rng := rand.New(rand.NewPCG(g.seed, 7))
	out := make([]store.Call, 0, g.n)
	ra := 2 * time.Second
	for i := range g.n {
		at := t0.Add(time.Duration(i) * g.step)
		off := at.Sub(t0)
		cl := stream.ClassOK
		u := rng.Float64()
		if g.epP > 0 && off >= g.epFrom && off < g.epTo && u < g.epP {
			cl = g.epClass
		} else {
			acc := 0.0
			u = rng.Float64()
			for _, c := range []stream.Class{stream.ClassOverload, stream.ClassRateLimit, stream.ClassServer} {
				acc += g.bg[c]
				if u < acc {
					cl = c
					break
				}
			}
		}
		ttft := time.Duration(float64(g.ttftMedian) * math.Exp(0.4*rng.NormFloat64()))
		tps := g.tpsMedian * math.Exp(0.3*rng.NormFloat64())
		const outTok = 200
		a := retry.Attempt{N: 1, Target: g.target, Class: cl, StartedAt: at, TTFT: ttft, RequestID: "req_secret_" + strconv.Itoa(i)}
		a.Duration = ttft + time.Duration(float64(outTok)/tps*float64(time.Second))
		if g.headers {
			a.Limits = &stream.Limits{At: at.Add(a.Duration),
				Requests: &stream.Window{Limit: 500, Remaining: 480, Reset: at.Add(a.Duration + 2400*time.Millisecond), HasLimit: true, HasRemaining: true},
				Tokens:   &stream.Window{Limit: 200000, Remaining: 190000, Reset: at.Add(a.Duration + 3*time.Second), HasLimit: true, HasRemaining: true}}
		}
		c := store.Call{ID: uint32(i + 1), CallID: "call-secret", Started: at, Chain: []stream.Target{g.target}, Attempts: 1, Mode: store.ModeReal}
		switch cl {
		case stream.ClassOK:
			a.Status, a.Decision = 200, retry.DecideDone
			c.Usage = &stream.Usage{InputTokens: 10, OutputTokens: outTok}
			c.Outcome = retry.OutcomeOK
		case stream.ClassRateLimit:
			a.Status, a.Code, a.Message = 429, "rate_limit_exceeded", "Rate limit reached for org-SECRETORG in project proj_SECRET"
			a.RetryAfter, a.DelaySource, a.Decision = &ra, stream.SourceRetryAfter, retry.DecideRetry
			a.Duration, a.TTFT = 80*time.Millisecond, 0
			c.Outcome = retry.OutcomeGaveUp
		default:
			a.Status, a.Code, a.Message = 503, "overloaded", "the account acct-SECRET is overloaded"
			if cl == stream.ClassServer {
				a.Status = 500
			}
			a.Decision, a.Duration, a.TTFT = retry.DecideRetry, 80*time.Millisecond, 0
			c.Outcome = retry.OutcomeGaveUp
		}
		c.Ended = at.Add(a.Duration)
		c.AttemptsList = []retry.Attempt{a}
		out = append(out, c)
	}
	return out
}

// simHistory records n requests to provider on a simulator running
// scenario, one every step on a fake clock, as the client would record
// them: the status, the limit headers and the error read by the stream
// package's own parsers. Answers are not paced (no latency is learnt).
func simHistory(t *testing.T, scenario, provider string, n int, step time.Duration) []store.Call {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.ini")
	if err := os.WriteFile(path, []byte(scenario), 0o600); err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{t: t0}
	s, err := sim.New(sim.Options{ScenarioFile: path, Clock: clk, Seed: 1, TokensPerSecond: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	target := stream.Target{Provider: provider, Model: "m"}
	var out []store.Call
	for i := range n {
		if i > 0 {
			clk.Advance(step)
		}
		now := clk.Now()
		status, h, body := exchange(t, s, provider)
		a := retry.Attempt{N: 1, Target: target, StartedAt: now, Status: status, Duration: 50 * time.Millisecond,
			Limits: stream.ParseLimits(provider, h, now)}
		c := store.Call{ID: uint32(i + 1), Started: now, Chain: []stream.Target{target}, Attempts: 1}
		if status == http.StatusOK {
			a.Class, a.TTFT = stream.ClassOK, 10*time.Millisecond
			c.Outcome = retry.OutcomeOK
		} else {
			e := stream.ParseError(provider, status, h, body, now)
			a.Class, a.Code, a.QuotaID, a.DelaySource = e.Class, e.Code, e.QuotaID, e.DelaySource
			if e.DelaySource != "" {
				d := e.Delay
				a.RetryAfter = &d
			}
			c.Outcome = retry.OutcomeGaveUp
		}
		c.AttemptsList = []retry.Attempt{a}
		out = append(out, c)
	}
	return out
}

// catalogueModel is the first model the simulator's catalogue lists for
// provider: the simulator answers an unknown model not found.
func catalogueModel(t *testing.T, provider string) string {
	t.Helper()
	for _, pm := range sim.Catalogue() {
		if pm.Provider == provider && len(pm.Models) > 0 {
			return pm.Models[0].ID
		}
	}
	t.Fatalf("the simulator's catalogue has no %s model", provider)
	return ""
}

// exchange sends one minimal request for provider to s, as its SDK would.
func exchange(t *testing.T, s *sim.Server, provider string) (int, http.Header, []byte) {
	t.Helper()
	root := "http://sim.test"
	var url string
	var body any
	h := http.Header{}
	msgs := []any{map[string]any{"role": "user", "content": "hello there"}}
	model := catalogueModel(t, strings.TrimSuffix(provider, ":responses"))
	switch provider {
	case "anthropic":
		url = sim.BaseURL(root, provider) + "/v1/messages"
		body = map[string]any{"model": model, "max_tokens": 64, "messages": msgs}
		h.Set("x-api-key", sim.FakeKey)
		h.Set("anthropic-version", "2023-06-01")
	case "gemini":
		url = sim.BaseURL(root, provider) + "/v1beta/models/gemini-2.5-flash:generateContent"
		body = map[string]any{"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "hello there"}}}},
			"generationConfig": map[string]any{"maxOutputTokens": 64}}
		h.Set("x-goog-api-key", sim.FakeKey)
	case "openai:responses":
		url = sim.BaseURL(root, provider) + "/responses"
		body = map[string]any{"model": model, "max_output_tokens": 64, "input": msgs}
		h.Set("Authorization", "Bearer "+sim.FakeKey)
	default:
		url = sim.BaseURL(root, provider) + "/chat/completions"
		body = map[string]any{"model": model, "max_tokens": 64, "messages": msgs}
		h.Set("Authorization", "Bearer "+sim.FakeKey)
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	res := rec.Result()
	rb, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, rb
}
