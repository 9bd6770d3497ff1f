package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func clearEnv(t testing.TB) {
	for _, v := range stream.AllEnvVars() {
		t.Setenv(v, "")
	}
}

func tempDB(t testing.TB) string {
	return filepath.Join(t.TempDir(), "state", "history.db")
}

func dur(d time.Duration) *time.Duration { return &d }

// spec describes a call for tests: its chain, the classes of its attempts
// in order and its outcome.
type spec struct {
	id      string
	start   time.Time
	chain   []stream.Target
	classes []stream.Class
	outcome retry.Outcome
	prompt  string
	text    string
	wait    time.Duration // after each failed attempt
	policy  *retry.Policy // nil: the default policy
}

var (
	tOpenAI    = stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	tAnthropic = stream.Target{Provider: "anthropic", Model: "claude-haiku-4-5"}
	tGemini    = stream.Target{Provider: "gemini", Model: "gemini-2.5-flash"}
)

// events returns the call and the engine events such a call produces.
func (s spec) events() (retry.Call, []retry.Event) {
	call := retry.Call{ID: s.id, Chain: s.chain, Prompt: s.prompt, MaxTokens: 256, Policy: retry.DefaultPolicy()}
	if s.policy != nil {
		call.Policy = *s.policy
	}
	evs := []retry.Event{{Kind: retry.EventCallStart, CallID: s.id, Time: s.start, Chain: s.chain}}
	now := s.start
	var atts []retry.Attempt
	for i, cl := range s.classes {
		tgt := s.chain[min(i, len(s.chain)-1)]
		a := retry.Attempt{
			N: i + 1, Target: tgt, Class: cl, StartedAt: now, Duration: 300 * time.Millisecond,
			TTFT: 120 * time.Millisecond, RequestID: fmt.Sprintf("req_%s_%d", s.id, i+1),
			Limits: &stream.Limits{At: now.Add(300 * time.Millisecond),
				Requests: &stream.Window{Limit: 500, Remaining: int64(499 - i), Reset: now.Add(1300 * time.Millisecond), HasLimit: true, HasRemaining: true},
				Tokens:   &stream.Window{Limit: 200000, Remaining: 190000, Reset: now.Add(6 * time.Second), HasLimit: true, HasRemaining: true, Rounded: true}},
		}
		if cl == stream.ClassOK {
			a.Status, a.Decision = 200, retry.DecideDone
		} else {
			a.Status, a.Code, a.Message = 429, "rate_limit_exceeded", "Rate limit reached for requests. Please try again in 1.984s."
			a.RetryAfter, a.DelaySource, a.Waited, a.Decision = dur(2*time.Second), stream.SourceRetryAfter, s.wait, retry.DecideRetry
			if cl == stream.ClassQuota {
				a.Code, a.Decision, a.Waited, a.RetryAfter, a.DelaySource = "insufficient_quota", retry.DecideStop, 0, nil, ""
			}
		}
		evs = append(evs, retry.Event{Kind: retry.EventAttemptStart, CallID: s.id, Time: now, Attempt: &retry.Attempt{N: i + 1, Target: tgt, StartedAt: now}})
		now = now.Add(a.Duration)
		evs = append(evs, retry.Event{Kind: retry.EventText, CallID: s.id, Time: now, Text: "ignored delta"})
		evs = append(evs, retry.Event{Kind: retry.EventAttemptEnd, CallID: s.id, Time: now, Attempt: &a})
		if a.Waited > 0 {
			evs = append(evs, retry.Event{Kind: retry.EventWait, CallID: s.id, Time: now, Wait: &retry.Wait{Target: tgt, Duration: a.Waited, Source: a.DelaySource}})
			now = now.Add(a.Waited)
		}
		atts = append(atts, a)
	}
	res := &retry.Result{CallID: s.id, Outcome: s.outcome, Attempts: atts, Started: s.start, Ended: now}
	if s.outcome == retry.OutcomeOK {
		last := atts[len(atts)-1].Target
		res.Text, res.FinishReason, res.Usage, res.ServedBy = s.text, "stop", &stream.Usage{InputTokens: 12, OutputTokens: 34}, &last
	} else if len(atts) > 0 {
		la := atts[len(atts)-1]
		res.Err = &stream.Error{Class: la.Class, Status: la.Status, Code: la.Code, Message: la.Message}
	}
	evs = append(evs, retry.Event{Kind: retry.EventCallEnd, CallID: s.id, Time: now, Result: res})
	return call, evs
}

// recordAll records the specs through one recorder and closes it.
func recordAll(t testing.TB, path string, info SessionInfo, specs ...spec) {
	t.Helper()
	r := NewRecorder(path, info, Options{Retention: -1})
	for _, s := range specs {
		c, evs := s.events()
		sink := r.Sink(c, nil)
		for _, ev := range evs {
			sink(ev)
		}
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func okSpec(id string, start time.Time, chain ...stream.Target) spec {
	if len(chain) == 0 {
		chain = []stream.Target{tOpenAI}
	}
	return spec{id: id, start: start, chain: chain, classes: []stream.Class{stream.ClassOK}, outcome: retry.OutcomeOK, prompt: "prompt " + id, text: "answer " + id}
}

func strconvItoa(n int) string { return fmt.Sprint(n) }
