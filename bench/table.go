package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Title is what a bench run prints first (two lines): what runs where, and
// the workload.
func Title(chain []string, simulated bool, scenario string, requests, concurrency int) string {
	where := "on the real provider"
	if simulated {
		where = "on the simulator"
		if scenario != "" {
			where += " (scenario " + scenario + ")"
		}
	}
	return fmt.Sprintf("bench: %s %s\n%d requests at concurrency %d per policy", strings.Join(chain, " -> "), where, requests, concurrency)
}

// Title is the report's title line.
func (r *Report) Title() string {
	return Title(r.Chain, r.Simulated, r.Scenario, r.Requests, r.Concurrency)
}

// WriteTable writes the report as a plain table, one row per policy, under
// its title, with the verdict last.
func (r *Report) WriteTable(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "%s\n\n", r.Title()); err != nil {
		return fmt.Errorf("writing the table: %w", err)
	}
	return r.WriteResults(w)
}

// WriteResults writes the table without its title (printed before the run),
// then a legend and the verdict line; it fits 100 columns.
func (r *Report) WriteResults(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintln(tw, "policy\tok\tstop\tgave up\thttp\trejected\twasted\tafter-q\telapsed\tgoodput\tratio\tp50\tp99")
	for _, p := range r.Policies {
		fmt.Fprintf(tw, "%s\t%d/%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%.2f/s\t%s\t%s\t%s\n",
			p.Policy, p.Completed, p.Requests, p.Stopped, p.GaveUp, p.HTTPRequests, p.Rejected, p.Wasted,
			p.RequestsAfterQuota, ms(p.ElapsedMs), p.GoodputPerS, optPct(p.GoodputRatio),
			ms(p.LatencyMs.P50), ms(p.LatencyMs.P99))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the table: %w", err)
	}
	limit := "the limit the headers named"
	if l := r.limit(); l != "" {
		limit += " (" + l + ")"
	}
	_, err := fmt.Fprintf(w, "\n"+
		"ok: calls answered; stop: calls stopped by a quota error; rejected: 429s received;\n"+
		"wasted: requests that produced no answer; after-q: requests sent to an account or model\n"+
		"after it answered with a quota error; goodput: answered calls over elapsed time (a policy\n"+
		"that gives up early finishes sooner); ratio: goodput over %s;\n"+
		"latency includes waits.\n\n%s\n", limit, r.Verdict())
	if err != nil {
		return fmt.Errorf("writing the table: %w", err)
	}
	return nil
}

// limit is the limit per second the policies' headers named, when they all
// agree ("" otherwise).
func (r *Report) limit() string {
	var v *float64
	for _, p := range r.Policies {
		if p.LimitPerS == nil {
			continue
		}
		if v != nil && math.Abs(*v-*p.LimitPerS) > 0.005 {
			return ""
		}
		v = p.LimitPerS
	}
	return optf(v, "%.2f/s")
}

// Verdict is the one line that says which policy won and by how much: most
// calls answered, then fewest requests wasted, then the lowest p99 latency.
func (r *Report) Verdict() string {
	if len(r.Policies) == 0 {
		return "No policy ran."
	}
	ranked := slices.Clone(r.Policies)
	slices.SortStableFunc(ranked, func(a, b PolicyResult) int {
		if a.Completed != b.Completed {
			return b.Completed - a.Completed
		}
		if a.Wasted != b.Wasted {
			return a.Wasted - b.Wasted
		}
		return int(a.LatencyMs.P99 - b.LatencyMs.P99)
	})
	w := ranked[0]
	if len(ranked) == 1 {
		return fmt.Sprintf("Only %s ran: %d/%d answered, %d wasted, p99 %s.", w.Policy, w.Completed, w.Requests, w.Wasted, ms(w.LatencyMs.P99))
	}
	s := ranked[1]
	var by string
	switch {
	case w.Completed > s.Completed:
		by = fmt.Sprintf("%d more calls answered than %s (%d vs %d)", w.Completed-s.Completed, s.Policy, w.Completed, s.Completed)
	case w.Wasted < s.Wasted:
		by = fmt.Sprintf("%d fewer wasted than %s (%d vs %d)", s.Wasted-w.Wasted, s.Policy, w.Wasted, s.Wasted)
	case w.LatencyMs.P99 < s.LatencyMs.P99:
		by = fmt.Sprintf("a lower p99 than %s", s.Policy)
	default:
		return fmt.Sprintf("A tie: %s and %s, %d/%d answered, %d wasted, p99 %s.", w.Policy, s.Policy, w.Completed, w.Requests, w.Wasted, ms(w.LatencyMs.P99))
	}
	return fmt.Sprintf("Winner: %s, by %s; p99 %s vs %s.", w.Policy, by, ms(w.LatencyMs.P99), ms(s.LatencyMs.P99))
}

func ms(v int64) string {
	d := time.Duration(v) * time.Millisecond
	if d < time.Second {
		return strconv.FormatInt(v, 10) + "ms"
	}
	if d < 100*time.Second {
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 0, 64) + "s"
}

func optf(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

func optPct(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v*100, 'f', 0, 64) + "%"
}
