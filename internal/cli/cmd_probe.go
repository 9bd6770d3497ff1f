package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/limitscope/limitscope/calls"
	"github.com/limitscope/limitscope/internal/sanitize"
	"github.com/limitscope/limitscope/probe"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

const probeHelp = `Usage: limitscope probe [flags] provider[:api][@account]/model

Finds what the account allows, with a small stated budget of requests: the
limits its response headers document (with their reset semantics), an
estimate from its answers and 429s where it sends no headers (said as one),
a ramp of parallel requests (1, 2, 4, ...) that stops at the first 429,
overload or the budget, and the time to first token and output tokens per
second. The result, a limits card, is printed and stored in the history
(limitscope history cards compares a target's cards over time). Before a
real provider it says how many requests and about how many tokens it will
spend, and asks (--yes skips the question).

Flags:
`

// probeOpts are probe's flags.
type probeOpts struct {
	calls     calls.Flags
	budget    int
	maxTokens int
	yes       bool
	json      bool
}

func runProbe(ctx context.Context, a *app, args []string) int {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	o := &probeOpts{}
	o.calls.Register(fs)
	fs.IntVar(&o.budget, "budget", probe.DefaultBudget, fmt.Sprintf("requests at most (1 to %d)", probe.MaxBudget))
	fs.IntVar(&o.maxTokens, "max-tokens", probe.DefaultMaxTokens, "output tokens per request")
	fs.BoolVar(&o.yes, "yes", false, "do not ask before probing a real provider")
	fs.BoolVar(&o.json, "json", false, "print the card as one JSON document (docs/probe-card.schema.json)")
	pos, err := histParse(fs, args)
	if ok, code := flagResult(a, "limitscope probe", err, flagHelp(fs, probeHelp)); !ok {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(a.stderr, "limitscope probe: %v\n", err)
		return exitUsage
	}
	if len(pos) != 1 {
		return fail(errors.New("want one target, provider[@account]/model; see limitscope probe --help"))
	}
	if o.budget < 1 || o.budget > probe.MaxBudget || o.maxTokens < 1 {
		return fail(fmt.Errorf("--budget wants 1 to %d requests, --max-tokens at least 1", probe.MaxBudget))
	}
	if err := o.calls.Validate(); err != nil {
		return fail(err)
	}
	target, err := stream.ParseTarget(pos[0])
	if err != nil {
		return fail(err)
	}
	simulated := calls.SimRequested(a.getenv, o.calls.Sim.Sim)
	cs, err := calls.Open(ctx, a.env(), o.calls, simulated, "probe")
	if err != nil {
		return fail(err)
	}
	defer cs.Close(ctx, calls.DefaultCloseAllowance)
	if err := cs.Providers.Check([]stream.Target{target}); err != nil {
		return fail(err)
	}
	popts := probe.Options{Target: target, Budget: o.budget, MaxTokens: o.maxTokens, Do: cs.Doer.Do, Now: a.now,
		Simulated: cs.Providers.Simulated, Scenario: cs.Providers.Scenario}
	if !cs.Providers.Simulated && !o.yes {
		reqs, toks := probe.Plan(popts)
		fmt.Fprintf(a.stderr, "limitscope probe: this sends up to %d requests to %s, a real provider (about %d tokens, at most %d output tokens each). Proceed? [y/N] ",
			reqs, target, toks, o.maxTokens)
		line, _ := bufio.NewReader(a.stdin).ReadString('\n')
		if ans := strings.ToLower(strings.TrimSpace(line)); ans != "y" && ans != "yes" {
			fmt.Fprintln(a.stderr, "limitscope probe: not probed (--yes skips the question)")
			return exitUsage
		}
	}
	card, err := probe.Run(ctx, popts)
	if err != nil {
		fmt.Fprintf(a.stderr, "limitscope probe: %v\n", err)
		return exitFailed
	}
	if err := saveCard(cs.History.Path(), card); err != nil {
		fmt.Fprintf(a.stderr, "limitscope probe: the card was not stored in the history: %v\n", err)
	}
	if card.QuotaStopped() {
		fmt.Fprintf(a.stderr, "limitscope probe: the card was not stored in the history: %v\n", errStoppedCard)
	}
	if o.json {
		return writeJSON(a, card)
	}
	for _, l := range card.Lines() {
		fmt.Fprintln(a.stdout, sanitize.Text(l))
	}
	return exitOK
}

// errStoppedCard says why a probe that met a quota stop at once stores no
// card: it measured nothing, and `history cards` would read its zeros as a
// change of the account.
var errStoppedCard = errors.New("the target met a quota stop at once, which says nothing of its limits")

// saveCard stores card in the history at path ("" : not recorded); a card
// that met a quota stop at once (probe.Card.QuotaStopped) is not stored.
func saveCard(path string, card *probe.Card) error {
	if path == "" || card.QuotaStopped() {
		return nil
	}
	b, err := json.Marshal(card)
	if err != nil {
		return fmt.Errorf("encoding the card: %w", err)
	}
	return store.SaveCard(path, card.Target, card.At, b)
}

// consoleProbe is the console's p key (tui.Options.Probe and ProbePlan):
// a probe with the default budget on the command's calls, its card stored.
func consoleProbe(a *app, cs *calls.Calls) (func(context.Context, stream.Target) ([]string, error), func(stream.Target) string) {
	opts := func(t stream.Target) probe.Options {
		return probe.Options{Target: t, Do: cs.Doer.Do, Now: a.now, Simulated: cs.Providers.Simulated, Scenario: cs.Providers.Scenario}
	}
	run := func(ctx context.Context, t stream.Target) ([]string, error) {
		card, err := probe.Run(ctx, opts(t))
		if err != nil {
			return nil, err
		}
		lines := card.Lines()
		if err := saveCard(cs.History.Path(), card); err != nil {
			lines = append(lines, "(not stored in the history: "+err.Error()+")")
		} else if card.QuotaStopped() {
			lines = append(lines, "(not stored in the history: "+errStoppedCard.Error()+")")
		}
		return lines, nil
	}
	plan := func(t stream.Target) string {
		reqs, toks := probe.Plan(opts(t))
		return fmt.Sprintf("up to %d requests, about %d tokens", reqs, toks)
	}
	return run, plan
}

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
