package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

// hostile is what a hostile server (or anything answering on its URL) puts
// in its text to take over the terminal: a title change, a screen clear,
// colours, a hyperlink, a device-status request, C1 CSI, and a bidi override.
const hostile = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x1b[0m \x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\ \x1b[6n\u009b1m\u202eok\r\n"

// hostileServer answers every request as OpenAI would, with the hostile
// text split so the escape sequences straddle deltas, or with a 400 whose
// message, code and request id carry them.
func hostileServer(t *testing.T, status int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status != 200 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "bad " + hostile, "type": "invalid_request_error", "code": "c\x1b[31m"}})
			_, _ = w.Write(b)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		runes := []rune(hostile)
		for i := 0; i < len(runes); i += 3 {
			piece := string(runes[i:min(i+3, len(runes))])
			b, _ := json.Marshal(map[string]any{"model": "m\x1b[1m", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": piece}}}})
			_, _ = w.Write([]byte("data: " + string(b) + "\n\n"))
		}
		_, _ = w.Write([]byte(`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// checkTerminalSafe fails if out carries anything a terminal would obey
// other than newlines and tabs.
func checkTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	for _, r := range out {
		if r == '\n' || r == '\t' {
			continue
		}
		if r < 0x20 || r >= 0x7f && r <= 0x9f || r >= 0x202a && r <= 0x202e {
			t.Errorf("%s carries %U: %q", what, r, out)
			return
		}
	}
}

func TestSendPrintsNoEscapeSequences(t *testing.T) {
	for _, status := range []int{200, 400} {
		for _, asJSON := range []bool{false, true} {
			clearEnv(t)
			ta := newTestApp(map[string]string{"OPENAI_BASE_URL": hostileServer(t, status), "OPENAI_API_KEY": "sk-x"})
			args := []string{"send", "--no-history", "--model", "openai/gpt-5.4-mini", "hi"}
			if asJSON {
				args = append(args[:1], append([]string{"--json"}, args[1:]...)...)
			}
			code := run(context.Background(), ta.app, args)
			checkTerminalSafe(t, "stdout", ta.out.String())
			checkTerminalSafe(t, "stderr", ta.errOut.String())
			switch {
			case status == 200 && !asJSON:
				if code != 0 || !strings.Contains(ta.out.String(), "red link ok") {
					t.Errorf("exit %d; the text itself should survive: %q", code, ta.out)
				}
			case status == 200 && asJSON:
				d := decodeSend(t, ta.out.Bytes())
				if d.Text != hostile {
					t.Errorf("--json should carry the exact text (escaped): %q", d.Text)
				}
			case !asJSON:
				if code != exitFailed || !strings.Contains(ta.errOut.String(), "bad") {
					t.Errorf("exit %d: %q", code, ta.errOut)
				}
			}
		}
	}
}

// TestHistoryPrintsNoEscapeSequences: what a hostile server said is stored
// as it came; reading it back on a terminal must not replay it.
func TestHistoryPrintsNoEscapeSequences(t *testing.T) {
	db := filepath.Join(t.TempDir(), "h.db")
	oa := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	rec := store.NewRecorder(db, store.SessionInfo{Version: "test", Mode: store.ModeReal, Command: "send"}, store.Options{Retention: -1})
	call := retry.Call{ID: "hostile", Chain: []stream.Target{oa}, Prompt: "prompt " + hostile}
	sink := rec.Sink(call, nil)
	now := time.Now()
	sink(retry.Event{Kind: retry.EventCallStart, CallID: call.ID, Time: now, Chain: call.Chain})
	bad := retry.Attempt{N: 1, Target: oa, Status: 429, Class: stream.ClassQuota, Code: "c" + hostile, QuotaID: "q" + hostile,
		Message: "m" + hostile, RequestID: "r" + hostile, PartialText: hostile, StartedAt: now, Decision: retry.DecideStop}
	sink(retry.Event{Kind: retry.EventAttemptEnd, CallID: call.ID, Time: now, Attempt: &bad})
	sink(retry.Event{Kind: retry.EventCallEnd, CallID: call.ID, Time: now, Result: &retry.Result{CallID: call.ID, Outcome: retry.OutcomeStopped,
		Text: hostile, FinishReason: "f" + hostile, Attempts: []retry.Attempt{bad}, Started: now, Ended: now,
		Err: &stream.Error{Class: stream.ClassQuota, Status: 429, Code: "c" + hostile, Message: "m" + hostile}}})
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := store.NewCooldowns(db, store.Options{}).Set(retry.Cooldown{Scope: "account:openai:x", Since: now, Target: oa.String(), Code: "c" + hostile, Message: "m" + hostile}); err != nil {
		t.Fatal(err)
	}
	for _, tty := range []bool{false, true} {
		env := map[string]string{"LIMITSCOPE_DB": db, "NO_COLOR": "1"}
		for _, args := range [][]string{{"list"}, {"show", "1"}, {"stats"}} {
			_, out, errOut := histRun(t, env, tty, runHistory, args...)
			checkTerminalSafe(t, fmt.Sprintf("history %v (tty %v)", args, tty), out+errOut)
			if args[0] == "show" && !strings.Contains(out, "red link ok") {
				t.Errorf("the stored answer should still show: %q", out)
			}
		}
		_, out, errOut := histRun(t, env, tty, runCooldowns)
		checkTerminalSafe(t, fmt.Sprintf("cooldowns (tty %v)", tty), out+errOut)
	}
}

func TestCSVTextDefusesFormulas(t *testing.T) {
	for in, want := range map[string]string{
		"=HYPERLINK(\"http://x\")": "'=HYPERLINK(\"http://x\")",
		"+1":                       "'+1",
		"-cmd":                     "'-cmd",
		"@SUM(A1)":                 "'@SUM(A1)",
		"Rate limit reached":       "Rate limit reached",
		"":                         "",
	} {
		if got := csvText(in); got != want {
			t.Errorf("csvText(%q) = %q, want %q", in, got, want)
		}
	}
}
