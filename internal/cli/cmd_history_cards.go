package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/limitscope/limitscope/internal/sanitize"
	"github.com/limitscope/limitscope/probe"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

const historyCardsHelp = `Usage: limitscope history cards [TARGET] [--limit N] [--json]

The limits cards limitscope probe stored, oldest first: one line each, with
what changed since the target's previous card.

Flags:
`

// historyCards is `limitscope history cards`: the stored cards, a
// target's compared over time.
func historyCards(_ context.Context, a *app, args []string) int {
	var hf historyFlags
	fs := hf.flagSet("history cards", reviewSpec{})
	limit := fs.Int("limit", 50, "at most this many cards, the newest (0: all)")
	pos, err := histParse(fs, args)
	if ok, code := flagResult(a, "limitscope history cards", err, flagHelp(fs, historyCardsHelp)); !ok {
		return code
	}
	if len(pos) > 1 || *limit < 0 {
		return usageErr(a, "history cards", errors.New("usage: limitscope history cards [TARGET] [--limit N] [--json]"))
	}
	target := ""
	if len(pos) == 1 {
		t, err := stream.ParseTarget(pos[0])
		if err != nil {
			return usageErr(a, "history cards", err)
		}
		target = t.String()
	}
	path, err := hf.path(a)
	if err != nil {
		return histFail(a, err)
	}
	recs, err := store.Cards(path, target, *limit)
	if err != nil {
		return histFail(a, err)
	}
	cards := make([]*probe.Card, 0, len(recs))
	for _, r := range recs {
		var c probe.Card
		if json.Unmarshal(r.JSON, &c) == nil {
			cards = append(cards, &c)
		}
	}
	if hf.asJSON {
		return writeJSON(a, map[string]any{"db": path, "cards": cards})
	}
	if len(cards) == 0 {
		fmt.Fprintf(a.stderr, "no limits cards in %s (limitscope probe makes them)\n", path)
		return exitOK
	}
	prev := map[string]*probe.Card{}
	for _, c := range cards {
		line := c.At.In(time.Local).Format("2006-01-02 15:04") + "  " + c.Target + "  " + summary(c)
		if c.QuotaStopped() {
			// Stored by an older version: it measured nothing, so it is
			// neither a change nor the card the next one is compared with.
			fmt.Fprintln(a.stdout, sanitize.Text(line+"  [a quota stop: nothing measured]"))
			continue
		}
		if p := prev[c.Target]; p != nil {
			if ch := changes(p, c); ch != "" {
				line += "  [since " + p.At.In(time.Local).Format("01-02 15:04") + ": " + ch + "]"
			} else {
				line += "  [unchanged]"
			}
		}
		prev[c.Target] = c
		fmt.Fprintln(a.stdout, sanitize.Text(line))
	}
	return exitOK
}

// figures are a card's comparable numbers, by name.
func figures(c *probe.Card) map[string]string {
	f := map[string]string{}
	for _, w := range c.Limits.Windows {
		if w.Limit != nil {
			f[strings.ReplaceAll(w.Kind, "_", " ")+"/"+w.Per] = fmt.Sprint(*w.Limit)
		}
	}
	if e := c.Estimate; e != nil {
		v := fmt.Sprint(e.Requests)
		if e.LowerBound {
			v = "≥" + v
		} else if !e.FromMessage {
			v = "~" + v
		}
		f["requests/"+e.Per+" (estimate)"] = v
	}
	f["concurrency"] = fmt.Sprint(c.Concurrency.Reached)
	if c.Concurrency.StoppedBy == probe.StopBudget {
		f["concurrency"] = "≥" + f["concurrency"]
	}
	if t := c.Latency.TTFTMs; t != nil {
		f["ttft median ms"] = fmt.Sprint(t.Median)
	}
	return f
}

// summary is a card in one line.
func summary(c *probe.Card) string {
	f := figures(c)
	var parts []string
	for _, k := range sortedKeys(f) {
		parts = append(parts, k+" "+f[k])
	}
	where := "real"
	if c.Simulated {
		where = "sim:" + c.Scenario
	}
	return where + "  " + strings.Join(parts, ", ")
}

// changes says which figures differ between two cards of a target.
func changes(a, b *probe.Card) string {
	fa, fb := figures(a), figures(b)
	var out []string
	for _, k := range sortedKeys(fb) {
		if fa[k] != fb[k] && k != "ttft median ms" {
			out = append(out, fmt.Sprintf("%s %s→%s", k, orDash(fa[k]), fb[k]))
		}
	}
	for _, k := range sortedKeys(fa) {
		if _, ok := fb[k]; !ok {
			out = append(out, k+" gone")
		}
	}
	return strings.Join(out, ", ")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}
