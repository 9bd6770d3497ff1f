package calls

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/tui"
)

// TestConsoleHistoryNamesSessions: the console's history names each call's
// recording session, the same for the calls of one session and another for
// the next, so the history's timeline (t) shows a session's calls together.
func TestConsoleHistoryNamesSessions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	tgt := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	t0 := time.Date(2026, 11, 29, 14, 2, 0, 0, time.UTC)
	n := 0
	session := func(calls int) {
		r := store.NewRecorder(path, store.SessionInfo{Command: "tui", Mode: store.ModeSimulated}, store.Options{Retention: -1})
		for i := 0; i < calls; i++ {
			n++
			at := t0.Add(time.Duration(n) * time.Second)
			id := "c" + string(rune('0'+n))
			r.RecordCall(retry.Call{ID: id, Chain: []stream.Target{tgt}, Prompt: "prompt"})
			a := retry.Attempt{N: 1, Target: tgt, Status: 200, Class: stream.ClassOK, StartedAt: at, Duration: time.Second}
			for _, ev := range []retry.Event{
				{Kind: retry.EventCallStart, CallID: id, Time: at, Chain: []stream.Target{tgt}},
				{Kind: retry.EventAttemptStart, CallID: id, Time: at, Attempt: &retry.Attempt{N: 1, Target: tgt, StartedAt: at}},
				{Kind: retry.EventAttemptEnd, CallID: id, Time: at.Add(time.Second), Attempt: &a},
				{Kind: retry.EventCallEnd, CallID: id, Time: at.Add(time.Second), Result: &retry.Result{CallID: id, Outcome: retry.OutcomeOK, ServedBy: &tgt, Attempts: []retry.Attempt{a}, Ended: at.Add(time.Second)}},
			} {
				r.Record(ev)
			}
		}
		if err := r.Close(context.Background()); err != nil {
			t.Fatalf("close: %v", err)
		}
	}
	session(2)
	session(1)
	h := storeHistory{rd: &store.Reader{Path: path}}
	list, err := h.List(context.Background(), tuiFilter())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 {
		t.Fatalf("listed %d calls, want 3", len(list))
	}
	// Newest first: the second session's call, then the first session's two.
	if list[0].Session == "" || list[1].Session == "" || list[1].Session != list[2].Session || list[0].Session == list[1].Session {
		t.Errorf("sessions: %q %q %q", list[0].Session, list[1].Session, list[2].Session)
	}
}

func tuiFilter() tui.HistoryFilter { return tui.HistoryFilter{Limit: 10} }
