package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"

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
