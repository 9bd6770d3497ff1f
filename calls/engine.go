package calls

import (
	"context"
	"fmt"
	"time"

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
	Doer      retry.Doer // a stream.Router over Providers' endpoints
	Pacer     *retry.Pacer
	Engine    *retry.Engine
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
		Prometheus: command == "proxy" || command == "tui", Stderr: env.stderr()})
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
		Doer:      &stream.Router{Client: &stream.Client{Options: f.Stream, Now: now}, Endpoints: provs.Endpoints},
		Pacer:     retry.NewPacer(),
		Telemetry: tel,
		env:       env,
		policy:    f.Policy,
	}
	c.Engine = &retry.Engine{Doer: c.Doer, Clock: env.Clock, Cooldowns: hist.Cooldowns(), Pacer: c.Pacer}
	return c, nil
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
	_ = c.Telemetry.Close(ctx) // bounded; what was not exported is counted on stderr
	c.Providers.Close()
}
