package calls

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// SimRequested reports whether --sim or LIMITSCOPE_SIM puts a command on the
// simulator.
func SimRequested(getenv func(string) string, simFlag bool) bool {
	if simFlag {
		return true
	}
	switch strings.ToLower(getenv("LIMITSCOPE_SIM")) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// AnyKey reports whether any provider's key is set in the environment.
func AnyKey(getenv func(string) string) bool {
	for _, p := range stream.Providers() {
		if _, err := stream.Resolve(p.Name, getenv); err == nil {
			return true
		}
	}
	return false
}

// Providers are one command's providers: all real or all simulated, never
// a mix.
type Providers struct {
	Simulated bool
	Scenario  string                             // the simulator's scenario (simulated only)
	Endpoints map[string]stream.Endpoint         // by provider name: the reachable ones
	Missing   map[string]*stream.MissingKeyError // real only: providers without a key
	Sim       *sim.Running                       // simulated only: the embedded simulator
	// Accounts are the named accounts' key variables from the accounts
	// file (AccountsFile), by "provider@account"; an account not in it
	// reads stream.AccountKeyEnv's conventional variable.
	Accounts map[string]string
	getenv   func(string) string
}

// OpenProviders sets up the providers. Simulated: an embedded simulator on a
// loopback port, every provider's base URL pointing at it (whatever
// *_BASE_URL says) with the simulator's fake key. Real: each provider's key
// and base URL from the environment; providers without a key are in Missing.
func OpenProviders(ctx context.Context, getenv func(string) string, sf SimFlags, simulated bool) (*Providers, error) {
	p := &Providers{Simulated: simulated, Endpoints: map[string]stream.Endpoint{}, Missing: map[string]*stream.MissingKeyError{}, getenv: getenv}
	if !simulated {
		accts, err := LoadAccounts(getenv)
		if err != nil {
			return nil, err
		}
		p.Accounts = accts
		for _, info := range stream.Providers() {
			ep, err := stream.Resolve(info.Name, getenv)
			var mk *stream.MissingKeyError
			if errors.As(err, &mk) {
				p.Missing[info.Name] = mk
				continue
			} else if err != nil {
				return nil, fmt.Errorf("provider %s: %w", info.Name, err)
			}
			p.Endpoints[info.Name] = ep
		}
		return p, nil
	}
	// Seed 0 is the simulator's rule (sim.Options.Seed: a random seed).
	r, err := sim.Start(ctx, "127.0.0.1:0", sim.Options{Scenario: sf.Scenario, ScenarioFile: sf.ScenarioFile, Seed: sf.Seed, Answer: sf.Answer})
	if err != nil {
		return nil, fmt.Errorf("starting the simulator: %w", err)
	}
	p.Sim = r
	p.Scenario = r.Server.Scenario()
	for _, info := range stream.Providers() {
		ep := stream.Endpoint{Provider: info.Name, BaseURL: r.BaseURL(info.Name), Key: stream.Secret(sim.FakeKey)}
		if info.SigV4Service != "" {
			// An AWS API signs with the simulated credentials, which the
			// simulator verifies (a Bedrock API key works too: curl uses it).
			ep.Key, ep.AWS = "", sim.FakeAWSAuth()
		}
		p.Endpoints[info.Name] = ep
	}
	return p, nil
}

// Close stops the embedded simulator, if any.
func (p *Providers) Close() {
	if p.Sim != nil {
		_ = p.Sim.Close()
	}
}

// Check returns the configuration error for the first target whose provider
// (or named account) has no key.
func (p *Providers) Check(chain []stream.Target) error {
	for _, t := range chain {
		if t.Account != "" {
			if _, err := p.AccountEndpoint(t); err != nil {
				return err
			}
			continue
		}
		if mk, ok := p.Missing[t.Provider]; ok {
			return mk
		}
	}
	return nil
}

// AccountEndpoint is the endpoint of t's named account (stream.Router's
// Accounts): on the simulator its base URL with sim.AccountKey(account),
// which the simulator counts as another account; else the provider's base
// URL with the key from the account's variable (the accounts file's, or
// stream.AccountKeyEnv's convention). A missing key is a
// *stream.MissingKeyError naming the variable.
func (p *Providers) AccountEndpoint(t stream.Target) (stream.Endpoint, error) {
	base, ok := p.Endpoints[t.Provider]
	if p.Simulated {
		if !ok {
			return stream.Endpoint{}, fmt.Errorf("provider %s: not simulated", t.Provider)
		}
		base.Key = stream.Secret(sim.AccountKey(t.Account))
		return base, nil
	}
	getenv := p.getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	var vars []string
	if v, ok := p.Accounts[stream.EndpointKey(accountOf(t.Provider), t.Account)]; ok {
		vars = []string{v}
	}
	return stream.ResolveAccount(t.Provider, t.Account, vars, getenv)
}

// accountOf is the provider whose account a provider row spends
// ("openai" for "openai:responses").
func accountOf(provider string) string {
	if info, ok := stream.Provider(provider); ok {
		return info.AccountName()
	}
	return provider
}

// Available reports whether provider can be reached (it has a key, or the
// session is simulated).
func (p *Providers) Available(provider string) bool {
	_, ok := p.Endpoints[provider]
	return ok
}

// Where says where calls go, for a banner: "real providers" or "the
// simulator, scenario S".
func (p *Providers) Where() string {
	if p.Simulated {
		return "the simulator, scenario " + p.Scenario
	}
	return "real providers"
}

// Curl renders an attempt as the curl command that repeats it: the real
// request, with the key as a reference to its variable ($OPENAI_API_KEY), or
// the simulator's fake key in a simulated session.
func (p *Providers) Curl(maxTokens int) func(at retry.Attempt, prompt string) string {
	return func(at retry.Attempt, prompt string) string {
		ep, ok := p.Endpoints[at.Target.Provider]
		if !ok {
			return ""
		}
		keyText := sim.AccountKey(at.Target.Account)
		if !p.Simulated {
			vars := stream.AccountKeyEnv(at.Target.Provider, at.Target.Account)
			if v, ok := p.Accounts[stream.EndpointKey(accountOf(at.Target.Provider), at.Target.Account)]; ok && at.Target.Account != "" {
				vars = []string{v}
			}
			if len(vars) == 0 {
				return ""
			}
			keyText = "$" + vars[0]
		}
		cmd, err := stream.Curl(ep, stream.Request{Target: at.Target, Prompt: prompt, MaxTokens: maxTokens}, keyText)
		if err != nil {
			return ""
		}
		return cmd
	}
}
