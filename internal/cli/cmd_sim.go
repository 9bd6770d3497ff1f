package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// simProviderJSON is one provider in `sim --json`.
type simProviderJSON struct {
	Provider   string `json:"provider"`
	BaseURL    string `json:"base_url"`
	BaseURLEnv string `json:"base_url_env"`
	KeyEnv     string `json:"key_env"`
}

// runSim is `limitscope sim`: serve the simulated providers on loopback
// until ctx ends, printing each provider's base URL and the env lines that
// point tools at it; --list describes the scenarios and fault kinds.
func runSim(ctx context.Context, a *app, args []string) int {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	listen := fs.String("listen", "127.0.0.1:8787", "`address` to serve on (port 0: any free port)")
	scenario := fs.String("scenario", "", "scenario `name` (default calm, or the scenario file's own)")
	file := fs.String("scenario-file", "", "load a scenario `file` (see sim/README.md)")
	list := fs.Bool("list", false, "describe each scenario and fault kind, then exit")
	asJSON := fs.Bool("json", false, "print one JSON document on stdout instead of text")
	seed := fs.Int64("seed", 0, "seed for ids, answers and fault draws; a fixed seed reproduces a run (0: random, printed)")
	anyModel := fs.Bool("any-model", false, "accept any model name (otherwise a model outside the provider's catalogue, listed by --list, gets the provider's not-found answer)")
	answer := fs.String("answer", "", "answer `shape`: words, paragraph, paragraphs or code, optionally :SIZE (e.g. paragraph:1MB, code:4KB, words:500t)")
	fs.Usage = func() {
		fmt.Fprintln(a.stderr, "Usage: limitscope sim [--listen ADDR] [--scenario NAME] [--scenario-file F] [--seed N] [--answer SHAPE[:SIZE]] [--any-model] [--list] [--json]")
		fmt.Fprintln(a.stderr, "\nRuns every simulated provider on one loopback listener, under /{provider}/ with the real API's paths.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(a.stderr, "limitscope sim: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return exitUsage
	}

	if *list {
		return simList(a, *file, *scenario, *asJSON)
	}

	r, err := sim.Start(ctx, *listen, sim.Options{Scenario: *scenario, ScenarioFile: *file, Seed: *seed, Answer: *answer, AnyModel: *anyModel})
	if err != nil {
		// A bad scenario, scenario file or listen address: configuration.
		fmt.Fprintf(a.stderr, "limitscope sim: %v\n", err)
		return exitUsage
	}
	defer r.Close()

	var provs []simProviderJSON
	for _, p := range sim.Providers() {
		info, _ := stream.Provider(p)
		pj := simProviderJSON{Provider: p, BaseURL: r.BaseURL(p), BaseURLEnv: info.BaseURLEnv}
		if len(info.KeyEnv) > 0 {
			pj.KeyEnv = info.KeyEnv[0]
		}
		provs = append(provs, pj)
	}
	if *asJSON {
		if code := writeJSON(a, map[string]any{
			"url": r.URL, "scenario": r.Server.Scenario(), "admin_url": r.URL + "/_sim",
			"seed": r.Server.Seed(), "instance": r.Server.Instance(),
			"key": sim.FakeKey, "providers": provs, "env": r.Env(),
		}); code != exitOK {
			return code
		}
	} else {
		printSimBanner(a.stdout, r, provs)
		fmt.Fprintf(a.stderr, "limitscope sim: serving scenario %q on %s with seed %d until interrupted (Ctrl-C)\n", r.Server.Scenario(), r.URL, r.Server.Seed())
	}
	<-ctx.Done()
	if err := r.Close(); err != nil {
		fmt.Fprintf(a.stderr, "limitscope sim: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// simList is sim --list: the scenarios, the fault kinds and each
// provider's models (a scenario file's models lines added), as a table or
// one JSON document.
func simList(a *app, file, scenario string, asJSON bool) int {
	models := sim.Catalogue()
	if file != "" {
		// The scenario file's models lines add to the catalogue.
		s, err := sim.New(sim.Options{ScenarioFile: file, Scenario: scenario})
		if err != nil {
			fmt.Fprintf(a.stderr, "limitscope sim: %v\n", err)
			return exitUsage
		}
		models = s.Models()
	}
	if asJSON {
		return writeJSON(a, map[string]any{"scenarios": sim.Scenarios(), "faults": sim.Faults(), "models": models})
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tDESCRIPTION")
	for _, s := range sim.Scenarios() {
		fmt.Fprintf(tw, "%s\t%s\n", s.Name, s.Description)
	}
	fmt.Fprintln(tw, "\t")
	fmt.Fprintln(tw, "FAULT\tDESCRIPTION (inject with POST /_sim/fault, or schedule in a scenario file)")
	for _, f := range sim.Faults() {
		fmt.Fprintf(tw, "%s\t%s\n", f.Name, f.Description)
	}
	fmt.Fprintln(tw, "\t")
	fmt.Fprintln(tw, "PROVIDER\tMODELS (others get the provider's not-found answer: add them with a scenario file's models line, or run with --any-model)")
	for _, pm := range models {
		ids := make([]string, 0, len(pm.Models))
		for _, m := range pm.Models {
			ids = append(ids, m.ID)
		}
		fmt.Fprintf(tw, "%s\t%s\n", pm.Provider, strings.Join(ids, " "))
	}
	_ = tw.Flush()
	return exitOK
}

func printSimBanner(w io.Writer, r *sim.Running, provs []simProviderJSON) {
	fmt.Fprintf(w, "limitscope simulator on %s (scenario %s, seed %d; replay with --seed %d)\n\n", r.URL, r.Server.Scenario(), r.Server.Seed(), r.Server.Seed())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tBASE URL")
	for _, p := range provs {
		fmt.Fprintf(tw, "%s\t%s\n", p.Provider, p.BaseURL)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n# point tools at it (the keys are fixed and not secrets; Bedrock: the AWS SDKs sign with the simulated AWS keys):\n")
	for _, e := range r.Env() {
		fmt.Fprintf(w, "export %s\n", e)
	}
	fmt.Fprintf(w, "\n# admin: POST %s/_sim/scenario {\"name\":\"busy\"}, POST %s/_sim/fault {\"provider\":\"openai\",\"kind\":\"rate_limit\",\"retry_after\":\"20s\"}, GET %s/_sim/armed, POST %s/_sim/clear {}, GET %s/_sim/status\n", r.URL, r.URL, r.URL, r.URL, r.URL)
}
