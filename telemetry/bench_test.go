package telemetry_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
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

// BenchmarkThousandCalls is export's CPU cost end to end. Each op is one
// round: the same 1,000 calls through the real engine, stream client and
// simulator (all in this process) run three ways, export off, export on to
// an in-process OTLP/HTTP collector that reads and discards (its CPU counts
// against export), and export on with the collector unreachable, in
// interleaved blocks of 250 calls whose order rotates, so that a change in
// the machine's load falls on all three alike. Each block is measured in
// the process's CPU time (getrusage: user + system of every thread, which a
// loaded machine inflates far less than wall time) and includes its spans
// built and their batches sent. Reported: the median CPU per call of each
// way (cpu-us/call-off, -on, -unreachable) and the median over rounds of
// each round's on/off and unreachable/off CPU ratio, as the CPU export adds
// (export-%, unreachable-%); -v logs every round. A few percent is within
// one round's noise on a loaded machine: take 20 rounds or more.
//
// It runs twice: with the shortest answers (a 32-token cap, the cheapest
// call there is, so export's fixed cost per call weighs most) and with the
// simulator's default answer (no cap set: stream's default cap, the
// simulator's usual answer of a few paragraphs).
//
//	go test -run '^$' -bench ThousandCalls -benchtime 20x ./telemetry/
func BenchmarkThousandCalls(b *testing.B) {
	b.Run("answer=32-tokens", func(b *testing.B) { benchThousandCalls(b, 32) })
	b.Run("answer=default", func(b *testing.B) { benchThousandCalls(b, 0) })
}

func benchThousandCalls(b *testing.B, maxTokens int) {
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
	newTel := func(endpoint string) *telemetry.Telemetry {
		env := map[string]string{telemetry.EnvEndpoint: endpoint}
		tel, err := telemetry.New(context.Background(), telemetry.Options{Getenv: func(k string) string { return env[k] }})
		if err != nil || tel == nil {
			b.Fatalf("telemetry for %s: %v, %v", endpoint, tel, err)
		}
		return tel
	}
	on, unreachable := newTel(sink.URL), newTel(dead)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = on.Close(ctx)
		_ = unreachable.Close(ctx)
	}()

	// The simulator's minute passes after each call: its per-minute limits
	// never stop the run. One engine and one simulator for all three: the
	// runs differ in their sink only.
	simClock := retrytest.NewFakeClock(time.Now())
	_, router := startSimClock(b, simClock)
	eng := &retry.Engine{Doer: router, Clock: retrytest.NewFakeClock(time.Now())}
	targets := []stream.Target{{Provider: "openai", Model: "gpt-5.4-mini"}, {Provider: "anthropic", Model: "claude-haiku-4-5"},
		{Provider: "deepseek", Model: "deepseek-chat"}, {Provider: "openai:responses", Model: "gpt-5.4-mini"}}
	const calls, blocks = 1000, 4
	// Every command has a sink of its own (the console's, send's printer,
	// the proxy's answer, the history's recorder), so the engine builds its
	// events with export off too; export wraps that sink.
	caller := func(retry.Event) {}
	run := func(tel *telemetry.Telemetry, n int) time.Duration {
		start := cpuTime()
		for i := range n {
			call := retry.Call{Chain: []stream.Target{targets[i%len(targets)]}, Prompt: "hello", MaxTokens: maxTokens,
				Policy: retry.Policy{MaxAttempts: 1}}
			if res := eng.Run(context.Background(), call, tel.Sink(call, caller)); res.Outcome != retry.OutcomeOK {
				b.Fatalf("call %d: %s %v", i, res.Outcome, res.Err)
			}
			simClock.Advance(time.Minute)
		}
		if tel == on {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := tel.FlushSpans(ctx)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
		} else if err := tel.Flush(context.Background()); err != nil { // unreachable: its exporter is retrying, not working
			b.Fatal(err)
		}
		return cpuTime() - start
	}
	runs := []*telemetry.Telemetry{nil, on, unreachable}
	for _, tel := range runs { // warm up: connections, attribute sets, the heap's size
		run(tel, calls/blocks)
	}
	// A round runs each kind's 1,000 calls in blocks of 250 (a block's 500
	// spans go in one batch, about the SDK's default of 512), the three
	// kinds' blocks interleaved (the order rotating from block to block), so
	// that a change in the machine's load falls on all three alike.
	var cpu [3][]float64 // per run kind, per round: CPU of 1,000 calls (us)
	for b.Loop() {
		var sum [3]time.Duration
		for blk := range blocks {
			for k := range runs {
				i := (blk + k) % len(runs)
				sum[i] += run(runs[i], calls/blocks)
			}
		}
		for i := range sum {
			cpu[i] = append(cpu[i], float64(sum[i].Microseconds()))
		}
		b.Logf("round %d: CPU per call off %.0f us, on %+.1f%%, unreachable %+.1f%%", len(cpu[0]),
			float64(sum[0].Microseconds())/calls, 100*(float64(sum[1])/float64(sum[0])-1), 100*(float64(sum[2])/float64(sum[0])-1))
	}
	b.StopTimer()
	if s := on.Stats(); s.Spans == 0 || s.Dropped > 0 || s.SpansFailed > 0 || s.SpansExported != s.Spans {
		b.Fatalf("export on: %+v; want every span exported", s)
	}
	ratio := func(x []float64) float64 {
		r := make([]float64, len(x))
		for i := range x {
			r[i] = x[i] / cpu[0][i]
		}
		return (median(r) - 1) * 100
	}
	b.ReportMetric(median(cpu[0])/calls, "cpu-us/call-off")
	b.ReportMetric(median(cpu[1])/calls, "cpu-us/call-on")
	b.ReportMetric(median(cpu[2])/calls, "cpu-us/call-unreachable")
	b.ReportMetric(ratio(cpu[1]), "export-%")
	b.ReportMetric(ratio(cpu[2]), "unreachable-%")
}

// median is the median of x.
func median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	x = slices.Clone(x)
	slices.Sort(x)
	if n := len(x); n%2 == 0 {
		return (x[n/2-1] + x[n/2]) / 2
	}
	return x[len(x)/2]
}

// BenchmarkExportOneCall is export's own cost for one call of one attempt
// with a limits snapshot (the shape of BenchmarkThousandCalls's calls):
// handing it over, building its spans and metrics, and the OTLP batches
// (to a collector in this process that discards them), in CPU per call.
// Every span must reach the collector (the SDK's queue drops spans past
// 8,192 without a word, which once made this figure a third too low).
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
	flush := func() {
		if err := tel.FlushSpans(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	n := 0
	start := cpuTime()
	for b.Loop() {
		s(ev)
		n++
		if n%1024 == 0 { // 3,072 spans (a call, its inference, its request): within the SDK's span queue (8,192), which drops past it
			flush()
		}
	}
	flush()
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(n), "cpu-us/call")
	b.StopTimer()
	if s := tel.Stats(); s.Dropped > 0 || s.SpansExported != s.Spans {
		b.Fatalf("%+v: want every span exported", s)
	}
	_ = tel.Close(context.Background())
}
