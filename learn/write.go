package learn

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// The quantile levels written for a latency distribution.
var distLevels = []float64{1, 5, 10, 25, 50, 75, 90, 95, 99}

// minLatencySamples is the fewest answers a distribution is learnt from.
const minLatencySamples = 20

// Write finishes learning and writes the scenario file: provenance
// comments, then a section per provider. The text is checked with the
// simulator's own parser before anything is written. ErrNoAttempts when
// nothing could be learnt.
func (l *Learner) Write(w io.Writer, name string) error {
	l.finish()
	provs := l.providers()
	if len(provs) == 0 {
		return ErrNoAttempts
	}
	var b bytes.Buffer
	l.writeHeader(&b, name, provs)
	for _, p := range provs {
		b.WriteByte('\n')
		l.writeProvider(&b, p)
	}
	if err := sim.CheckScenario(bytes.NewReader(b.Bytes()), "learnt scenario"); err != nil {
		return fmt.Errorf("learn: the learnt scenario does not parse (a bug): %w", err)
	}
	_, err := w.Write(b.Bytes())
	return err
}

func (l *Learner) writeHeader(b *bytes.Buffer, name string, provs []*provider) {
	span := l.last.Sub(l.first)
	fmt.Fprintf(b, "# A scenario learnt by `limitscope history scenario`%s from the history.\n", versionNote(l.src.Version))
	fmt.Fprintf(b, "# Source: %s: %d calls, %d attempts (%s).\n", l.src.Scope, l.calls, l.attempts, modeNote(l.modes))
	fmt.Fprintf(b, "# From %s to %s (%s); time 0s in the windows below is the first attempt.\n",
		l.first.UTC().Format(time.RFC3339), l.last.UTC().Format(time.RFC3339), roundDur(span))
	if l.trace {
		b.WriteString("# Trace: each provider answers its requests with the recorded outcomes, in order, shifted to now;\n")
		b.WriteString("# past its trace, the statistical rules below answer (drawn from the simulator's seed).\n")
	} else {
		b.WriteString("# Statistical: rates and distributions are drawn from the simulator's seed (sim --seed N repeats a run).\n")
	}
	if l.skipped > 0 {
		fmt.Fprintf(b, "# Not learnt: %d attempts on providers the simulator does not have.\n", l.skipped)
	}
	if l.ignored > 0 {
		fmt.Fprintf(b, "# Not learnt: %d attempts that failed on the caller's side (bad request, timeout, cancelled).\n", l.ignored)
	}
	b.WriteString("# Learnt per provider: its models share its section")
	if l.accounts {
		b.WriteString(", and so do its named accounts (their names are not written)")
	}
	b.WriteString(".\n")
	b.WriteString("# No prompt, answer, key, request id, account name or provider message is in this file.\n")
	fmt.Fprintf(b, "name = %s\n", name)
	names := make([]string, len(provs))
	for i, p := range provs {
		names[i] = p.name
	}
	fmt.Fprintf(b, "description = learnt from %s: %d attempts on %s over %s\n", oneLine(l.src.Scope), l.attempts, strings.Join(names, ", "), roundDur(span))
	if len(provs) > 0 {
		fmt.Fprintf(b, "primary = %s\n", busiest(provs).name)
	}
	if l.trace {
		b.WriteString("mode = trace\n")
	}
}

func versionNote(v string) string {
	if v == "" {
		return ""
	}
	return " (limitscope " + oneLine(v) + ")"
}

func modeNote(modes map[string]int) string {
	var parts []string
	keys := make([]string, 0, len(modes))
	for k := range modes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d calls %s", modes[k], k))
	}
	return strings.Join(parts, ", ")
}

func busiest(provs []*provider) *provider {
	best := provs[0]
	for _, p := range provs[1:] {
		if p.attempts > best.attempts {
			best = p
		}
	}
	return best
}

// offset is t as a duration since the first attempt.
func (l *Learner) offset(t time.Time) time.Duration {
	return max(0, t.Sub(l.first)).Truncate(100 * time.Millisecond)
}

func (l *Learner) writeProvider(b *bytes.Buffer, p *provider) {
	fmt.Fprintf(b, "[%s]\n", p.name)
	fmt.Fprintf(b, "# %d attempts, at most %d in a minute\n", p.attempts, p.peakRPM)
	var models []string
	for _, m := range p.models {
		if sim.NeedsModelLine(p.name, m) {
			models = append(models, m)
		}
	}
	if len(models) > 0 {
		// Without the line the simulator would answer these models not found.
		fmt.Fprintf(b, "# the models this history used that the simulator's catalogue lacks\nmodels = %s\n", strings.Join(models, " "))
	}
	est := l.writeLimits(b, p)

	// Quota stops first: a stop refuses every request until its reset.
	for _, s := range p.stops {
		end := ""
		note := "no reset was recorded: it lasts to the end"
		if !s.reset.IsZero() {
			end = fmtDur(l.offset(s.reset))
			note = "until its reset"
			if s.reset.Sub(s.start) < 100*time.Millisecond {
				end = fmtDur(l.offset(s.start) + 100*time.Millisecond)
			}
		}
		code := ""
		if s.code != "" {
			code = " code=" + s.code
		}
		fmt.Fprintf(b, "# quota stop: %d refusals from %s, %s\n", s.n, fmtDur(l.offset(s.start)), note)
		fmt.Fprintf(b, "window = %s-%s %s%s\n", fmtDur(l.offset(s.start)), end, s.kind, code)
	}
	if p.droppedStops > 0 {
		fmt.Fprintf(b, "# %d later quota stops not written (at most %d)\n", p.droppedStops, maxStops)
	}

	// Episodes, then the background rates. The simulator tries the rules
	// in order and the first that fires answers, so each background rate
	// is written as its share of what the rules before it let through.
	type bg struct {
		kind string
		rate float64
	}
	var bgs []bg
	for _, k := range faultKinds {
		d := p.det[k]
		if k == sim.FaultRateLimit && est > 0 {
			fmt.Fprintf(b, "# rate limits: %d 429s, all where the estimated limit explains them\n", p.counts[k])
			continue
		}
		opts := l.delayOpts(p, k)
		for _, e := range d.episodes {
			fmt.Fprintf(b, "# %s episode: %d of %d attempts failed so\n", k, e.hits, e.attempts)
			end := l.offset(e.end) + 100*time.Millisecond
			fmt.Fprintf(b, "window = %s-%s %s p=%s%s\n", fmtDur(l.offset(e.start)), fmtDur(end), k, fmtProb(float64(e.hits)/float64(e.attempts)), opts)
		}
		if d.dropped > 0 {
			fmt.Fprintf(b, "# %d later %s episodes counted as background (at most %d)\n", d.dropped, k, maxEpisodes)
		}
		if r := d.background(); r > 0 {
			bgs = append(bgs, bg{k, r})
		}
	}
	if p.limitCaused > 0 {
		fmt.Fprintf(b, "# %d 429s came when the headers showed a limit used up: the limits above replay them\n", p.limitCaused)
	}
	left := 1.0
	for _, g := range bgs {
		prob := g.rate
		if left > 0 {
			prob = math.Min(1, g.rate/left)
		}
		left -= g.rate
		fmt.Fprintf(b, "# %s: %.2f%% of the attempts outside episodes\n", g.kind, 100*g.rate)
		fmt.Fprintf(b, "fault = %s %s%s\n", g.kind, fmtProb(prob), l.delayOpts(p, g.kind))
	}
	l.writeLatency(b, p)
	if l.trace {
		l.writeTrace(b, p)
	}
}

// writeLimits writes the limits the headers showed (exact), or an estimate
// where none did; it returns the estimated requests per minute (0: none).
func (l *Learner) writeLimits(b *bytes.Buffer, p *provider) int {
	if !p.headers {
		est := p.estimateRPM()
		if est > 0 {
			fmt.Fprintf(b, "# no limit headers: the requests limit is estimated from where %d 429s began\n", len(p.at429))
			fmt.Fprintf(b, "rpm = %d\nestimated = rpm\n", est)
		} else {
			fmt.Fprintf(b, "# no limit headers and no limit reached (at most %d requests a minute): limits off\n", p.peakRPM)
			b.WriteString("rpm = 0\n")
		}
		b.WriteString("tpm = 0\nitpm = 0\notpm = 0\nrpd = 0\ntpd = 0\n")
		return est
	}
	b.WriteString("# limits from the headers (exact)\n")
	keys := [4][2]string{{"rpm", "rpd"}, {"tpm", "tpd"}, {"itpm", ""}, {"otpm", ""}}
	var missing []string
	for i, w := range p.win {
		key := keys[i][0]
		if w.perDay && keys[i][1] != "" {
			key = keys[i][1]
		}
		if !w.seen {
			missing = append(missing, keys[i][0])
			continue
		}
		if i == wTokens && (p.win[wInput].seen || p.win[wOutput].seen) {
			// With input and output windows the tokens window is the
			// tighter of the two, not a limit of its own.
			fmt.Fprintf(b, "# the tokens window (%d) follows the input and output windows: not a limit of its own\n", w.limit)
			continue
		}
		if w.lo != w.hi {
			fmt.Fprintf(b, "# %s: the headers showed %d to %d; the last is kept\n", key, w.lo, w.hi)
		}
		fmt.Fprintf(b, "%s = %d\n", key, w.limit)
	}
	if len(missing) > 0 {
		fmt.Fprintf(b, "# not in the headers (the simulator's defaults kept): %s\n", strings.Join(missing, ", "))
	}
	r := p.win[wRequests]
	switch n := r.bucketLike + r.windowLike; {
	case n < 5:
		b.WriteString("# how the requests limit resets: too few readings, the default kept\n")
	case float64(r.bucketLike) >= 0.8*float64(n):
		fmt.Fprintf(b, "# the requests limit refills evenly (%d of %d resets fit a bucket)\nlimit_kind = bucket\n", r.bucketLike, n)
	default:
		fmt.Fprintf(b, "# the requests limit comes back at once (%d of %d resets fit no bucket)\nlimit_kind = window\n", r.windowLike, n)
	}
	return 0
}

// delayOpts is " retry_after=D" when most failures of kind named a delay:
// their median.
func (l *Learner) delayOpts(p *provider, kind string) string {
	h := p.delays[kind]
	if h == nil || p.named[kind]*2 < p.counts[kind]-p.limitCausedOf(kind) {
		return ""
	}
	d := time.Duration(h.quantile(0.5) * float64(time.Second))
	if d >= time.Second {
		d = d.Round(100 * time.Millisecond) // the histogram's 1% is noise here
	} else {
		d = d.Round(time.Millisecond)
	}
	if d <= 0 {
		return ""
	}
	return " retry_after=" + fmtDur(d)
}

func (p *provider) limitCausedOf(kind string) int {
	if kind == sim.FaultRateLimit {
		return p.limitCaused
	}
	return 0
}

func (l *Learner) writeLatency(b *bytes.Buffer, p *provider) {
	if len(p.srcs) > 0 {
		var parts []string
		total := 0
		for _, n := range p.srcs {
			total += n
		}
		srcs := make([]stream.DelaySource, 0, len(p.srcs))
		for s := range p.srcs {
			srcs = append(srcs, s)
		}
		sort.Slice(srcs, func(i, j int) bool { return p.srcs[srcs[i]] > p.srcs[srcs[j]] })
		for _, s := range srcs {
			name := string(s)
			if name == "" {
				name = "none"
			}
			parts = append(parts, fmt.Sprintf("%s %d%%", name, 100*p.srcs[s]/total))
		}
		fmt.Fprintf(b, "# delays asked for came from: %s (the simulator sends its dialect's own)\n", strings.Join(parts, ", "))
	}
	if p.ttft.n >= minLatencySamples {
		fmt.Fprintf(b, "# time to first token over %d answers\nfirst_token_dist =", p.ttft.n)
		for _, q := range distLevels {
			d := time.Duration(p.ttft.quantile(q/100) * float64(time.Second)).Round(time.Millisecond)
			fmt.Fprintf(b, " p%g=%s", q, fmtDur(max(d, time.Millisecond)))
		}
		b.WriteByte('\n')
	} else {
		fmt.Fprintf(b, "# time to first token: %d answers, too few (the default kept)\n", p.ttft.n)
	}
	if p.tps.n >= minLatencySamples {
		fmt.Fprintf(b, "# output tokens per second over %d answers\ntokens_per_second_dist =", p.tps.n)
		for _, q := range distLevels {
			fmt.Fprintf(b, " p%g=%s", q, fmtRate(p.tps.quantile(q/100)))
		}
		b.WriteByte('\n')
	} else {
		fmt.Fprintf(b, "# output pace: %d answers with usage, too few (the default kept)\n", p.tps.n)
	}
}

func fmtRate(v float64) string {
	return fmt.Sprintf("%.4g", math.Max(v, 0.001))
}

func fmtProb(p float64) string {
	s := fmt.Sprintf("%.4f", math.Max(0, math.Min(1, p)))
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "" {
		return "0"
	}
	return s
}

// fmtDur writes d as the scenario format reads it.
func fmtDur(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	return d.String()
}

func roundDur(d time.Duration) string {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute).String()
	case d >= time.Minute:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}

// oneLine keeps a value on its comment line.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}
