package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/bench"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// benchApp returns an app whose streams are buffers and whose environment is
// env only (no provider variable of the developer's leaks in).
func benchApp(t *testing.T, env map[string]string) (*app, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	for _, v := range stream.AllEnvVars() {
		t.Setenv(v, "")
	}
	var out, errb bytes.Buffer
	return &app{
		stdin:  strings.NewReader(""),
		stdout: &out,
		stderr: &errb,
		getenv: func(k string) string { return env[k] },
		now:    time.Now,
	}, &out, &errb
}

const fastScenario = "../../bench/testdata/fast.ini"

func TestBenchSimJSON(t *testing.T) {
	for _, viaEnv := range []bool{false, true} {
		env := map[string]string{}
		args := []string{"--model", "openai/gpt-5.4-mini", "--requests", "8", "--concurrency", "2",
			"--scenario-file", fastScenario, "--json"}
		if viaEnv {
			env["LIMITSCOPE_SIM"] = "1"
		} else {
			args = append(args, "--sim")
		}
		a, out, errb := benchApp(t, env)
		if code := runBench(t.Context(), a, args); code != exitOK {
			t.Fatalf("exit %d, stderr %s", code, errb)
		}
		if errb.Len() != 0 {
			t.Errorf("stderr not a terminal, yet: %q", errb)
		}
		var doc struct {
			Policies    []map[string]any `json:"policies"`
			Simulated   bool             `json:"simulated"`
			Scenario    string           `json:"scenario"`
			Requests    int              `json:"requests"`
			Concurrency int              `json:"concurrency"`
		}
		dec := json.NewDecoder(bytes.NewReader(out.Bytes()))
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		if dec.More() {
			t.Fatalf("more than one document:\n%s", out)
		}
		if !doc.Simulated || doc.Scenario != "bench-fast" || doc.Requests != 8 || doc.Concurrency != 2 {
			t.Errorf("header: %+v", doc)
		}
		var names []string
		for _, p := range doc.Policies {
			names = append(names, p["policy"].(string))
			num := func(k string) int { return int(p[k].(float64)) }
			if num("completed")+num("stopped")+num("gave_up") != num("requests") || num("requests") != 8 {
				t.Errorf("%v: outcomes do not add up", p)
			}
			if num("completed") != 8 || num("http_requests") != 8 || num("rejected") != 0 || num("wasted") != 0 {
				t.Errorf("%v: want 8 clean calls on generous limits", p)
			}
			if p["limit_per_s"].(float64) != 10000 {
				t.Errorf("limit_per_s %v, want 10000 (600000 a minute)", p["limit_per_s"])
			}
			lat := p["latency_ms"].(map[string]any)
			for _, k := range []string{"p50", "p95", "p99"} {
				if _, ok := lat[k].(float64); !ok {
					t.Errorf("latency_ms.%s missing", k)
				}
			}
		}
		if strings.Join(names, ",") != strings.Join(bench.Policies(), ",") {
			t.Errorf("policies %v, want all four in order", names)
		}
	}
}

func TestBenchSimTable(t *testing.T) {
	a, out, errb := benchApp(t, nil)
	code := runBench(t.Context(), a, []string{"--sim", "--scenario-file", fastScenario, "--model", "openai/gpt-5.4-mini",
		"--requests", "4", "--concurrency", "2", "--policy", "limitscope,naive"})
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errb)
	}
	s := out.String()
	for _, want := range []string{"on the simulator (scenario bench-fast)", "policy", "rejected", "limitscope", "naive", "4/4"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "sdk-default") {
		t.Errorf("a policy that was not asked for ran:\n%s", s)
	}
}

func TestBenchNoKey(t *testing.T) {
	a, out, errb := benchApp(t, nil)
	code := runBench(t.Context(), a, []string{"--model", "openai/gpt-5.4-mini", "--requests", "2", "--concurrency", "1"})
	if code != exitUsage {
		t.Fatalf("exit %d, want %d", code, exitUsage)
	}
	msg := errb.String()
	if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "OPENAI_API_KEY") || !strings.Contains(msg, "--sim") {
		t.Errorf("want one line naming OPENAI_API_KEY and --sim, got %q", msg)
	}
	if out.Len() != 0 {
		t.Errorf("stdout: %q", out)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--sim", "--requests", "2"}, // no --model
		{"--sim", "--model", "nosuch/x"},
		{"--sim", "--model", "openai/m", "--requests", "0"},
		{"--sim", "--model", "openai/m", "--concurrency", "0"},
		{"--sim", "--model", "openai/m", "--policy", "retry-forever"},
		{"--sim", "--model", "openai/m", "--scenario", "no-such-scenario"},
		{"--sim", "--model", "openai/m", "--bogus"},
		{"--sim", "--model", "openai/m", "extra"},
	} {
		a, _, errb := benchApp(t, nil)
		if code := runBench(t.Context(), a, args); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
		if errb.Len() == 0 {
			t.Errorf("%v: no message", args)
		}
	}
}

// On a real account the comparison policies do not run unless allowed. A
// simulator stands in for the real provider, reached through the ordinary
// key and base-URL variables.
func TestBenchRealAccount(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r, err := sim.Start(ctx, "", sim.Options{ScenarioFile: fastScenario})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	env := map[string]string{"OPENAI_API_KEY": sim.FakeKey, "OPENAI_BASE_URL": r.BaseURL("openai")}
	base := []string{"--model", "openai/gpt-5.4-mini", "--requests", "3", "--concurrency", "1", "--json"}

	// Asked for by name, without the flag: refused before anything is sent.
	a, out, errb := benchApp(t, env)
	if code := runBench(ctx, a, append(base, "--policy", "limitscope,naive")); code != exitUsage {
		t.Fatalf("explicit comparison on a real account: exit %d, want %d", code, exitUsage)
	}
	if !strings.Contains(errb.String(), "--allow-real-comparisons") || out.Len() != 0 {
		t.Errorf("stderr %q stdout %q", errb, out)
	}
	if st := r.Server.Status(); totalRequests(st) != 0 {
		t.Fatalf("%d requests sent by a refused run", totalRequests(st))
	}

	// The default policy list: only limitscope runs, with a note.
	a, out, errb = benchApp(t, env)
	if code := runBench(ctx, a, base); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var doc bench.Report
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Policies) != 1 || doc.Policies[0].Policy != bench.PolicyLimitscope || doc.Simulated {
		t.Errorf("policies %+v simulated %v, want limitscope alone on a real account", doc.Policies, doc.Simulated)
	}
	if !strings.Contains(errb.String(), "only the limitscope policy") {
		t.Errorf("no note on stderr: %q", errb)
	}

	// Allowed: a warning, then every policy.
	a, out, errb = benchApp(t, env)
	if code := runBench(ctx, a, append(base, "--allow-real-comparisons")); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Policies) != 4 || !strings.Contains(errb.String(), "WARNING") {
		t.Errorf("%d policies, stderr %q", len(doc.Policies), errb)
	}
	for _, s := range []string{out.String(), errb.String()} {
		if strings.Contains(s, sim.FakeKey) {
			t.Errorf("the key appears in the output: %q", s)
		}
	}
}

func totalRequests(st sim.Status) int64 {
	var n int64
	for _, p := range st.Providers {
		n += p.Requests
	}
	return n
}

func TestBenchProgressBar(t *testing.T) {
	var b bytes.Buffer
	p := progressBar(&b)
	for i := 1; i <= 200; i++ {
		p("naive", i, 200)
	}
	s := b.String()
	if n := strings.Count(s, "\r"); n != 101 {
		t.Errorf("%d redraws for 200 calls, want one per percent, 0 to 100", n)
	}
	if !strings.HasSuffix(s, "100% 200/200\n") || strings.Count(s, "\n") != 1 {
		t.Errorf("want one final line ending the bar, got tail %q", s[max(0, len(s)-40):])
	}
}

func TestBenchCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	a, _, errb := benchApp(t, nil)
	code := runBench(ctx, a, []string{"--sim", "--scenario-file", fastScenario, "--model", "openai/gpt-5.4-mini", "--requests", "4"})
	if code != exitCancelled || !strings.Contains(errb.String(), "cancelled") {
		t.Fatalf("exit %d stderr %q, want %d and a note", code, errb, exitCancelled)
	}
}

// bench runs on the simulator's bench scenario (300 RPM, burst 5) by default.
func TestBenchDefaultScenario(t *testing.T) {
	if got := benchScenario(); got != "bench" {
		t.Errorf("default scenario %q, want bench", got)
	}
}

// The title comes first, the table fits 100 columns, and
// one line at the end says who won and by how much.
func TestBenchTitleFirstVerdictLast(t *testing.T) {
	a, out, errb := benchApp(t, nil)
	code := runBench(t.Context(), a, []string{"--sim", "--scenario-file", fastScenario, "--model", "openai/gpt-5.4-mini",
		"--requests", "4", "--concurrency", "2", "--policy", "limitscope,naive"})
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errb)
	}
	s := out.String()
	if !strings.HasPrefix(s, "bench: openai/gpt-5.4-mini on the simulator (scenario bench-fast)\n4 requests at concurrency 2 per policy\n") {
		t.Errorf("the title is not first:\n%s", s)
	}
	if strings.Count(s, "bench: openai") != 1 {
		t.Errorf("the title is printed more than once:\n%s", s)
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for _, l := range lines {
		if n := len([]rune(l)); n > 100 {
			t.Errorf("line of %d columns: %q", n, l)
		}
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "Winner: ") && !strings.HasPrefix(last, "A tie: ") {
		t.Errorf("last line %q, want the verdict", last)
	}
}

// The default run is the short workload; --long is the long one.
func TestBenchDefaultWorkload(t *testing.T) {
	a, _, errb := benchApp(t, nil)
	if code := runBench(t.Context(), a, []string{"--help"}); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	u := errb.String()
	if !strings.Contains(u, "calls per policy (the default run takes about 45 s on the simulator, its policies at once) (default 30)") || !strings.Contains(u, "-serial") || !strings.Contains(u, "-long") {
		t.Errorf("usage:\n%s", u)
	}
}

// The progress line says "policy k of n" and an ETA for the whole run.
func TestBenchProgressPolicyOfAndETA(t *testing.T) {
	var b bytes.Buffer
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	p := newProgress(&b, []string{"limitscope", "naive", "nested"}, clock)
	for i := 1; i <= 10; i++ {
		now = now.Add(time.Second) // a call a second: 10 s per policy
		p("limitscope", i, 10)
	}
	b.Reset()
	now = now.Add(2 * time.Second)
	p("naive", 1, 10) // 2 s a call now: 20 s for naive, then nested at the mean 15 s
	s := b.String()
	if !strings.Contains(s, "policy 2 of 3  naive") {
		t.Errorf("no 'policy 2 of 3': %q", s)
	}
	if !strings.Contains(s, "ETA 0:33") { // 18 s of naive left + 15 s for nested
		t.Errorf("want ETA 0:33, got %q", s)
	}
}

// Policies that run at once share one progress line: each one's share (a
// check mark once done), the time since the start, and a newline only when
// the last is done.
func TestBenchParallelProgressOneLine(t *testing.T) {
	var b bytes.Buffer
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	p := newParallelProgress(&b, []string{"limitscope", "naive", "nested"}, clock)
	p("limitscope", 0, 10)
	p("naive", 0, 10)
	now = now.Add(21 * time.Second)
	p("limitscope", 10, 10)
	p("naive", 4, 10)
	s := b.String()
	last := s[strings.LastIndex(s, "\r"):]
	if want := "\rlimitscope ✓ · naive 40% · nested -   0:21\x1b[K"; last != want {
		t.Errorf("the line reads %q, want %q", last, want)
	}
	if strings.Contains(s, "\n") {
		t.Errorf("a newline before every policy is done: %q", s)
	}
	p("nested", 10, 10)
	p("naive", 10, 10)
	if s := b.String(); !strings.HasSuffix(s, "\n") || strings.Count(s, "\n") != 1 {
		t.Errorf("want one newline, at the end, once all are done: %q", s)
	}
}
