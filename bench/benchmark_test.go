package bench

import (
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// instantDoer answers at once, with a requests window far from empty.
func instantDoer() *fakeDoer {
	return &fakeDoer{fn: func(int, stream.Request) stream.Result {
		r := ok()
		r.Limits = &stream.Limits{At: time.Now(), Requests: &stream.Window{Limit: 1 << 30, Remaining: 1 << 29,
			HasLimit: true, HasRemaining: true, Reset: time.Now().Add(time.Second)}}
		return r
	}}
}

// BenchmarkCall measures each policy's own cost per call (the decision, the
// pacing gate, the counting wrapper), against a Doer that answers at once.
func BenchmarkCall(b *testing.B) {
	for _, p := range Policies() {
		b.Run(p, func(b *testing.B) {
			d := NewCounter(instantDoer())
			call := policyCall(Config{Chain: []stream.Target{target}, Prompt: "hi", MaxTokens: 16}, p, d, retry.WallClock{}, half())
			ctx := b.Context()
			i := 0
			for b.Loop() {
				if o := call(ctx, i); o != retry.OutcomeOK {
					b.Fatalf("outcome %s", o)
				}
				i++
			}
		})
	}
}

// BenchmarkCallParallel is BenchmarkCall with every P calling at once
// through one engine and pacer (lock contention included).
func BenchmarkCallParallel(b *testing.B) {
	d := NewCounter(instantDoer())
	call := policyCall(Config{Chain: []stream.Target{target}, Prompt: "hi", MaxTokens: 16,
		NewPacer: func() *retry.Pacer { return &retry.Pacer{MaxConcurrency: 1024} }}, PolicyLimitscope, d, retry.WallClock{}, half())
	ctx := b.Context()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if o := call(ctx, 0); o != retry.OutcomeOK {
				b.Errorf("outcome %s", o)
				return
			}
		}
	})
}

// BenchmarkSimCall is one limitscope call through the real stream.Client and
// Router to a simulator answering at once with generous limits: in memory
// (no kernel) and over a loopback port.
func BenchmarkSimCall(b *testing.B) {
	for _, v := range stream.AllEnvVars() {
		b.Setenv(v, "")
	}
	for _, mode := range []struct {
		name     string
		inMemory bool
	}{{"in-memory", true}, {"loopback", false}} {
		for _, p := range []string{PolicyLimitscope, PolicySDKDefault} {
			b.Run(mode.name+"/"+p, func(b *testing.B) {
				env := &SimEnv{InMemory: mode.inMemory, Options: sim.Options{ScenarioFile: "testdata/fast.ini", TokensPerSecond: 1e6}}
				d, release, err := env.Prepare(b.Context(), p, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer release()
				call := policyCall(Config{Chain: []stream.Target{target}, Prompt: "hi", MaxTokens: 16,
					NewPacer: func() *retry.Pacer { return &retry.Pacer{MaxConcurrency: 1024} }}, p, NewCounter(d), retry.WallClock{}, half())
				ctx := b.Context()
				for b.Loop() {
					if o := call(ctx, 0); o != retry.OutcomeOK {
						b.Fatalf("outcome %s", o)
					}
				}
			})
		}
	}
}
