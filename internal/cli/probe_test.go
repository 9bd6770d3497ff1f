package cli

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/limitscope/limitscope/probe"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

var cardSchema = func() *jsonschema.Schema {
	return jsonschema.NewCompiler().MustCompile("../../docs/probe-card.schema.json")
}()

func validCard(t *testing.T, b []byte) probe.Card {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	if err := cardSchema.Validate(inst); err != nil {
		t.Fatalf("probe --json does not match docs/probe-card.schema.json: %v\n%s", err, b)
	}
	var c probe.Card
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// probe --json on the simulator, with headers (OpenAI, Anthropic, Groq),
// estimates and stops (Gemini) and a per-day limit: each card matches the
// schema; the cards are stored, and history cards compares them. (Every
// provider and scenario is the probe package's test, on a still clock.)
func TestProbeCommand(t *testing.T) {
	clearEnv(t)
	runs := map[string][]string{"calm": {"openai", "anthropic", "gemini"}, "busy": {"gemini"}, "daily-quota": {"gemini", "groq"}}
	total := 0
	for _, sc := range []string{"calm", "busy", "daily-quota"} {
		for _, name := range runs[sc] {
			p, _ := stream.Provider(name)
			total++
			ta := newTestApp(nil)
			if code := run(t.Context(), ta.app, []string{"probe", "--sim", "--seed", "1", "--scenario", sc, "--json", p.Name + "/" + p.DefaultModel}); code != exitOK {
				t.Fatalf("probe %s %s: exit %d\n%s", sc, p.Name, code, ta.errOut.String())
			}
			c := validCard(t, ta.out.Bytes())
			if c.Budget.Sent > c.Budget.Requests || c.Target != p.Name+"/"+p.DefaultModel || c.Scenario != sc {
				t.Errorf("%s %s: %+v", sc, p.Name, c)
			}
		}
	}
	ta := newTestApp(nil)
	if code := run(t.Context(), ta.app, []string{"history", "cards", "gemini/gemini-3.8-flash"}); code != exitOK {
		t.Fatalf("history cards: exit %d\n%s", code, ta.errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(ta.out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "requests/minute (estimate) 10") || !strings.Contains(lines[1], "requests/minute (estimate) 10→5") ||
		!strings.Contains(lines[2], "requests/day (estimate) 3") {
		t.Errorf("history cards:\n%s", ta.out.String())
	}
	ta = newTestApp(nil)
	if code := run(t.Context(), ta.app, []string{"history", "cards", "--json"}); code != exitOK {
		t.Fatal(ta.errOut.String())
	}
	var doc struct{ Cards []json.RawMessage }
	if err := json.Unmarshal(ta.out.Bytes(), &doc); err != nil || len(doc.Cards) != total {
		t.Fatalf("history cards --json: %v, %d cards", err, len(doc.Cards))
	}
	for _, c := range doc.Cards {
		validCard(t, c)
	}
}

// Before a real provider, probe states its budget and asks; without a yes
// it sends nothing.
func TestProbeAsksBeforeARealProvider(t *testing.T) {
	clearEnv(t)
	ta := newTestApp(map[string]string{"OPENAI_API_KEY": "sk-test-not-used", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"})
	ta.app.stdin = strings.NewReader("n\n")
	code := run(t.Context(), ta.app, []string{"probe", "--budget", "5", "openai/gpt-5.4-mini"})
	msg := ta.errOut.String()
	if code != exitUsage || !strings.Contains(msg, "up to 5 requests") || !strings.Contains(msg, "tokens") || !strings.Contains(msg, "not probed") || ta.out.Len() != 0 {
		t.Errorf("exit %d\n%s", code, msg)
	}
}

// A reasoning stream on the simulator: history show lists both first-token
// times (the first content, thinking included, and the first visible text).
func TestHistoryShowsBothFirstTokenTimes(t *testing.T) {
	clearEnv(t)
	ta := newTestApp(nil)
	if code := run(t.Context(), ta.app, []string{"send", "--sim", "--answer", "think:40t+words:40", "--model", "gemini/gemini-3.8-flash", "why"}); code != exitOK {
		t.Fatalf("send: exit %d\n%s", code, ta.errOut.String())
	}
	ta = newTestApp(nil)
	if code := run(t.Context(), ta.app, []string{"history", "show", "1"}); code != exitOK {
		t.Fatalf("history show: exit %d\n%s", code, ta.errOut.String())
	}
	out := ta.out.String()
	for _, want := range []string{"first token", "first text", "thought", "40 reasoning tokens"} {
		if strings.Count(out, want) < 2 { // the call's line and its attempt's
			t.Errorf("history show lacks %q twice:\n%s", want, out)
		}
	}
}

// Bedrock streams Claude's thinking as a reasoningContent block: send
// records it as thinking, with the first token and the first text apart.
func TestBedrockThinkingRecorded(t *testing.T) {
	clearEnv(t)
	ta := newTestApp(nil)
	if code := run(t.Context(), ta.app, []string{"send", "--sim", "--json", "--answer", "think:40t+words:40", "--model", "bedrock/us-east-1/anthropic.claude-haiku-5-5-v1:0", "why"}); code != exitOK {
		t.Fatalf("send: exit %d\n%s", code, ta.errOut.String())
	}
	ta = newTestApp(nil)
	if code := run(t.Context(), ta.app, []string{"history", "show", "1"}); code != exitOK {
		t.Fatalf("history show: exit %d\n%s", code, ta.errOut.String())
	}
	out := ta.out.String()
	for _, want := range []string{"first token", "first text", "thought"} {
		if !strings.Contains(out, want) {
			t.Errorf("history show lacks %q:\n%s", want, out)
		}
	}
}

// TestProbeMeetingAQuotaStopStoresNoCard: a probe whose first request meets
// a spend cap says that it measured nothing (no "all answered" beside a
// zero), and stores no card that history cards would read as a change of
// the account.
func TestProbeMeetingAQuotaStopStoresNoCard(t *testing.T) {
	clearEnv(t)
	r, env := simEnv(t)
	db := filepath.Join(t.TempDir(), "h.db")
	ta := newTestApp(env)
	if code := run(t.Context(), ta.app, []string{"probe", "--yes", "--db", db, "openai/gpt-5.4-mini"}); code != exitOK {
		t.Fatalf("first probe: exit %d\n%s", code, ta.errOut)
	}
	if err := r.Server.Inject(sim.Fault{Provider: "openai", Kind: sim.FaultSpendCap, For: time.Hour}); err != nil {
		t.Fatal(err)
	}
	ta = newTestApp(env)
	if code := run(t.Context(), ta.app, []string{"probe", "--yes", "--db", db, "openai/gpt-5.4-mini"}); code != exitOK {
		t.Fatalf("stopped probe: exit %d\n%s", code, ta.errOut)
	}
	out := ta.out.String()
	if strings.Contains(out, "all answered") || !strings.Contains(out, "not measured: the first request met a quota stop") {
		t.Errorf("the stopped probe's card claims a measurement:\n%s", out)
	}
	if !strings.Contains(ta.errOut.String(), "not stored in the history") {
		t.Errorf("stderr does not say the card was not stored:\n%s", ta.errOut)
	}
	ta = newTestApp(env)
	if code := run(t.Context(), ta.app, []string{"history", "cards", "--db", db}); code != exitOK {
		t.Fatal(ta.errOut.String())
	}
	if n := strings.Count(strings.TrimSpace(ta.out.String()), "\n") + 1; n != 1 {
		t.Errorf("history cards holds the stopped probe's card:\n%s", ta.out)
	}
}
