package calls

import (
	"context"
	"fmt"
	"time"

	"github.com/limitscope/limitscope/fleet"
	"github.com/limitscope/limitscope/internal/sanitize"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/telemetry"
)

// Calls is one command's wiring: its providers, its history, and the one
// engine (Doer, clock, pacer, cooldowns) every call of the command runs on,
// typed or proxied.
type Calls struct {
	Providers *Providers
	History   *History
	Doer      retry.Doer   // a stream.Router over Providers' endpoints
	Pacer     *retry.Pacer // this process's own pacer
	// Pacing is what the engine paces with: Pacer, or with --state the
	// fleet's shared pacing over it.
	Pacing retry.Pacing
	// Fleet is the shared state with --state (nil without).
	Fleet  *fleet.Fleet
	Engine *retry.Engine
	// Telemetry exports the calls (OpenTelemetry when OTEL_EXPORTER_OTLP_*
	// asks for it; Prometheus for the proxy); nil: nothing is exported.
	Telemetry *telemetry.Telemetry
	env       Env
	policy    retry.Policy // the policy flags' values, the proxy's lowest layer above the built-in defaults
}

// Open sets up a command's calls: the providers (simulated or real), the
// history recorder for command, and the engine. Close releases them.
func Open(ctx context.Context, env Env, f Flags, simulated bool, command string) (*Calls, error) {
	provs, err := OpenProviders(ctx, env.Getenv, f.Sim, simulated)
	if err != nil {
		return nil, err
	}
	hist := OpenHistory(env, f.History, provs.Simulated, command)
	// Telemetry never fails a command: a problem is one warning.
	tel, err := telemetry.New(ctx, telemetry.Options{Getenv: env.Getenv, Version: env.Version, Command: command,
		Prometheus: command == "proxy" || command == "tui", Stderr: env.stderr(),
		BaseURL: func(tg stream.Target) string { return provs.Endpoints[tg.Provider].BaseURL }})
	if err != nil {
		fmt.Fprintf(env.stderr(), "limitscope: telemetry off: %s\n", sanitize.Printable(err.Error()))
	}
	hist.tel = tel
	now := env.Now
	if now == nil {
		now = time.Now
	}
	c := &Calls{
		Providers: provs,
		History:   hist,
		Doer:      &stream.Router{Client: &stream.Client{Options: f.Stream, Now: now}, Endpoints: provs.Endpoints, Accounts: provs.AccountEndpoint},
		Pacer:     retry.NewPacer(),
		Telemetry: tel,
		env:       env,
		policy:    f.Policy,
	}
	c.Pacing = c.Pacer
	tel.SetQueued(c.Pacer.Queued) // the calls waiting at the gates, for the proxy's /metrics
	if err := c.openFleet(ctx, f.StateURL(env.Getenv), command, now); err != nil {
		if f.State == "" {
			err = fmt.Errorf("LIMITSCOPE_REDIS_URL: %w", err)
		}
		hist.Close(ctx, 0)
		_ = tel.Close(ctx)
		provs.Close()
		return nil, err
	}
	c.Engine = &retry.Engine{Doer: c.Doer, Clock: env.Clock, Cooldowns: hist.Cooldowns(), Pacer: c.Pacing,
		Breaker: retry.NewMemoryBreaker(retry.BreakerConfig{})}
	return c, nil
}

// openFleet puts the calls on the shared state at url (none when ""): the
// Doer publishes every attempt to the fleet's stream, the cooldowns and the
// pacing are shared. An unreachable Redis is a warning, never an error: the
// calls run on local state until it is back.
func (c *Calls) openFleet(ctx context.Context, url, command string, now func() time.Time) error {
	if url == "" {
		return nil
	}
	stderr := c.env.stderr()
	fl, err := fleet.Open(ctx, url, fleet.Options{
		Warn:    func(msg string) { fmt.Fprintf(stderr, "limitscope: %s\n", msg) },
		Getenv:  c.env.Getenv,
		Now:     now,
		Command: command,
	})
	if err != nil {
		return err
	}
	c.Fleet = fl
	inner := c.Doer
	c.Doer = fleet.Doer{Next: inner, Fleet: fl}
	// The history's cooldowns stay the local state under the shared ones,
	// and every user of History.Cooldowns (the proxy, the console) sees the
	// shared ones.
	c.History.cool = fleet.NewCooldowns(fl, c.History.cool)
	// One shared state per account and target: the account scope carries a
	// simulator's instance, so simulated stops and rates stay among the
	// clients of that simulator.
	c.Pacing = fleet.NewPacing(fl, c.Pacer, fleet.AccountScope(inner))
	return nil
}

// Run runs call on the engine, recording it in the history (and exporting
// it, with Telemetry); sink sees every event too. It is the console's Runner.
func (c *Calls) Run(ctx context.Context, call retry.Call, sink func(retry.Event)) retry.Result {
	return c.Engine.Run(ctx, call, c.History.Sink(call, sink))
}

// Close commits the history (waiting up to allowance for the file), flushes
// the telemetry (a few seconds at most) and then stops the embedded
// simulator.
func (c *Calls) Close(ctx context.Context, allowance time.Duration) {
	c.History.Close(ctx, allowance)
	if c.Fleet != nil {
		_ = c.Fleet.Close()
	}
	_ = c.Telemetry.Close(ctx) // bounded; what was not exported is counted on stderr
	c.Providers.Close()
}
