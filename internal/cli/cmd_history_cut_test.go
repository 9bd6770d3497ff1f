package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

// Where the history keeps less of an answer than the caller received (the
// stream client keeps the first 1 MiB; the proxy's caller gets it all),
// `history show` says so; an answer kept whole says nothing.
func TestHistoryShowSaysWhenItKeptLessText(t *testing.T) {
	db := filepath.Join(t.TempDir(), "h.db")
	oa := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	rec := store.NewRecorder(db, store.SessionInfo{Version: "test", Mode: store.ModeSimulated, Command: "proxy"}, store.Options{Retention: -1})
	t0 := time.Now().Add(-time.Minute)
	for _, c := range []struct {
		id  string
		cut bool
	}{{"c-cut", true}, {"c-whole", false}} {
		call := retry.Call{ID: c.id, Chain: []stream.Target{oa}, Prompt: "long", Policy: retry.DefaultPolicy()}
		sink := rec.Sink(call, nil)
		sink(retry.Event{Kind: retry.EventCallStart, CallID: c.id, Time: t0, Chain: call.Chain})
		a := retry.Attempt{N: 1, Target: oa, Status: 200, Class: stream.ClassOK, StartedAt: t0, Duration: time.Second, Decision: retry.DecideDone}
		sink(retry.Event{Kind: retry.EventAttemptEnd, CallID: c.id, Time: t0.Add(time.Second), Attempt: &a})
		sink(retry.Event{Kind: retry.EventCallEnd, CallID: c.id, Time: t0.Add(time.Second), Result: &retry.Result{CallID: c.id, Outcome: retry.OutcomeOK,
			Attempts: []retry.Attempt{a}, Started: t0, Ended: t0.Add(time.Second), Text: "the first part", TextTruncated: c.cut, ServedBy: &oa, FinishReason: "stop"}})
	}
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"LIMITSCOPE_DB": db}
	code, out, _ := histRun(t, env, false, runHistory, "show", "c-cut")
	if code != 0 || !strings.Contains(out, "the history keeps the first 14 bytes of this answer; the caller received all of it") {
		t.Errorf("cut answer: exit %d\n%s", code, out)
	}
	code, out, _ = histRun(t, env, false, runHistory, "show", "c-whole")
	if code != 0 || !strings.Contains(out, "the first part") || strings.Contains(out, "the history keeps the first") {
		t.Errorf("whole answer: exit %d\n%s", code, out)
	}
}
