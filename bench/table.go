package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable writes the report as a plain table, one row per policy.
func (r *Report) WriteTable(w io.Writer) error {
	where := "on the real provider"
	if r.Simulated {
		where = "on the simulator"
		if r.Scenario != "" {
			where += " (scenario " + r.Scenario + ")"
		}
	}
	if _, err := fmt.Fprintf(w, "bench: %s %s, %d requests at concurrency %d per policy\n\n",
		strings.Join(r.Chain, " -> "), where, r.Requests, r.Concurrency); err != nil {
		return fmt.Errorf("writing the table: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "policy\tcompleted\tstopped\tgave up\thttp\trejected\twasted\tafter quota\telapsed\tgoodput/s\tlimit/s\tratio\tp50\tp95\tp99\t")
	for _, p := range r.Policies {
		fmt.Fprintf(tw, "%s\t%d/%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%.2f\t%s\t%s\t%s\t%s\t%s\t\n",
			p.Policy, p.Completed, p.Requests, p.Stopped, p.GaveUp, p.HTTPRequests, p.Rejected, p.Wasted,
			p.RequestsAfterQuota, ms(p.ElapsedMs), p.GoodputPerS, optf(p.LimitPerS, "%.2f"), optPct(p.GoodputRatio),
			ms(p.LatencyMs.P50), ms(p.LatencyMs.P95), ms(p.LatencyMs.P99))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the table: %w", err)
	}
	_, err := fmt.Fprintln(w, "\nrejected: 429s received; wasted: requests that produced no answer; after quota: requests sent to an"+
		"\naccount or model after it answered with a quota error; goodput: completed calls over elapsed time (a policy"+
		"\nthat gives up early finishes sooner); ratio: goodput over the limit the headers named; latency includes waits.")
	if err != nil {
		return fmt.Errorf("writing the table: %w", err)
	}
	return nil
}

func ms(v int64) string {
	d := time.Duration(v) * time.Millisecond
	if d < time.Second {
		return strconv.FormatInt(v, 10) + "ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
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
