package bench

import (
	"context"
	"testing"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// quotaDoer answers every request with an account-wide quota stop.
type quotaDoer struct{}

func (quotaDoer) Do(context.Context, stream.Request, func(string)) stream.Result {
	return stream.Result{Status: 429, Err: &stream.Error{Class: stream.ClassQuota, Status: 429, Scope: stream.ScopeAccount}}
}
func (quotaDoer) Scope(t stream.Target, s stream.Scope) string { return string(s) + ":" + t.Provider }

// TestCounterLearnsThroughCooldowns: for a policy that learns of a quota stop
// through its cooldowns, requests count as "after quota" from the moment it
// recorded the stop; and if it never records one, from the moment the
// answer came back, so an engine that ignored quota could not hide.
func TestCounterLearnsThroughCooldowns(t *testing.T) {
	req := stream.Request{Target: stream.Target{Provider: "openai", Model: "m"}}
	ctx := context.Background()

	c := NewCounter(quotaDoer{})
	c.learnsVia = true
	c.Do(ctx, req, nil) // the quota answer comes back
	c.Do(ctx, req, nil) // already decided before the policy learned
	cool := learningCooldowns{Cooldowns: retry.NewMemoryCooldowns(), counter: c}
	if err := cool.Set(retry.Cooldown{Scope: "account:openai"}); err != nil {
		t.Fatal(err)
	}
	c.Do(ctx, req, nil) // sent after the policy knew: counts
	if got := c.Counts().RequestsAfterQuota; got != 1 {
		t.Errorf("learned through cooldowns: %d after quota, want 1", got)
	}

	ignorant := NewCounter(quotaDoer{})
	ignorant.learnsVia = true
	for range 3 {
		ignorant.Do(ctx, req, nil)
	}
	if got := ignorant.Counts().RequestsAfterQuota; got != 2 {
		t.Errorf("never learned: %d after quota, want 2", got)
	}
}
