package probe

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Lines renders the card for people, one finding a line (no colour; the
// caller sanitizes and styles).
func (c *Card) Lines() []string {
	where := "real provider"
	if c.Simulated {
		where = "simulator, scenario " + c.Scenario
	}
	out := []string{
		fmt.Sprintf("limits card  %s  (%s)  %s", c.Target, where, c.At.UTC().Format("2006-01-02 15:04:05 UTC")),
		fmt.Sprintf("budget       %d of %d requests sent in %s", c.Budget.Sent, c.Budget.Requests, (time.Duration(c.Elapsed) * time.Millisecond).Round(time.Millisecond)),
	}
	switch c.Limits.Source {
	case SourceHeaders:
		out = append(out, "limits       from the response headers (the provider's own numbers):")
		for _, w := range c.Limits.Windows {
			out = append(out, "  "+w.line())
		}
	case SourceEstimate:
		out = append(out, "limits       no limit headers: an ESTIMATE from the answers")
		if e := c.Estimate; e != nil {
			q, how := "about ", ""
			if e.LowerBound {
				q = "at least "
			} else if e.FromMessage {
				q, how = "", " (the 429 says so)"
			}
			out = append(out, fmt.Sprintf("  requests       %s%s a %s%s", q, group(int64(e.Requests)), e.Per, how), "  "+e.Basis)
		}
	default:
		out = append(out, "limits       no limit headers, and nothing answered to learn from")
	}
	cc := c.Concurrency
	switch cc.StoppedBy {
	case StopBudget:
		out = append(out, fmt.Sprintf("concurrency  %d parallel requests all answered; the budget stopped the ramp", cc.Reached))
	case StopQuota:
		if cc.Reached == 0 {
			out = append(out, "concurrency  not measured: the first request met a quota stop (a person must act; these are not the target's limits)")
		} else {
			out = append(out, fmt.Sprintf("concurrency  %d parallel requests all answered; at %d parallel, a quota stop came", cc.Reached, max(cc.Tried, 1)))
		}
	default:
		what := strings.ReplaceAll(cc.StoppedBy, "_", " ")
		if cc.Reached == 0 {
			out = append(out, "concurrency  not measured: the first request met a "+what)
		} else {
			out = append(out, fmt.Sprintf("concurrency  %d parallel requests all answered; at %d parallel, one met a %s", cc.Reached, max(cc.Tried, 1), what))
		}
	}
	l := c.Latency
	if l.TTFTMs != nil {
		s := fmt.Sprintf("latency      first token %s ms (min/median/max of %d)", l.TTFTMs.text(), l.Samples)
		if l.OutputTokensPerSecond != nil {
			s += fmt.Sprintf("; output %s tokens/s", l.OutputTokensPerSecond.text())
		}
		out = append(out, s)
	} else {
		out = append(out, "latency      no answer to time")
	}
	if fs := c.FirstStop; fs != nil {
		s := fmt.Sprintf("first stop   %s (HTTP %d %s) after %d answered", fs.Class, fs.Status, fs.Code, fs.AfterRequests)
		if fs.RetryAfterMs > 0 {
			s += fmt.Sprintf(", retry after %s", time.Duration(fs.RetryAfterMs)*time.Millisecond)
		}
		out = append(out, s)
	}
	return out
}

func (w Window) line() string {
	lim := "?"
	if w.Limit != nil {
		lim = group(*w.Limit)
	}
	s := fmt.Sprintf("%-14s %s a %s", strings.ReplaceAll(w.Kind, "_", " "), lim, w.Per)
	if w.Remaining != nil {
		s += fmt.Sprintf(", %s left", group(*w.Remaining))
	}
	if w.ResetInMs != nil {
		s += fmt.Sprintf(", full again in %s", time.Duration(*w.ResetInMs)*time.Millisecond)
	}
	return s + " (" + w.Semantics + ")"
}

func (s *Spread) text() string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	return f(s.Min) + "/" + f(s.Median) + "/" + f(s.Max)
}

// group writes n with thousands separators.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
