package sim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// The scenario keys a learnt scenario (limitscope history scenario) adds to
// a provider section. Each is optional: a file without them is read as
// before.
//
//	first_token_dist = p5=310ms p50=420ms p95=900ms   the time to first token, drawn per answer
//	tokens_per_second_dist = p5=40 p50=60 p95=85      the output pace, drawn per answer
//	estimated = rpm                                   limits guessed from where 429s began (informational)

// dist is a distribution given by a few of its quantiles: a draw picks a
// uniform u and interpolates linearly between the neighbouring quantiles
// (below the first or above the last: that quantile's value). Its median
// is exact when p50 is given.
type dist struct {
	p []float64 // quantile levels, 0..1, strictly increasing
	v []float64 // their values, non-decreasing
}

// maxDistPoints bounds a distribution line.
const maxDistPoints = 101

// parseDist parses "pNN=VALUE ..." where VALUE is read by val.
func parseDist(value string, val func(string) (float64, error)) (*dist, error) {
	f := strings.Fields(value)
	if len(f) == 0 {
		return nil, fmt.Errorf("%q: want quantiles like p10=300ms p50=420ms p90=800ms", value)
	}
	if len(f) > maxDistPoints {
		return nil, fmt.Errorf("%d quantiles: at most %d", len(f), maxDistPoints)
	}
	d := &dist{}
	for _, q := range f {
		k, v, ok := strings.Cut(q, "=")
		if !ok || len(k) < 2 || (k[0] != 'p' && k[0] != 'P') {
			return nil, fmt.Errorf("quantile %q: want pNN=VALUE, e.g. p50=420ms", q)
		}
		lvl, err := strconv.ParseFloat(k[1:], 64)
		if err != nil || lvl < 0 || lvl > 100 || lvl != lvl {
			return nil, fmt.Errorf("quantile %q: the level must be 0 to 100", q)
		}
		x, err := val(v)
		if err != nil {
			return nil, fmt.Errorf("quantile %q: %v", q, err)
		}
		lvl /= 100
		if n := len(d.p); n > 0 && (lvl <= d.p[n-1] || x < d.v[n-1]) {
			return nil, fmt.Errorf("quantile %q: levels must increase and values must not decrease", q)
		}
		d.p, d.v = append(d.p, lvl), append(d.v, x)
	}
	return d, nil
}

// draw returns the value at a uniform draw u in [0, 1).
func (d *dist) draw(u float64) float64 {
	if u <= d.p[0] {
		return d.v[0]
	}
	for i := 1; i < len(d.p); i++ {
		if u <= d.p[i] {
			f := (u - d.p[i-1]) / (d.p[i] - d.p[i-1])
			return d.v[i-1] + f*(d.v[i]-d.v[i-1])
		}
	}
	return d.v[len(d.v)-1]
}

func durationValue(s string) (float64, error) {
	d, err := parseDuration(s)
	return float64(d), err
}

func rateValue(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || f != f || f > 1e9 {
		return 0, fmt.Errorf("%q is not a number above 0", s)
	}
	return f, nil
}

// estimatedKeys are the limits `estimated =` may name.
var estimatedKeys = []string{"rpm", "tpm", "itpm", "otpm", "rpd", "tpd"}

// setLearnt applies the keys a learnt scenario adds; known is false for
// any other key.
func (c *providerConfig) setLearnt(key, value string) (known bool, err error) {
	switch key {
	case "first_token_dist":
		d, err := parseDist(value, durationValue)
		if err != nil {
			return true, err
		}
		c.FirstTokenDist = d
	case "tokens_per_second_dist":
		d, err := parseDist(value, rateValue)
		if err != nil {
			return true, err
		}
		c.TPSDist = d
	case "trace":
		return true, c.addTraceStep(value)
	case "estimated":
		c.Estimated = nil
		for _, k := range strings.FieldsFunc(value, func(r rune) bool { return r == ',' || r == ' ' }) {
			ok := false
			for _, e := range estimatedKeys {
				ok = ok || e == k
			}
			if !ok {
				return true, fmt.Errorf("%q is not a limit (known: %s)", k, strings.Join(estimatedKeys, ", "))
			}
			c.Estimated = append(c.Estimated, k)
		}
	default:
		return false, nil
	}
	return true, nil
}

// drawPace draws an answer's time to first token and pace from the
// provider's distributions (zero: none, the fixed values apply). Called
// with s.mu held, from the seeded generator, so a fixed seed repeats them.
func drawPace(rng *rand.Rand, cfg *providerConfig) (first time.Duration, tps float64) {
	if cfg.FirstTokenDist != nil {
		first = max(0, time.Duration(cfg.FirstTokenDist.draw(rng.Float64())))
	}
	if cfg.TPSDist != nil {
		tps = cfg.TPSDist.draw(rng.Float64())
	}
	return first, tps
}

// pacingFor is the pacing of one answer: the provider's, with the drawn
// values of a learnt distribution unless the simulator's options set the
// pace (tests, --tokens-per-second).
func (s *Server) pacingFor(cfg *providerConfig, d decision) pacing {
	p := s.pacing(cfg)
	if s.opts.TokensPerSecond > 0 {
		return p
	}
	if d.firstToken > 0 && s.opts.FirstTokenDelay <= 0 {
		p.firstToken = d.firstToken
	}
	if d.tps > 0 {
		p.perToken = time.Duration(float64(time.Second) / d.tps)
	}
	return p
}

// windowReset is when a scheduled quota stop ends: the end of its window
// (a learnt stop names its reset so), or zero (the budget's period).
func (s *Server) windowReset(r faultRule, elapsed time.Duration) time.Time {
	if !r.HasWindow || r.End == 0 || r.Every > 0 || (r.Kind != FaultSpendCap && r.Kind != FaultDailyQuota) {
		return time.Time{}
	}
	return s.clock.Now().Add(r.End - elapsed)
}

// ScenarioSection is the scenario-file section that sets a target's
// provider ("openai:responses" shares "openai"'s limits); false for a
// provider the simulator does not have.
func ScenarioSection(provider string) (string, bool) {
	name := accountName(provider)
	if !knownProvider(name) {
		return "", false
	}
	return name, true
}

// CheckScenario parses a scenario file's text as the simulator would and
// returns its first error, naming source and the line.
func CheckScenario(r io.Reader, source string) error {
	_, err := parseScenario("check", r, source)
	return err
}
