package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

// benchHistoryDir, when set, keeps the generated histories there (named
// attempts-N.db) and reuses them, so the real binary can be measured on the
// same files:
//
//	LIMITSCOPE_BENCH_HISTORY_DIR=/tmp/h go test -run '^$' -bench HistorySize ./internal/cli/
//	/usr/bin/time -v limitscope history stats --db /tmp/h/attempts-1000000.db
const benchHistoryDir = "LIMITSCOPE_BENCH_HISTORY_DIR"

// genHistory records calls through the store's Recorder until it holds n
// attempts, in a realistic mix (60% one attempt, 25% a 429 then success,
// 10% two overloads then a failover, 5% five attempts that give up), a
// third of the sessions simulated, with no text.
func genHistory(tb testing.TB, path string, n int) {
	tb.Helper()
	oa := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	an := stream.Target{Provider: "anthropic", Model: "claude-haiku-4-5"}
	ge := stream.Target{Provider: "gemini", Model: "gemini-2.5-flash"}
	chains := [][]stream.Target{{oa, an}, {an, ge}, {ge, oa}}
	t0 := time.Now().Add(-24 * time.Hour).UTC()
	ra := 2 * time.Second
	const perSession = 100_000
	attempts := 0
	for s := 0; attempts < n; s++ {
		mode := store.ModeReal
		if s%3 == 2 {
			mode = store.ModeSimulated
		}
		rec := store.NewRecorder(path, store.SessionInfo{Version: "bench", Mode: mode, Command: "send", NoContent: true},
			store.Options{Retention: -1, BatchSize: 8192})
		for i := 0; i < perSession && attempts < n; i++ {
			k := s*perSession + i
			chain := chains[k%3]
			id := fmt.Sprintf("call-%08d", k)
			start := t0.Add(time.Duration(k) * 10 * time.Millisecond)
			var classes []stream.Class
			outcome := retry.OutcomeOK
			switch r := k % 20; {
			case r < 12:
				classes = []stream.Class{stream.ClassOK}
			case r < 17:
				classes = []stream.Class{stream.ClassRateLimit, stream.ClassOK}
			case r < 19:
				classes = []stream.Class{stream.ClassOverload, stream.ClassOverload, stream.ClassOK}
			default:
				classes = []stream.Class{stream.ClassRateLimit, stream.ClassRateLimit, stream.ClassOverload, stream.ClassOverload, stream.ClassRateLimit}
				outcome = retry.OutcomeGaveUp
			}
			sink := rec.Sink(retry.Call{ID: id, Chain: chain, Policy: retry.DefaultPolicy()}, nil)
			sink(retry.Event{Kind: retry.EventCallStart, CallID: id, Time: start, Chain: chain})
			now := start
			atts := make([]retry.Attempt, len(classes))
			for j, cl := range classes {
				a := retry.Attempt{N: j + 1, Target: chain[min(j/2, len(chain)-1)], Class: cl, StartedAt: now,
					Duration: 300 * time.Millisecond, TTFT: 120 * time.Millisecond, RequestID: fmt.Sprintf("req_%s_%d", id, j+1)}
				if cl == stream.ClassOK {
					a.Status, a.Decision = 200, retry.DecideDone
				} else {
					a.Status, a.Code, a.Message = 429, "rate_limit_exceeded", "Rate limit reached for requests. Please try again in 1.984s."
					a.RetryAfter, a.DelaySource, a.Waited, a.Decision = &ra, stream.SourceRetryAfter, 1500*time.Millisecond, retry.DecideRetry
				}
				now = now.Add(a.Duration + a.Waited)
				atts[j] = a
				sink(retry.Event{Kind: retry.EventAttemptEnd, CallID: id, Time: now, Attempt: &atts[j]})
			}
			res := &retry.Result{CallID: id, Outcome: outcome, Attempts: atts, Started: start, Ended: now}
			if outcome == retry.OutcomeOK {
				sb := atts[len(atts)-1].Target
				res.ServedBy, res.FinishReason, res.Usage = &sb, "stop", &stream.Usage{InputTokens: 12, OutputTokens: 34}
			} else {
				la := atts[len(atts)-1]
				res.Err = &stream.Error{Class: la.Class, Status: la.Status, Code: la.Code, Message: la.Message}
			}
			sink(retry.Event{Kind: retry.EventCallEnd, CallID: id, Time: now, Result: res})
			attempts += len(classes)
			for rec.Pending() > 200_000 { // bound memory, as a real producer would be
				time.Sleep(time.Millisecond)
			}
		}
		if err := rec.Close(context.Background()); err != nil {
			tb.Fatal(err)
		}
	}
}

// benchHistory returns a history of n attempts, built once (kept in
// $LIMITSCOPE_BENCH_HISTORY_DIR when set).
func benchHistory(b *testing.B, n int) string {
	dir := os.Getenv(benchHistoryDir)
	if dir == "" {
		dir = b.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("attempts-%d.db", n))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	tmp := path + ".part"
	_ = os.Remove(tmp)
	genHistory(b, tmp, n)
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkHistorySize times the review commands, in-process, against the
// history's size (10 k, 100 k and 1 M attempts): history list (its default
// 50 newest), history stats, and history export (jsonl, to io.Discard).
//
//	go test -run '^$' -bench HistorySize -benchtime 3x ./internal/cli/
func BenchmarkHistorySize(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		var path string
		for _, cmd := range []struct {
			name string
			args []string
		}{{"list", []string{"list"}}, {"stats", []string{"stats"}}, {"export", []string{"export"}}} {
			b.Run(fmt.Sprintf("%s/attempts%d", cmd.name, n), func(b *testing.B) {
				if path == "" {
					path = benchHistory(b, n)
				}
				a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &bytes.Buffer{},
					getenv: func(string) string { return "" }, now: time.Now}
				args := append(append([]string(nil), cmd.args...), "--db", path)
				for b.Loop() {
					if code := runHistory(context.Background(), a, args); code != exitOK {
						b.Fatalf("history %s: exit %d: %s", cmd.name, code, a.stderr)
					}
				}
			})
		}
	}
}
