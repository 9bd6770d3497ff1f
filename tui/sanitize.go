package tui

import (
	"github.com/limitscope/limitscope/internal/sanitize"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// Everything a server (or anything answering on its URL) wrote reaches the
// screen through these: the answer's deltas, error messages, codes, request
// ids, and the history's stored copies of them. Each string is passed
// through sanitize.Text, so no escape sequence or control character but
// newline and tab reaches the terminal. The deltas of an attempt go through
// one sanitize.Filter, so a sequence split across two deltas is dropped
// whole.

// cleanEvent returns ev with every string in it safe to print, its text
// through text (the run's filter, started again with each attempt). Shared
// values (the attempt, wait and result) are copied, not changed.
func cleanEvent(ev retry.Event, text *sanitize.Filter) retry.Event {
	switch ev.Kind {
	case retry.EventText:
		ev.Text = text.Text(ev.Text)
	case retry.EventAttemptStart, retry.EventAttemptEnd:
		text.Reset()
	}
	if ev.Attempt != nil {
		a := cleanAttempt(*ev.Attempt)
		ev.Attempt = &a
	}
	if ev.Wait != nil {
		w := cleanWait(*ev.Wait)
		ev.Wait = &w
	}
	if ev.Result != nil {
		r := *ev.Result
		r.Text = sanitize.Text(r.Text)
		r.FinishReason = sanitize.Text(r.FinishReason)
		if r.ServedBy != nil {
			t := cleanTarget(*r.ServedBy)
			r.ServedBy = &t
		}
		if r.Attempts != nil {
			as := make([]retry.Attempt, len(r.Attempts))
			for i := range r.Attempts {
				as[i] = cleanAttempt(r.Attempts[i])
			}
			r.Attempts = as
		}
		r.Err = cleanError(r.Err)
		ev.Result = &r
	}
	return ev
}

func cleanTarget(t stream.Target) stream.Target {
	t.Provider, t.Model = sanitize.Text(t.Provider), sanitize.Text(t.Model)
	return t
}

func cleanAttempt(a retry.Attempt) retry.Attempt {
	a.Target = cleanTarget(a.Target)
	a.Code = sanitize.Text(a.Code)
	a.QuotaID = sanitize.Text(a.QuotaID)
	a.Message = sanitize.Text(a.Message)
	a.RequestID = sanitize.Text(a.RequestID)
	a.PartialText = sanitize.Text(a.PartialText)
	return a
}

func cleanWait(w retry.Wait) retry.Wait {
	w.Target = cleanTarget(w.Target)
	w.Reason = sanitize.Text(w.Reason)
	return w
}

// cleanError copies e with its strings cleaned; its underlying error is
// wrapped so that its text is cleaned too while errors.Is and As still see
// it.
func cleanError(e *stream.Error) *stream.Error {
	if e == nil {
		return nil
	}
	c := *e
	c.Code = sanitize.Text(c.Code)
	c.Message = sanitize.Text(c.Message)
	c.QuotaID = sanitize.Text(c.QuotaID)
	c.RequestID = sanitize.Text(c.RequestID)
	c.Snippet = sanitize.Text(c.Snippet)
	if c.Err != nil {
		c.Err = cleanErr{c.Err}
	}
	return &c
}

type cleanErr struct{ err error }

func (c cleanErr) Error() string { return sanitize.Text(c.err.Error()) }
func (c cleanErr) Unwrap() error { return c.err }

func cleanSummary(c CallSummary) CallSummary {
	c.ID = sanitize.Text(c.ID)
	c.PromptHead = sanitize.Text(c.PromptHead)
	c.ServedBy = sanitize.Text(c.ServedBy)
	return c
}

func cleanSummaries(cs []CallSummary) []CallSummary {
	if cs == nil {
		return nil
	}
	out := make([]CallSummary, len(cs))
	for i := range cs {
		out[i] = cleanSummary(cs[i])
	}
	return out
}

func cleanDetail(d CallDetail) CallDetail {
	d.CallSummary = cleanSummary(d.CallSummary)
	d.Prompt = sanitize.Text(d.Prompt)
	d.Text = sanitize.Text(d.Text)
	if d.Attempts != nil {
		as := make([]retry.Attempt, len(d.Attempts))
		for i := range d.Attempts {
			as[i] = cleanAttempt(d.Attempts[i])
		}
		d.Attempts = as
	}
	if d.Waits != nil {
		ws := make([]retry.Wait, len(d.Waits))
		for i := range d.Waits {
			ws[i] = cleanWait(d.Waits[i])
		}
		d.Waits = ws
	}
	return d
}
