package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/limitscope/limitscope/calls"
	"github.com/limitscope/limitscope/proxy"
	"github.com/limitscope/limitscope/retry"
)

// proxyGCPercent is the proxy's GOGC unless the environment sets one.
const proxyGCPercent = 400

// proxyOpts are proxy's flags: the shared call flags and its own.
type proxyOpts struct {
	calls  calls.Flags
	listen string
	config string
	quiet  bool
	replay time.Duration

	maxInFlight  int
	maxConc      int
	writeTimeout time.Duration
	streamBuffer int
	maxQueued    int64
	maxAnswer    int64
}

// newProxyOpts registers proxy's flags on fs.
func newProxyOpts(fs *flag.FlagSet) *proxyOpts {
	o := &proxyOpts{}
	fs.StringVar(&o.listen, "listen", proxy.DefaultListen, "address to listen on (loopback unless you say otherwise)")
	fs.StringVar(&o.config, "config", "", "proxy config file (JSON: aliases with fallback chains and policies, allowed_hosts); an alias's policy wins over these flags")
	o.calls.Register(fs)
	fs.DurationVar(&o.replay, "replay-window", proxy.DefaultReplayWindow, "answer a caller's identical retry of a request that just failed for good from that failure, for up to this long (never past the wait it suggested); 0: off")
	fs.BoolVar(&o.quiet, "quiet", false, "no line per call on stderr")
	fs.IntVar(&o.maxInFlight, "max-in-flight", proxy.DefaultMaxInFlight, "calls served at once; past it a call is refused at once with 503 and retry-after (config: max_in_flight; an alias's own max_in_flight caps its calls)")
	fs.IntVar(&o.maxConc, "max-concurrency", retry.DefaultMaxConcurrency, "ceiling of each target's concurrent requests; the provider's request limits set it lower, and slow start grows to it as answers begin (config: max_concurrency, and targets.NAME.max_concurrency per provider or provider/model)")
	fs.DurationVar(&o.writeTimeout, "write-timeout", proxy.DefaultWriteTimeout, "drop a caller that takes none of its answer for this long, closing its upstream request (config: write_timeout)")
	fs.IntVar(&o.streamBuffer, "stream-buffer", proxy.DefaultStreamBuffer, "answer bytes queued for one caller; past it the call reads its upstream no faster than the caller reads (config: stream_buffer)")
	fs.Int64Var(&o.maxQueued, "max-queued", proxy.DefaultMaxQueued, "answer bytes queued for all callers at once; past it each call waits for its caller (config: max_queued)")
	fs.Int64Var(&o.maxAnswer, "max-answer", proxy.DefaultMaxAnswer, "largest non-streamed or buffered answer, in bytes; a larger one is an error naming this cap, never a cut answer (config: max_answer)")
	return o
}

// applyLimits puts the limit flags given on cfg (they win over the file's)
// after checking every limit flag: a value that is not positive is one
// line naming the flag.
func (o *proxyOpts) applyLimits(fs *flag.FlagSet, cfg *proxy.Config) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, k := range []struct {
		name string
		v    int64
	}{
		{"max-in-flight", int64(o.maxInFlight)}, {"max-concurrency", int64(o.maxConc)}, {"write-timeout", int64(o.writeTimeout)},
		{"stream-buffer", int64(o.streamBuffer)}, {"max-queued", o.maxQueued}, {"max-answer", o.maxAnswer},
	} {
		if k.v <= 0 {
			return fmt.Errorf("--%s must be positive, not %s", k.name, fs.Lookup(k.name).Value)
		}
	}
	if given["max-in-flight"] || cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = o.maxInFlight
	}
	if given["max-concurrency"] || cfg.MaxConcurrency == 0 {
		cfg.MaxConcurrency = o.maxConc
	}
	if given["write-timeout"] || cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = o.writeTimeout
	}
	if given["stream-buffer"] || cfg.StreamBuffer == 0 {
		cfg.StreamBuffer = o.streamBuffer
	}
	if given["max-queued"] || cfg.MaxQueued == 0 {
		cfg.MaxQueued = o.maxQueued
	}
	if given["max-answer"] || cfg.MaxAnswer == 0 {
		cfg.MaxAnswer = o.maxAnswer
	}
	return nil
}

const proxyHelp = `Usage: limitscope proxy [--listen 127.0.0.1:4000] [--config FILE] [--sim] [flags]

Serves POST /v1/chat/completions and POST /v1/responses (OpenAI), POST
/v1/messages (Anthropic) and GET /v1/models; every call runs through the
retry core. Point an SDK at it:
  OPENAI_BASE_URL=http://127.0.0.1:4000/v1  ANTHROPIC_BASE_URL=http://127.0.0.1:4000
with the proxy's token as the API key (limitscope info shows it).

A route's policy: an alias's own policy in the config file wins over the
policy flags given here, which win over the file's top-level "policy",
which wins over the built-in defaults (field by field).

Flags:
`

// runProxy serves the local OpenAI- and Anthropic-compatible endpoint until
// interrupted: limitscope proxy [--listen ADDR] [--config FILE] [--sim]...
func runProxy(ctx context.Context, a *app, args []string) int {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	o := newProxyOpts(fs)
	if ok, code := parseFlags(a, fs, "limitscope proxy", args, flagHelp(fs, proxyHelp)); !ok {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(a.stderr, "limitscope proxy: %v\n", err)
		return exitUsage
	}
	if fs.NArg() != 0 {
		return fail(fmt.Errorf("unexpected argument %q; see limitscope proxy --help", fs.Arg(0)))
	}
	if err := o.calls.Validate(); err != nil {
		return fail(err)
	}
	cfg, err := calls.LoadProxyConfig(o.config, o.calls, fs)
	if err != nil {
		return fail(err)
	}
	if err := o.applyLimits(fs, cfg); err != nil {
		return fail(err)
	}
	replayGiven := false
	fs.Visit(func(f *flag.Flag) { replayGiven = replayGiven || f.Name == "replay-window" })
	if replayGiven || cfg.ReplayWindow == nil { // the flag given wins over the file's replay_window
		if o.replay < 0 {
			return fail(errors.New("--replay-window must not be negative"))
		}
		cfg.ReplayWindow = &o.replay
	}
	token, tokenPath, err := calls.ProxyToken(a.getenv)
	if err != nil {
		return fail(err)
	}

	simulated := calls.SimRequested(a.getenv, o.calls.Sim.Sim)
	if !simulated && !calls.AnyKey(a.getenv) {
		return fail(errors.New("no provider key is set (OPENAI_API_KEY, ANTHROPIC_API_KEY, GOOGLE_API_KEY, ...); set one, or use --sim to run on the built-in simulator"))
	}
	cs, err := calls.Open(ctx, a.env(), o.calls, simulated, "proxy")
	if err != nil {
		return fail(err)
	}
	defer cs.Close(ctx, calls.DefaultCloseAllowance)
	for _, p := range cs.AliasProblems(cfg) {
		fmt.Fprintf(a.stderr, "limitscope proxy: warning: %s\n", p)
	}

	var logf func(string, ...any)
	if !o.quiet {
		logf = func(format string, args ...any) {
			fmt.Fprintf(a.stderr, "limitscope "+format+"\n", args...)
		}
	}
	h, err := cs.ProxyHandler(token, cfg, nil, logf)
	if err != nil {
		return fail(err)
	}
	px, err := calls.ListenProxy(ctx, a.env(), o.listen)
	if err != nil {
		return fail(err)
	}
	addr := px.Addr()
	fmt.Fprintf(a.stderr, "limitscope proxy: listening on http://%s (%s)\n", addr, cs.Providers.Where())
	fmt.Fprintf(a.stderr, "  OPENAI_BASE_URL=http://%s/v1\n  ANTHROPIC_BASE_URL=http://%s\n", addr, addr)
	fmt.Fprintf(a.stderr, "  API key: the proxy token in %s (limitscope info shows it)\n", tokenPath)
	if s := cs.Providers.Sim; s != nil {
		fmt.Fprintf(a.stderr, "  simulator: %s (POST %s/_sim/fault injects a fault)\n", s.URL, s.URL)
	}
	if a.getenv("GOGC") == "" {
		// A proxy's live heap is small (a few MB) and its garbage is per
		// token: collecting at 5x the live heap instead of 2x costs some
		// tens of MB and saves about a tenth of its CPU per streamed call
		// (BenchmarkStreamingCall), and GC pauses from the p99 tail.
		defer debug.SetGCPercent(debug.SetGCPercent(proxyGCPercent))
	}
	px.Serve(ctx, h, 5*time.Second)
	if err := px.Wait(); err != nil {
		fmt.Fprintf(a.stderr, "limitscope proxy: %v\n", err)
		return exitFailed
	}
	return exitOK
}
