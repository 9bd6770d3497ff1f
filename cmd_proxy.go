package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/limitscope/limitscope/proxy"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

// runProxy serves the local OpenAI- and Anthropic-compatible endpoint until
// interrupted: limitscope proxy [--listen ADDR] [--config FILE] [--sim]...
func runProxy(ctx context.Context, a *app, args []string) int {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	fs.Usage = func() {
		fmt.Fprintln(a.stderr, `Usage: limitscope proxy [--listen 127.0.0.1:4000] [--config FILE] [--sim] [flags]

Serves POST /v1/chat/completions (OpenAI), POST /v1/messages (Anthropic) and
GET /v1/models; every call runs through the retry core. Point an SDK at it:
  OPENAI_BASE_URL=http://127.0.0.1:4000/v1  ANTHROPIC_BASE_URL=http://127.0.0.1:4000
with the proxy's token as the API key (limitscope info shows it).

Flags:`)
		fs.PrintDefaults()
	}
	listen := fs.String("listen", proxy.DefaultListen, "address to listen on (loopback unless you say otherwise)")
	cfgPath := fs.String("config", "", "proxy config file (JSON: aliases with fallback chains and policies, allowed_hosts)")
	var sf sessionFlags
	fs.BoolVar(&sf.sim, "sim", false, "use the built-in simulator (also LIMITSCOPE_SIM=1)")
	fs.StringVar(&sf.scenario, "scenario", "calm", "simulator scenario (see limitscope sim --list)")
	fs.StringVar(&sf.scenarioFile, "scenario-file", "", "simulator scenario file")
	sdef := stream.DefaultOptions()
	sopts := sdef
	fs.DurationVar(&sopts.HeaderTimeout, "header-timeout", sdef.HeaderTimeout, "time to the response headers")
	fs.DurationVar(&sopts.FirstTokenTimeout, "first-token-timeout", sdef.FirstTokenTimeout, "time to the first content")
	fs.DurationVar(&sopts.StallTimeout, "stall-timeout", sdef.StallTimeout, "silence on the wire before a stream counts as stalled")
	noHistory := fs.Bool("no-history", false, "do not record proxied calls in the history")
	noContent := fs.Bool("no-content", false, "record metadata only, not prompts and answers")
	db := fs.String("db", "", "history database (default $LIMITSCOPE_DB, else $XDG_STATE_HOME/limitscope/history.db)")
	quiet := fs.Bool("quiet", false, "no line per call on stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintf(a.stderr, "limitscope proxy: %v\n", err)
		return exitUsage
	}
	if fs.NArg() != 0 {
		return fail(fmt.Errorf("unexpected argument %q; see limitscope proxy -h", fs.Arg(0)))
	}
	if sopts.HeaderTimeout <= 0 || sopts.FirstTokenTimeout <= 0 || sopts.StallTimeout <= 0 {
		return fail(errors.New("timeouts must be positive"))
	}
	cfg := &proxy.Config{}
	if *cfgPath != "" {
		var err error
		if cfg, err = proxy.LoadConfig(*cfgPath); err != nil {
			return fail(err)
		}
	}
	paths, _ := store.ResolvePaths(a.getenv)
	if paths.ConfigDir == "" {
		return fail(errors.New("no config folder for the proxy token: set HOME or XDG_CONFIG_HOME"))
	}
	tokenPath := proxy.TokenPath(paths.ConfigDir)
	token, err := proxy.LoadOrCreateToken(tokenPath)
	if err != nil {
		return fail(err)
	}

	simulated := a.simRequested(sf)
	if !simulated && !a.anyKey() {
		return fail(errors.New("no provider key is set (OPENAI_API_KEY, ANTHROPIC_API_KEY, GOOGLE_API_KEY, ...); set one, or use --sim to run on the built-in simulator"))
	}
	sess, err := a.openSession(ctx, sf, simulated)
	if err != nil {
		return fail(err)
	}
	defer sess.close()
	for name, al := range cfg.Aliases {
		if err := sess.check(al.Chain); err != nil {
			fmt.Fprintf(a.stderr, "limitscope proxy: warning: alias %q: %v (that target is skipped)\n", name, err)
		}
	}

	hist := a.openHistory(callFlags{db: *db, noHistory: *noHistory, noContent: *noContent, keep: "90d"}, sess.simulated, "proxy")
	defer hist.close(ctx, a)

	opts := proxy.Options{
		Token:     token,
		Doer:      &stream.Router{Client: &stream.Client{Options: sopts, Now: a.now}, Endpoints: sess.endpoints},
		Clock:     a.clock,
		Cooldowns: hist.cooldowns(),
		Pacer:     retry.NewPacer(),
		Config:    cfg,
		Available: func(p string) bool { _, ok := sess.endpoints[p]; return ok },
		Record:    hist.sink,
		Now:       a.now,
	}
	if !*quiet {
		opts.Logf = func(format string, args ...any) {
			fmt.Fprintf(a.stderr, "limitscope "+format+"\n", args...)
		}
	}
	h, err := proxy.New(opts)
	if err != nil {
		return fail(err)
	}
	ln, err := proxy.Listen(ctx, *listen)
	if err != nil {
		return fail(err)
	}
	addr := ln.Addr().String()
	where := "real providers"
	if sess.simulated {
		where = "the simulator, scenario " + sess.scenario
	}
	fmt.Fprintf(a.stderr, "limitscope proxy: listening on http://%s (%s)\n", addr, where)
	fmt.Fprintf(a.stderr, "  OPENAI_BASE_URL=http://%s/v1\n  ANTHROPIC_BASE_URL=http://%s\n", addr, addr)
	fmt.Fprintf(a.stderr, "  API key: the proxy token in %s (limitscope info shows it)\n", tokenPath)
	if sess.running != nil {
		fmt.Fprintf(a.stderr, "  simulator: %s (POST %s/_sim/fault injects a fault)\n", sess.running.URL, sess.running.URL)
	}
	if !proxy.IsLoopback(addr) {
		fmt.Fprintf(a.stderr, "limitscope proxy: warning: %s is not loopback: anyone who can reach it and has the token can spend your keys\n", addr)
	}
	if err := proxy.Serve(ctx, ln, h, 5*time.Second); err != nil {
		fmt.Fprintf(a.stderr, "limitscope proxy: %v\n", err)
		return exitFailed
	}
	return exitOK
}
