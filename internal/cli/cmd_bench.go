package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/limitscope/limitscope/bench"
	"github.com/limitscope/limitscope/fleet"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// benchScenario is the simulator scenario bench runs on by default: "bench"
// (a per-minute limit with a small burst and short fast answers) when the
// simulator has it, else "calm".
func benchScenario() string {
	if knownScenario("bench") {
		return "bench"
	}
	return "calm"
}

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// benchOpts are bench's flags.
type benchOpts struct {
	model, policyList, scenario, scenFile, prompt, stateURL string
	fallbacks                                               listFlag
	requests, concurrency, maxTokens                        int
	seed                                                    int64
	long, useSim, serial, asJSON, allowReal                 bool
	set                                                     map[string]bool // the flags given
}

// runBench is `limitscope bench`: the same workload through each retry
// policy in turn, a table (or one JSON document) of what each did on the wire.
func runBench(ctx context.Context, a *app, args []string) int {
	o, code, ok := parseBenchFlags(a, args)
	if !ok {
		return code
	}
	usageErr := func(err error) int {
		fmt.Fprintf(a.stderr, "limitscope bench: %v\n", err)
		return exitUsage
	}
	cfg, err := o.config()
	if err != nil {
		return usageErr(err)
	}
	simulated := a.simRequested(sessionFlags{sim: o.useSim})
	if url := cmp.Or(o.stateURL, a.getenv("LIMITSCOPE_REDIS_URL")); url != "" {
		fl, err := fleet.Open(ctx, url, fleet.Options{
			Warn:    func(msg string) { fmt.Fprintf(a.stderr, "limitscope bench: %s\n", msg) },
			Getenv:  a.getenv,
			Command: "bench",
		})
		if err != nil {
			return usageErr(err)
		}
		defer fl.Close()
		cfg.Shared = fleet.Shared(fl)
	}
	if err := cfg.Validate(); err != nil {
		return usageErr(errors.New(strings.TrimPrefix(err.Error(), "bench: ")))
	}
	var env bench.Env
	if simulated {
		env, err = o.simEnv()
	} else {
		env, err = o.realEnv(a, &cfg)
	}
	if err != nil {
		return usageErr(err)
	}
	a.benchProgress(&cfg, env)
	if !o.asJSON {
		// The title first, so a person knows at once what is running.
		scen := ""
		if simulated {
			scen = o.scenario
		}
		names := make([]string, len(cfg.Chain))
		for i, t := range cfg.Chain {
			names[i] = t.String()
		}
		fmt.Fprintf(a.stdout, "%s\n\n", bench.Title(names, simulated, scen, cfg.Requests, cfg.Concurrency))
	}
	return o.run(ctx, a, cfg, env, simulated)
}

// parseBenchFlags parses bench's command line. ok is false when the run
// ends at once, with code.
func parseBenchFlags(a *app, args []string) (o *benchOpts, code int, ok bool) {
	fs := flag.NewFlagSet("limitscope bench", flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	o = &benchOpts{}
	fs.StringVar(&o.model, "model", "", "the target, provider/model (required)")
	fs.IntVar(&o.requests, "requests", benchRequests, "calls per policy (the default run takes about 45 s on the simulator, its policies at once)")
	fs.BoolVar(&o.long, "long", false, fmt.Sprintf("the long workload: %d calls per policy (about 5 minutes on the simulator's openai)", benchLongRequests))
	fs.IntVar(&o.concurrency, "concurrency", 16, "workers per policy")
	fs.StringVar(&o.policyList, "policy", strings.Join(bench.Policies(), ","), "policies to run, in order, comma-separated; limitscope:SETTING=VALUE[:...] runs limitscope with failover-wait, max-wait, deadline, tries, attempts or order (reverse, or 2,1) changed")
	fs.BoolVar(&o.useSim, "sim", false, "run on the built-in simulator, a fresh one per policy, all policies at once (also LIMITSCOPE_SIM=1)")
	fs.BoolVar(&o.serial, "serial", false, "with --sim: run the policies one after the other, not at once (each still on its own simulator)")
	fs.StringVar(&o.scenario, "scenario", benchScenario(), "the simulator's scenario (with --sim)")
	fs.StringVar(&o.scenFile, "scenario-file", "", "a simulator scenario file (with --sim; see sim/README.md)")
	fs.Int64Var(&o.seed, "seed", 1, "the simulator's seed (with --sim)")
	fs.StringVar(&o.prompt, "prompt", "Say hello in five words.", "the prompt every call sends")
	fs.IntVar(&o.maxTokens, "max-tokens", 64, "max tokens per answer")
	fs.BoolVar(&o.asJSON, "json", false, `print one JSON document {"policies":[...]} on stdout`)
	fs.StringVar(&o.stateURL, "state", "", "share the limitscope policy's pacing and cooldowns with other processes through Redis: redis://HOST:PORT/DB (also LIMITSCOPE_REDIS_URL)")
	fs.BoolVar(&o.allowReal, "allow-real-comparisons", false, "run the comparison policies on a real account too (they spend money and ignore quota errors)")
	fs.Var(&o.fallbacks, "fallback", "a fallback target, provider/model (repeatable; only the limitscope policy fails over)")
	fs.Usage = func() {
		fmt.Fprintln(a.stderr, "Usage: limitscope bench --model provider/model [--fallback provider/model]... --requests N --concurrency C\n"+
			"         [--policy limitscope,sdk-default,naive,nested] [--sim [--scenario S]] [--prompt TEXT] [--json]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, exitOK, false
		}
		return nil, exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(a.stderr, "limitscope bench: unexpected argument %q\n", fs.Arg(0))
		return nil, exitUsage, false
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	return o, 0, true
}

// config is the run's configuration: the chain, the workload and the
// policies, checked.
func (o *benchOpts) config() (bench.Config, error) {
	if o.model == "" {
		return bench.Config{}, errors.New("--model is required, e.g. --model openai/gpt-5.4-mini")
	}
	var chain []stream.Target
	for _, s := range append([]string{o.model}, o.fallbacks...) {
		t, err := stream.ParseTarget(s)
		if err != nil {
			return bench.Config{}, err
		}
		chain = append(chain, t)
	}
	if o.long && !o.set["requests"] {
		o.requests = benchLongRequests
	}
	var policies []string
	for _, p := range strings.Split(o.policyList, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !bench.ValidPolicy(p) {
			return bench.Config{}, fmt.Errorf("unknown policy %q (known: %s, or limitscope:SETTING=VALUE... to vary its settings)", p, strings.Join(bench.Policies(), ", "))
		}
		policies = append(policies, p)
	}
	if len(policies) == 0 {
		return bench.Config{}, fmt.Errorf("--policy names no policy (known: %s)", strings.Join(bench.Policies(), ", "))
	}
	if o.maxTokens < 1 {
		return bench.Config{}, fmt.Errorf("--max-tokens must be at least 1, got %d", o.maxTokens)
	}
	return bench.Config{
		Chain:       chain,
		Requests:    o.requests,
		Concurrency: o.concurrency,
		Prompt:      o.prompt,
		MaxTokens:   o.maxTokens,
		Policies:    policies,
	}, nil
}

// simEnv is the simulator to run on; its scenario is checked now, so a typo
// is a usage error, not a failed run.
func (o *benchOpts) simEnv() (bench.Env, error) {
	opts := sim.Options{Scenario: o.scenario, Seed: o.seed, ScenarioFile: o.scenFile}
	if o.scenFile != "" && !o.set["scenario"] {
		opts.Scenario = "" // the file's own scenario
	}
	probe, err := sim.New(opts)
	if err != nil {
		return nil, err
	}
	o.scenario = probe.Scenario()
	probe.Close()
	return &bench.SimEnv{Options: opts, AtOnce: !o.serial}, nil
}

// realEnv is the real providers of cfg's chain. The comparison policies
// run there only with --allow-real-comparisons: given by name without it,
// they are a usage error; by default, only the limitscope policy runs.
func (o *benchOpts) realEnv(a *app, cfg *bench.Config) (bench.Env, error) {
	eps := map[string]stream.Endpoint{}
	for _, t := range cfg.Chain {
		ep, err := stream.Resolve(t.Provider, a.getenv)
		if err != nil {
			// A missing key names its variable and --sim.
			return nil, err
		}
		eps[t.Provider] = ep
	}
	var comparisons []string
	for _, p := range cfg.Policies {
		if bench.IsComparison(p) {
			comparisons = append(comparisons, p)
		}
	}
	switch {
	case len(comparisons) > 0 && !o.allowReal && o.set["policy"]:
		return nil, fmt.Errorf("the comparison policies (%s) spend money and keep sending after quota errors: on a real account "+
			"they run only with --allow-real-comparisons; or use --sim", strings.Join(comparisons, ", "))
	case len(comparisons) > 0 && !o.allowReal:
		fmt.Fprintln(a.stderr, "limitscope bench: on a real account only the limitscope policy runs "+
			"(--allow-real-comparisons runs the others too, at your expense; --sim compares them on the simulator)")
		cfg.Policies = []string{bench.PolicyLimitscope}
	case len(comparisons) > 0:
		fmt.Fprintf(a.stderr, "limitscope bench: WARNING: %s will send up to %d real requests and keep sending past rate limits "+
			"and spend caps; this costs money\n", strings.Join(comparisons, ", "), o.requests*9*len(comparisons))
	}
	return &bench.RealEnv{
		Doer: &stream.Router{Client: &stream.Client{}, Endpoints: eps},
		OnWait: func(policy string, d time.Duration) {
			fmt.Fprintf(a.stderr, "limitscope bench: waiting %s for the limits to recover before %s\n", d.Round(time.Second), policy)
		},
	}, nil
}

// benchProgress gives cfg a progress display on a terminal's stderr: one
// line for the policies that run at once, else one per policy.
func (a *app) benchProgress(cfg *bench.Config, env bench.Env) {
	f, ok := a.stderr.(*os.File)
	if !ok || !isTerminal(f) || a.getenv("TERM") == "dumb" {
		return
	}
	ps := cfg.Policies
	if len(ps) == 0 {
		ps = bench.Policies()
	}
	if pe, ok := env.(bench.ParallelEnv); ok && pe.Parallel() {
		cfg.Progress = newParallelProgress(a.stderr, ps, time.Now)
	} else {
		cfg.Progress = newProgress(a.stderr, ps, time.Now)
	}
}

// run runs the policies and writes their report; a cancelled run writes
// what it has.
func (o *benchOpts) run(ctx context.Context, a *app, cfg bench.Config, env bench.Env, simulated bool) int {
	rep, err := bench.Run(ctx, cfg, env)
	if rep != nil {
		rep.Simulated = simulated
		if simulated {
			rep.Scenario = o.scenario
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(a.stderr, "limitscope bench: cancelled")
			if rep != nil && len(rep.Policies) > 0 {
				_ = writeBenchReport(a.stdout, rep, o.asJSON)
			}
			return exitCancelled
		}
		fmt.Fprintf(a.stderr, "limitscope bench: %v\n", strings.TrimPrefix(err.Error(), "bench: "))
		return exitFailed
	}
	if err := writeBenchReport(a.stdout, rep, o.asJSON); err != nil {
		fmt.Fprintf(a.stderr, "limitscope bench: %v\n", err)
		return exitFailed
	}
	return exitOK
}

func writeBenchReport(w io.Writer, rep *bench.Report, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
		return nil
	}
	return rep.WriteResults(w) // the title was printed before the run
}

func knownScenario(name string) bool {
	for _, s := range sim.Scenarios() {
		if s.Name == name {
			return true
		}
	}
	return false
}

// The default and the long workload of bench, in calls per policy: the
// default finishes in about 45 s on the simulator, its policies at once
// (openai's nested policy takes the longest), with the same conclusions as
// the long one.
const (
	benchRequests     = 30
	benchLongRequests = 120
)

// progressBar returns a Progress callback drawing one line per policy on w
// (a terminal): the policy, a bar and the count, redrawn in place.
func progressBar(w io.Writer) func(policy string, done, total int) {
	return newProgress(w, nil, nil)
}

// newProgress is progressBar with "policy k of n" (policies: the run's, in
// order) and an ETA for the whole run (from now: the time per call so far,
// and the finished policies' durations), when policies and now are set.
func newProgress(w io.Writer, policies []string, now func() time.Time) func(policy string, done, total int) {
	var mu sync.Mutex
	lastPct := -1
	lastPolicy := ""
	var start, policyStart time.Time
	var finished []time.Duration
	if now != nil {
		start = now()
		policyStart = start
	}
	return func(policy string, done, total int) {
		mu.Lock()
		defer mu.Unlock()
		if policy != lastPolicy {
			lastPolicy, lastPct = policy, -1
		}
		pct := 100
		if total > 0 {
			pct = done * 100 / total
		}
		if pct == lastPct && done != total {
			return
		}
		lastPct = pct
		head := fmt.Sprintf("%-12s", policy)
		if k := slices.Index(policies, policy); k >= 0 {
			head = fmt.Sprintf("policy %d of %d  %-12s", k+1, len(policies), policy)
			if now != nil && done > 0 {
				t := now()
				elapsed := t.Sub(policyStart)
				est := time.Duration(float64(elapsed) / float64(done) * float64(total))
				per := est
				if len(finished) > 0 {
					var sum time.Duration
					for _, d := range finished {
						sum += d
					}
					per = (sum + est) / time.Duration(len(finished)+1)
				}
				left := est - elapsed + time.Duration(len(policies)-k-1)*per
				if done == total {
					finished = append(finished, elapsed)
					policyStart = t
					left = time.Duration(len(policies)-k-1) * per
				}
				head += fmt.Sprintf(" ETA %s ", fmtETA(left))
			}
		}
		const width = 30
		filled := width * pct / 100
		fmt.Fprintf(w, "\r%s %s%s %3d%% %d/%d", head, strings.Repeat("█", filled), strings.Repeat("░", width-filled), pct, done, total)
		if done == total {
			fmt.Fprintln(w)
		}
	}
}

// newParallelProgress draws the progress of policies that run at once on
// one line, redrawn in place: each policy's share done (a check mark when
// it is), and the time since the run began; a newline when all are done.
func newParallelProgress(w io.Writer, policies []string, now func() time.Time) func(policy string, done, total int) {
	var mu sync.Mutex
	start := now()
	pct := make(map[string]int, len(policies))
	left := len(policies)
	return func(policy string, done, total int) {
		mu.Lock()
		defer mu.Unlock()
		p := 100
		if total > 0 {
			p = done * 100 / total
		}
		old, seen := pct[policy]
		if seen && old == p {
			return
		}
		pct[policy] = p
		if done == total && (!seen || old < 100) {
			left--
		}
		var b strings.Builder
		b.WriteString("\r")
		for i, name := range policies {
			if i > 0 {
				b.WriteString(" · ")
			}
			switch v, ok := pct[name]; {
			case !ok:
				fmt.Fprintf(&b, "%s -", name)
			case v == 100:
				fmt.Fprintf(&b, "%s ✓", name)
			default:
				fmt.Fprintf(&b, "%s %d%%", name, v)
			}
		}
		fmt.Fprintf(&b, "   %s\x1b[K", fmtETA(now().Sub(start)))
		if left == 0 {
			b.WriteString("\n")
		}
		_, _ = io.WriteString(w, b.String())
	}
}

// fmtETA prints a time left as m:ss.
func fmtETA(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int(d.Round(time.Second).Seconds())
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
