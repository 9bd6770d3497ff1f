package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// sessionFlags are the flags every command that talks to providers shares.
type sessionFlags struct {
	sim          bool
	scenario     string
	scenarioFile string
}

// simRequested reports whether the flags or LIMITSCOPE_SIM put the session
// on the simulator.
func (a *app) simRequested(sf sessionFlags) bool {
	if sf.sim {
		return true
	}
	switch strings.ToLower(a.getenv("LIMITSCOPE_SIM")) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// session is one command's providers: all real or all simulated, never a mix.
type session struct {
	simulated bool
	scenario  string
	endpoints map[string]stream.Endpoint
	missing   map[string]*stream.MissingKeyError // real sessions: providers without a key
	running   *sim.Running                       // simulated sessions: the in-process simulator
}

// openSession sets up the providers. Simulated: an in-process simulator on a
// loopback port, every provider's base URL pointing at it (whatever *_BASE_URL
// says) with the simulator's fake key. Real: each provider's key and base URL
// from the environment; providers without a key are listed in missing.
func (a *app) openSession(ctx context.Context, sf sessionFlags, simulated bool) (*session, error) {
	s := &session{simulated: simulated, endpoints: map[string]stream.Endpoint{}, missing: map[string]*stream.MissingKeyError{}}
	if !simulated {
		for _, p := range stream.Providers() {
			ep, err := stream.Resolve(p.Name, a.getenv)
			if mk, ok := err.(*stream.MissingKeyError); ok {
				s.missing[p.Name] = mk
				continue
			} else if err != nil {
				return nil, err
			}
			s.endpoints[p.Name] = ep
		}
		return s, nil
	}
	scenario := sf.scenario
	if scenario == "" {
		scenario = "calm"
	}
	r, err := sim.Start(ctx, "127.0.0.1:0", sim.Options{Scenario: scenario, ScenarioFile: sf.scenarioFile})
	if err != nil {
		return nil, fmt.Errorf("starting the simulator: %w", err)
	}
	s.running = r
	s.scenario = r.Server.Scenario()
	for _, p := range stream.Providers() {
		s.endpoints[p.Name] = stream.Endpoint{Provider: p.Name, BaseURL: r.BaseURL(p.Name), Key: stream.Secret(sim.FakeKey)}
	}
	return s, nil
}

// close stops the in-process simulator, if any.
func (s *session) close() {
	if s.running != nil {
		_ = s.running.Close()
	}
}

// check returns the configuration error for the first target whose provider
// has no key.
func (s *session) check(chain []stream.Target) error {
	for _, t := range chain {
		if mk, ok := s.missing[t.Provider]; ok {
			return mk
		}
	}
	return nil
}

// anyKey reports whether any provider's key is set in the environment.
func (a *app) anyKey() bool {
	for _, p := range stream.Providers() {
		if _, err := stream.Resolve(p.Name, a.getenv); err == nil {
			return true
		}
	}
	return false
}
