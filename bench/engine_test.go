package bench

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// The real core against a fake token bucket of 5/s, burst 5, in virtual time.
func TestLimitscopeOnBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := EnvFunc(func(_ context.Context, p string, _ *stream.Limits) (retry.Doer, func(), error) {
			return newBucketDoer(5, 5), func() {}, nil
		})
		cfg := Config{Chain: []stream.Target{target}, Requests: 120, Concurrency: 16, Rand: half()}
		rep, err := Run(t.Context(), cfg, env)
		if err != nil {
			t.Fatal(err)
		}
		// The end-to-end figures (all completed, rejections) are asserted on
		// the simulator (simenv_test.go); this fake's 429s carry no reset, so
		// only the comparison is asserted here.
		ls := rep.Policies[0]
		if ls.Policy != PolicyLimitscope {
			t.Fatalf("first policy %s, want limitscope", ls.Policy)
		}
		for _, r := range rep.Policies {
			checkSums(t, r)
			t.Logf("%-11s completed %3d http %3d rejected %3d wasted %3d ratio %.3f", r.Policy, r.Completed, r.HTTPRequests, r.Rejected, r.Wasted, *r.GoodputRatio)
			if r.Rejected < ls.Rejected {
				t.Errorf("%s rejected %d < limitscope's %d", r.Policy, r.Rejected, ls.Rejected)
			}
		}
	})
}

// After a quota error the engine sends nothing more to that account.
func TestLimitscopeQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newBucketDoer(100, 100)
		d.quotaAfter = 10
		r, _ := RunPolicy(t.Context(), Config{Chain: []stream.Target{target}, Requests: 30, Concurrency: 1, Rand: half()}, PolicyLimitscope, d)
		checkSums(t, r)
		if r.RequestsAfterQuota != 0 || r.HTTPRequests != 11 {
			t.Errorf("requests_after_quota %d after %d requests, want 0 after 11", r.RequestsAfterQuota, r.HTTPRequests)
		}
		if r.Completed != 10 || r.Stopped != 20 {
			t.Errorf("completed %d stopped %d, want 10 and 20", r.Completed, r.Stopped)
		}
	})
}

// The same with 4 workers. The Doer here answers instantly, so a worker that
// passed its cooldown check just before another worker's quota answer came
// back can still send just after it (the window between the engine's check
// and its Do, which no concurrent client closes entirely): the Counter
// counts that strictly. This bounds it at one per other worker and logs it;
// the simulator tests, with real HTTP round trips, assert 0.
func TestLimitscopeQuotaConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newBucketDoer(100, 100)
		d.quotaAfter = 10
		r, _ := RunPolicy(t.Context(), Config{Chain: []stream.Target{target}, Requests: 30, Concurrency: 4, Rand: half()}, PolicyLimitscope, d)
		checkSums(t, r)
		if r.RequestsAfterQuota > 3 {
			t.Errorf("requests_after_quota %d, want at most 3 (one per other worker)", r.RequestsAfterQuota)
		} else if r.RequestsAfterQuota > 0 {
			t.Logf("requests_after_quota %d: a send already decided when the quota answer came (see the comment)", r.RequestsAfterQuota)
		}
		if r.Completed != 10 || r.Stopped != 20 {
			t.Errorf("completed %d stopped %d, want 10 and 20", r.Completed, r.Stopped)
		}
		// At most the requests in flight when the first quota error came back.
		if r.HTTPRequests > 10+4 {
			t.Errorf("%d requests: more than the 10 answers plus one in flight per worker", r.HTTPRequests)
		}
	})
}
