package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/limitscope/limitscope/calls"
	"github.com/limitscope/limitscope/proxy"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/tui"
)

// consoleOpts are the console's flags: the shared call flags, the targets,
// and its own.
type consoleOpts struct {
	calls       calls.Flags
	targets     calls.TargetFlags
	mouse       bool
	proxy       string
	proxyConfig string
}

// newConsoleOpts registers the console's flags on fs.
func newConsoleOpts(fs *flag.FlagSet) *consoleOpts {
	o := &consoleOpts{}
	o.targets.Register(fs)
	o.calls.Register(fs)
	fs.BoolVar(&o.mouse, "mouse", false, "capture the mouse (wheel scrolling) from the start")
	fs.StringVar(&o.proxy, "proxy", "", "also serve the proxy (OpenAI/Anthropic-compatible endpoint) on ADDR, e.g. 127.0.0.1:4000; its calls show live here")
	fs.StringVar(&o.proxyConfig, "proxy-config", "", "the proxy's config file (aliases with fallback chains and policies, allowed_hosts); needs --proxy")
	return o
}

// runTUI starts the console: on the simulator when --sim, LIMITSCOPE_SIM or
// no key at all; on the real providers otherwise. With --proxy ADDR it also
// serves the proxy (limitscope proxy's endpoint) on the same calls, and the
// screen shows the proxied calls beside typed ones.
func runTUI(ctx context.Context, a *app, args []string) int {
	return runConsole(ctx, a, args, tui.Run)
}

// validate checks the console's flags together.
func (o *consoleOpts) validate() error {
	if err := o.targets.Validate(); err != nil {
		return err
	}
	if err := o.calls.Validate(); err != nil {
		return err
	}
	if o.proxyConfig != "" && o.proxy == "" {
		return errors.New("--proxy-config needs --proxy ADDR")
	}
	return nil
}

// uiOptions is what the screen is given: the chain (--model's, or the
// default), the targets, and the calls' engine, history and providers.
func (o *consoleOpts) uiOptions(a *app, cs *calls.Calls) (tui.Options, error) {
	targets := cs.Providers.ConsoleTargets()
	var chain []stream.Target
	if o.targets.Model != "" {
		var err error
		if chain, err = o.targets.Chain(); err != nil {
			return tui.Options{}, err
		}
		if err := cs.Providers.Check(chain); err != nil {
			return tui.Options{}, err
		}
		targets = calls.MergeTargets(chain, targets)
	} else {
		chain = calls.DefaultChain(targets)
	}

	opts := tui.Options{
		Runner:    cs,
		Chain:     chain,
		Targets:   targets,
		Policy:    o.calls.Policy,
		MaxTokens: o.targets.MaxTokens,
		Simulated: cs.Providers.Simulated,
		Scenario:  cs.Providers.Scenario,
		Faults:    cs.Providers.Faults(),
		Armed:     cs.Providers.ArmedFaults(cs.History.Cooldowns()),
		History:   cs.History.ConsoleHistory(),
		Version:   a.buildVersion(),
		Now:       a.now,
		NoColor:   a.getenv("NO_COLOR") != "",
		Mouse:     o.mouse,
		Curl:      cs.Providers.Curl(o.targets.MaxTokens),
		// What the engine knows of a target (its cooldown, the pacer's
		// hold) and clearing a stop: through the engine's own API.
		TargetState: cs.Engine.TargetState,
		Fleet:       cs.FleetFeed(), // nil without --state
		ClearCooldown: func(_ context.Context, scope string) error {
			return cs.History.Cooldowns().Clear(scope)
		},
	}
	if cds, err := cs.History.Cooldowns().List(); err == nil {
		opts.Cooldowns = cds
	}
	opts.Probe, opts.ProbePlan = consoleProbe(a, cs) // the p key
	return opts, nil
}

// consoleProxy is the proxy the console serves with --proxy.
type consoleProxy struct {
	srv   *calls.ProxyServer
	cfg   *proxy.Config
	token string
}

// listenProxy loads the proxy's config and token and takes its address;
// nil without --proxy.
func (o *consoleOpts) listenProxy(ctx context.Context, a *app, fs *flag.FlagSet) (*consoleProxy, error) {
	if o.proxy == "" {
		return nil, nil
	}
	px := &consoleProxy{}
	var err error
	if px.cfg, err = calls.LoadProxyConfig(o.proxyConfig, o.calls, fs); err != nil {
		return nil, err
	}
	if px.token, _, err = calls.ProxyToken(a.getenv); err != nil {
		return nil, err
	}
	if px.srv, err = calls.ListenProxy(ctx, a.env(), o.proxy); err != nil {
		return nil, err
	}
	return px, nil
}

// serve serves proxied calls on cs, the same calls as typed ones (one
// Doer, clock, pacer, cooldowns and history recorder), into the screen's
// inbox; the config's alias problems go to warnings.
func (px *consoleProxy) serve(ctx context.Context, cs *calls.Calls, opts *tui.Options, warnings io.Writer) error {
	for _, p := range cs.AliasProblems(px.cfg) {
		fmt.Fprintf(warnings, "limitscope: proxy: warning: %s\n", p)
	}
	inbox := tui.NewInbox()
	h, err := cs.ProxyHandler(px.token, px.cfg, inbox.Event, nil)
	if err != nil {
		return err
	}
	opts.Inbox, opts.ProxyAddr = inbox, px.srv.Addr()
	px.srv.Serve(ctx, h, 2*time.Second)
	return nil
}

// consoleUI runs the console's screen; tui.Run, or a test's stand-in.
type consoleUI func(ctx context.Context, opts tui.Options) error

// runConsole is runTUI with the screen given.
func runConsole(ctx context.Context, a *app, args []string, ui consoleUI) int {
	fs := flag.NewFlagSet("limitscope", flag.ContinueOnError)
	o := newConsoleOpts(fs)
	if ok, code := parseFlags(a, fs, "limitscope", args, usage); !ok {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(a.stderr, "limitscope: %v\n", err)
		return exitUsage
	}
	if fs.NArg() != 0 {
		return fail(fmt.Errorf("unknown command %q (see limitscope --help)", fs.Arg(0)))
	}
	if !a.stdinTTY || !a.stdoutTTY {
		fmt.Fprintln(a.stderr, "limitscope: the console needs a terminal; for scripts use limitscope send (see limitscope -h)")
		return exitUsage
	}
	if err := o.validate(); err != nil {
		return fail(err)
	}

	// History warnings would tear the full-screen view: collect them and
	// print them once the console has closed.
	var warnings bytes.Buffer
	env := a.env()
	env.Stderr = &warnings
	defer func() { io.Copy(a.stderr, &warnings) }()

	// The proxy fails fast, before the screen takes the terminal: a bad
	// config, no token, or an address in use is exit 2 with a sentence.
	pxFail := func(err error) int { return fail(fmt.Errorf("--proxy: %w", err)) }
	px, err := o.listenProxy(ctx, a, fs)
	if err != nil {
		return pxFail(err)
	}
	if px != nil {
		defer px.srv.Stop()
	}

	simulated := calls.SimRequested(a.getenv, o.calls.Sim.Sim) || !calls.AnyKey(a.getenv)
	cs, err := calls.Open(ctx, env, o.calls, simulated, "tui")
	if err != nil {
		return fail(err)
	}
	defer cs.Close(ctx, calls.DefaultCloseAllowance)

	opts, err := o.uiOptions(a, cs)
	if err != nil {
		return fail(err)
	}
	if px != nil {
		if err := px.serve(ctx, cs, &opts, &warnings); err != nil {
			return pxFail(err)
		}
	}
	err = ui(ctx, opts)
	if px != nil {
		// Stop taking proxied calls before the history closes (deferred).
		if serr := px.srv.Stop(); serr != nil {
			fmt.Fprintf(&warnings, "limitscope: proxy: %v\n", serr)
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(a.stderr, "limitscope: %v\n", err)
		return exitFailed
	}
	return exitOK
}
