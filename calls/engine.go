package calls

import (
	"context"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
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
	now := env.Now
	if now == nil {
		now = time.Now
	}
	c := &Calls{
		Providers: provs,
		History:   hist,
		Doer:      &stream.Router{Client: &stream.Client{Options: f.Stream, Now: now}, Endpoints: provs.Endpoints, Accounts: provs.AccountEndpoint},
		Pacer:     retry.NewPacer(),
		env:       env,
		policy:    f.Policy,
	}
	c.Engine = &retry.Engine{Doer: c.Doer, Clock: env.Clock, Cooldowns: hist.Cooldowns(), Pacer: c.Pacer}
	return c, nil
}

// Run runs call on the engine, recording it in the history; sink sees every
// event too. It is the console's Runner.
func (c *Calls) Run(ctx context.Context, call retry.Call, sink func(retry.Event)) retry.Result {
	return c.Engine.Run(ctx, call, c.History.Sink(call, sink))
}

// Close commits the history (waiting up to allowance for the file) and
// then stops the embedded simulator.
func (c *Calls) Close(ctx context.Context, allowance time.Duration) {
	c.History.Close(ctx, allowance)
	c.Providers.Close()
}
