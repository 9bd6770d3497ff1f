package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// The policies bench compares.
const (
	PolicyLimitscope = "limitscope"  // retry.Engine with a Pacer: the real core
	PolicySDKDefault = "sdk-default" // the openai-node SDK's default retries
	PolicyNaive      = "naive"       // every error retried after a fixed 1 s, 5 attempts
	PolicyNested     = "nested"      // an app loop of 3 attempts around sdk-default
)

// Policies returns every policy name, in the order bench runs them.
func Policies() []string {
	return []string{PolicyLimitscope, PolicySDKDefault, PolicyNaive, PolicyNested}
}

// IsComparison reports whether a policy is one of the copied client loops
// (which spend money and ignore quota errors on a real account).
func IsComparison(name string) bool {
	return name == PolicySDKDefault || name == PolicyNaive || name == PolicyNested
}

// ValidPolicy reports whether name is a known policy.
func ValidPolicy(name string) bool {
	if _, ok, err := parseVariant(name); ok {
		return err == nil // a variant of limitscope's settings (variants.go)
	}
	for _, p := range Policies() {
		if p == name {
			return true
		}
	}
	return false
}

// The constants of the copied loops. sdk-default is openai-node 7.5.0's
// src/client.ts (maxRetries 2; shouldRetry; retryRequest;
// calculateDefaultRetryTimeoutMillis), which the Anthropic and Go SDKs share.
const (
	sdkMaxRetries     = 2
	sdkInitialDelay   = 500 * time.Millisecond
	sdkMaxDelay       = 8 * time.Second
	sdkMaxRetryAfter  = 60 * time.Second // retry-after honoured when 0 < t < 60 s
	naiveAttempts     = 5
	naiveDelay        = time.Second
	nestedAppAttempts = 3
	nestedAppDelay    = time.Second // doubled after each failed app attempt
)

// callOutcome is how one call of a copied loop ended.
type callOutcome struct {
	outcome retry.Outcome
	err     *stream.Error
}

// loop holds what every copied client loop needs.
type loop struct {
	doer  retry.Doer
	clock retry.Clock
	rand  func() float64
}

// classify maps a copied loop's final error to an outcome, so its calls
// count in the same columns as the engine's: a quota error is a stop, the
// caller's cancellation is a cancel, anything else the loop gave up on.
func classify(ctx context.Context, e *stream.Error) retry.Outcome {
	switch {
	case e == nil:
		return retry.OutcomeOK
	case ctx.Err() != nil || e.Class == stream.ClassCancelled:
		return retry.OutcomeCancelled
	case e.Class == stream.ClassQuota:
		return retry.OutcomeStopped
	}
	return retry.OutcomeGaveUp
}

// sleep waits d on the loop's clock.
func (l loop) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return l.clock.Sleep(ctx, d)
}

// sdkShouldRetry copies openai-node's shouldRetry: no retry once the
// streaming body has started; a connection error or timeout without a
// response is retried; x-should-retry: false forbids it; otherwise 408, 409,
// 429 and every 5xx are retried, whatever the error code says.
func sdkShouldRetry(res stream.Result) bool {
	e := res.Err
	if e == nil || e.Class == stream.ClassCancelled {
		return false
	}
	if e.MidStream || res.Status == 200 {
		return false // the SDK handed the stream to the caller: it cannot retry
	}
	if e.NoRetry {
		return false
	}
	s := e.Status
	if s == 0 {
		s = res.Status
	}
	switch {
	case s == 0:
		return true // APIConnectionError, APIConnectionTimeoutError
	case s == 408, s == 409, s == 429, s >= 500:
		return true
	}
	return false
}

// sdkDelay copies openai-node's retryRequest: retry-after-ms, then
// retry-after, honoured when 0 < t < 60 s; otherwise 0.5 s * 2^n capped at 8 s,
// times (1 - rand*0.25). Delays the SDK does not read (a Gemini RetryInfo, a
// delay in the message text) are ignored, as the SDK ignores them.
func (l loop) sdkDelay(e *stream.Error, retriesRemaining int) time.Duration {
	if e != nil && (e.DelaySource == stream.SourceRetryAfterMs || e.DelaySource == stream.SourceRetryAfter) &&
		e.Delay > 0 && e.Delay < sdkMaxRetryAfter {
		return e.Delay
	}
	n := sdkMaxRetries - retriesRemaining
	d := math.Min(float64(sdkInitialDelay)*math.Pow(2, float64(n)), float64(sdkMaxDelay))
	jitter := 1 - l.rand()*0.25
	return time.Duration(d * jitter)
}

// sdkDefault is one SDK call: at most 1 + 2 requests.
func (l loop) sdkDefault(ctx context.Context, req stream.Request) callOutcome {
	retriesRemaining := sdkMaxRetries
	for {
		res := l.doer.Do(ctx, req, nil)
		if res.Err == nil {
			return callOutcome{outcome: retry.OutcomeOK}
		}
		if ctx.Err() != nil || retriesRemaining == 0 || !sdkShouldRetry(res) {
			return callOutcome{outcome: classify(ctx, res.Err), err: res.Err}
		}
		if err := l.sleep(ctx, l.sdkDelay(res.Err, retriesRemaining)); err != nil {
			return callOutcome{outcome: retry.OutcomeCancelled, err: cancelledError(err)}
		}
		retriesRemaining--
	}
}

// naive retries every error after a fixed second, up to 5 attempts.
func (l loop) naive(ctx context.Context, req stream.Request) callOutcome {
	var last *stream.Error
	for attempt := 1; attempt <= naiveAttempts; attempt++ {
		res := l.doer.Do(ctx, req, nil)
		if res.Err == nil {
			return callOutcome{outcome: retry.OutcomeOK}
		}
		last = res.Err
		if ctx.Err() != nil || attempt == naiveAttempts {
			break
		}
		if err := l.sleep(ctx, naiveDelay); err != nil {
			return callOutcome{outcome: retry.OutcomeCancelled, err: cancelledError(err)}
		}
	}
	return callOutcome{outcome: classify(ctx, last), err: last}
}

// nested is an application loop of 3 attempts (1 s, then 2 s apart) around
// an SDK call that keeps its default retries: up to 9 requests a call.
func (l loop) nested(ctx context.Context, req stream.Request) callOutcome {
	var last callOutcome
	delay := nestedAppDelay
	for attempt := 1; attempt <= nestedAppAttempts; attempt++ {
		last = l.sdkDefault(ctx, req)
		if last.outcome == retry.OutcomeOK || ctx.Err() != nil || attempt == nestedAppAttempts {
			break
		}
		if err := l.sleep(ctx, delay); err != nil {
			return callOutcome{outcome: retry.OutcomeCancelled, err: cancelledError(err)}
		}
		delay *= 2
	}
	return last
}

func cancelledError(err error) *stream.Error {
	if err == nil {
		err = context.Canceled
	}
	return &stream.Error{Class: stream.ClassCancelled, Message: "cancelled", Err: err}
}

// errUnknownPolicy names a policy bench does not know.
var errUnknownPolicy = errors.New("unknown policy")

func unknownPolicy(name string) error {
	if _, ok, err := parseVariant(name); ok && err != nil {
		return fmt.Errorf("%w: %w", errUnknownPolicy, err)
	}
	return fmt.Errorf("%w %q (known: limitscope, sdk-default, naive, nested, or limitscope:SETTING=VALUE...)", errUnknownPolicy, name)
}
