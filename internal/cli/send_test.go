package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// clearEnv removes every provider key and base URL from the test's
// environment, and points the history at a temporary file.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, v := range stream.AllEnvVars() {
		t.Setenv(v, "")
	}
	t.Setenv("LIMITSCOPE_SIM", "")
	t.Setenv("LIMITSCOPE_DB", filepath.Join(t.TempDir(), "history.db"))
	t.Setenv("XDG_STATE_HOME", t.TempDir())
}

// testApp runs commands in-process on buffers, with a fake engine clock.
type testApp struct {
	*app
	out, errOut *bytes.Buffer
	clock       *retrytest.FakeClock
}

func newTestApp(env map[string]string) *testApp {
	ta := &testApp{out: &bytes.Buffer{}, errOut: &bytes.Buffer{}, clock: retrytest.NewFakeClock(time.Now())}
	ta.app = &app{
		stdin:  strings.NewReader(""),
		stdout: ta.out,
		stderr: ta.errOut,
		getenv: func(k string) string {
			if v, ok := env[k]; ok {
				return v
			}
			return os.Getenv(k)
		},
		now:   time.Now,
		clock: ta.clock,
	}
	return ta
}

// simEnv starts a simulator and returns the environment that points the
// real-provider path of every command at it, as a user's base URLs would.
//
// A clock, when given, is the simulator's: a test whose engine waits on a
// fake clock gives the simulator the same one, so that a wait the engine took
// (a Retry-After honoured) has passed for the simulator too.
func simEnv(t *testing.T, clock ...sim.Clock) (*sim.Running, map[string]string) {
	t.Helper()
	opts := sim.Options{Scenario: "calm", TokensPerSecond: 1e6}
	if len(clock) > 0 {
		opts.Clock = clock[0]
	}
	r, err := sim.Start(context.Background(), "127.0.0.1:0", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	env := map[string]string{}
	for _, p := range stream.Providers() {
		env[p.BaseURLEnv] = r.BaseURL(p.Name)
		env[p.KeyEnv[0]] = sim.FakeKey
	}
	return r, env
}

var sendSchema = func() *jsonschema.Schema {
	c := jsonschema.NewCompiler()
	return c.MustCompile("../../docs/send.schema.json")
}()

// decodeSend validates a `send --json` document against the schema and
// decodes it.
func decodeSend(t *testing.T, b []byte) sendDoc {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("send --json is not JSON: %v\n%s", err, b)
	}
	if err := sendSchema.Validate(inst); err != nil {
		t.Fatalf("send --json does not match docs/send.schema.json: %v\n%s", err, b)
	}
	var d sendDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func requestsBy(d sendDoc) string {
	var parts []string
	for _, a := range d.Attempts {
		parts = append(parts, a.Provider)
	}
	return strings.Join(parts, " ")
}

// workedCase is one worked case of `send --json` on the simulator: the
// faults injected, the arguments, and what the call must show.
type workedCase struct {
	faults   []sim.Fault
	args     []string
	requests string // the providers asked, in order
	outcome  string
	exit     int
	served   string // the provider that served; "" when none
	minWait  time.Duration
	maxWait  time.Duration
}

// runWorkedCase runs tc through `send --json --no-history` against a fresh
// simulator on the engine's fake clock, checks what every worked case
// checks, and returns the document and the app for more.
func runWorkedCase(t *testing.T, tc workedCase) (sendDoc, *testApp) {
	t.Helper()
	clearEnv(t)
	env := map[string]string{}
	ta := newTestApp(env)
	r, senv := simEnv(t, ta.clock)
	maps.Copy(env, senv)
	for _, f := range tc.faults {
		if err := r.Server.Inject(f); err != nil {
			t.Fatal(err)
		}
	}
	args := append([]string{"send", "--json", "--no-history"}, tc.args...)
	code := run(context.Background(), ta.app, append(args, "hello"))
	d := decodeSend(t, ta.out.Bytes())
	if code != tc.exit {
		t.Errorf("exit %d, want %d; stderr: %s", code, tc.exit, ta.errOut)
	}
	if string(d.Outcome) != tc.outcome {
		t.Errorf("outcome %s, want %s", d.Outcome, tc.outcome)
	}
	if got := requestsBy(d); got != tc.requests {
		t.Errorf("requests %q, want %q", got, tc.requests)
	}
	if tc.served == "" && d.ServedBy != nil || tc.served != "" && (d.ServedBy == nil || d.ServedBy.Provider != tc.served) {
		t.Errorf("served by %+v, want %q", d.ServedBy, tc.served)
	}
	if tc.served != "" && d.Text == "" {
		t.Error("no text for a served call")
	}
	slept := ta.clock.Slept()
	if slept < tc.minWait || slept > tc.maxWait {
		t.Errorf("waited %s, want between %s and %s (sleeps %v)", slept, tc.minWait, tc.maxWait, ta.clock.Sleeps())
	}
	return d, ta
}

// TestSendWorkedCases runs every worked case of the engine issue through
// `send --json` against the simulator, with faults injected per request.
func TestSendWorkedCases(t *testing.T) {
	const A, B = "openai/gpt-5.4-mini", "anthropic/claude-haiku-5-5"
	cases := []struct {
		name     string
		faults   []sim.Fault
		args     []string
		requests string
		outcome  string
		exit     int
		served   string
		minWait  time.Duration
		maxWait  time.Duration
	}{
		{"429 retry-after 1 then 200", []sim.Fault{{Provider: "openai", Kind: sim.FaultRateLimit, RetryAfter: time.Second}},
			[]string{"--model", A}, "openai openai", "ok", 0, "openai", time.Second, 1250 * time.Millisecond},
		{"429 retry-after 600, no fallback", []sim.Fault{{Provider: "openai", Kind: sim.FaultRateLimit, RetryAfter: 600 * time.Second}},
			[]string{"--model", A}, "openai", "deferred", 4, "", 0, 0},
		{"429 retry-after 600, fallback serves", []sim.Fault{{Provider: "openai", Kind: sim.FaultRateLimit, RetryAfter: 600 * time.Second}},
			[]string{"--model", A, "--fallback", B}, "openai anthropic", "ok", 0, "anthropic", 0, time.Second},
		{"503 503, fallback serves", []sim.Fault{{Provider: "openai", Kind: sim.FaultOverload, Count: 2}},
			[]string{"--model", A, "--fallback", B}, "openai openai anthropic", "ok", 0, "anthropic", 0, 20 * time.Second},
		{"500 then 200 on the primary", []sim.Fault{{Provider: "openai", Kind: sim.FaultServerError}},
			[]string{"--model", A, "--fallback", B}, "openai openai", "ok", 0, "openai", 0, 20 * time.Second},
		{"credit_balance_exhausted stops", []sim.Fault{{Provider: "openai", Kind: sim.FaultSpendCap, Code: "credit_balance_exhausted"}},
			[]string{"--model", A, "--fallback", B}, "openai", "stopped", 3, "", 0, 0},
		{"429 retry-after 600 then spend cap on the fallback", []sim.Fault{
			{Provider: "openai", Kind: sim.FaultRateLimit, RetryAfter: 600 * time.Second},
			{Provider: "anthropic", Kind: sim.FaultSpendCap}},
			[]string{"--model", A, "--fallback", B}, "openai anthropic", "stopped", 3, "", 0, 0},
		{"503 x5, no fallback, max-attempts 3", []sim.Fault{{Provider: "openai", Kind: sim.FaultOverload, Count: 5}},
			[]string{"--model", A, "--max-attempts", "3"}, "openai openai openai", "gave_up", 1, "", 0, 60 * time.Second},
		{"context_length_exceeded, fallback serves", []sim.Fault{{Provider: "openai", Kind: sim.FaultContextLength}},
			[]string{"--model", A, "--fallback", B}, "openai anthropic", "ok", 0, "anthropic", 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, ta := runWorkedCase(t, workedCase{tc.faults, tc.args, tc.requests, tc.outcome, tc.exit, tc.served, tc.minWait, tc.maxWait})
			if tc.outcome == "deferred" {
				if d.RetryAt == nil {
					t.Fatal("deferred without retry_at")
				}
				at, _ := time.Parse(time.RFC3339Nano, *d.RetryAt)
				if off := at.Sub(ta.clock.Now()); off < 599*time.Second || off > 602*time.Second {
					t.Errorf("retry_at %s is %s from now, want about 600s", *d.RetryAt, off)
				}
			}
		})
	}
}

// TestSendNoKey: a real provider is never silently replaced by the
// simulator; the error names the variable and --sim.
func TestSendNoKey(t *testing.T) {
	clearEnv(t)
	ta := newTestApp(nil)
	code := run(context.Background(), ta.app, []string{"send", "--model", "openai/gpt-5.4-mini", "hi"})
	if code != exitUsage {
		t.Errorf("exit %d, want 2", code)
	}
	msg := ta.errOut.String()
	if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "OPENAI_API_KEY") || !strings.Contains(msg, "--sim") {
		t.Errorf("want one line naming OPENAI_API_KEY and --sim, got %q", msg)
	}
	if ta.out.Len() != 0 {
		t.Errorf("stdout not empty: %q", ta.out)
	}
}

// TestSendSim: --sim works with no key, streams the answer to stdout and
// says on stderr that the simulator answered.
func TestSendSim(t *testing.T) {
	t.Parallel()
	ta := newTestApp(isolatedEnv(t, map[string]string{"OPENAI_BASE_URL": "http://192.0.2.1:9/never-used"}))
	code := run(context.Background(), ta.app, []string{"send", "--sim", "--model", "openai/gpt-5.4-mini", "hi"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, ta.errOut)
	}
	if strings.TrimSpace(ta.out.String()) == "" {
		t.Error("no answer on stdout")
	}
	if !strings.Contains(ta.errOut.String(), "simulator") {
		t.Errorf("summary does not say the simulator answered: %q", ta.errOut)
	}
}

// TestSendMidStreamRetry: a stream that breaks part-way is retried; the
// broken text stays on its attempt and the answer is the retry's alone.
func TestSendMidStreamRetry(t *testing.T) {
	clearEnv(t)
	r, env := simEnv(t)
	if err := r.Server.Inject(sim.Fault{Provider: "anthropic", Kind: sim.FaultMidStream}); err != nil {
		t.Fatal(err)
	}
	ta := newTestApp(env)
	code := run(context.Background(), ta.app, []string{"send", "--json", "--no-history", "--model", "anthropic/claude-haiku-5-5", "hello"})
	d := decodeSend(t, ta.out.Bytes())
	if code != 0 || len(d.Attempts) != 2 {
		t.Fatalf("exit %d, %d attempts, want 0 and 2", code, len(d.Attempts))
	}
	first := d.Attempts[0]
	if !first.MidStream || first.Status != 200 || first.Class != "overload" || first.PartialText == "" {
		t.Errorf("first attempt %+v: want a mid-stream overload after 200 with partial text", first)
	}
	// The simulator's text is deterministic, so the retry's answer starts
	// with the same words: glued together, the broken part would show twice.
	if strings.Count(d.Text, first.PartialText) != 1 || d.Attempts[1].PartialText != "" {
		t.Errorf("the broken attempt's text was glued onto the answer: %q", d.Text)
	}
}

// TestSendHistoryAndNoKeyLeak: a call is recorded; a distinctive key is
// nowhere in stdout, stderr or the history file's bytes, even when the
// provider rejects it.
func TestSendHistoryAndNoKeyLeak(t *testing.T) {
	clearEnv(t)
	const key = "sk-test-LEAKCANARY-0123456789abcdef"
	r, env := simEnv(t)
	env["OPENAI_API_KEY"] = key // the simulator rejects it: 401 with the real body
	db := filepath.Join(t.TempDir(), "h.db")
	for _, args := range [][]string{
		{"send", "--db", db, "--model", "openai/gpt-5.4-mini", "hi"},
		{"send", "--db", db, "--json", "--model", "openai/gpt-5.4-mini", "hi"},
		{"send", "--db", db, "--json", "--model", "anthropic/claude-haiku-5-5", "hi"},
	} {
		ta := newTestApp(env)
		code := run(context.Background(), ta.app, args)
		if strings.Contains(ta.out.String()+ta.errOut.String(), key) {
			t.Fatalf("%v printed the key", args)
		}
		if args[len(args)-2] == "openai/gpt-5.4-mini" && code != exitFailed {
			t.Errorf("%v: exit %d, want 1 (401 is a caller error)", args, code)
		}
	}
	_ = r
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatalf("history not written: %v", err)
	}
	if bytes.Contains(b, []byte(key)) || bytes.Contains(b, []byte("LEAKCANARY")) {
		t.Fatal("the key is in the history file")
	}
	if !bytes.Contains(b, []byte("claude-haiku-5-5")) {
		t.Error("the successful call is not in the history file")
	}
}
