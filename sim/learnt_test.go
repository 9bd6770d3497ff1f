package sim

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// Scenario files written before the learnt keys read as they did: every
// preset and every file in testdata parses, and none gets a distribution
// or an estimate.
func TestOlderScenarioFilesStayValid(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.ini")
	if len(files) == 0 {
		t.Fatal("no testdata/*.ini: the test tests nothing")
	}
	check := func(name string, s *scenario) {
		for p, c := range s.Providers {
			if c.FirstTokenDist != nil || c.TPSDist != nil || c.Estimated != nil {
				t.Errorf("%s [%s]: learnt settings from an older file", name, p)
			}
		}
	}
	for _, f := range files {
		s, err := loadScenarioFile(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		check(f, s)
	}
	for _, p := range presets {
		s, err := preset(p.name)
		if err != nil {
			t.Fatal(err)
		}
		check(p.name, s)
	}
	// The same file with the new keys added parses to the same config
	// plus them.
	old := "[openai]\nrpm = 30\nfault = overload 0.1\n"
	a, err := parseScenario("x", strings.NewReader(old), "x")
	if err != nil {
		t.Fatal(err)
	}
	b, err := parseScenario("x", strings.NewReader(old+"first_token_dist = p50=400ms\nestimated = rpm\n"), "x")
	if err != nil {
		t.Fatal(err)
	}
	cb := *b.Providers["openai"]
	cb.FirstTokenDist, cb.Estimated = nil, nil
	if !reflect.DeepEqual(*a.Providers["openai"], cb) {
		t.Error("the learnt keys changed other settings")
	}
}

func TestParseDist(t *testing.T) {
	d, err := parseDist("p10=100ms p50=400ms p90=1s", durationValue)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		u    float64
		want time.Duration
	}{{0, 100 * time.Millisecond}, {0.1, 100 * time.Millisecond}, {0.3, 250 * time.Millisecond}, {0.5, 400 * time.Millisecond}, {0.99, time.Second}} {
		if got := time.Duration(d.draw(c.u)); (got - c.want).Abs() > time.Millisecond {
			t.Errorf("draw(%v) = %v, want %v", c.u, got, c.want)
		}
	}
	for _, bad := range []string{"", "50=1s", "p50", "p50=1s p40=2s", "p40=2s p50=1s", "p101=1s", "p50=-1s", "pX=1s", "p50=1s p50=2s"} {
		if _, err := parseDist(bad, durationValue); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if _, err := parseDist("p50=0", rateValue); err == nil {
		t.Error("a pace of 0 parsed")
	}
	if _, err := parseScenario("x", strings.NewReader("[openai]\nestimated = rpm, bogus\n"), "x.ini"); err == nil || !strings.HasPrefix(err.Error(), "x.ini:2:") {
		t.Errorf("estimated = bogus: %v", err)
	}
}

// Answers draw their time to first token and pace from the distributions
// with the seeded generator: the median is the file's within 10%, and the
// same seed draws the same values.
func TestDrawPaceFollowsTheDistribution(t *testing.T) {
	s, err := parseScenario("x", strings.NewReader("[openai]\nfirst_token_dist = p5=200ms p50=420ms p95=1.2s\ntokens_per_second_dist = p5=30 p50=60 p95=90\n"), "x")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.Providers["openai"]
	draw := func(seed uint64) ([]float64, []float64) {
		rng := rand.New(rand.NewPCG(seed, seed))
		var ft, tps []float64
		for range 5000 {
			f, p := drawPace(rng, cfg)
			ft, tps = append(ft, float64(f)), append(tps, p)
		}
		return ft, tps
	}
	ft, tps := draw(1)
	again, _ := draw(1)
	if !reflect.DeepEqual(ft, again) {
		t.Error("the same seed drew other values")
	}
	med := func(v []float64) float64 {
		c := append([]float64(nil), v...)
		sort.Float64s(c)
		return c[len(c)/2]
	}
	if m := med(ft); math.Abs(m-float64(420*time.Millisecond)) > 0.1*float64(420*time.Millisecond) {
		t.Errorf("ttft median %v, want 420ms within 10%%", time.Duration(m))
	}
	if m := med(tps); math.Abs(m-60) > 6 {
		t.Errorf("pace median %v, want 60 within 10%%", m)
	}
	// The simulator uses them unless its options set the pace.
	srv := &Server{opts: Options{}}
	p := srv.pacingFor(cfg, decision{firstToken: 500 * time.Millisecond, tps: 50})
	if p.firstToken != 500*time.Millisecond || p.perToken != 20*time.Millisecond {
		t.Errorf("pacing %+v, want the drawn 500ms and 50/s", p)
	}
	srv.opts.TokensPerSecond = 1e9
	if p := srv.pacingFor(cfg, decision{firstToken: 500 * time.Millisecond, tps: 50}); p.firstToken == 500*time.Millisecond {
		t.Error("a set pace was overridden by the draw")
	}
}

// Any distribution text parses or fails; a parsed one draws within its
// quantiles, never a panic.
func FuzzParseDist(f *testing.F) {
	for _, s := range []string{"p50=1s", "p1=1ms p50=2ms p99=3s", "p0=0 p100=1h", "p50=1s p50=1s", "p=1", "p5=1e9"} {
		f.Add(s, 0.5)
	}
	f.Fuzz(func(t *testing.T, text string, u float64) {
		d, err := parseDist(text, durationValue)
		if err != nil || strings.ContainsAny(text, "\n\r") {
			return
		}
		if u != u || u < 0 || u >= 1 {
			u = 0.5
		}
		v := d.draw(u)
		if v < d.v[0] || v > d.v[len(d.v)-1] {
			t.Fatalf("draw %v outside [%v, %v]", v, d.v[0], d.v[len(d.v)-1])
		}
		if _, err := parseScenario("f", strings.NewReader("[openai]\nfirst_token_dist = "+text+"\n"), "f.ini"); err != nil {
			t.Fatalf("parses alone, not in a file: %v", err)
		}
	})
}
