package calls

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/limitscope/limitscope/proxy"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
)

// ProxyToken loads (or makes, on first use) the proxy's token from the
// config folder, returning it and its file.
func ProxyToken(getenv func(string) string) (token, path string, err error) {
	paths, _ := store.ResolvePaths(getenv)
	if paths.ConfigDir == "" {
		return "", "", errors.New("no config folder for the proxy token: set HOME or XDG_CONFIG_HOME")
	}
	path = proxy.TokenPath(paths.ConfigDir)
	token, err = proxy.LoadOrCreateToken(path)
	if err != nil {
		return "", path, fmt.Errorf("proxy token: %w", err)
	}
	return token, path, nil
}

// LoadProxyConfig reads the proxy's config file ("" => an empty config)
// and applies the command's policy flags as the defaults of every route:
// an alias's own policy (in the file) wins over the flags given on the
// command line, which win over the file's top-level "policy", which wins
// over the built-in defaults. Each field is taken on its own: an alias
// that sets only max_attempts takes the rest from the flags. fs is the
// command's flag set, to tell flags given from defaults (nil: none given).
func LoadProxyConfig(path string, f Flags, fs *flag.FlagSet) (*proxy.Config, error) {
	cfg := &proxy.Config{}
	if path != "" {
		var err error
		if cfg, err = proxy.LoadConfig(path); err != nil {
			return nil, err
		}
	}
	given := map[string]bool{}
	if fs != nil {
		fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	}
	cfg.Policy = routePolicy(cfg.Policy, f.Policy, given)
	if given["failover-on-quota"] {
		v := f.Policy.FailoverOnQuota
		cfg.FailoverOnQuota = &v // the flag given takes the file's place; an alias's own word still wins
	}
	// An alias's own policy is layered over this by the proxy
	// (Config.RoutePolicy), field by field, with the flags' values (given or
	// default) below the file's as Options.DefaultPolicy.
	return cfg, nil
}

// routePolicy is the policy of a route with no alias policy: the flags
// given, else the file's, else the flags' defaults.
func routePolicy(file, flags retry.Policy, given map[string]bool) retry.Policy {
	p := fillPolicy(file, flags)
	pick := func(name string, dst *time.Duration, v time.Duration) {
		if given[name] {
			*dst = v
		}
	}
	if given["max-attempts"] {
		p.MaxAttempts = flags.MaxAttempts
	}
	if given["tries-per-target"] {
		p.TriesPerTarget = flags.TriesPerTarget
	}
	pick("failover-wait", &p.FailoverWait, flags.FailoverWait)
	pick("max-wait", &p.MaxWait, flags.MaxWait)
	pick("deadline", &p.Deadline, flags.Deadline)
	if given["ignore-cooldown"] {
		p.IgnoreCooldown = flags.IgnoreCooldown
	}
	if given["failover-on-quota"] {
		p.FailoverOnQuota = flags.FailoverOnQuota
	}
	return p
}

// fillPolicy returns p with its zero fields taken from def. A boolean set
// in def turns it on (a config cannot turn off per alias what a flag or the
// top-level policy turned on).
func fillPolicy(p, def retry.Policy) retry.Policy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = def.MaxAttempts
	}
	if p.TriesPerTarget <= 0 {
		p.TriesPerTarget = def.TriesPerTarget
	}
	if p.FailoverWait <= 0 {
		p.FailoverWait = def.FailoverWait
	}
	if p.MaxWait <= 0 {
		p.MaxWait = def.MaxWait
	}
	if p.Deadline <= 0 {
		p.Deadline = def.Deadline
	}
	if p.BackoffBase <= 0 {
		p.BackoffBase = def.BackoffBase
	}
	if p.BackoffCap <= 0 {
		p.BackoffCap = def.BackoffCap
	}
	if p.Jitter <= 0 {
		p.Jitter = def.Jitter
	}
	p.IgnoreCooldown = p.IgnoreCooldown || def.IgnoreCooldown
	p.FailoverOnQuota = p.FailoverOnQuota || def.FailoverOnQuota
	p.NoRetryAfterText = p.NoRetryAfterText || def.NoRetryAfterText
	return p
}

// ProxyHandler is the proxy's handler on these calls' engine (c.Engine):
// the same Doer, clock, pacer, breaker, cooldowns, fleet state, telemetry
// and history as the command's own calls.
// events (nil: none) receives every proxied call's events (the console's
// feed); logf (nil: silent) gets one line per call.
//
// The config's concurrency ceilings (max_concurrency, targets) become the
// engine's pacer's, so call it before the engine's first call.
func (c *Calls) ProxyHandler(token string, cfg *proxy.Config, events func(retry.Call, retry.Event), logf func(string, ...any)) (*proxy.Handler, error) {
	if cfg != nil && c.Pacer != nil {
		if cfg.MaxConcurrency > 0 {
			c.Pacer.MaxConcurrency = cfg.MaxConcurrency
		}
		if len(cfg.TargetMax) > 0 {
			c.Pacer.TargetMax = cfg.TargetMax
		}
	}
	h, err := proxy.New(proxy.Options{
		Token:     token,
		Engine:    c.Engine,
		Config:    cfg,
		Available: c.Providers.Available,
		Events:    events,
		Record:    c.History.Sink,
		// Nothing answered is lost: the call's record is durable before
		// its answer ends.
		Commit:        c.History.Commit,
		DefaultPolicy: c.policy,
		Now:           c.env.Now,
		Logf:          logf,
		Metrics:       c.Telemetry.MetricsHandler(),
		Trace:         c.Telemetry.Server,
		RecordContext: c.History.SinkContext,
	})
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	// The metrics name only the models the proxy routes to; it counts
	// its calls in flight (and, from its concurrency gate, those queued:
	// Telemetry.SetProxyQueued).
	c.Telemetry.Bound(h.Targets())
	c.Telemetry.ObserveProxyInFlight(h.InFlight)
	c.Telemetry.ObserveProxyHeldWaiting(h.HeldWaiting)
	if c.Pacer != nil {
		// The calls waiting at the targets' gates and at the aliases'
		// ceilings.
		pacer := c.Pacer
		c.Telemetry.SetQueued(func() int { return pacer.Queued() + h.Queued() })
	}
	return h, nil
}

// AliasProblems lists, one sentence each, the aliases whose chain names a
// provider without a key (that target is skipped).
func (c *Calls) AliasProblems(cfg *proxy.Config) []string {
	var out []string
	for name, al := range cfg.Aliases {
		if err := c.Providers.Check(al.Chain); err != nil {
			out = append(out, fmt.Sprintf("alias %q: %v (that target is skipped)", name, err))
		}
	}
	return out
}

// ProxyServer is a proxy listener and, once Serve is called, its server.
type ProxyServer struct {
	ln      net.Listener
	cancel  context.CancelFunc
	done    chan error
	stopped bool
}

// ListenProxy opens the proxy's listener on addr ("" => proxy.DefaultListen).
// A non-loopback address is allowed with a warning on env.Stderr.
func ListenProxy(ctx context.Context, env Env, addr string) (*ProxyServer, error) {
	ln, err := proxy.Listen(ctx, addr)
	if err != nil {
		return nil, err
	}
	if !proxy.IsLoopback(ln.Addr().String()) {
		fmt.Fprintf(env.stderr(), "limitscope: warning: the proxy listens on %s, not loopback: anyone who can reach it and has the token can spend your keys\n", ln.Addr())
	}
	return &ProxyServer{ln: ln}, nil
}

// Addr is the address listened on ("127.0.0.1:4000").
func (p *ProxyServer) Addr() string { return p.ln.Addr().String() }

// Serve serves h in the background until Stop (or ctx ends); calls in
// flight then get grace to finish.
func (p *ProxyServer) Serve(ctx context.Context, h http.Handler, grace time.Duration) {
	sctx, cancel := context.WithCancel(ctx)
	p.cancel, p.done = cancel, make(chan error, 1)
	go func() { p.done <- proxy.Serve(sctx, p.ln, h, grace) }()
}

// Wait waits for serving to end (ctx ended, or Stop).
func (p *ProxyServer) Wait() error {
	if p.done == nil {
		return nil
	}
	err := <-p.done
	p.done = nil
	return err
}

// Stop ends serving (calls in flight get the grace), or releases the
// listener when serving never began.
func (p *ProxyServer) Stop() error {
	if p.stopped {
		return nil
	}
	p.stopped = true
	if p.done == nil {
		return p.ln.Close()
	}
	p.cancel()
	return p.Wait()
}
