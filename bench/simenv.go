package bench

import (
	"context"
	"fmt"
	"net/http"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// SimEnv runs every policy against a simulator of its own, started fresh for
// that policy, so no policy inherits another's drained buckets.
type SimEnv struct {
	// Options configure each fresh simulator.
	Options sim.Options
	// InMemory serves the simulator over in-memory connections instead of a
	// loopback port (for tests and benchmarks in a testing/synctest bubble).
	InMemory bool
	// Stream configures the stream.Client that speaks to it (zero: defaults).
	Stream stream.Options
	// OnStart, when set, is told each fresh simulator's base URL ("" in memory).
	OnStart func(policy, url string)
	// AtOnce runs the policies at the same time (each on its own
	// simulator, so none counts against another's limits): the run takes
	// as long as its slowest policy, not as long as all of them.
	AtOnce bool
}

// Parallel reports whether Run may run the policies at once (AtOnce).
func (e *SimEnv) Parallel() bool { return e.AtOnce }

// inMemoryURL is the host every in-memory request names; the in-memory
// transport answers for any host.
const inMemoryURL = "http://sim.invalid"

// Prepare starts a fresh simulator and returns a stream.Router whose every
// provider points at it with the simulator's fake key.
func (e *SimEnv) Prepare(ctx context.Context, policy string, _ *stream.Limits) (retry.Doer, func(), error) {
	var (
		root string
		hc   *http.Client
		stop func()
	)
	if e.InMemory {
		srv, err := sim.New(e.Options)
		if err != nil {
			return nil, nil, fmt.Errorf("simulator: %w", err)
		}
		var stopMem func()
		hc, stopMem = InMemory(srv)
		root = inMemoryURL
		stop = func() {
			srv.Close() // releases hung requests
			stopMem()
		}
	} else {
		r, err := sim.Start(ctx, "", e.Options)
		if err != nil {
			return nil, nil, fmt.Errorf("simulator: %w", err)
		}
		tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 256}
		hc = &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		root = r.URL
		stop = func() {
			tr.CloseIdleConnections()
			_ = r.Close()
		}
	}
	if e.OnStart != nil {
		url := root
		if e.InMemory {
			url = ""
		}
		e.OnStart(policy, url)
	}
	eps := map[string]stream.Endpoint{}
	for _, p := range sim.Providers() {
		eps[p] = stream.Endpoint{Provider: p, BaseURL: sim.BaseURL(root, p), Key: stream.Secret(sim.FakeKey)}
	}
	router := &stream.Router{Client: &stream.Client{HTTP: hc, Options: e.Stream}, Endpoints: eps}
	return router, stop, nil
}
