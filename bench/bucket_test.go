package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// bucketServer is a second model of a provider's request limit, written
// from OpenAI's documentation and independent of the simulator's code, so
// that pacing is checked against a bucket that behaves as documented and
// not only against our own: a token bucket of Burst requests refilled
// continuously at Rate per second; every request takes a token when it
// arrives, and a request that finds none is rejected with a 429 and still
// costs one (OpenAI: "unsuccessful requests contribute to your per-minute
// limit"), so the bucket can go into debt. Every answer carries OpenAI's
// headers: x-ratelimit-limit-requests (the per-minute limit),
// x-ratelimit-remaining-requests (whole tokens left) and
// x-ratelimit-reset-requests (the time until the bucket is full again, as
// "1.2s"). The 429 carries no retry-after. It answers OpenAI chat
// completions as SSE after Latency.
type bucketServer struct {
	Rate    float64 // tokens per second
	Burst   float64
	Latency time.Duration // before the answer's headers, at least
	// Jitter, when set, adds 0..Jitter to each answer's latency (drawn from
	// Rand): the headers describe the bucket when the request arrived, and
	// reach the client late and out of order, as a real server's do.
	Jitter time.Duration
	Rand   *rand.Rand

	mu       sync.Mutex
	tokens   float64
	at       time.Time
	started  bool
	rejected int
	served   int
}

// take takes one token at now and returns whether the request is let
// through, with the headers' remaining and time to full.
func (b *bucketServer) take(now time.Time) (ok bool, remaining int, toFull time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.started {
		b.tokens, b.at, b.started = b.Burst, now, true
	}
	b.tokens += now.Sub(b.at).Seconds() * b.Rate
	if b.tokens > b.Burst {
		b.tokens = b.Burst
	}
	b.at = now
	ok = b.tokens >= 1
	b.tokens-- // a rejected request costs a token too
	if ok {
		b.served++
	} else {
		b.rejected++
	}
	remaining = max(0, int(b.tokens))
	toFull = time.Duration((b.Burst - b.tokens) / b.Rate * float64(time.Second)).Round(time.Millisecond)
	return ok, remaining, toFull
}

func (b *bucketServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.NotFound(w, r)
		return
	}
	ok, remaining, toFull := b.take(time.Now())
	lat := b.Latency
	if b.Jitter > 0 {
		b.mu.Lock()
		lat += time.Duration(b.Rand.Int64N(int64(b.Jitter)))
		b.mu.Unlock()
	}
	time.Sleep(lat)
	h := w.Header()
	h.Set("x-ratelimit-limit-requests", strconv.Itoa(int(b.Rate*60)))
	h.Set("x-ratelimit-remaining-requests", strconv.Itoa(remaining))
	h.Set("x-ratelimit-reset-requests", toFull.String())
	h.Set("x-request-id", "req_bucket")
	if !ok {
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"error":{"message":"Rate limit reached for requests per min (RPM): Limit %d, Used %d, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			int(b.Rate*60), int(b.Rate*60))
		return
	}
	h.Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, ev := range []string{
		`{"id":"c1","object":"chat.completion.chunk","model":"gpt-5.4-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello there, five words."},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","model":"gpt-5.4-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`{"id":"c1","object":"chat.completion.chunk","model":"gpt-5.4-mini","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":5,"total_tokens":13}}`,
		`[DONE]`,
	} {
		fmt.Fprintf(w, "data: %s\n\n", ev)
	}
}

// bucketEnv gives each policy a fresh bucketServer over in-memory
// connections.
type bucketEnv struct {
	seed uint64
	last *bucketServer
}

func (e *bucketEnv) Prepare(_ context.Context, _ string, _ *stream.Limits) (retry.Doer, func(), error) {
	b := &bucketServer{Rate: 5, Burst: 5, Latency: 20 * time.Millisecond, Jitter: 400 * time.Millisecond, Rand: rand.New(rand.NewPCG(e.seed, 11))}
	e.last = b
	hc, stop := InMemory(b)
	eps := map[string]stream.Endpoint{"openai": {Provider: "openai", BaseURL: inMemoryURL + "/v1", Key: stream.Secret("sk-bucket-test")}}
	return &stream.Router{Client: &stream.Client{HTTP: hc}, Endpoints: eps}, stop, nil
}

// TestPacingOnIndependentBucket: 90 requests at
// concurrency 16 against the independent bucket (5/s, burst 5), ten runs
// with different jitter (the engine's, and the bucket's answer latency of 20-420 ms): every run gets at least 95% of the limit with at
// most 2% of its requests rejected; and the same on the simulator's bench
// scenario, in the same run. Before the pacer kept a request's cushion and
// served waiters in order, the issue measured 94% with 3-4% rejected in
// three of five runs.
func TestPacingOnIndependentBucket(t *testing.T) {
	clearEnv(t)
	target := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	check := func(t *testing.T, name string, ls PolicyResult) {
		t.Helper()
		checkSums(t, ls)
		g := derefF(ls.GoodputRatio)
		rej := float64(ls.Rejected) / float64(max(1, ls.HTTPRequests))
		t.Logf("%-10s completed %d/%d goodput %.2f/s = %.1f%% of the limit, rejected %d of %d (%.1f%%), p99 %dms",
			name, ls.Completed, ls.Requests, ls.GoodputPerS, 100*g, ls.Rejected, ls.HTTPRequests, 100*rej, ls.LatencyMs.P99)
		if ls.Completed != ls.Requests {
			t.Errorf("%s: completed %d of %d (%v)", name, ls.Completed, ls.Requests, ls.Outcomes)
		}
		if g < 0.95 {
			t.Errorf("%s: %.1f%% of the limit, want at least 95%%", name, 100*g)
		}
		if rej > 0.02 {
			t.Errorf("%s: %.1f%% rejected, want at most 2%%", name, 100*rej)
		}
	}
	for seed := uint64(1); seed <= 10; seed++ {
		cfg := Config{Chain: []stream.Target{target}, Requests: 90, Concurrency: 16, Prompt: "Say hello in five words.", MaxTokens: 64,
			Policies: []string{PolicyLimitscope}, LimitPerSecond: 5}
		synctest.Test(t, func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 7))
			var mu sync.Mutex
			cfg.Rand = func() float64 { mu.Lock(); defer mu.Unlock(); return rnd.Float64() }
			env := &bucketEnv{seed: seed}
			rep, err := Run(t.Context(), cfg, env)
			if err != nil {
				t.Fatal(err)
			}
			check(t, fmt.Sprintf("bucket #%d", seed), rep.Policies[0])
			if env.last.rejected != rep.Policies[0].Rejected {
				t.Errorf("the bucket rejected %d, the bench counted %d", env.last.rejected, rep.Policies[0].Rejected)
			}
		})
		synctest.Test(t, func(t *testing.T) {
			env := &SimEnv{InMemory: true, Options: sim.Options{Scenario: "bench", Seed: int64(seed)}}
			rep, err := Run(t.Context(), cfg, env)
			if err != nil {
				t.Fatal(err)
			}
			check(t, fmt.Sprintf("sim #%d", seed), rep.Policies[0])
		})
	}
}
