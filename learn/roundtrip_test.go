package learn

import (
	"bytes"
	"errors"
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

// A synthetic account with known rates, an overload burst and known
// latencies is learnt back: the limits exactly, the background rates
// within 15%, the episode's start and end within 5 s, the latency medians
// within 10%.
func TestLearnsRatesEpisodesAndLatency(t *testing.T) {
	g := genSpec{
		target: stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}, n: 12000, step: 250 * time.Millisecond,
		bg:      map[stream.Class]float64{stream.ClassOverload: 0.04, stream.ClassRateLimit: 0.03, stream.ClassServer: 0.02},
		epClass: stream.ClassOverload, epFrom: 600 * time.Second, epTo: 720 * time.Second, epP: 0.8,
		ttftMedian: 420 * time.Millisecond, tpsMedian: 60, headers: true, seed: 1,
	}
	text := learnText(t, g.calls())
	sec := section(text, "openai")
	if sec["rpm"][0] != "500" || sec["tpm"][0] != "200000" {
		t.Errorf("limits rpm %v tpm %v, want 500 and 200000 (exact, from the headers)", sec["rpm"], sec["tpm"])
	}
	if got := sec["limit_kind"]; len(got) != 1 || got[0] != "bucket" {
		t.Errorf("limit_kind %v, want bucket (the resets fit a refilling bucket)", got)
	}
	// The file writes each rate as its share of what the rules before it
	// let through; undo that to compare with the account's rates.
	left := 1.0
	for _, c := range []struct {
		kind string
		want float64
	}{{sim.FaultOverload, 0.04}, {sim.FaultRateLimit, 0.03}, {sim.FaultServerError, 0.02}} {
		p := faultProb(t, sec, c.kind) * left
		left -= p
		if !within(p, c.want, 0.15) {
			t.Errorf("%s background rate %.4f, want %.3f within 15%%\n%s", c.kind, p, c.want, text)
		}
	}
	eps := windowsOf(t, sec, sim.FaultOverload)
	if len(eps) != 1 {
		t.Fatalf("overload episodes %v, want one\n%s", eps, text)
	}
	if d := (eps[0][0] - g.epFrom).Abs(); d > 5*time.Second {
		t.Errorf("episode starts at %v, want %v within 5s", eps[0][0], g.epFrom)
	}
	if d := (eps[0][1] - g.epTo).Abs(); d > 5*time.Second {
		t.Errorf("episode ends at %v, want %v within 5s", eps[0][1], g.epTo)
	}
	if w := windowsOf(t, sec, sim.FaultRateLimit); len(w) != 0 {
		t.Errorf("rate limits spread evenly became episodes: %v", w)
	}
	if !strings.Contains(strings.Join(sec["fault"], "\n"), "rate_limit 0.0") || !strings.Contains(text, "retry_after=2s") {
		t.Errorf("the rate limits' retry-after (2s) is not learnt:\n%s", text)
	}
	if got := distMedian(t, sec, "first_token_dist", true); !within(got, 0.42, 0.10) {
		t.Errorf("ttft median %.3fs, want 0.42s within 10%%", got)
	}
	if got := distMedian(t, sec, "tokens_per_second_dist", false); !within(got, 60, 0.10) {
		t.Errorf("tokens/s median %.1f, want 60 within 10%%", got)
	}
	// Nothing of the messages, ids or names.
	for _, leak := range []string{"SECRET", "req_", "call-secret", "org-", "proj_", "acct-"} {
		if strings.Contains(text, leak) {
			t.Errorf("the learnt file holds %q:\n%s", leak, text)
		}
	}
}

// The learnt file replays in the simulator: the same rates (within 15%)
// from a fixed seed, the episode where it was, and the same draws from the
// same seed.
func TestStatisticalReplay(t *testing.T) {
	g := genSpec{
		target: stream.Target{Provider: "openai", Model: "m"}, n: 8000, step: 250 * time.Millisecond,
		bg:      map[stream.Class]float64{stream.ClassOverload: 0.05, stream.ClassRateLimit: 0.03},
		epClass: stream.ClassOverload, epFrom: 300 * time.Second, epTo: 400 * time.Second, epP: 0.8,
		ttftMedian: 300 * time.Millisecond, tpsMedian: 80, headers: true, seed: 2,
	}
	text := learnText(t, g.calls())
	// Replay at the same pace.
	replay := simHistory(t, text, "openai", g.n, g.step)
	var ov, rl, epOv, epN, n int
	for _, c := range replay {
		a := c.AttemptsList[0]
		off := a.StartedAt.Sub(t0)
		if off >= g.epFrom && off < g.epTo {
			epN++
			if a.Class == stream.ClassOverload {
				epOv++
			}
			continue
		}
		n++
		switch a.Class {
		case stream.ClassOverload:
			ov++
		case stream.ClassRateLimit:
			rl++
		}
	}
	if got := float64(ov) / float64(n); !within(got, 0.05, 0.15) {
		t.Errorf("replayed overload rate %.4f outside the episode, want 0.05 within 15%%", got)
	}
	// A replayed 429 holds the account for its retry-after, and this
	// client does not wait: the requests in the hold are refused too.
	if got := float64(rl) / float64(n); got < 0.03*0.85 {
		t.Errorf("replayed rate-limit rate %.4f, want at least 0.03 within 15%%", got)
	}
	if got := float64(epOv) / float64(epN); !within(got, 0.8, 0.15) {
		t.Errorf("replayed overloads in the episode %.3f, want 0.8 within 15%%", got)
	}
	// Same seed, same run.
	again := simHistory(t, text, "openai", 2000, g.step)
	for i := range again {
		if again[i].AttemptsList[0].Class != replay[i].AttemptsList[0].Class {
			t.Fatalf("attempt %d: %s, then %s with the same seed", i, replay[i].AttemptsList[0].Class, again[i].AttemptsList[0].Class)
		}
	}
}

// One test per dialect: a simulated account with its own limits, recorded
// through the stream package's parsers, is learnt back with those limits
// exactly (OpenAI, Responses, Anthropic, Groq's per-day requests); a
// provider without limit headers gets an estimate, marked so.
func TestLimitsPerDialect(t *testing.T) {
	for _, c := range []struct {
		provider, section, scenario string
		want                        map[string]string
	}{
		{"openai", "openai", "[openai]\nrpm = 37\ntpm = 123456\n", map[string]string{"rpm": "37", "tpm": "123456"}},
		{"openai:responses", "openai", "[openai]\nrpm = 23\ntpm = 65432\n", map[string]string{"rpm": "23", "tpm": "65432"}},
		{"anthropic", "anthropic", "[anthropic]\nrpm = 41\nitpm = 20000\notpm = 5000\n", map[string]string{"rpm": "41", "itpm": "20000", "otpm": "5000", "tpm": ""}},
		{"groq", "groq", "[groq]\nrpm = 0\nrpd = 1000\ntpm = 60000\n", map[string]string{"rpd": "1000", "tpm": "60000"}},
	} {
		t.Run(c.provider, func(t *testing.T) {
			// One a second: more than the per-minute limits allow, so the
			// limits themselves refuse some.
			calls := simHistory(t, c.scenario, c.provider, 180, time.Second)
			refused := 0
			for _, call := range calls {
				if call.AttemptsList[0].Class == stream.ClassRateLimit {
					refused++
				}
			}
			text := learnText(t, calls)
			sec := section(text, c.section)
			for k, v := range c.want {
				if got := sec[k]; v == "" && len(got) != 0 {
					t.Errorf("%s = %v, want none\n%s", k, got, text)
				} else if v != "" && (len(got) != 1 || got[0] != v) {
					t.Errorf("%s = %v, want %s\n%s", k, got, v, text)
				}
			}
			if len(sec["estimated"]) != 0 {
				t.Errorf("limits from headers marked estimated:\n%s", text)
			}
			if c.provider != "groq" && refused == 0 {
				t.Fatal("the limits refused nothing: the test tests nothing")
			}
			// The limits explain the 429s: no fault rate is made of them.
			if p := faultProb(t, sec, sim.FaultRateLimit); p > 0 {
				t.Errorf("%d 429s from the limits became a fault rate %v\n%s", refused, p, text)
			}
		})
	}
	t.Run("gemini", func(t *testing.T) {
		calls := simHistory(t, "[gemini]\nrpm = 20\nrpd = 0\ntpm = 0\n", "gemini", 300, 2*time.Second)
		text := learnText(t, calls)
		sec := section(text, "gemini")
		if got := sec["estimated"]; len(got) != 1 || got[0] != "rpm" {
			t.Errorf("estimated = %v, want rpm\n%s", got, text)
		}
		if got := sec["rpm"]; len(got) != 1 || got[0] != "20" {
			t.Errorf("estimated rpm %v, want 20\n%s", got, text)
		}
		if p := faultProb(t, sec, sim.FaultRateLimit); p > 0 {
			t.Errorf("the 429s the estimate explains became a fault rate %v", p)
		}
	})
}

// A quota stop with its reset is learnt as a window that refuses every
// request until the reset, and the simulator names that reset.
func TestQuotaStopRoundTrip(t *testing.T) {
	g := genSpec{target: stream.Target{Provider: "openai", Model: "m"}, n: 400, step: time.Second, ttftMedian: 200 * time.Millisecond, tpsMedian: 50, headers: true, seed: 3}
	calls := g.calls()
	reset := t0.Add(300 * time.Second)
	for i := 100; i < 300; i += 10 { // a stopped client tries now and then
		c := &calls[i]
		a := &c.AttemptsList[0]
		a.Class, a.Status, a.Code, a.Message, a.Limits = stream.ClassQuota, 429, "insufficient_quota", "org-SECRET is out of credit", nil
		c.CooldownUntil, c.Outcome, c.Usage = reset, retry.OutcomeStopped, nil
	}
	text := learnText(t, calls)
	sec := section(text, "openai")
	w := windowsOf(t, sec, sim.FaultSpendCap)
	if len(w) != 1 || w[0][0] != 100*time.Second || w[0][1] != 300*time.Second {
		t.Fatalf("quota stop windows %v, want 1m40s-5m0s\n%s", w, text)
	}
	if !strings.Contains(sec["window"][0], "code=insufficient_quota") {
		t.Errorf("the stop's code is lost: %v", sec["window"])
	}
	replay := simHistory(t, text, "openai", 400, time.Second)
	for _, i := range []int{99, 100, 250, 299, 300} {
		a := replay[i].AttemptsList[0]
		stopped := i >= 100 && i < 300
		if (a.Class == stream.ClassQuota) != stopped {
			t.Errorf("replay at %ds: %s, stopped %v", i, a.Class, stopped)
		}
	}
}

// Bad input: nothing learnable is ErrNoAttempts.
func TestNothingToLearn(t *testing.T) {
	l := New(Source{Scope: "empty"})
	if err := l.Write(&bytes.Buffer{}, "x"); !errors.Is(err, ErrNoAttempts) {
		t.Errorf("empty: %v, want ErrNoAttempts", err)
	}
	l = New(Source{Scope: "elsewhere"})
	c := store.Call{Started: t0, AttemptsList: []retry.Attempt{{Target: stream.Target{Provider: "no-such-provider", Model: "m"}, StartedAt: t0, Class: stream.ClassOK}}}
	l.Add(&c)
	if err := l.Write(&bytes.Buffer{}, "x"); !errors.Is(err, ErrNoAttempts) {
		t.Errorf("an unknown provider only: %v, want ErrNoAttempts", err)
	}
}

// A learnt file loads as any scenario file (sim.New reads it).
func TestLearntFileLoads(t *testing.T) {
	g := genSpec{target: stream.Target{Provider: "anthropic", Model: "m"}, n: 500, step: time.Second, ttftMedian: time.Second, tpsMedian: 40, headers: true, seed: 4,
		bg: map[stream.Class]float64{stream.ClassOverload: 0.1}}
	text := learnText(t, g.calls())
	path := filepath.Join(t.TempDir(), "learnt.ini")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(sim.Options{ScenarioFile: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Scenario() != "learnt" {
		t.Errorf("scenario %q, want learnt", s.Scenario())
	}
	if code, _, _ := exchange(t, s, "anthropic"); code == 0 {
		t.Error("no answer")
	}
}

// Broken streams are told apart: an error event after HTTP 200 is a
// mid-stream error, a stream cut without its end a cut, a connection
// dropped before any response a reset; each learnt at its rate.
func TestLearnsBrokenStreams(t *testing.T) {
	tgt := stream.Target{Provider: "mistral", Model: "m"}
	var calls []store.Call
	for i := range 3000 {
		at := t0.Add(time.Duration(i) * time.Second)
		a := retry.Attempt{N: 1, Target: tgt, StartedAt: at, Class: stream.ClassOK, Status: 200, Duration: time.Second, TTFT: 100 * time.Millisecond}
		switch i % 20 {
		case 3:
			a.Class, a.MidStream = stream.ClassServer, true // 5%
		case 7, 11:
			a.Class, a.MidStream = stream.ClassConnection, true // 10%
		case 13:
			a.Class, a.Status = stream.ClassConnection, 0 // 5%
		}
		calls = append(calls, store.Call{Started: at, AttemptsList: []retry.Attempt{a}})
	}
	sec := section(learnText(t, calls), "mistral")
	left := 1.0
	for _, c := range []struct {
		kind string
		want float64
	}{{sim.FaultMidStream, 0.05}, {sim.FaultCut, 0.10}, {sim.FaultReset, 0.05}} {
		p := faultProb(t, sec, c.kind) * left
		left -= p
		if !within(p, c.want, 0.15) {
			t.Errorf("%s rate %.4f, want %.2f within 15%%: %v", c.kind, p, c.want, sec["fault"])
		}
	}
}
