package telemetry_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/telemetry"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkThousandCalls sends 1,000 calls per op through the real engine,
// stream client and simulator (in this process), with export off, on (to
// an OTLP/HTTP collector in this process that reads and discards: its CPU
// is counted against export), and on with the collector unreachable. It
// reports the process's CPU per call (cpu-us/call): export's cost is the
// difference to "off".
//
//	go test -run '^$' -bench ThousandCalls -benchtime 5x ./telemetry/
func BenchmarkThousandCalls(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer sink.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	for _, bc := range []struct{ name, endpoint string }{{"off", ""}, {"on", sink.URL}, {"unreachable", dead}} {
		b.Run("export="+bc.name, func(b *testing.B) {
			env := map[string]string{}
			if bc.endpoint != "" {
				env[telemetry.EnvEndpoint] = bc.endpoint
			}
			tel, err := telemetry.New(context.Background(), telemetry.Options{Getenv: func(k string) string { return env[k] }})
			if err != nil {
				b.Fatal(err)
			}
			if (tel != nil) != (bc.endpoint != "") {
				b.Fatalf("telemetry %v for endpoint %q", tel, bc.endpoint)
			}
			// The simulator's minute passes after each call: its per-minute
			// limits never stop the run.
			simClock := retrytest.NewFakeClock(time.Now())
			_, router := startSimClock(b, simClock)
			eng := &retry.Engine{Doer: router, Clock: retrytest.NewFakeClock(time.Now())}
			targets := []stream.Target{{Provider: "openai", Model: "gpt-5.4-mini"}, {Provider: "anthropic", Model: "claude-haiku-4-5"},
				{Provider: "deepseek", Model: "deepseek-chat"}, {Provider: "openai:responses", Model: "gpt-5.4-mini"}}
			calls := 0
			start := cpuTime()
			for b.Loop() {
				for i := range 1000 {
					call := retry.Call{Chain: []stream.Target{targets[i%len(targets)]}, Prompt: "hello", MaxTokens: 32,
						Policy: retry.Policy{MaxAttempts: 1}}
					if res := eng.Run(context.Background(), call, tel.Sink(call, nil)); res.Outcome != retry.OutcomeOK {
						b.Fatalf("call %d: %s %v", i, res.Outcome, res.Err)
					}
					calls++
					simClock.Advance(time.Minute)
				}
			}
			if err := tel.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
			used := cpuTime() - start // the spans built, their batches exported or failed within the run
			b.ReportMetric(float64(used.Microseconds())/float64(calls), "cpu-us/call")
			b.StopTimer()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = tel.Close(ctx)
		})
	}
}

// BenchmarkExportOneCall is export's own cost for one call of one attempt
// with a limits snapshot (the shape of BenchmarkThousandCalls's calls):
// handing it over, building its spans and metrics, and the OTLP batches
// (to a collector in this process that discards them), in CPU per call.
//
//	go test -run '^$' -bench ExportOneCall ./telemetry/
func BenchmarkExportOneCall(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer sink.Close()
	env := map[string]string{telemetry.EnvEndpoint: sink.URL}
	tel, err := telemetry.New(context.Background(), telemetry.Options{Getenv: func(k string) string { return env[k] }, QueueSize: 1 << 16})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	tg := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	w := func(l, r int64) *stream.Window {
		return &stream.Window{Limit: l, Remaining: r, HasLimit: true, HasRemaining: true, Reset: now.Add(time.Second)}
	}
	res := &retry.Result{CallID: "c1", Outcome: retry.OutcomeOK, ServedBy: &tg, Usage: &stream.Usage{InputTokens: 10, OutputTokens: 30},
		FinishReason: "stop", Started: now, Ended: now.Add(300 * time.Millisecond),
		Attempts: []retry.Attempt{{N: 1, Target: tg, Status: 200, Class: stream.ClassOK, RequestID: "req_0123456789", StartedAt: now,
			Duration: 290 * time.Millisecond, TTFT: 80 * time.Millisecond, Decision: retry.DecideDone,
			Limits: &stream.Limits{At: now, Requests: w(500, 499), Tokens: w(200000, 199000)}}}}
	call := retry.Call{Chain: []stream.Target{tg}, Prompt: "hello", MaxTokens: 32}
	s := tel.Sink(call, nil)
	ev := retry.Event{Kind: retry.EventCallEnd, Result: res}
	n := 0
	start := cpuTime()
	for b.Loop() {
		s(ev)
		n++
		if n%4096 == 0 {
			_ = tel.Flush(context.Background())
		}
	}
	_ = tel.Flush(context.Background())
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(n), "cpu-us/call")
	b.StopTimer()
	if d := tel.Stats().Dropped; d > 0 {
		b.Fatalf("%d dropped", d)
	}
	_ = tel.Close(context.Background())
}
