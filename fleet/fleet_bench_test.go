package fleet_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitscope/limitscope/calls"
	"github.com/limitscope/limitscope/fleet/fleettest"
	"github.com/limitscope/limitscope/proxy"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// fleetRun is what the simulator counted over one fleet run.
type fleetRun struct {
	requests, rejected int64
	seconds            float64
}

// okPerSecond is the answered requests per second.
func (r fleetRun) okPerSecond() float64 { return float64(r.requests-r.rejected) / r.seconds }

// ofLimit is the answered requests as a share of what the bucket allowed
// over the run: its burst of 5 and 5 a second.
func (r fleetRun) ofLimit() float64 {
	return 100 * float64(r.requests-r.rejected) / (5 + 5*r.seconds)
}

// BenchmarkFleet runs two proxies and a bench process, each with its own
// engine and 8 callers, against one simulator bucket (the "bench" scenario:
// 300 requests a minute, 5 a second with a burst of 5) for FLEET_SECONDS
// (default 20), first sharing one Redis (--state), then each on its own
// state, and reports for both the answered rate as a share of the limit and
// the share of requests rejected with a 429 (both counted by the simulator).
// Run it with
//
//	go test -run '^$' -bench Fleet -benchtime 1x ./fleet/
func BenchmarkFleet(b *testing.B) {
	r := fleettest.Start(b)
	secs := 20
	if v := os.Getenv("FLEET_SECONDS"); v != "" {
		fmt.Sscan(v, &secs)
	}
	d := time.Duration(secs) * time.Second
	for i := 0; i < b.N; i++ {
		shared := runFleet(b, r.URL(), d)
		alone := runFleet(b, "", d)
		b.ReportMetric(shared.ofLimit(), "redis-%limit")
		b.ReportMetric(100*float64(shared.rejected)/float64(shared.requests), "redis-%rejected")
		b.ReportMetric(alone.ofLimit(), "alone-%limit")
		b.ReportMetric(100*float64(alone.rejected)/float64(alone.requests), "alone-%rejected")
		b.Logf("with Redis: %d requests, %d rejected, %.2f ok/s; alone: %d requests, %d rejected, %.2f ok/s (limit 5/s)",
			shared.requests, shared.rejected, shared.okPerSecond(), alone.requests, alone.rejected, alone.okPerSecond())
	}
}

// runFleet runs the three processes on a fresh simulator for d, with
// --state url ("" : none).
func runFleet(b *testing.B, url string, d time.Duration) fleetRun {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := sim.Start(ctx, "127.0.0.1:0", sim.Options{Scenario: "bench", Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	env := map[string]string{"OPENAI_BASE_URL": s.BaseURL("openai"), "OPENAI_API_KEY": sim.FakeKey}
	open := func(command string) *calls.Calls {
		fs := flag.NewFlagSet(command, flag.ContinueOnError)
		var f calls.Flags
		f.Register(fs)
		args := []string{"--no-history"}
		if url != "" {
			args = append(args, "--state", url)
		}
		if err := fs.Parse(args); err != nil {
			b.Fatal(err)
		}
		c, err := calls.Open(ctx, calls.Env{Getenv: func(k string) string { return env[k] }}, f, false, command)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	const token = "fleet-bench-proxy-token-0123456789abcdef"
	var procs []*calls.Calls
	var proxies []*httptest.Server
	for i := 0; i < 2; i++ {
		c := open("proxy")
		procs = append(procs, c)
		h, err := c.ProxyHandler(token, &proxy.Config{}, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		proxies = append(proxies, httptest.NewServer(h))
	}
	direct := open("bench")
	procs = append(procs, direct)
	defer func() {
		for _, p := range proxies {
			p.Close()
		}
		for _, c := range procs {
			c.Close(context.Background(), time.Second)
		}
	}()

	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	const workers = 8
	target := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	for _, p := range proxies {
		client := p.Client()
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := `{"model":"openai/gpt-5.4-mini","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
				for runCtx.Err() == nil {
					req, _ := http.NewRequestWithContext(runCtx, http.MethodPost, p.URL+"/v1/chat/completions", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+token)
					req.Header.Set("Content-Type", "application/json")
					resp, err := client.Do(req)
					if err != nil {
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
			}()
		}
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				direct.Run(runCtx, retry.Call{Chain: []stream.Target{target}, Prompt: "hi", MaxTokens: 16, Policy: retry.DefaultPolicy()}, nil)
			}
		}()
	}
	start := time.Now()
	timer := time.NewTimer(d)
	<-timer.C
	st := s.Server.Status()
	el := time.Since(start)
	stop()
	wg.Wait()
	for _, p := range st.Providers {
		if p.Provider == "openai" {
			return fleetRun{requests: p.Requests, rejected: p.Errors, seconds: el.Seconds()}
		}
	}
	b.Fatal("no openai in the simulator's status")
	return fleetRun{}
}
