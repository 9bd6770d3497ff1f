package cli

import (
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// sendDoc is the `send --json` document: a stable contract, described by
// docs/send.schema.json.
type sendDoc struct {
	// CallID is the call's id, the one `history show` opens (when the
	// history is on).
	CallID        string         `json:"call_id"`
	Outcome       retry.Outcome  `json:"outcome"`
	Simulated     bool           `json:"simulated"`
	Text          string         `json:"text"`
	FinishReason  string         `json:"finish_reason"`
	Usage         *stream.Usage  `json:"usage"`
	ServedBy      *stream.Target `json:"served_by"`
	Attempts      []attemptDoc   `json:"attempts"`
	Error         *errorDoc      `json:"error"`
	RetryAt       *string        `json:"retry_at,omitempty"`
	CooldownUntil *string        `json:"cooldown_until,omitempty"`
}

type attemptDoc struct {
	Provider     string  `json:"provider"`
	Account      string  `json:"account,omitempty"` // a named account (provider@account)
	Model        string  `json:"model"`
	Status       int     `json:"status"`
	Class        string  `json:"class"`
	Code         string  `json:"code"`
	QuotaID      string  `json:"quota_id"`
	Message      string  `json:"message"`
	RetryAfterMs *int64  `json:"retry_after_ms"`
	DelaySource  *string `json:"delay_source"`
	PacedMs      int64   `json:"paced_ms"`
	WaitedMs     int64   `json:"waited_ms"`
	RequestID    string  `json:"request_id"`
	MidStream    bool    `json:"mid_stream"`
	PartialText  string  `json:"partial_text"`
	TTFTMs       *int64  `json:"ttft_ms"`
	// TTFTextMs is the time to the first visible text, after any thinking
	// (absent when no text came); Thinking: reasoning streamed first.
	TTFTextMs       *int64 `json:"ttft_text_ms,omitempty"`
	Thinking        bool   `json:"thinking,omitempty"`
	ReasoningTokens int    `json:"reasoning_tokens,omitempty"`
	// Tier is the service tier asked, ServedTier the one the answer named,
	// Downgraded a premium tier served lower.
	Tier       string `json:"tier,omitempty"`
	ServedTier string `json:"served_tier,omitempty"`
	Downgraded bool   `json:"downgraded,omitempty"`
	StartedAt  string `json:"started_at"`
	DurationMs int64  `json:"duration_ms"`
}

type errorDoc struct {
	Class    string `json:"class"`
	Provider string `json:"provider"`
	Status   int    `json:"status"`
	Code     string `json:"code"`
	Message  string `json:"message"`
}

// rfc3339 formats t in UTC with fractional seconds.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func ms(d time.Duration) int64 { return d.Milliseconds() }

func newSendDoc(res retry.Result, simulated bool) sendDoc {
	doc := sendDoc{
		CallID:       res.CallID,
		Outcome:      res.Outcome,
		Simulated:    simulated,
		Text:         res.Text,
		FinishReason: res.FinishReason,
		Usage:        res.Usage,
		ServedBy:     res.ServedBy,
		Attempts:     make([]attemptDoc, 0, len(res.Attempts)),
	}
	for _, at := range res.Attempts {
		d := attemptDoc{
			Provider:    at.Target.Provider,
			Account:     at.Target.Account,
			Model:       at.Target.Model,
			Status:      at.Status,
			Class:       string(at.Class),
			Code:        at.Code,
			QuotaID:     at.QuotaID,
			Message:     at.Message,
			PacedMs:     ms(at.Paced),
			WaitedMs:    ms(at.Waited),
			RequestID:   at.RequestID,
			MidStream:   at.MidStream,
			PartialText: at.PartialText,
			StartedAt:   rfc3339(at.StartedAt),
			DurationMs:  ms(at.Duration),
		}
		if at.RetryAfter != nil {
			v := ms(*at.RetryAfter)
			d.RetryAfterMs = &v
		}
		if at.DelaySource != stream.SourceNone {
			v := string(at.DelaySource)
			d.DelaySource = &v
		}
		if at.TTFT > 0 {
			v := ms(at.TTFT)
			d.TTFTMs = &v
		}
		if at.TTFText > 0 {
			v := ms(at.TTFText)
			d.TTFTextMs = &v
		}
		d.Thinking, d.ReasoningTokens = at.Thinking, at.ReasoningTokens
		d.Tier, d.ServedTier, d.Downgraded = at.Target.Tier, at.ServedTier, at.Downgraded
		doc.Attempts = append(doc.Attempts, d)
	}
	if res.Err != nil {
		e := &errorDoc{Class: string(res.Err.Class), Status: res.Err.Status, Code: res.Err.Code, Message: res.Err.Message}
		if e.Message == "" {
			e.Message = res.Err.Error()
		}
		if n := len(res.Attempts); n > 0 {
			e.Provider = res.Attempts[n-1].Target.Provider
		}
		doc.Error = e
	}
	if res.Outcome == retry.OutcomeDeferred && !res.RetryAt.IsZero() {
		s := rfc3339(res.RetryAt)
		doc.RetryAt = &s
	}
	if res.CooldownHit && !res.CooldownUntil.IsZero() {
		s := rfc3339(res.CooldownUntil)
		doc.CooldownUntil = &s
	}
	return doc
}
