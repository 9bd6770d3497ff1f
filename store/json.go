package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// AttemptJSON is an attempt as `history --json` and export show it: the
// same fields as `send --json`, plus the decision and the limits snapshot.
type AttemptJSON struct {
	N            int                 `json:"n"`
	Provider     string              `json:"provider"`
	Account      string              `json:"account,omitempty"`
	Model        string              `json:"model"`
	Status       int                 `json:"status"`
	Class        stream.Class        `json:"class"`
	Code         string              `json:"code"`
	QuotaID      string              `json:"quota_id"`
	Message      string              `json:"message"`
	RetryAfterMs *float64            `json:"retry_after_ms"`
	DelaySource  *stream.DelaySource `json:"delay_source"`
	PacedMs      float64             `json:"paced_ms"`
	WaitedMs     float64             `json:"waited_ms"`
	RequestID    string              `json:"request_id"`
	MidStream    bool                `json:"mid_stream"`
	PartialText  string              `json:"partial_text"`
	TTFTMs       float64             `json:"ttft_ms"`
	StartedAt    string              `json:"started_at"`
	DurationMs   float64             `json:"duration_ms"`
	Decision     retry.Decision      `json:"decision"`
	NoRetry      bool                `json:"no_retry"`
	Limits       *stream.Limits      `json:"limits"`
	// FailedOverByUser: the user moved the call on (the console's ctrl+f),
	// WaitPlannedMs into a wait of that length (0: during the request).
	FailedOverByUser bool    `json:"failed_over_by_user,omitempty"`
	WaitPlannedMs    float64 `json:"wait_planned_ms,omitempty"`
	// TTFTextMs: the time to the first visible text, after any thinking;
	// Thinking: reasoning streamed; ReasoningTokens where reported.
	TTFTextMs       float64 `json:"ttft_text_ms,omitempty"`
	Thinking        bool    `json:"thinking,omitempty"`
	ReasoningTokens int     `json:"reasoning_tokens,omitempty"`
	// Tier is the service tier the attempt asked for, ServedTier the one
	// the answer named, Downgraded a premium tier served lower.
	Tier       string `json:"tier,omitempty"`
	ServedTier string `json:"served_tier,omitempty"`
	Downgraded bool   `json:"downgraded,omitempty"`
}

// CallJSON is a call as `history --json` and export show it.
type CallJSON struct {
	ID            uint32          `json:"id"`
	CallID        string          `json:"call_id,omitempty"`
	Session       uint32          `json:"session"`
	Route         string          `json:"route,omitempty"`  // a proxied call's requested model (alias or provider/model)
	Client        string          `json:"client,omitempty"` // a proxied call's client (User-Agent, scrubbed)
	StartedAt     string          `json:"started_at"`
	EndedAt       *string         `json:"ended_at"`
	Outcome       retry.Outcome   `json:"outcome"`
	Chain         []stream.Target `json:"chain"`
	ServedBy      *stream.Target  `json:"served_by"`
	AttemptCount  int             `json:"attempt_count"`
	Retries       int             `json:"retries"`
	WaitedMs      float64         `json:"waited_ms"`
	LatencyMs     *float64        `json:"latency_ms"`
	TTFTMs        float64         `json:"ttft_ms"`
	Classes       []stream.Class  `json:"classes"`
	Policy        *PolicyJSON     `json:"policy,omitempty"`
	MaxTokens     int             `json:"max_tokens,omitempty"`
	FinishReason  string          `json:"finish_reason,omitempty"`
	Usage         *stream.Usage   `json:"usage,omitempty"`
	Error         *CallError      `json:"error,omitempty"`
	RetryAt       *string         `json:"retry_at,omitempty"`
	CooldownUntil *string         `json:"cooldown_until,omitempty"`
	CooldownHit   bool            `json:"cooldown_hit,omitempty"`
	Prompt        *string         `json:"prompt,omitempty"`
	Text          *string         `json:"text,omitempty"`
	Attempts      []AttemptJSON   `json:"attempts,omitempty"`
}

// PolicyJSON is a call's policy with durations in milliseconds.
type PolicyJSON struct {
	MaxAttempts    int     `json:"max_attempts"`
	TriesPerTarget int     `json:"tries_per_target"`
	FailoverWaitMs float64 `json:"failover_wait_ms"`
	MaxWaitMs      float64 `json:"max_wait_ms"`
	DeadlineMs     float64 `json:"deadline_ms"`
	BackoffBaseMs  float64 `json:"backoff_base_ms"`
	BackoffCapMs   float64 `json:"backoff_cap_ms"`
	JitterMs       float64 `json:"jitter_ms"`
	IgnoreCooldown bool    `json:"ignore_cooldown"`
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func tsp(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := ts(t)
	return &s
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// AttemptToJSON converts one attempt.
func AttemptToJSON(a *retry.Attempt) AttemptJSON {
	j := AttemptJSON{
		N: a.N, Provider: a.Target.Provider, Model: a.Target.Model, Status: a.Status, Class: a.Class,
		Code: a.Code, QuotaID: a.QuotaID, Message: a.Message, PacedMs: ms(a.Paced), WaitedMs: ms(a.Waited),
		RequestID: a.RequestID, MidStream: a.MidStream, PartialText: a.PartialText, TTFTMs: ms(a.TTFT),
		DurationMs: ms(a.Duration), Decision: a.Decision, NoRetry: a.NoRetry, Limits: a.Limits,
		FailedOverByUser: a.FailedOverByUser, WaitPlannedMs: ms(a.WaitPlanned),
		Account: a.Target.Account, TTFTextMs: ms(a.TTFText), Thinking: a.Thinking, ReasoningTokens: a.ReasoningTokens,
		Tier: a.Target.Tier, ServedTier: a.ServedTier, Downgraded: a.Downgraded,
	}
	if !a.StartedAt.IsZero() {
		j.StartedAt = ts(a.StartedAt)
	}
	if a.RetryAfter != nil {
		v := ms(*a.RetryAfter)
		j.RetryAfterMs = &v
	}
	if a.DelaySource != "" {
		s := a.DelaySource
		j.DelaySource = &s
	}
	return j
}

// ToJSON converts a call; the full record's fields appear when it was
// decoded in full, the text when withText.
func (c *Call) ToJSON(withText bool) CallJSON {
	var j CallJSON
	c.FillJSON(&j, withText)
	return j
}

// FillJSON sets *j to what ToJSON returns, reusing j's attempts slice (for
// a loop that encodes calls one at a time, as history export does).
func (c *Call) FillJSON(j *CallJSON, withText bool) {
	attempts := j.Attempts[:0]
	clear(j.Attempts[:cap(j.Attempts)]) // keep no earlier call's text alive
	*j = CallJSON{
		ID: c.ID, CallID: c.CallID, Session: c.Session, Route: c.Route, Client: c.Client, StartedAt: ts(c.Started), EndedAt: tsp(c.Ended),
		Outcome: c.Outcome, Chain: c.Chain, ServedBy: c.ServedBy, AttemptCount: c.Attempts,
		Retries: c.Retries(), WaitedMs: ms(c.Waited), TTFTMs: ms(c.TTFT), Classes: c.Classes,
	}
	if j.Chain == nil {
		j.Chain = []stream.Target{}
	}
	if j.Classes == nil {
		j.Classes = []stream.Class{}
	}
	if !c.Ended.IsZero() {
		l := ms(c.Latency())
		j.LatencyMs = &l
	}
	if c.Full {
		p := c.Policy
		j.Policy = &PolicyJSON{p.MaxAttempts, p.TriesPerTarget, ms(p.FailoverWait), ms(p.MaxWait), ms(p.Deadline),
			ms(p.BackoffBase), ms(p.BackoffCap), ms(p.Jitter), p.IgnoreCooldown}
		j.MaxTokens, j.FinishReason, j.Usage, j.Error = c.MaxTokens, c.FinishReason, c.Usage, c.Err
		j.RetryAt, j.CooldownUntil, j.CooldownHit = tsp(c.RetryAt), tsp(c.CooldownUntil), c.CooldownHit
	}
	if withText {
		if c.HasPrompt || c.Prompt != "" {
			j.Prompt = &c.Prompt
		}
		if c.HasText || c.Text != "" {
			j.Text = &c.Text
		}
	}
	if len(c.AttemptsList) > 0 && attempts == nil {
		attempts = make([]AttemptJSON, 0, len(c.AttemptsList))
	}
	for i := range c.AttemptsList {
		a := AttemptToJSON(&c.AttemptsList[i])
		if !withText {
			a.PartialText = ""
		}
		attempts = append(attempts, a)
	}
	if len(attempts) > 0 {
		j.Attempts = attempts // else nil, as omitempty and ToJSON's callers expect
	}
}

// MarshalJSON writes the call as ToJSON(true) does.
func (c *Call) MarshalJSON() ([]byte, error) { return json.Marshal(c.ToJSON(true)) }

// WaitsOf rebuilds the waits of a stored call from its attempts (the store
// keeps each wait on the attempt it followed or, for pacing, preceded):
// for a view that shows waits as the engine reported them. Reason is a
// short description; Until and Deadline are not stored and stay zero.
func WaitsOf(attempts []retry.Attempt) []retry.Wait {
	var out []retry.Wait
	for _, a := range attempts {
		if a.Paced > 0 {
			out = append(out, retry.Wait{Target: a.Target, Duration: a.Paced, Source: stream.SourceReset, Pacing: true,
				Reason: "paced: the limits snapshot said none remained"})
		}
		if a.Waited > 0 {
			w := retry.Wait{Target: a.Target, Duration: a.Waited, Source: a.DelaySource}
			if a.RetryAfter != nil {
				w.Asked = *a.RetryAfter
			}
			switch {
			case a.RetryAfter != nil:
				w.Reason = fmt.Sprintf("the server asked for %s (%s)", *a.RetryAfter, a.DelaySource)
			case a.DelaySource != "":
				w.Reason = fmt.Sprintf("waited %s (%s) after %s", a.Waited, a.DelaySource, a.Class)
			default:
				w.Reason = fmt.Sprintf("waited %s after %s", a.Waited, a.Class)
			}
			out = append(out, w)
		}
	}
	return out
}
