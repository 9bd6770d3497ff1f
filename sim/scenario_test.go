package sim

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestPresetsParseAndAreListed(t *testing.T) {
	want := []string{"calm", "bench", "busy", "overloaded", "outage", "spend-cap", "daily-quota", "mid-stream", "flaky", "failover-demo"}
	got := Scenarios()
	if len(got) != len(want) {
		t.Fatalf("%d scenarios, want %d", len(got), len(want))
	}
	for i, s := range got {
		if s.Name != want[i] || s.Description == "" {
			t.Errorf("scenario %d: %+v, want %s with a description", i, s, want[i])
		}
		if _, err := preset(s.Name); err != nil {
			t.Errorf("preset %s: %v", s.Name, err)
		}
	}
	if _, err := New(Options{Scenario: "nope"}); err == nil || !strings.Contains(err.Error(), "calm") {
		t.Errorf("unknown scenario: %v, want an error listing the known ones", err)
	}
	if len(Faults()) != len(faultInfos) {
		t.Error("Faults does not list every kind")
	}
}

func TestScenarioFileExample(t *testing.T) {
	// The example in README.md, kept in testdata.
	sc, err := loadScenarioFile("testdata/example.ini")
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name != "demo-day" || sc.Primary != "anthropic" {
		t.Errorf("name %q primary %q", sc.Name, sc.Primary)
	}
	oa := sc.Providers["openai"]
	if oa.RPM != 30 || oa.TPM != 60000 || oa.BudgetUSD != 0.05 || oa.SpendCode != "credit_balance_exhausted" || oa.LimitKind != "window" {
		t.Errorf("openai %+v", oa)
	}
	an := sc.Providers["anthropic"]
	if an.RPM != 5 || an.ITPM != 10000 || an.OTPM != 2000 || an.RampFactor != 3 || an.RampFloor != 6 || an.RampWindow != 10*time.Second {
		t.Errorf("anthropic %+v", an)
	}
	// [*] applies to every provider, and a later section adds to it.
	if len(sc.Providers["xai"].Faults) != 1 || sc.Providers["xai"].Faults[0].Kind != FaultServerError {
		t.Errorf("xai faults %+v", sc.Providers["xai"].Faults)
	}
	f := oa.Faults
	if len(f) != 3 {
		t.Fatalf("openai faults %+v", f)
	}
	if f[1].Kind != FaultRateLimit || f[1].Prob != 0.1 || f[1].RetryAfter != 2*time.Second {
		t.Errorf("fault line %+v", f[1])
	}
	if w := f[2]; !w.HasWindow || w.Start != 30*time.Second || w.End != 90*time.Second || w.Kind != FaultOverload || w.Prob != 0.8 || w.Every != 5*time.Minute {
		t.Errorf("window line %+v", w)
	}
	g := sc.Providers["gemini"].Faults
	if len(g) != 2 || g[1].Kind != FaultMidStream || g[1].Code != "bare" || g[1].End != 0 || g[1].Start != time.Minute {
		t.Errorf("gemini faults %+v", g)
	}
	if sc.Providers["gemini"].RPD != 100 {
		t.Errorf("gemini rpd %d", sc.Providers["gemini"].RPD)
	}
	// The README shows the same text.
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	ex, _ := os.ReadFile("testdata/example.ini")
	if !strings.Contains(string(readme), strings.TrimSpace(string(ex))) {
		t.Error("README.md does not show testdata/example.ini verbatim")
	}
}

func TestScenarioFileErrorsNameTheLine(t *testing.T) {
	cases := []struct {
		text, want string
	}{
		{"name = x\n[openai]\nrpm = lots\n", "bad.ini:3: rpm: \"lots\" is not a whole number"},
		{"# c\n\n[opneai]\n", "bad.ini:3: unknown provider section [opneai]"},
		{"[openai]\nrpmm = 3\n", "bad.ini:2: unknown key \"rpmm\" in [openai]"},
		{"rpm = 3\n", "bad.ini:1: \"rpm\" is a provider setting: put it under [*] or [provider]"},
		{"[*]\nfault = rate_limit\n", "bad.ini:2: fault:"},
		{"[*]\nfault = ratelimit 0.1\n", "bad.ini:2: fault: unknown fault kind \"ratelimit\""},
		{"[*]\nfault = rate_limit 1.5\n", "bad.ini:2: fault: probability \"1.5\""},
		{"[*]\n\nwindow = 10s-5s overload\n", "bad.ini:3: window: window \"10s-5s\" ends before it starts"},
		{"[*]\nwindow = 10s overload\n", "bad.ini:2: window: window \"10s\": want START-END"},
		{"[*]\nwindow = 0s-5s overload every=2s\n", "bad.ini:2: window: every=2s is shorter than the window"},
		{"[*]\nfault = overload 0.1 retry_after=soon\n", "bad.ini:2: fault: \"soon\" is not a duration"},
		{"[*]\nramp = 3\n", "bad.ini:2: ramp:"},
		{"[openai\n", "bad.ini:1: section header"},
		{"[*]\njust words\n", "bad.ini:2: \"just words\": want key = value"},
		{"primary = nobody\n", "bad.ini:1: primary: unknown provider"},
		{"[*]\nlimit_kind = leaky\n", "bad.ini:2: limit_kind:"},
		{"[anthropic]\nrpm = 60\n\nburst = some\n", "bad.ini:4: burst: \"some\" is not a whole number >= 0"},
		{"[*]\nburst = -2\n", "bad.ini:2: burst: \"-2\" is not a whole number >= 0"},
		{"[*]\nfault = failover-demo 0.5\n", "bad.ini:2: fault: failover-demo is a live action"},
	}
	for _, c := range cases {
		_, err := parseScenario("x", strings.NewReader(c.text), "bad.ini")
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %s...", c.text, err, c.want)
		}
	}
	// Through New, with the file's path.
	p := scenarioFile(t, "[openai]\nrpm = -1\n")
	if _, err := New(Options{ScenarioFile: p}); err == nil || !strings.Contains(err.Error(), "test.ini:2:") {
		t.Errorf("New: %v", err)
	}
	if _, err := New(Options{ScenarioFile: t.TempDir() + "/missing.ini"}); err == nil {
		t.Error("a missing file is no error")
	}
}

func TestScenarioFileSelectable(t *testing.T) {
	p := scenarioFile(t, "name = mine\n[*]\nfault = overload 1\n")
	s, _, _ := newTestSim(t, Options{ScenarioFile: p})
	if s.Scenario() != "mine" {
		t.Fatalf("scenario %q, want the file's", s.Scenario())
	}
	if r := call(t, s, "deepseek", true); r.status != 503 {
		t.Errorf("%d, want 503", r.status)
	}
	if err := s.SetScenario("calm"); err != nil {
		t.Fatal(err)
	}
	if r := call(t, s, "deepseek", true); r.status != 200 {
		t.Errorf("calm: %d", r.status)
	}
	if err := s.SetScenario("mine"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetScenario("other"); err == nil || !strings.Contains(err.Error(), "mine") {
		t.Errorf("unknown: %v", err)
	}
}

// The presets do what they say, on a fake clock.
func TestPresetBehaviour(t *testing.T) {
	t.Run("spend-cap", func(t *testing.T) {
		s, _, _ := newTestSim(t, Options{Scenario: "spend-cap"})
		var last raw
		for i := 0; i < 20; i++ {
			last = call(t, s, "openai", true)
		}
		if last.status != 429 || path(jsonOf(t, last.body), "error.code") != "insufficient_quota" {
			t.Errorf("%d %s", last.status, last.body)
		}
	})
	t.Run("daily-quota", func(t *testing.T) {
		s, _, _ := newTestSim(t, Options{Scenario: "daily-quota"})
		var last raw
		for i := 0; i < 4; i++ {
			last = call(t, s, "groq", true)
		}
		if msg, _ := path(jsonOf(t, last.body), "error.message").(string); last.status != 429 || !strings.Contains(msg, "requests per day (RPD)") {
			t.Errorf("%d %s", last.status, last.body)
		}
	})
	t.Run("failover-demo", func(t *testing.T) {
		// Degraded from the first request, so a one-shot send fails over.
		s, _, clk := newTestSim(t, Options{Scenario: "failover-demo"})
		if r := call(t, s, "openai", true); r.status != 503 && r.status != 429 {
			t.Fatalf("first request: %d, want the degraded primary's 503 or 429", r.status)
		}
		clk.Advance(6 * time.Second)
		for i := 0; i < 10; i++ {
			if r := call(t, s, "openai", true); r.status != 503 && r.status != 429 {
				t.Fatalf("degraded primary answered %d", r.status)
			}
			if r := call(t, s, "anthropic", true); r.status != 200 {
				t.Fatalf("fallback answered %d", r.status)
			}
		}
	})
	t.Run("mid-stream", func(t *testing.T) {
		s, _, _ := newTestSim(t, Options{Scenario: "mid-stream", Seed: 1})
		broken := 0
		for i := 0; i < 20; i++ {
			r := call(t, s, "anthropic", true)
			if r.status != 200 {
				t.Fatalf("%d", r.status)
			}
			if strings.Contains(string(r.body), "event: error") {
				broken++
			}
		}
		if broken < 3 || broken > 17 {
			t.Errorf("%d of 20 broken, want about half", broken)
		}
	})
	t.Run("busy", func(t *testing.T) {
		s, _, _ := newTestSim(t, Options{Scenario: "busy", Seed: 1})
		codes := map[int]int{}
		for i := 0; i < 30; i++ {
			codes[call(t, s, "openai", true).status]++
		}
		if codes[429] == 0 || codes[200] == 0 {
			t.Errorf("statuses %v, want both 200 and 429", codes)
		}
	})
}

// ScenarioLimits names every provider of the table, with the scenario's
// changes over the provider's own limits, and refuses an unknown scenario.
func TestScenarioLimits(t *testing.T) {
	calm, err := ScenarioLimits("calm")
	if err != nil {
		t.Fatal(err)
	}
	busy, err := ScenarioLimits("busy")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range providers {
		c, ok := calm[p.name]
		if !ok {
			t.Fatalf("calm: no limits for %s", p.name)
		}
		d := p.limits
		if c.RPM != d.RPM || c.TPM != d.TPM || c.ITPM != d.ITPM || c.OTPM != d.OTPM || c.RPD != d.RPD || c.TPD != d.TPD || c.Headers != p.limitHeaders {
			t.Errorf("calm %s: %+v, the row says %+v (headers %v)", p.name, c, d, p.limitHeaders)
		}
	}
	if busy["openai"].RPM != 20 || busy["openai"].TPM != 40000 || busy["bedrock"] != calm["bedrock"] {
		t.Errorf("busy: openai %+v, bedrock %+v (calm %+v)", busy["openai"], busy["bedrock"], calm["bedrock"])
	}
	if _, err := ScenarioLimits("no-such-scenario"); err == nil {
		t.Error("an unknown scenario gave no error")
	}
}
