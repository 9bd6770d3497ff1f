package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// TestTextFilterSkipsUnusedFallbacks: the console's text filter (Filter.Text)
// finds a call by its primary and the targets it tried, never by a fallback
// it did not use.
func TestTextFilterSkipsUnusedFallbacks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	oa := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	an := stream.Target{Provider: "anthropic", Model: "claude-haiku-4-5"}
	rec := NewRecorder(path, SessionInfo{Version: "test", Command: "send"}, Options{Retention: -1})
	start := time.Now().Add(-time.Hour)
	for i, served := range []stream.Target{oa, an} {
		id := []string{"primary-served", "failed-over"}[i]
		call := retry.Call{ID: id, Chain: []stream.Target{oa, an}, Prompt: "p", Policy: retry.DefaultPolicy()}
		sink := rec.Sink(call, nil)
		sink(retry.Event{Kind: retry.EventCallStart, CallID: id, Time: start, Chain: call.Chain})
		var atts []retry.Attempt
		if served == an {
			atts = append(atts, retry.Attempt{N: 1, Target: oa, Status: 529, Class: stream.ClassOverload, Decision: retry.DecideFailover, StartedAt: start})
		}
		atts = append(atts, retry.Attempt{N: len(atts) + 1, Target: served, Status: 200, Class: stream.ClassOK, Decision: retry.DecideDone, StartedAt: start})
		for j := range atts {
			sink(retry.Event{Kind: retry.EventAttemptEnd, CallID: id, Time: start, Attempt: &atts[j]})
		}
		sink(retry.Event{Kind: retry.EventCallEnd, CallID: id, Time: start.Add(time.Second), Result: &retry.Result{CallID: id,
			Outcome: retry.OutcomeOK, Attempts: atts, ServedBy: &served, Started: start, Ended: start.Add(time.Second)}})
		start = start.Add(time.Minute)
	}
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := (&Reader{Path: path}).List(context.Background(), Filter{Text: "anthropic"})
	if err != nil {
		t.Fatal(err)
	}
	// Summaries carry no engine id: the call that failed over is the second.
	if len(got) != 1 || got[0].ID != 2 {
		var ids []uint32
		for _, c := range got {
			ids = append(ids, c.ID)
		}
		t.Errorf("text anthropic found calls %v, want only call 2, which failed over to it", ids)
	}
}
