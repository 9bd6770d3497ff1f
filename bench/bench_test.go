package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// bucketDoer is a provider with a token bucket of rate per second and burst,
// on the (bubble's) wall clock: a request that finds it empty gets a 429 with
// retry-after; every answer carries the requests window. After quotaAfter
// answers (0: never) every request gets a quota error.
type bucketDoer struct {
	fakeDoer
	mu         sync.Mutex
	rate       float64
	burst      float64
	tokens     float64
	last       time.Time
	served     int
	quotaAfter int
}

func newBucketDoer(rate, burst float64) *bucketDoer {
	b := &bucketDoer{rate: rate, burst: burst, tokens: burst, last: time.Now()}
	b.fn = b.answer
	return b
}

func (b *bucketDoer) answer(_ int, _ stream.Request) stream.Result {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	if b.quotaAfter > 0 && b.served >= b.quotaAfter {
		return quota()
	}
	lim := &stream.Limits{At: now, Requests: &stream.Window{Limit: int64(b.rate * 60), HasLimit: true, HasRemaining: true}}
	if b.tokens < 1 {
		r := rateLimited(time.Second)
		r.Limits = lim
		return r
	}
	b.tokens--
	b.served++
	lim.Requests.Remaining = int64(b.tokens)
	lim.Requests.Reset = now.Add(time.Duration((b.burst - b.tokens) / b.rate * float64(time.Second)))
	r := ok()
	r.Limits = lim
	return r
}

func TestRunComparisonPolicies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		prepared := []string{}
		env := EnvFunc(func(_ context.Context, p string, _ *stream.Limits) (retry.Doer, func(), error) {
			prepared = append(prepared, p)
			return newBucketDoer(5, 5), func() {}, nil
		})
		var progress, starts int
		cfg := Config{
			Chain: []stream.Target{target}, Requests: 40, Concurrency: 8, Prompt: "hi", MaxTokens: 16,
			Policies: []string{PolicySDKDefault, PolicyNaive, PolicyNested}, Rand: half(),
			Progress: func(_ string, done, _ int) {
				if done == 0 {
					starts++ // each policy is shown as it starts
					return
				}
				progress++
			},
		}
		rep, err := Run(t.Context(), cfg, env)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(prepared, ",") != "sdk-default,naive,nested" {
			t.Fatalf("prepared %v: each policy gets a fresh env, in order", prepared)
		}
		if progress != 120 || starts != 3 {
			t.Fatalf("%d progress calls and %d starts, want 120 and 3", progress, starts)
		}
		for _, r := range rep.Policies {
			checkSums(t, r)
			if r.Rejected == 0 {
				t.Errorf("%s: no 429 at 8 workers against 5/s burst 5", r.Policy)
			}
			if r.LimitPerS == nil || *r.LimitPerS != 5 {
				t.Errorf("%s: limit_per_s %v, want 5", r.Policy, r.LimitPerS)
			}
		}
	})
}

// checkSums asserts the invariants every policy's figures keep.
func checkSums(t *testing.T, r PolicyResult) {
	t.Helper()
	if r.Completed+r.Stopped+r.GaveUp != r.Requests {
		t.Errorf("%s: completed %d + stopped %d + gave_up %d != requests %d", r.Policy, r.Completed, r.Stopped, r.GaveUp, r.Requests)
	}
	if r.HTTPRequests-r.Wasted != r.Completed {
		t.Errorf("%s: http_requests %d - wasted %d != completed %d", r.Policy, r.HTTPRequests, r.Wasted, r.Completed)
	}
	if r.Rejected > r.Wasted {
		t.Errorf("%s: rejected %d > wasted %d", r.Policy, r.Rejected, r.Wasted)
	}
	sum := 0
	for _, n := range r.Statuses {
		sum += n
	}
	if sum != r.HTTPRequests {
		t.Errorf("%s: statuses %v add to %d, not http_requests %d", r.Policy, r.Statuses, sum, r.HTTPRequests)
	}
	if r.ElapsedMs > 0 {
		if want := round3(float64(r.Completed) / (float64(r.ElapsedMs) / 1000)); math.Abs(r.GoodputPerS-want) > 0.01*want+0.01 {
			t.Errorf("%s: goodput %v, want about %v", r.Policy, r.GoodputPerS, want)
		}
	}
	if r.LimitPerS != nil && r.GoodputRatio != nil && math.Abs(*r.GoodputRatio - r.GoodputPerS / *r.LimitPerS) > 0.01 {
		t.Errorf("%s: goodput_ratio %v != %v / %v", r.Policy, *r.GoodputRatio, r.GoodputPerS, *r.LimitPerS)
	}
	if !(r.LatencyMs.P50 <= r.LatencyMs.P95 && r.LatencyMs.P95 <= r.LatencyMs.P99) {
		t.Errorf("%s: latency %+v not ordered", r.Policy, r.LatencyMs)
	}
}

func TestQuotaHammering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, p := range []string{PolicySDKDefault, PolicyNaive, PolicyNested} {
			d := newBucketDoer(100, 100)
			d.quotaAfter = 10
			r, _ := RunPolicy(t.Context(), Config{Chain: []stream.Target{target}, Requests: 30, Concurrency: 1, Rand: half()}, p, d)
			checkSums(t, r)
			if r.Completed != 10 || r.Stopped != 20 {
				t.Errorf("%s: completed %d stopped %d, want 10 and 20", p, r.Completed, r.Stopped)
			}
			perCall := map[string]int{PolicySDKDefault: 3, PolicyNaive: 5, PolicyNested: 9}[p]
			if want := 20*perCall - 1; r.RequestsAfterQuota != want {
				t.Errorf("%s: requests_after_quota %d, want %d", p, r.RequestsAfterQuota, want)
			}
		}
	})
}

func TestReportJSON(t *testing.T) {
	l, ratio := 5.0, 0.97
	rep := &Report{Policies: []PolicyResult{{Policy: PolicyLimitscope, Requests: 1, Completed: 1, HTTPRequests: 1,
		LimitPerS: &l, GoodputRatio: &ratio, Outcomes: map[retry.Outcome]int{retry.OutcomeOK: 1}, Statuses: map[int]int{200: 1}}}}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(rep); err != nil {
		t.Fatal(err)
	}
	checkJSONShape(t, buf.Bytes(), 1)
}

// checkJSONShape checks a bench --json document has every documented field.
func checkJSONShape(t *testing.T, doc []byte, policies int) {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatalf("not one JSON document: %v\n%s", err, doc)
	}
	ps, ok := v["policies"].([]any)
	if !ok || len(ps) != policies {
		t.Fatalf("policies: %v", v["policies"])
	}
	for _, p := range ps {
		m := p.(map[string]any)
		for _, k := range []string{"policy", "requests", "completed", "stopped", "gave_up", "http_requests", "rejected",
			"wasted", "requests_after_quota", "elapsed_ms", "goodput_per_s", "limit_per_s", "goodput_ratio", "latency_ms"} {
			if _, ok := m[k]; !ok {
				t.Errorf("policy %v: no %q", m["policy"], k)
			}
		}
		lat, _ := m["latency_ms"].(map[string]any)
		for _, k := range []string{"p50", "p95", "p99"} {
			if _, ok := lat[k].(float64); !ok {
				t.Errorf("latency_ms.%s: %v", k, lat[k])
			}
		}
	}
}

func TestValidate(t *testing.T) {
	good := Config{Chain: []stream.Target{target}, Requests: 1, Concurrency: 1}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{
		{Requests: 1, Concurrency: 1},
		{Chain: good.Chain, Requests: 0, Concurrency: 1},
		{Chain: good.Chain, Requests: 1, Concurrency: 0},
		{Chain: good.Chain, Requests: 1, Concurrency: 1, Policies: []string{"retry-forever"}},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}
