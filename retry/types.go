package retry

import (
	"context"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// Doer sends one attempt. *stream.Client wrapped with its endpoints is the
// real one; tests use fakes.
type Doer interface {
	// Do sends one request and reads it to its end, calling onText with each
	// text delta. It never retries.
	Do(ctx context.Context, req stream.Request, onText func(string)) stream.Result
	// Scope returns the cooldown key for a quota stop of the given scope on
	// target: the provider plus a fingerprint of its key for ScopeAccount
	// (never the key), the target for ScopeTarget.
	Scope(t stream.Target, s stream.Scope) string
}

// Clock is time as the engine sees it; tests use a fake one.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx ends, returning ctx.Err() in that case.
	Sleep(ctx context.Context, d time.Duration) error
}

// Cooldown is a stop that outlives one call: a quota or billing error blocks
// its scope until Until (zero: until cleared).
type Cooldown struct {
	Scope   string    `json:"scope"`
	Until   time.Time `json:"until,omitempty"`
	Since   time.Time `json:"since"`
	Target  string    `json:"target"` // the target whose error set it
	Code    string    `json:"code"`
	Message string    `json:"message"`
}

// Active reports whether the cooldown blocks calls at now.
func (c Cooldown) Active(now time.Time) bool { return c.Until.IsZero() || now.Before(c.Until) }

// Cooldowns stores cooldowns. The engine's default is in memory; the store
// package persists them across processes.
type Cooldowns interface {
	Get(scope string) (Cooldown, bool, error)
	Set(c Cooldown) error
	Clear(scope string) error
	List() ([]Cooldown, error)
}

// Outcome is how a call ended.
type Outcome string

// The outcomes.
const (
	OutcomeOK        Outcome = "ok"
	OutcomeStopped   Outcome = "stopped"   // quota, billing, or a cooldown: a person must act
	OutcomeDeferred  Outcome = "deferred"  // the server asked for a wait longer than max-wait
	OutcomeGaveUp    Outcome = "gave_up"   // transient errors used the budget or the deadline
	OutcomeFailed    Outcome = "failed"    // the request itself is wrong
	OutcomeCancelled Outcome = "cancelled" // the caller cancelled
)

// ExitCode maps an outcome to the process exit code shared by every command.
func (o Outcome) ExitCode() int {
	switch o {
	case OutcomeOK:
		return 0
	case OutcomeGaveUp, OutcomeFailed:
		return 1
	case OutcomeStopped:
		return 3
	case OutcomeDeferred:
		return 4
	case OutcomeCancelled:
		return 130
	}
	return 1
}

// Decision is what the engine did after an attempt.
type Decision string

// The decisions.
const (
	DecideDone     Decision = "done"      // success
	DecideRetry    Decision = "retry"     // same target again, after a wait
	DecideFailover Decision = "fail over" // next target
	DecideStop     Decision = "stop"      // quota: no retry, no failover
	DecideFail     Decision = "fail"      // caller error
	DecideDefer    Decision = "defer"     // wait too long, no fallback
	DecideGiveUp   Decision = "give up"   // budget or deadline spent
	DecideCancel   Decision = "cancel"
)

// Attempt is one HTTP request of a call, as every consumer sees it.
type Attempt struct {
	N           int           // 1-based within the call
	Target      stream.Target // as requested
	Status      int           // 0 when no response
	Class       stream.Class  // ClassOK on success
	Code        string
	QuotaID     string
	Message     string
	RetryAfter  *time.Duration     // the server's delay, nil when none
	DelaySource stream.DelaySource // of the wait that followed (server's, reset or backoff); "" when none
	Paced       time.Duration      // waited before this attempt by pacing
	Waited      time.Duration      // waited after this attempt, before the next: what was actually waited (in its attempt_end event, the wait about to be taken)
	WaitPlanned time.Duration      // the wait announced after this attempt (Wait.Duration); Waited is less when it was cut short
	RequestID   string
	ResponseID  string // the provider's id of its response (gen_ai.response.id), "" when none
	MidStream   bool
	PartialText string // text received before an error (never glued onto a retry's answer)
	TTFT        time.Duration
	// TTFText is the time to the first visible text (after any thinking;
	// 0: none), Thinking whether reasoning streamed, ReasoningTokens the
	// provider's count of them (0: not reported).
	TTFText         time.Duration
	Thinking        bool
	ReasoningTokens int
	// ServedTier is the service tier that served the answer, as the
	// provider named it ("" when it named none); Downgraded says it is
	// below the premium tier the target asked for.
	ServedTier string
	Downgraded bool
	StartedAt  time.Time
	Duration   time.Duration
	Limits     *stream.Limits // the snapshot this response carried
	Decision   Decision
	NoRetry    bool // x-should-retry: false
	// Cooldown is the cooldown this attempt's quota error recorded (scope,
	// target, until), nil when none: consumers read it, never parse Message.
	Cooldown *Cooldown
	// FailedOverByUser: the user moved the call on (Control.FailOver) during
	// this attempt's stream or the wait after it.
	FailedOverByUser bool
}

// FailoverNote is the sentence of an attempt the user moved on from (""
// otherwise): "failed over by you after 11s of a 20s wait", or "failed over
// by you during the request" when a stream was in flight.
func (a Attempt) FailoverNote() string {
	if !a.FailedOverByUser {
		return ""
	}
	if a.WaitPlanned > 0 {
		return userNote(a.Waited, a.WaitPlanned)
	}
	return "failed over by you during the request"
}

// Move is one failover of a call, from a target to the next in the chain,
// and what caused it: the console's fallback note reads Cause, never the
// last error retried before it.
type Move struct {
	From, To stream.Target
	// Attempt is the N of the attempt whose answer moved the call; 0 when no
	// attempt on From did (pacing asked too long a wait, a cooldown, the
	// deadline, the user during a wait for a slot).
	Attempt int
	// Cause is the error that moved the call: the deciding attempt's, or a
	// cooldown's as a quota error; nil when the move was pacing's or the
	// user's alone.
	Cause  *stream.Error
	ByUser bool   // the user moved it (Control.FailOver)
	Reason string // a sentence
}

// Wait is a pause the engine takes, as a value: the TUI counts it down, the
// store records it, tests check it.
type Wait struct {
	Target   stream.Target
	Duration time.Duration // how long the engine will wait
	Asked    time.Duration // what the server asked (0 when the source is backoff)
	Source   stream.DelaySource
	Reason   string    // a sentence: why it waits
	Until    time.Time // when the wait ends
	Deadline time.Time // the call's deadline
	Pacing   bool      // before the first request to a target, from a limits snapshot
	// Set on EventWaitEnd only: the time actually waited and how the wait
	// ended (elapsed, the user failed over, cancelled).
	Waited  time.Duration
	EndedBy WaitEnd
}

// EventKind names an Event.
type EventKind string

// The event kinds. Text events may be coalesced by a consumer; the others
// must all be delivered.
const (
	EventCallStart    EventKind = "call_start"
	EventAttemptStart EventKind = "attempt_start"
	EventText         EventKind = "text"
	EventThinking     EventKind = "thinking" // the attempt's first reasoning delta: the model is thinking
	EventUsage        EventKind = "usage"    // the attempt's usage as reported before its text (Event.Usage; where the provider reports it that early)
	EventAttemptEnd   EventKind = "attempt_end"
	EventWait         EventKind = "wait"
	EventWaitEnd      EventKind = "wait_end" // a wait ended; Wait.Waited is what was actually waited
	EventCallEnd      EventKind = "call_end"
)

// Event is one thing that happened during a call.
type Event struct {
	Kind    EventKind
	CallID  string
	Time    time.Time
	Chain   []stream.Target // EventCallStart
	Attempt *Attempt        // EventAttemptStart (partly filled) and EventAttemptEnd
	Text    string          // EventText: one delta of the current attempt
	Usage   *stream.Usage   // EventUsage: the input tokens (and any output so far) before the attempt's text
	Wait    *Wait           // EventWait
	Result  *Result         // EventCallEnd
}

// Result is how a call ended, with every attempt.
type Result struct {
	CallID  string
	Outcome Outcome
	Text    string // the serving attempt's text only
	// TextTruncated: the sink got more of the serving attempt's text than
	// Text keeps (the stream client's MaxPartialText).
	TextTruncated bool
	FinishReason  string
	Usage         *stream.Usage
	ServedBy      *stream.Target // provider, and the model as the serving provider reported it
	Attempts      []Attempt
	Err           *stream.Error // the error that ended the call; nil when ok
	RetryAt       time.Time     // when deferred
	CooldownUntil time.Time     // when a cooldown stopped the call (zero with CooldownActive: until cleared)
	CooldownHit   bool          // the call was not sent because of a cooldown
	// Cooldown is the cooldown that stopped the call (recorded by it, or
	// found active before sending); with Policy.FailoverOnQuota, the last one
	// recorded even when another account answered. Nil when none.
	Cooldown *Cooldown
	// ActionRequired is set with Cooldown: one sentence saying that a person
	// must act (the plan, billing or limits), also when another account
	// answered the call (Policy.FailoverOnQuota, Outcome ok). Show it
	// loudly; never drop it because the call was answered.
	ActionRequired string
	Skips          []Skip // targets left without a request (pacing asked too long a wait, a cooldown, the deadline, the same account as a quota stop)
	Moves          []Move // every failover, in order, with its cause
	Started        time.Time
	Ended          time.Time
	// SinkTime is how long the sink took over text events (a proxy's caller
	// reading slowly): the call's deadline does not count it.
	SinkTime time.Duration
}

// TierNote says which service tier served the attempt: "served standard,
// downgraded from priority", "served flex", or "" when the answer named
// none.
func (a Attempt) TierNote() string {
	switch {
	case a.ServedTier == "":
		return ""
	case a.Downgraded:
		return "served " + a.ServedTier + ", downgraded from " + a.Target.Tier
	}
	return "served " + a.ServedTier
}
