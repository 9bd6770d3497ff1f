package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// traceRun is what a replay must repeat of one send: its exit code, who
// served, and each attempt's provider and class.
type traceRun struct {
	code     int
	served   string
	attempts string
}

// runTraceSends runs the session the trace test records and replays, on a
// simulator serving scenario, into the history at db: a failover (OpenAI
// overloaded, Anthropic serves), three calls on Groq whose per-day limit
// is two (the third is a quota stop), and a spend-cap stop on Mistral;
// xAI fails half its requests at random, so only a replay of the recorded
// outcomes (not of their rate) repeats its calls.
func runTraceSends(t *testing.T, scenario, dir string) []traceRun {
	t.Helper()
	r, err := sim.Start(context.Background(), "127.0.0.1:0", sim.Options{ScenarioFile: scenario, Seed: 1, TokensPerSecond: 1e6})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	env := map[string]string{
		"LIMITSCOPE_DB":   filepath.Join(dir, "history.db"),
		"XDG_STATE_HOME":  filepath.Join(dir, "state"),
		"XDG_CONFIG_HOME": filepath.Join(dir, "config"),
		"HOME":            dir,
	}
	for _, p := range stream.Providers() {
		env[p.BaseURLEnv] = r.BaseURL(p.Name)
		env[p.KeyEnv[0]] = sim.FakeKey
	}
	// One engine clock for the session, as one process has: its waits pass
	// at once, and the attempts' times keep the order they were sent in.
	clk := retrytest.NewFakeClock(time.Now())
	var out []traceRun
	for _, args := range [][]string{
		{"--model", "openai/gpt-5.4-mini", "--fallback", "anthropic/claude-haiku-4-5"},
		{"--model", "xai/grok-4", "--fallback", "anthropic/claude-haiku-4-5"},
		{"--model", "xai/grok-4", "--fallback", "anthropic/claude-haiku-4-5"},
		{"--model", "xai/grok-4", "--fallback", "anthropic/claude-haiku-4-5"},
		{"--model", "xai/grok-4", "--fallback", "anthropic/claude-haiku-4-5"},
		{"--model", "groq/llama-3.3-70b-versatile"},
		{"--model", "groq/llama-3.3-70b-versatile"},
		{"--model", "groq/llama-3.3-70b-versatile"},
		{"--model", "mistral/mistral-small-latest"},
	} {
		ta := newTestApp(env)
		ta.clock, ta.app.clock = clk, clk
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		code := run(ctx, ta.app, append(append([]string{"send", "--json"}, args...), "hi"))
		cancel()
		var doc sendDoc
		if err := json.Unmarshal(ta.out.Bytes(), &doc); err != nil {
			t.Fatalf("send %v: exit %d, %v\n%s%s", args, code, err, ta.out, ta.errOut)
		}
		tr := traceRun{code: code}
		if doc.ServedBy != nil {
			tr.served = doc.ServedBy.String()
		}
		var atts []string
		for _, a := range doc.Attempts {
			atts = append(atts, a.Provider+":"+a.Class)
		}
		tr.attempts = strings.Join(atts, " ")
		out = append(out, tr)
	}
	return out
}

// A session with a failover, a per-day limit and quota stops, learnt in
// trace mode, replays with the same attempts, failovers and stops.
func TestTraceScenarioReplaysTheSession(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	rec := filepath.Join(dir, "recording.ini")
	if err := os.WriteFile(rec, []byte("[openai]\nwindow = 0s- overload\n[xai]\nfault = overload 0.5\n[groq]\nrpd = 2\n[mistral]\nwindow = 0s- spend_cap\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	recorded := runTraceSends(t, rec, filepath.Join(dir, "recorded"))
	want := []struct {
		code   int
		served string
	}{{exitOK, "anthropic/claude-haiku-4-5"}, {-1, ""}, {-1, ""}, {-1, ""}, {-1, ""}, {exitOK, "groq/llama-3.3-70b-versatile"}, {exitOK, "groq/llama-3.3-70b-versatile"}, {exitStopped, ""}, {exitStopped, ""}}
	for i, w := range want {
		if w.code >= 0 && (recorded[i].code != w.code || recorded[i].served != w.served) {
			t.Fatalf("recording, send %d: exit %d served by %q (%s), want exit %d served by %q", i+1, recorded[i].code, recorded[i].served, recorded[i].attempts, w.code, w.served)
		}
	}
	learnt := filepath.Join(dir, "learnt.ini")
	a, _, errOut := scenarioApp()
	if code := runHistory(context.Background(), a, []string{"scenario", "--db", filepath.Join(dir, "recorded", "history.db"), "--since", "1h", "--trace", "--out", learnt}); code != exitOK {
		t.Fatalf("history scenario --trace: exit %d: %s", code, errOut)
	}
	text, _ := os.ReadFile(learnt)
	for _, w := range []string{"mode = trace", "[groq]", "rpd = 2", "daily_quota", "spend_cap"} {
		if !strings.Contains(string(text), w) {
			t.Errorf("the learnt file has no %q:\n%s", w, text)
		}
	}
	replayed := runTraceSends(t, learnt, filepath.Join(dir, "replayed"))
	for i := range recorded {
		if replayed[i] != recorded[i] {
			t.Errorf("send %d: replayed %+v, recorded %+v", i+1, replayed[i], recorded[i])
		}
	}
	if t.Failed() {
		t.Logf("learnt:\n%s", text)
	}
}

// bench runs limitscope's settings variants beside a comparison policy on
// a learnt scenario: the session above, whose OpenAI was always overloaded,
// is better served with the chain reversed.
func TestBenchVariantsOnALearntScenario(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	rec := filepath.Join(dir, "recording.ini")
	if err := os.WriteFile(rec, []byte("[openai]\nwindow = 0s- overload\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runTraceSends(t, rec, dir)
	learnt := filepath.Join(dir, "learnt.ini")
	a, _, errOut := scenarioApp()
	if code := runHistory(context.Background(), a, []string{"scenario", "--db", filepath.Join(dir, "history.db"), "--since", "1h", "--out", learnt}); code != exitOK {
		t.Fatalf("history scenario: exit %d: %s", code, errOut)
	}
	ba, out, errb := benchApp(t, nil)
	code := runBench(t.Context(), ba, []string{"--sim", "--scenario-file", learnt, "--model", "openai/gpt-5.4-mini", "--fallback", "anthropic/claude-haiku-4-5",
		"--requests", "4", "--concurrency", "4", "--max-tokens", "4", "--policy", "limitscope,limitscope:order=reverse,sdk-default", "--json"})
	if code != exitOK {
		t.Fatalf("bench: exit %d: %s", code, errb)
	}
	var rep struct {
		Policies []struct {
			Policy       string `json:"policy"`
			Completed    int    `json:"completed"`
			HTTPRequests int    `json:"http_requests"`
		} `json:"policies"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || len(rep.Policies) != 3 {
		t.Fatalf("%v: %s", err, out)
	}
	base, rev := rep.Policies[0], rep.Policies[1]
	if rev.Policy != "limitscope:order=reverse" || rev.Completed != 4 || rev.HTTPRequests != 4 {
		t.Errorf("reversed: %+v, want 4 calls in 4 requests (the fallback first)", rev)
	}
	if base.HTTPRequests <= rev.HTTPRequests {
		t.Errorf("limitscope sent %d requests, the reversed chain %d: the learnt overloads are not replayed", base.HTTPRequests, rev.HTTPRequests)
	}
}
