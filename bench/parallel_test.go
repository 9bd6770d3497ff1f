package bench

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// parallelEnv is an EnvFunc that says its policies are independent.
type parallelEnv struct {
	EnvFunc
	atOnce bool
}

func (e parallelEnv) Parallel() bool { return e.atOnce }

// With a ParallelEnv the policies run at once: the run takes as long as
// its slowest policy, each policy's figures are its own (every policy has
// a provider of its own), the report keeps cfg's order, and progress is
// never called concurrently. Without it, one after the other.
func TestRunPoliciesAtOnce(t *testing.T) {
	for _, atOnce := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			env := parallelEnv{atOnce: atOnce, EnvFunc: func(_ context.Context, _ string, _ *stream.Limits) (retry.Doer, func(), error) {
				return newBucketDoer(5, 5), func() {}, nil
			}}
			inProgress, maxAtOnce := 0, 0
			busy := false
			cfg := Config{
				Chain: []stream.Target{target}, Requests: 40, Concurrency: 8, Prompt: "hi", MaxTokens: 16,
				Policies: []string{PolicyLimitscope, PolicySDKDefault, PolicyNaive, PolicyNested}, Rand: half(),
				Progress: func(_ string, done, total int) {
					if busy {
						t.Error("progress called concurrently")
					}
					busy = true
					defer func() { busy = false }()
					if done == 0 {
						inProgress++
						maxAtOnce = max(maxAtOnce, inProgress)
					}
					if done == total {
						inProgress--
					}
				},
			}
			start := time.Now()
			rep, err := Run(t.Context(), cfg, env)
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			var sum, longest time.Duration
			for i, r := range rep.Policies {
				if r.Policy != cfg.Policies[i] {
					t.Fatalf("policy %d is %s, want %s: the report keeps cfg's order", i, r.Policy, cfg.Policies[i])
				}
				checkSums(t, r)
				d := time.Duration(r.ElapsedMs) * time.Millisecond
				sum += d
				longest = max(longest, d)
			}
			if atOnce {
				if maxAtOnce != 4 {
					t.Errorf("at most %d policies ran at once, want 4", maxAtOnce)
				}
				if took > longest+time.Second {
					t.Errorf("at once the run took %v, want about its slowest policy's %v (the sum is %v)", took, longest, sum)
				}
			} else {
				if maxAtOnce != 1 {
					t.Errorf("%d policies ran at once, want one after the other", maxAtOnce)
				}
				if took < sum-time.Second {
					t.Errorf("one after the other the run took %v, less than the policies' sum %v", took, sum)
				}
			}
		})
	}
}

// SimEnv runs at once only when asked (AtOnce): it gives each policy a
// simulator of its own.
func TestSimEnvParallelOnlyWhenAsked(t *testing.T) {
	var e Env = &SimEnv{Options: sim.Options{Scenario: "bench"}}
	if pe, ok := e.(ParallelEnv); !ok || pe.Parallel() {
		t.Fatal("a SimEnv without AtOnce runs its policies at once")
	}
	e = &SimEnv{AtOnce: true}
	if pe, ok := e.(ParallelEnv); !ok || !pe.Parallel() {
		t.Fatal("a SimEnv with AtOnce does not run its policies at once")
	}
	var r Env = &RealEnv{}
	if _, ok := r.(ParallelEnv); ok {
		t.Fatal("a real account must never run policies at once")
	}
}
