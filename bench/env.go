package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// EnvFunc adapts a function to Env.
type EnvFunc func(ctx context.Context, policy string, prev *stream.Limits) (retry.Doer, func(), error)

// Prepare calls f.
func (f EnvFunc) Prepare(ctx context.Context, policy string, prev *stream.Limits) (retry.Doer, func(), error) {
	return f(ctx, policy, prev)
}

// RealEnv runs every policy against the same real Doer, waiting between runs
// until the limits the previous run saw have recovered.
type RealEnv struct {
	Doer retry.Doer
	// Clock runs the recovery wait; nil: the wall clock.
	Clock retry.Clock
	// MaxRecoveryWait caps the wait for a reset (default 2m); per-day windows
	// are never waited for.
	MaxRecoveryWait time.Duration
	// OnWait, when set, is told before each recovery wait.
	OnWait func(policy string, d time.Duration)
}

// Prepare waits for the recovery RecoveryWait names, then returns the Doer.
func (e *RealEnv) Prepare(ctx context.Context, policy string, prev *stream.Limits) (retry.Doer, func(), error) {
	clock := e.Clock
	if clock == nil {
		clock = retry.WallClock{}
	}
	capWait := e.MaxRecoveryWait
	if capWait <= 0 {
		capWait = 2 * time.Minute
	}
	if d := min(RecoveryWait(prev, clock.Now()), capWait); d > 0 {
		if e.OnWait != nil {
			e.OnWait(policy, d)
		}
		if err := clock.Sleep(ctx, d); err != nil {
			return nil, nil, fmt.Errorf("waiting %s for the limits to recover: %w", d.Round(time.Millisecond), err)
		}
	}
	return e.Doer, func() {}, nil
}

// RecoveryWait is how long until every per-minute window in l is full again:
// the latest reset it names after now (per-day windows excepted). Zero when
// nothing is to wait for.
func RecoveryWait(l *stream.Limits, now time.Time) time.Duration {
	if l == nil {
		return 0
	}
	var until time.Time
	for _, w := range []*stream.Window{l.Requests, l.Tokens, l.InputTokens, l.OutputTokens} {
		if w == nil || w.PerDay || w.Reset.IsZero() {
			continue
		}
		if w.Reset.After(until) {
			until = w.Reset
		}
	}
	if until.IsZero() || !until.After(now) {
		return 0
	}
	return until.Sub(now)
}
