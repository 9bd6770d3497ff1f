package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

// histTestApp runs history commands in-process on buffers, with its own
// environment (nothing from the developer's).
func histTestApp(env map[string]string, tty bool) (*app, *bytes.Buffer, *bytes.Buffer) {
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	a := &app{
		stdin: strings.NewReader(""), stdout: out, stderr: errOut,
		getenv:    func(k string) string { return env[k] },
		stdoutTTY: tty,
		now:       time.Now,
	}
	return a, out, errOut
}

var histT0 = time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)

// seedHistory records three calls: an ok, a retried failover, a quota stop.
func seedHistory(t *testing.T, db string) {
	t.Helper()
	oa := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	an := stream.Target{Provider: "anthropic", Model: "claude-haiku-4-5"}
	rec := store.NewRecorder(db, store.SessionInfo{Version: "test", Mode: store.ModeSimulated, Command: "send"}, store.Options{Retention: -1})
	mk := func(id string, start time.Time, chain []stream.Target, atts []retry.Attempt, o retry.Outcome, text string) {
		call := retry.Call{ID: id, Chain: chain, Prompt: "prompt of " + id, Policy: retry.DefaultPolicy()}
		sink := rec.Sink(call, nil)
		sink(retry.Event{Kind: retry.EventCallStart, CallID: id, Time: start, Chain: chain})
		end := start
		for i := range atts {
			atts[i].StartedAt = end
			end = end.Add(atts[i].Duration + atts[i].Waited)
			sink(retry.Event{Kind: retry.EventAttemptEnd, CallID: id, Time: end, Attempt: &atts[i]})
		}
		res := &retry.Result{CallID: id, Outcome: o, Attempts: atts, Started: start, Ended: end, Text: text}
		if o == retry.OutcomeOK {
			sb := atts[len(atts)-1].Target
			res.ServedBy, res.FinishReason, res.Usage = &sb, "stop", &stream.Usage{InputTokens: 3, OutputTokens: 4}
		} else {
			la := atts[len(atts)-1]
			res.Err = &stream.Error{Class: la.Class, Status: la.Status, Code: la.Code, Message: la.Message}
		}
		sink(retry.Event{Kind: retry.EventCallEnd, CallID: id, Time: end, Result: res})
	}
	ra := 2 * time.Second
	mk("c-ok", histT0, []stream.Target{oa}, []retry.Attempt{{N: 1, Target: oa, Status: 200, Class: stream.ClassOK, Duration: 400 * time.Millisecond, TTFT: 90 * time.Millisecond, Decision: retry.DecideDone, RequestID: "req_1"}}, retry.OutcomeOK, "the answer")
	mk("c-fail-over", histT0.Add(time.Minute), []stream.Target{an, oa}, []retry.Attempt{
		{N: 1, Target: an, Status: 529, Class: stream.ClassOverload, Code: "overloaded_error", Message: "Overloaded", RetryAfter: &ra, DelaySource: stream.SourceRetryAfter, Waited: 2100 * time.Millisecond, Duration: 100 * time.Millisecond, Decision: retry.DecideRetry,
			Limits: &stream.Limits{At: histT0, Requests: &stream.Window{Limit: 50, Remaining: 0, HasLimit: true, HasRemaining: true, Reset: histT0.Add(30 * time.Second)}}},
		{N: 2, Target: an, Status: 200, Class: stream.ClassConnection, MidStream: true, PartialText: "half an ans", Duration: 300 * time.Millisecond, Decision: retry.DecideFailover},
		{N: 3, Target: oa, Status: 200, Class: stream.ClassOK, Duration: 500 * time.Millisecond, Decision: retry.DecideDone},
	}, retry.OutcomeOK, "served by the fallback")
	mk("c-quota", histT0.Add(2*time.Minute), []stream.Target{oa}, []retry.Attempt{{N: 1, Target: oa, Status: 429, Class: stream.ClassQuota, Code: "insufficient_quota", Message: "You exceeded your current quota", Duration: 80 * time.Millisecond, Decision: retry.DecideStop}}, retry.OutcomeStopped, "")
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func histRun(t *testing.T, env map[string]string, tty bool, fn func(context.Context, *app, []string) int, args ...string) (int, string, string) {
	t.Helper()
	a, out, errOut := histTestApp(env, tty)
	code := fn(context.Background(), a, args)
	return code, out.String(), errOut.String()
}

func TestHistoryCommands(t *testing.T) {
	db := filepath.Join(t.TempDir(), "state", "history.db")
	env := map[string]string{"LIMITSCOPE_DB": db}
	seedHistory(t, db)

	// list, piped: tab-separated, newest first.
	code, out, errOut := histRun(t, env, false, runHistory, "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[0], "ID\tSTARTED\t") {
		t.Fatalf("list: %d %q %q", code, out, errOut)
	}
	if f := strings.Split(lines[1], "\t"); f[0] != "3" || f[4] != "stopped" || f[2] != "openai/gpt-5.4-mini" {
		t.Fatalf("newest row %q", lines[1])
	}
	if f := strings.Split(lines[2], "\t"); f[2] != "anthropic/claude-haiku-4-5 +1" || f[3] != "openai/gpt-5.4-mini" || f[5] != "3" || f[6] != "2100" {
		t.Fatalf("failover row %q", lines[2])
	}
	// history with no subcommand is list; filters apply.
	code, out, _ = histRun(t, env, false, runHistory, "--provider", "anthropic")
	if code != 0 || strings.Count(out, "\n") != 2 {
		t.Fatalf("filtered list: %q", out)
	}
	code, out, _ = histRun(t, env, false, runHistory, "list", "--class", "quota", "--json")
	var listDoc struct {
		DB    string           `json:"db"`
		Calls []store.CallJSON `json:"calls"`
	}
	if err := json.Unmarshal([]byte(out), &listDoc); err != nil || code != 0 || listDoc.DB != db || len(listDoc.Calls) != 1 || listDoc.Calls[0].Outcome != retry.OutcomeStopped {
		t.Fatalf("list --json: %v %s", err, out)
	}
	// --db wins over the environment.
	code, out, _ = histRun(t, map[string]string{"LIMITSCOPE_DB": "/nonexistent/x.db"}, false, runHistory, "list", "--db", db, "--limit", "1")
	if code != 0 || strings.Count(out, "\n") != 2 {
		t.Fatalf("--db: %q", out)
	}

	// show: the call, every attempt, its waits and its text.
	code, out, _ = histRun(t, env, false, runHistory, "show", "2")
	for _, want := range []string{"anthropic/claude-haiku-4-5 -> openai/gpt-5.4-mini", "#1", "529 overload overloaded_error", "Overloaded",
		"server asked 2s; waited 2.1s (retry-after)", "limits: requests 0/50 reset in 30s", "(mid-stream)", `partial text: "half an ans"`,
		"#3", "prompt of c-fail-over", "served by the fallback", "-> fail over"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	if code != 0 || strings.Contains(out, "\x1b") {
		t.Fatalf("show: %d", code)
	}
	code, out, _ = histRun(t, env, false, runHistory, "show", "--json", "c-quota")
	var showDoc store.CallJSON
	if err := json.Unmarshal([]byte(out), &showDoc); err != nil || code != 0 || showDoc.ID != 3 || showDoc.Error == nil || showDoc.Error.Code != "insufficient_quota" || len(showDoc.Attempts) != 1 {
		t.Fatalf("show --json: %v %s", err, out)
	}
	if code, out, _ = histRun(t, env, false, runHistory, "show", "1"); code != 0 || !strings.Contains(out, "session 1 (send, simulated, test)") {
		t.Errorf("show lacks the session: %q", out)
	}
	code, out, _ = histRun(t, env, false, runHistory, "sessions")
	if code != 0 || !strings.HasPrefix(out, "ID\tSTARTED\tENDED\tCOMMAND") || !strings.Contains(out, "\tsend\tsimulated\ttest\t") {
		t.Errorf("sessions: %q", out)
	}
	if code, _, errOut = histRun(t, env, false, runHistory, "show", "99"); code != exitFailed || !strings.Contains(errOut, "no call") {
		t.Fatalf("show missing: %d %q", code, errOut)
	}

	// stats.
	code, out, _ = histRun(t, env, false, runHistory, "stats")
	if code != 0 || !strings.Contains(out, "PROVIDER\tPRIMARY_CALLS\tTRIED_CALLS\tSERVED_CALLS\tRETRIED_SHARE") ||
		// openai: primary of 2, sent a request by all 3 (the failover's too), served 2; anthropic tried by 1, served none.
		!strings.Contains(out, "openai\t2\t3\t2\t0.0000\t0.00\t") || !strings.Contains(out, "anthropic\t1\t1\t0\t") || !strings.Contains(out, "all\t3\t3\t2\t0.3333\t0.67\t") {
		t.Fatalf("stats:\n%s", out)
	}
	code, out, _ = histRun(t, env, false, runHistory, "stats", "--json")
	var statsDoc struct {
		Providers []store.ProviderStats `json:"providers"`
		Total     store.ProviderStats   `json:"total"`
	}
	if err := json.Unmarshal([]byte(out), &statsDoc); err != nil || code != 0 || len(statsDoc.Providers) != 2 || statsDoc.Total.QuotaStops != 1 || statsDoc.Total.Calls != 3 {
		t.Fatalf("stats --json: %v %s", err, out)
	}

	// export.
	code, out, _ = histRun(t, env, false, runHistory, "export")
	jl := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(jl) != 3 {
		t.Fatalf("export jsonl: %q", out)
	}
	var first store.CallJSON
	if err := json.Unmarshal([]byte(jl[0]), &first); err != nil || first.CallID != "c-ok" || first.Text == nil || *first.Text != "the answer" {
		t.Fatalf("export oldest first with text: %v %s", err, jl[0])
	}
	code, out, _ = histRun(t, env, false, runHistory, "export", "--no-text")
	if code != 0 || strings.Contains(out, "the answer") || strings.Contains(out, "half an ans") {
		t.Fatalf("export --no-text has text")
	}
	code, out, _ = histRun(t, env, false, runHistory, "export", "--format", "csv")
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || code != 0 || len(recs) != 6 || recs[0][0] != "id" || recs[2][7] != "1" || recs[2][11] != "overload" {
		t.Fatalf("export csv: %v %q", err, out)
	}

	// prune: nothing is old yet; then everything is, from the future.
	code, out, _ = histRun(t, env, false, runHistory, "prune")
	if code != 0 || !strings.Contains(out, "deleted 0 calls") {
		t.Fatalf("prune: %q", out)
	}
	a, pout, _ := histTestApp(env, false)
	a.now = func() time.Time { return time.Now().Add(100 * 24 * time.Hour) }
	if code := runHistory(context.Background(), a, []string{"prune", "--compact", "--json"}); code != 0 {
		t.Fatalf("prune --compact: %d", code)
	}
	var pruneDoc struct {
		Deleted   int                  `json:"deleted"`
		Compacted *store.CompactResult `json:"compacted"`
	}
	if err := json.Unmarshal(pout.Bytes(), &pruneDoc); err != nil || pruneDoc.Deleted != 3 || pruneDoc.Compacted == nil {
		t.Fatalf("prune doc %v %s", err, pout)
	}
	code, out, _ = histRun(t, env, false, runHistory, "list")
	if code != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("after prune: %q", out)
	}

	// repair of a readable file still works and keeps the old one.
	code, out, _ = histRun(t, env, false, runHistory, "repair")
	if code != 0 || !strings.Contains(out, "the old file is kept as "+db+".broken-") {
		t.Fatalf("repair: %d %q", code, out)
	}
}

func TestHistoryUsageErrors(t *testing.T) {
	env := map[string]string{"LIMITSCOPE_DB": filepath.Join(t.TempDir(), "h.db")}
	for _, args := range [][]string{
		{"bogus"}, {"list", "--nope"}, {"list", "--outcome", "fine"}, {"list", "--class", "teapot"},
		{"list", "--provider", "acme"}, {"list", "--since", "yesterday-ish"}, {"list", "extra"},
		{"show"}, {"show", "1", "2"}, {"export", "--format", "xml"}, {"prune", "--keep", "soon"}, {"stats", "x"},
	} {
		code, _, errOut := histRun(t, env, false, runHistory, args...)
		if code != exitUsage || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	if code, out, _ := histRun(t, env, false, runHistory, "-h"); code != 0 || !strings.Contains(out, "history show ID") {
		t.Errorf("-h: %d %q", code, out)
	}
	if code, _, _ := histRun(t, env, false, runHistory, "list", "-h"); code != 0 {
		t.Errorf("list -h: %d", code)
	}
	for _, args := range [][]string{{"extra"}, {"clear", "a", "b"}} {
		if code, _, _ := histRun(t, env, false, runCooldowns, args...); code != exitUsage {
			t.Errorf("cooldowns %v: %d", args, code)
		}
	}
	if code, _, _ := histRun(t, env, false, runInfo, "extra"); code != exitUsage {
		t.Errorf("info extra: %d", code)
	}
	// No file yet: empty, not an error, and nothing created.
	if code, out, _ := histRun(t, env, false, runHistory, "list"); code != 0 || strings.Count(out, "\n") != 1 {
		t.Errorf("empty list: %d %q", code, out)
	}
	if _, err := os.Stat(env["LIMITSCOPE_DB"]); !os.IsNotExist(err) {
		t.Error("list created the file")
	}
}

func TestHistoryColourOnlyOnATerminalWithoutNoColor(t *testing.T) {
	db := filepath.Join(t.TempDir(), "h.db")
	seedHistory(t, db)
	for _, c := range []struct {
		tty     bool
		noColor string
		want    bool
	}{{true, "", true}, {true, "1", false}, {false, "", false}} {
		env := map[string]string{"LIMITSCOPE_DB": db, "NO_COLOR": c.noColor}
		for _, args := range [][]string{{"list"}, {"show", "2"}, {"stats"}} {
			_, out, _ := histRun(t, env, c.tty, runHistory, args...)
			if got := strings.Contains(out, "\x1b["); got != c.want {
				t.Errorf("tty %v NO_COLOR %q %v: colour %v", c.tty, c.noColor, args, got)
			}
			if c.tty && args[0] == "list" && strings.Contains(out, "\t") {
				t.Errorf("terminal table uses tabs")
			}
		}
	}
}

func TestHistoryCorruptFile(t *testing.T) {
	db := filepath.Join(t.TempDir(), "h.db")
	junk := bytes.Repeat([]byte("this is not a database "), 500)
	if err := os.WriteFile(db, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"LIMITSCOPE_DB": db}
	code, _, errOut := histRun(t, env, false, runHistory, "list")
	if code != exitFailed || !strings.Contains(errOut, "corrupt") || !strings.Contains(errOut, "history repair") {
		t.Fatalf("corrupt: %d %q", code, errOut)
	}
	code, _, errOut = histRun(t, env, false, runHistory, "repair")
	if code != exitFailed || !strings.Contains(errOut, "not a limitscope history file") {
		t.Fatalf("repair of a non-bbolt file: %d %q", code, errOut)
	}
	if b, _ := os.ReadFile(db); !bytes.Equal(b, junk) {
		t.Fatal("file changed")
	}
}

func TestCooldownsCommand(t *testing.T) {
	db := filepath.Join(t.TempDir(), "h.db")
	env := map[string]string{"LIMITSCOPE_DB": db}
	if code, out, _ := histRun(t, env, true, runCooldowns); code != 0 || !strings.Contains(out, "no cooldowns") {
		t.Fatalf("empty: %q", out)
	}
	cd := store.NewCooldowns(db, store.Options{})
	now := time.Now()
	for _, c := range []retry.Cooldown{
		{Scope: "openai:0123abcd4567", Since: now.Add(-time.Hour), Target: "openai/gpt-5.4-mini", Code: "insufficient_quota", Message: "You exceeded your current quota"},
		{Scope: "gemini/gemini-2.5-pro", Since: now.Add(-time.Hour), Until: now.Add(5 * time.Hour), Target: "gemini/gemini-2.5-pro", Code: "RESOURCE_EXHAUSTED"},
		{Scope: "groq:old", Since: now.Add(-48 * time.Hour), Until: now.Add(-24 * time.Hour)},
	} {
		if err := cd.Set(c); err != nil {
			t.Fatal(err)
		}
	}
	code, out, _ := histRun(t, env, false, runCooldowns)
	if code != 0 || !strings.Contains(out, "openai:0123abcd4567\tactive\tuntil cleared\t") || !strings.Contains(out, "groq:old\tended\t") {
		t.Fatalf("list:\n%s", out)
	}
	code, out, _ = histRun(t, env, false, runCooldowns, "--json")
	var doc struct {
		Cooldowns []struct {
			Scope  string  `json:"scope"`
			Active bool    `json:"active"`
			Until  *string `json:"until"`
		} `json:"cooldowns"`
	}
	// Sorted by scope: gemini, groq, openai.
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 || len(doc.Cooldowns) != 3 || !doc.Cooldowns[0].Active || doc.Cooldowns[1].Active ||
		!doc.Cooldowns[2].Active || doc.Cooldowns[2].Until != nil || doc.Cooldowns[0].Until == nil {
		t.Fatalf("json: %v %s", err, out)
	}
	if code, out, _ = histRun(t, env, false, runCooldowns, "clear", "gemini/gemini-2.5-pro"); code != 0 || !strings.Contains(out, "cleared gemini/gemini-2.5-pro") {
		t.Fatalf("clear one: %d %q", code, out)
	}
	if code, _, errOut := histRun(t, env, false, runCooldowns, "clear", "nope"); code != exitFailed || !strings.Contains(errOut, "no cooldown") {
		t.Fatalf("clear unknown: %d %q", code, errOut)
	}
	if code, out, _ = histRun(t, env, false, runCooldowns, "clear", "--json"); code != 0 || !strings.Contains(out, "groq:old") {
		t.Fatalf("clear all: %d %q", code, out)
	}
	if list, _ := store.NewCooldowns(db, store.Options{}).List(); len(list) != 0 {
		t.Fatalf("left %+v", list)
	}
}

func TestInfoCommand(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"HOME": dir, "XDG_STATE_HOME": filepath.Join(dir, "st"), "XDG_CONFIG_HOME": filepath.Join(dir, "cfg")}
	code, out, _ := histRun(t, env, false, runInfo, "--json")
	var doc struct {
		DB        string `json:"db"`
		DBSource  string `json:"db_source"`
		ConfigDir string `json:"config_dir"`
		DBExists  bool   `json:"db_exists"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 || doc.DB != filepath.Join(dir, "st", "limitscope", "history.db") ||
		doc.DBSource != "XDG_STATE_HOME" || doc.ConfigDir != filepath.Join(dir, "cfg", "limitscope") || doc.DBExists {
		t.Fatalf("info: %v %s", err, out)
	}
	code, out, _ = histRun(t, env, true, runInfo)
	if code != 0 || !strings.Contains(out, "not created yet") || !strings.Contains(out, "config dir") {
		t.Fatalf("info table: %q", out)
	}
	env["LIMITSCOPE_DB"] = filepath.Join(dir, "x.db")
	if _, out, _ = histRun(t, env, false, runInfo); !strings.Contains(out, "history\t"+filepath.Join(dir, "x.db")) {
		t.Fatalf("info piped: %q", out)
	}
}

// TestSendTwiceThenHistory is the new user's path: two sends on the
// simulator, then history list and history show.
func TestSendTwiceThenHistory(t *testing.T) {
	for _, v := range stream.AllEnvVars() {
		t.Setenv(v, "")
	}
	db := filepath.Join(t.TempDir(), "history.db")
	// The simulator, fast, reached the way a user's base URLs reach a provider.
	r, err := sim.Start(context.Background(), "127.0.0.1:0", sim.Options{Scenario: "calm", TokensPerSecond: 1e6})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	env := map[string]string{"LIMITSCOPE_DB": db, "HOME": t.TempDir(), "OPENAI_BASE_URL": r.BaseURL("openai"), "OPENAI_API_KEY": sim.FakeKey}
	for i, prompt := range []string{"first question", "second question"} {
		a, _, errOut := histTestApp(env, false)
		if code := run(context.Background(), a, []string{"send", "--model", "openai/gpt-5.4-mini", prompt}); code != 0 {
			t.Fatalf("send %d: exit %d: %s", i, code, errOut)
		}
	}
	code, out, errOut := histRun(t, env, false, runHistory, "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[1], "2\t") || !strings.Contains(lines[1], "\tok\t") {
		t.Fatalf("list after two sends: %d %q %q", code, out, errOut)
	}
	code, out, _ = histRun(t, env, false, runHistory, "show", "2")
	if code != 0 || !strings.Contains(out, "second question") || !strings.Contains(out, "openai/gpt-5.4-mini") || !strings.Contains(out, "answer") {
		t.Fatalf("show: %q", out)
	}
}
