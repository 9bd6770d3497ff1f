package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

// seedProxied records one call as the proxy hands it over: with the route
// the request named and the caller's User-Agent.
func seedProxied(t *testing.T, db, id, route, client string, start time.Time) {
	t.Helper()
	oa := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	rec := store.NewRecorder(db, store.SessionInfo{Version: "test", Mode: store.ModeSimulated, Command: "proxy"}, store.Options{Retention: -1})
	call := retry.Call{ID: id, Chain: []stream.Target{oa}, Prompt: "hi", Policy: retry.DefaultPolicy(), Route: route, Client: client}
	sink := rec.Sink(call, nil)
	sink(retry.Event{Kind: retry.EventCallStart, CallID: id, Time: start, Chain: call.Chain})
	att := retry.Attempt{N: 1, Target: oa, Status: 200, Class: stream.ClassOK, StartedAt: start, Duration: 200 * time.Millisecond, Decision: retry.DecideDone}
	sink(retry.Event{Kind: retry.EventAttemptEnd, CallID: id, Time: start, Attempt: &att})
	sink(retry.Event{Kind: retry.EventCallEnd, CallID: id, Time: start.Add(att.Duration), Result: &retry.Result{
		CallID: id, Outcome: retry.OutcomeOK, Attempts: []retry.Attempt{att}, Started: start, Ended: start.Add(att.Duration),
		Text: "hello", ServedBy: &oa}})
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestHistoryShowsRouteAndClient(t *testing.T) {
	for _, v := range stream.AllEnvVars() {
		t.Setenv(v, "")
	}
	db := filepath.Join(t.TempDir(), "state", "history.db")
	env := map[string]string{"LIMITSCOPE_DB": db}
	seedHistory(t, db) // ids 1-3, typed calls
	const key = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123"
	seedProxied(t, db, "px-1", "fast", "OpenAI/Python 1.99.0", histT0.Add(3*time.Minute))
	seedProxied(t, db, "px-2", "anthropic/claude-haiku-4-5", "evil\x1b[2J/1.0 "+key, histT0.Add(4*time.Minute))

	// list, piped: ROUTE and CLIENT columns, "-" for typed calls.
	code, out, errOut := histRun(t, env, false, runHistory, "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 6 || !strings.HasSuffix(lines[0], "\tCLASSES\tROUTE\tCLIENT") {
		t.Fatalf("list: %d %q %q", code, out, errOut)
	}
	if f := strings.Split(lines[1], "\t"); f[0] != "5" || f[9] != "anthropic/claude-haiku-4-5" || f[10] != "evil/1.0 [redacted]" {
		t.Fatalf("proxied row %q", lines[1])
	}
	if f := strings.Split(lines[2], "\t"); f[0] != "4" || f[9] != "fast" || f[10] != "OpenAI/Python 1.99.0" {
		t.Fatalf("proxied row %q", lines[2])
	}
	if f := strings.Split(lines[3], "\t"); f[0] != "3" || f[9] != "-" || f[10] != "-" {
		t.Fatalf("typed row %q", lines[3])
	}
	// No proxied call listed: no extra columns.
	code, out, _ = histRun(t, env, false, runHistory, "list", "--outcome", "stopped")
	if code != 0 || strings.Contains(out, "ROUTE") || strings.Count(out, "\n") != 2 {
		t.Fatalf("list of typed calls: %q", out)
	}
	// Filters.
	code, out, _ = histRun(t, env, false, runHistory, "list", "--client", "python")
	if lines = strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[1], "4\t") {
		t.Fatalf("--client: %q", out)
	}
	code, out, _ = histRun(t, env, false, runHistory, "list", "--route", "anthropic/claude-haiku-4-5")
	if lines = strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[1], "5\t") {
		t.Fatalf("--route: %q", out)
	}
	// On a terminal, the client column is clipped.
	long := "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36"
	seedProxied(t, db, "px-3", "fast", long, histT0.Add(5*time.Minute))
	code, out, _ = histRun(t, env, true, runHistory, "list", "--limit", "1")
	if code != 0 || !strings.Contains(out, "CLIENT") || !strings.Contains(out, long[:32]+"…") || strings.Contains(out, long) {
		t.Fatalf("tty list: %q", out)
	}

	// list --json: route and client on proxied calls only.
	code, out, _ = histRun(t, env, false, runHistory, "list", "--json")
	var listDoc struct {
		Calls []store.CallJSON `json:"calls"`
	}
	if err := json.Unmarshal([]byte(out), &listDoc); err != nil || code != 0 || len(listDoc.Calls) != 6 ||
		listDoc.Calls[1].Route != "anthropic/claude-haiku-4-5" || listDoc.Calls[2].Client != "OpenAI/Python 1.99.0" {
		t.Fatalf("list --json: %v %s", err, out)
	}
	if strings.Count(out, `"route"`) != 3 || strings.Count(out, `"client"`) != 3 {
		t.Fatalf("route/client not omitted when empty: %s", out)
	}

	// show: a route and a client line for a proxied call, none for a typed one.
	code, out, _ = histRun(t, env, false, runHistory, "show", "px-1")
	if code != 0 || !strings.Contains(out, "route      fast\n") || !strings.Contains(out, "client     OpenAI/Python 1.99.0\n") {
		t.Fatalf("show proxied: %q", out)
	}
	code, out, _ = histRun(t, env, false, runHistory, "show", "5")
	if code != 0 || !strings.Contains(out, "client     evil/1.0 [redacted]\n") || strings.Contains(out, "\x1b") || strings.Contains(out, key) {
		t.Fatalf("show hostile client: %q", out)
	}
	code, out, _ = histRun(t, env, false, runHistory, "show", "1")
	if code != 0 || strings.Contains(out, "route ") || strings.Contains(out, "client ") {
		t.Fatalf("show typed: %q", out)
	}
	code, out, _ = histRun(t, env, false, runHistory, "show", "--json", "4")
	var showDoc store.CallJSON
	if err := json.Unmarshal([]byte(out), &showDoc); err != nil || code != 0 || showDoc.Route != "fast" || showDoc.Client != "OpenAI/Python 1.99.0" {
		t.Fatalf("show --json: %v %s", err, out)
	}

	// stats and export take the filters too.
	code, out, _ = histRun(t, env, false, runHistory, "stats", "--route", "fast", "--json")
	if code != 0 || !strings.Contains(out, `"calls": 2`) {
		t.Fatalf("stats --route: %s", out)
	}
	code, out, _ = histRun(t, env, false, runHistory, "export", "--client", "python")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"route":"fast","client":"OpenAI/Python 1.99.0"`) {
		t.Fatalf("export --client: %s", out)
	}

	// The key the User-Agent carried is nowhere in the file.
	raw, err := os.ReadFile(db)
	if err != nil || strings.Contains(string(raw), key) || strings.Contains(string(raw), "abcdefghijklmnopqrstuvwxyz0123") {
		t.Fatalf("the file holds the key (%v)", err)
	}
}
