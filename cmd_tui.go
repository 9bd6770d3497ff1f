package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/limitscope/limitscope/proxy"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/tui"
)

// defaultModels is the model offered for each provider in the console's
// target list when the user names none.
var defaultModels = []stream.Target{
	{Provider: "openai", Model: "gpt-5.4-mini"},
	{Provider: "anthropic", Model: "claude-haiku-5-5"},
	{Provider: "gemini", Model: "gemini-3.8-flash"},
	{Provider: "groq", Model: "llama-3.3-70b-versatile"},
	{Provider: "deepseek", Model: "deepseek-chat"},
	{Provider: "mistral", Model: "mistral-small-latest"},
	{Provider: "xai", Model: "grok-4-fast"},
}

// runTUI starts the console: on the simulator when --sim, LIMITSCOPE_SIM or
// no key at all; on the real providers otherwise. With --proxy ADDR it also
// serves the proxy (limitscope proxy's endpoint) on the same session, and the
// screen shows the proxied calls beside typed ones.
func runTUI(ctx context.Context, a *app, args []string) int {
	return runConsole(ctx, a, args, tui.Run)
}

// consoleUI runs the console's screen; tui.Run, or a test's stand-in.
type consoleUI func(ctx context.Context, opts tui.Options) error

// runConsole is runTUI with the screen given.
func runConsole(ctx context.Context, a *app, args []string, ui consoleUI) int {
	fs := flag.NewFlagSet("limitscope", flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	fs.Usage = func() {
		usage(a.stderr)
		fmt.Fprintln(a.stderr, "\nConsole flags:")
		fs.PrintDefaults()
	}
	var cf callFlags
	cf.register(fs)
	mouse := fs.Bool("mouse", false, "capture the mouse (wheel scrolling) from the start")
	proxyAddr := fs.String("proxy", "", "also serve the proxy (OpenAI/Anthropic-compatible endpoint) on ADDR, e.g. 127.0.0.1:4000; its calls show live here")
	proxyCfg := fs.String("proxy-config", "", "the proxy's config file (aliases with fallback chains and policies, allowed_hosts); needs --proxy")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(a.stderr, "limitscope: unknown command %q\n\n", fs.Arg(0))
		usage(a.stderr)
		return exitUsage
	}
	if !a.stdinTTY || !a.stdoutTTY {
		fmt.Fprintln(a.stderr, "limitscope: the console needs a terminal; for scripts use limitscope send (see -h)")
		usage(a.stderr)
		return exitUsage
	}
	if err := cf.validate(); err != nil {
		fmt.Fprintf(a.stderr, "limitscope: %v\n", err)
		return exitUsage
	}
	if *proxyCfg != "" && *proxyAddr == "" {
		fmt.Fprintln(a.stderr, "limitscope: --proxy-config needs --proxy ADDR")
		return exitUsage
	}

	// The proxy fails fast, before the screen takes the terminal: a bad
	// config, no token, or an address in use is exit 2 with a sentence.
	var px *consoleProxy
	if *proxyAddr != "" {
		var err error
		if px, err = openConsoleProxy(ctx, a, *proxyAddr, *proxyCfg); err != nil {
			fmt.Fprintf(a.stderr, "limitscope: --proxy: %v\n", err)
			return exitUsage
		}
		defer px.close()
	}

	simulated := a.simRequested(cf.session) || !a.anyKey()
	sess, err := a.openSession(ctx, cf.session, simulated)
	if err != nil {
		fmt.Fprintf(a.stderr, "limitscope: %v\n", err)
		return exitUsage
	}
	defer sess.close()

	targets := consoleTargets(sess)
	var chain []stream.Target
	if cf.model != "" {
		if chain, err = cf.chain(); err != nil {
			fmt.Fprintf(a.stderr, "limitscope: %v\n", err)
			return exitUsage
		}
		if err := sess.check(chain); err != nil {
			fmt.Fprintf(a.stderr, "limitscope: %v\n", err)
			return exitUsage
		}
		targets = mergeTargets(chain, targets)
	} else {
		for _, t := range targets {
			if t.Available && len(chain) < 3 {
				chain = append(chain, t.Target)
			}
		}
	}

	// History warnings would tear the full-screen view: collect them and
	// print them once the console has closed.
	var warnings bytes.Buffer
	quiet := *a
	quiet.stderr = &warnings
	hist := quiet.openHistory(cf, sess.simulated, "tui")
	defer func() {
		hist.close(ctx, &quiet)
		io.Copy(a.stderr, &warnings)
	}()

	doer := &stream.Router{Client: &stream.Client{Options: cf.stream, Now: a.now}, Endpoints: sess.endpoints}
	engine := &retry.Engine{
		Doer:      doer,
		Clock:     a.clock,
		Cooldowns: hist.cooldowns(),
		Pacer:     retry.NewPacer(),
	}
	opts := tui.Options{
		Runner:    recordingRunner{engine: engine, hist: hist},
		Chain:     chain,
		Targets:   targets,
		Policy:    cf.policy,
		MaxTokens: cf.maxTokens,
		Simulated: sess.simulated,
		Scenario:  sess.scenario,
		Version:   version,
		Now:       a.now,
		NoColor:   a.getenv("NO_COLOR") != "",
		Mouse:     *mouse,
		Curl:      sess.curl(cf.maxTokens),
	}
	if sess.running != nil {
		opts.Faults = simFaults{srv: sess.running.Server}
	}
	if hist.rec != nil {
		// The same file the recorder writes, found once.
		opts.History = storeHistory{rd: &store.Reader{Path: hist.rec.Path()}}
	}
	if cds, err := hist.cooldowns().List(); err == nil {
		opts.Cooldowns = cds
	}
	if px != nil {
		for name, al := range px.cfg.Aliases {
			if err := sess.check(al.Chain); err != nil {
				fmt.Fprintf(&warnings, "limitscope: proxy: warning: alias %q: %v (that target is skipped)\n", name, err)
			}
		}
		// The same session as typed calls: one Doer, clock, pacer,
		// cooldowns and history recorder.
		inbox := tui.NewInbox()
		h, err := proxy.New(proxy.Options{
			Token:     px.token,
			Doer:      doer,
			Clock:     a.clock,
			Cooldowns: engine.Cooldowns,
			Pacer:     engine.Pacer,
			Config:    px.cfg,
			Available: func(p string) bool { _, ok := sess.endpoints[p]; return ok },
			Events:    inbox.Event,
			Record:    hist.sink,
			Now:       a.now,
		})
		if err != nil {
			fmt.Fprintf(a.stderr, "limitscope: --proxy: %v\n", err)
			return exitUsage
		}
		opts.Inbox, opts.ProxyAddr = inbox, px.addr()
		px.serve(ctx, h)
	}
	err = ui(ctx, opts)
	if px != nil {
		// Stop taking proxied calls before the history closes (deferred).
		if serr := px.stop(); serr != nil {
			fmt.Fprintf(&warnings, "limitscope: proxy: %v\n", serr)
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(a.stderr, "limitscope: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// consoleProxy is the proxy served inside the console (--proxy).
type consoleProxy struct {
	ln     net.Listener
	cfg    *proxy.Config
	token  string
	cancel context.CancelFunc
	done   chan error
}

// openConsoleProxy loads the config and the token and opens the listener:
// everything that can fail before the screen starts.
func openConsoleProxy(ctx context.Context, a *app, addr, cfgPath string) (*consoleProxy, error) {
	cfg := &proxy.Config{}
	if cfgPath != "" {
		var err error
		if cfg, err = proxy.LoadConfig(cfgPath); err != nil {
			return nil, err
		}
	}
	paths, _ := store.ResolvePaths(a.getenv)
	if paths.ConfigDir == "" {
		return nil, errors.New("no config folder for the proxy token: set HOME or XDG_CONFIG_HOME")
	}
	token, err := proxy.LoadOrCreateToken(proxy.TokenPath(paths.ConfigDir))
	if err != nil {
		return nil, err
	}
	ln, err := proxy.Listen(ctx, addr)
	if err != nil {
		return nil, err
	}
	if !proxy.IsLoopback(ln.Addr().String()) {
		fmt.Fprintf(a.stderr, "limitscope: warning: the proxy listens on %s, not loopback: anyone who can reach it and has the token can spend your keys\n", ln.Addr())
	}
	return &consoleProxy{ln: ln, cfg: cfg, token: token}, nil
}

func (p *consoleProxy) addr() string { return p.ln.Addr().String() }

// serve serves h until stop (or ctx ends).
func (p *consoleProxy) serve(ctx context.Context, h http.Handler) {
	sctx, cancel := context.WithCancel(ctx)
	p.cancel, p.done = cancel, make(chan error, 1)
	go func() { p.done <- proxy.Serve(sctx, p.ln, h, 2*time.Second) }()
}

// stop ends serving: calls in flight get a short grace, then are closed.
func (p *consoleProxy) stop() error {
	if p.done == nil {
		return nil
	}
	p.cancel()
	err := <-p.done
	p.done = nil
	return err
}

// close releases the listener when serving never began (an early return).
func (p *consoleProxy) close() {
	if p.done == nil {
		_ = p.ln.Close()
		return
	}
	_ = p.stop()
}

// consoleTargets lists one default target per provider, available when the
// session can reach it.
func consoleTargets(sess *session) []tui.TargetInfo {
	var out []tui.TargetInfo
	for _, t := range defaultModels {
		ti := tui.TargetInfo{Target: t}
		if _, ok := sess.endpoints[t.Provider]; ok {
			ti.Available = true
		} else if mk, ok := sess.missing[t.Provider]; ok {
			ti.Missing = mk.Vars[0]
		}
		out = append(out, ti)
	}
	return out
}

// mergeTargets puts the chain first, then the defaults not already in it.
func mergeTargets(chain []stream.Target, defaults []tui.TargetInfo) []tui.TargetInfo {
	out := make([]tui.TargetInfo, 0, len(chain)+len(defaults))
	seen := map[stream.Target]bool{}
	for _, t := range chain {
		seen[t] = true
		out = append(out, tui.TargetInfo{Target: t, Available: true})
	}
	for _, d := range defaults {
		if !seen[d.Target] {
			out = append(out, d)
		}
	}
	return out
}

// recordingRunner runs calls on the engine and records them in the history.
type recordingRunner struct {
	engine *retry.Engine
	hist   *historyHook
}

func (r recordingRunner) Run(ctx context.Context, c retry.Call, sink func(retry.Event)) retry.Result {
	return r.engine.Run(ctx, c, r.hist.sink(c, sink))
}

// simFaults injects the console's demo faults into the in-process simulator.
type simFaults struct{ srv *sim.Server }

func (s simFaults) Inject(_ context.Context, f tui.FaultRequest) error {
	return s.srv.Inject(sim.Fault{Provider: f.Provider, Kind: f.Kind, RetryAfter: f.RetryAfter, Count: f.Count, Code: f.Code})
}

func (s simFaults) SetScenario(_ context.Context, name string) error { return s.srv.SetScenario(name) }

// storeHistory serves the console's history view from the history file.
type storeHistory struct{ rd *store.Reader }

func summary(c *store.Call) tui.CallSummary {
	s := tui.CallSummary{
		ID:       strconv.FormatUint(uint64(c.ID), 10),
		Time:     c.Started,
		Outcome:  c.Outcome,
		Attempts: c.Attempts,
	}
	if c.ServedBy != nil {
		s.ServedBy = c.ServedBy.String()
	}
	s.Duration = c.Latency()
	head := c.Prompt
	if head == "" && len(c.Chain) > 0 {
		head = c.Chain[0].String()
	}
	s.PromptHead = strings.ReplaceAll(head, "\n", " ")
	return s
}

func (h storeHistory) List(ctx context.Context, f tui.HistoryFilter) ([]tui.CallSummary, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 200
	}
	calls, err := h.rd.List(ctx, store.Filter{Limit: limit, Text: f.Text, PromptHead: 80})
	if err != nil {
		return nil, err
	}
	out := make([]tui.CallSummary, 0, len(calls))
	for i := range calls {
		out = append(out, summary(&calls[i]))
	}
	return out, nil
}

func (h storeHistory) Show(ctx context.Context, id string) (tui.CallDetail, error) {
	c, err := h.rd.Show(ctx, id)
	if err != nil {
		return tui.CallDetail{}, err
	}
	return tui.CallDetail{CallSummary: summary(c), Prompt: c.Prompt, Attempts: c.AttemptsList,
		Waits: store.WaitsOf(c.AttemptsList), Text: c.Text}, nil
}

// curl renders an attempt as the curl command that repeats it: the real
// request, with the key as a reference to its variable ($OPENAI_API_KEY), or
// the simulator's fake key in a simulated session.
func (s *session) curl(maxTokens int) func(at retry.Attempt, prompt string) string {
	return func(at retry.Attempt, prompt string) string {
		ep, ok := s.endpoints[at.Target.Provider]
		if !ok {
			return ""
		}
		keyText := sim.FakeKey
		if !s.simulated {
			info, _ := stream.Provider(at.Target.Provider)
			keyText = "$" + info.KeyEnv[0]
		}
		cmd, err := stream.Curl(ep, stream.Request{Target: at.Target, Prompt: prompt, MaxTokens: maxTokens}, keyText)
		if err != nil {
			return ""
		}
		return cmd
	}
}
