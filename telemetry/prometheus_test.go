package telemetry_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/limitscope/limitscope/calls"
	"github.com/limitscope/limitscope/proxy"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// openProxy is `limitscope proxy`'s wiring (calls.Open for "proxy" on the
// simulator, its ProxyHandler) behind an httptest server, with env's
// variables.
func openProxy(t *testing.T, vars map[string]string) (*calls.Calls, *httptest.Server) {
	t.Helper()
	env := calls.Env{Getenv: func(k string) string { return vars[k] }, Stderr: io.Discard, Clock: retrytest.NewFakeClock(time.Now()), Version: "test"}
	f := calls.Flags{History: calls.HistoryFlags{NoHistory: true}, Sim: calls.SimFlags{Sim: true, Seed: 3}}
	cs, err := calls.Open(context.Background(), env, f, true, "proxy")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(context.Background(), time.Second) })
	if cs.Telemetry == nil {
		t.Fatal("the proxy has no telemetry: /metrics needs it")
	}
	h, err := cs.ProxyHandler(proxyToken, &proxy.Config{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return cs, srv
}

const proxyToken = "lsp-test-token-for-metrics-0001"

// do sends one request to srv.
func do(t *testing.T, srv *httptest.Server, method, path, auth, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// scrape reads /metrics with the official text parser and lints it.
func scrape(t *testing.T, cs *calls.Calls, srv *httptest.Server) (map[string]*dto.MetricFamily, []byte) {
	t.Helper()
	// The metrics are recorded off the call's goroutine: wait for that.
	if err := cs.Telemetry.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, b := do(t, srv, "GET", "/metrics", proxyToken, "")
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, b)
	}
	problems, err := promlint.New(bytes.NewReader(b)).Lint()
	if err != nil {
		t.Fatalf("promlint: %v", err)
	}
	for _, pr := range problems {
		t.Errorf("promlint: %s: %s", pr.Metric, pr.Text)
	}
	return fams, b
}

func labels(m *dto.Metric) map[string]string {
	lbl := map[string]string{}
	for _, l := range m.Label {
		lbl[l.GetName()] = l.GetValue()
	}
	return lbl
}

// TestProxyMetricsScrape sends a call through the proxy that is retried
// once after a 500, and scrapes /metrics: refused without the token, and
// with it a Prometheus text page the official parser reads and promlint
// passes, whose names carry their units, with one operation point for the
// call (not one per request) and a request duration point per request.
func TestProxyMetricsScrape(t *testing.T) {
	cs, srv := openProxy(t, nil)
	if err := cs.Providers.Sim.Server.Inject(sim.Fault{Provider: "openai", Kind: sim.FaultServerError}); err != nil {
		t.Fatal(err)
	}
	resp, b := do(t, srv, "POST", "/v1/chat/completions", proxyToken, `{"model":"openai/gpt-5.4-mini","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get(proxy.HeaderAttempts) != "2" {
		t.Fatalf("the call: %d, %s attempts: %s", resp.StatusCode, resp.Header.Get(proxy.HeaderAttempts), b)
	}
	if resp, _ := do(t, srv, "GET", "/metrics", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/metrics without the token: %d, want 401", resp.StatusCode)
	}
	if resp, _ := do(t, srv, "GET", "/metrics", "wrong-token", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/metrics with a wrong token: %d, want 401", resp.StatusCode)
	}
	cs.Telemetry.SetQueued(func() int { return 3 }) // the concurrency gate's hook
	fams, b := scrape(t, cs, srv)
	for name, typ := range map[string]dto.MetricType{
		"gen_ai_client_operation_duration_seconds":              dto.MetricType_HISTOGRAM,
		"gen_ai_client_operation_time_to_first_chunk_seconds":   dto.MetricType_HISTOGRAM,
		"gen_ai_client_operation_time_per_output_chunk_seconds": dto.MetricType_HISTOGRAM,
		"gen_ai_client_token_usage":                             dto.MetricType_HISTOGRAM,
		"http_client_request_duration_seconds":                  dto.MetricType_HISTOGRAM,
		"limitscope_call_attempts":                              dto.MetricType_HISTOGRAM,
		"limitscope_call_duration_seconds":                      dto.MetricType_HISTOGRAM,
		"limitscope_wait_duration_seconds":                      dto.MetricType_HISTOGRAM,
		"limitscope_ratelimit_requests_remaining":               dto.MetricType_GAUGE,
		"limitscope_ratelimit_requests_limit":                   dto.MetricType_GAUGE,
		"limitscope_ratelimit_tokens_remaining":                 dto.MetricType_GAUGE,
		"limitscope_proxy_calls_in_flight":                      dto.MetricType_GAUGE,
		"limitscope_proxy_calls_queued":                         dto.MetricType_GAUGE,
		"limitscope_telemetry_dropped_total":                    dto.MetricType_COUNTER,
	} {
		if fams[name] == nil {
			t.Errorf("no %s in /metrics", name)
		} else if fams[name].GetType() != typ {
			t.Errorf("%s is a %v, want a %v", name, fams[name].GetType(), typ)
		}
	}
	for _, gone := range []string{"limitscope_ratelimit_remaining", "limitscope_ratelimit_limit"} {
		if fams[gone] != nil {
			t.Errorf("%s mixes requests and tokens; it is split per unit", gone)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", b)
		return
	}
	if m := fams["limitscope_call_attempts"].Metric; len(m) != 1 || m[0].GetHistogram().GetSampleCount() != 1 || m[0].GetHistogram().GetSampleSum() != 2 {
		t.Errorf("attempts per call: %v, want one call of 2 attempts", fams["limitscope_call_attempts"])
	}
	var ops uint64
	for _, m := range fams["gen_ai_client_operation_duration_seconds"].Metric {
		lbl := labels(m)
		if lbl["gen_ai_provider_name"] != "openai" || lbl["gen_ai_request_model"] != "gpt-5.4-mini" || lbl["gen_ai_operation_name"] != "chat" ||
			lbl["error_type"] != "" || lbl["server_address"] != "127.0.0.1" || lbl["server_port"] == "" {
			t.Errorf("operation duration labels %v", lbl)
		}
		ops += m.GetHistogram().GetSampleCount()
	}
	if ops != 1 {
		t.Errorf("%d operation points, want 1: one call, retried once, is one operation", ops)
	}
	byType := map[string]uint64{}
	for _, m := range fams["http_client_request_duration_seconds"].Metric {
		byType[labels(m)["error_type"]] += m.GetHistogram().GetSampleCount()
	}
	if !maps.Equal(byType, map[string]uint64{"500": 1, "": 1}) {
		t.Errorf("requests by error_type %v, want a 500 and a success", byType)
	}
	for _, m := range fams["limitscope_ratelimit_tokens_remaining"].Metric {
		if labels(m)["limitscope_ratelimit_window"] == "" {
			t.Errorf("tokens gauge without its window: %v", labels(m))
		}
	}
	if n := fams["limitscope_proxy_calls_in_flight"].Metric; len(n) != 1 || n[0].GetGauge().GetValue() != 0 {
		t.Errorf("calls in flight after the call: %v, want 0", n)
	}
	if n := fams["limitscope_proxy_calls_queued"].Metric; len(n) != 1 || n[0].GetGauge().GetValue() != 3 {
		t.Errorf("calls queued: %v, want the 3 set", n)
	}
	if bytes.Contains(b, []byte(proxyToken)) {
		t.Error("the proxy token is in /metrics")
	}
}

// series counts the series of a scrape.
func series(fams map[string]*dto.MetricFamily) int {
	n := 0
	for _, f := range fams {
		n += len(f.Metric)
	}
	return n
}

// TestProxyMetricsBounded: callers name models the proxy does not route to
// (and an upstream answers with model names of its own); the metrics count
// them under "other", so the series stay as many after 3,000 invented
// names as after the first few, and every model label value is a served
// model or "other".
func TestProxyMetricsBounded(t *testing.T) {
	cs, srv := openProxy(t, nil)
	// Through the proxy: a served model and two it does not list.
	for _, m := range []string{"openai/gpt-5.4-mini", "openai/invented-model-a", "anthropic/invented-model-b"} {
		do(t, srv, "POST", "/v1/chat/completions", proxyToken, `{"model":"`+m+`","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)
	}
	// Then straight into the telemetry (3,000 calls through the simulator
	// would take too long here): answered calls to invented models, with
	// invented response models and rate-limit headers.
	send := func(from, to int) {
		for i := from; i < to; i++ {
			tg := stream.Target{Provider: []string{"openai", "anthropic", "gemini"}[i%3], Model: fmt.Sprintf("invented-%d", i)}
			call := retry.Call{ID: fmt.Sprint("c", i), Chain: []stream.Target{tg}}
			start := time.Now()
			left := int64(100 - i%50)
			res := &retry.Result{CallID: call.ID, Outcome: retry.OutcomeOK, Started: start, Ended: start.Add(time.Second),
				ServedBy: &stream.Target{Provider: tg.Provider, Model: tg.Model + "-2026-01-01"}, Usage: &stream.Usage{InputTokens: 3, OutputTokens: 5},
				Attempts: []retry.Attempt{{N: 1, Target: tg, Status: 200, Class: stream.ClassOK, StartedAt: start, Duration: time.Second, TTFT: time.Millisecond,
					Limits: &stream.Limits{Requests: &stream.Window{Remaining: left, HasRemaining: true}, Tokens: &stream.Window{Remaining: left, HasRemaining: true}}}}}
			cs.Telemetry.Sink(call, nil)(retry.Event{Kind: retry.EventCallEnd, Result: res})
		}
	}
	send(0, 30)
	before, _ := scrape(t, cs, srv)
	send(30, 3000)
	after, b := scrape(t, cs, srv)
	if s := cs.Telemetry.Stats(); s.Dropped > 0 {
		t.Fatalf("%d calls dropped from the queue: the count below would not be the worst case", s.Dropped)
	}
	if n0, n1 := series(before), series(after); n1 != n0 {
		t.Errorf("%d series after 30 invented models, %d after 3,000: want them flat", n0, n1)
	}
	served := map[string]bool{"other": true}
	for _, p := range stream.Providers() {
		served[p.DefaultModel] = true
	}
	var others uint64
	for name, f := range after {
		for _, m := range f.Metric {
			lbl := labels(m)
			for _, k := range []string{"gen_ai_request_model", "gen_ai_response_model"} {
				if v, ok := lbl[k]; ok && !served[v] {
					t.Errorf("%s: %s=%q, a model the proxy does not route to", name, k, v)
				}
			}
			if name == "gen_ai_client_operation_duration_seconds" && lbl["gen_ai_request_model"] == "other" {
				others += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if others < 3000 {
		t.Errorf("%d operations counted under other, want the 3,000 invented ones (and the proxied ones)", others)
	}
	if len(b) > 200_000 {
		t.Errorf("/metrics is %d bytes after 3,000 invented models", len(b))
	}
}

// TestSendWiringExports: the calls `send` and the console build
// (calls.Open, Calls.Run) export each call when the OTLP endpoint is set in
// their environment, and Close flushes it before returning.
func TestSendWiringExports(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "OTEL_METRICS_EXPORTER": "none"}
	env := calls.Env{Getenv: func(k string) string { return vars[k] }, Stderr: io.Discard, Clock: retrytest.NewFakeClock(time.Now()), Version: "test"}
	f := calls.Flags{History: calls.HistoryFlags{NoHistory: true}, Sim: calls.SimFlags{Sim: true, Seed: 5}}
	cs, err := calls.Open(context.Background(), env, f, true, "send")
	if err != nil {
		t.Fatal(err)
	}
	call := retry.Call{Chain: []stream.Target{{Provider: "anthropic", Model: "claude-haiku-4-5"}}, Prompt: "hi", MaxTokens: 8}
	if res := cs.Run(context.Background(), call, nil); res.Outcome != retry.OutcomeOK {
		t.Fatalf("send: %s", res.Outcome)
	}
	cs.Close(context.Background(), time.Second)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.spans) != 3 {
		t.Fatalf("%d spans exported, want the call's, its inference's and its request's", len(rc.spans))
	}
	st := treeOf(t, rc.spans)
	if len(st.inferences) != 1 || len(st.requests) != 1 {
		t.Fatalf("%d inferences, %d requests; want one each", len(st.inferences), len(st.requests))
	}
	a := attrMap(st.inferences[0].Attributes)
	if str(a, "gen_ai.provider.name") != "anthropic" || str(a, "server.address") != "127.0.0.1" {
		t.Errorf("inference: provider %q, server %q; want anthropic on the simulator", str(a, "gen_ai.provider.name"), str(a, "server.address"))
	}
}

// TestProxyMetricsLatestNames: with the GenAI opt-in the page carries
// semantic-conventions-genai's names under Prometheus naming rules (the
// README's table), and promlint still passes.
func TestProxyMetricsLatestNames(t *testing.T) {
	cs, srv := openProxy(t, map[string]string{"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"})
	if resp, b := do(t, srv, "POST", "/v1/chat/completions", proxyToken, `{"model":"openai/gpt-5.4-mini","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 {
		t.Fatalf("the call: %d %s", resp.StatusCode, b)
	}
	fams, b := scrape(t, cs, srv)
	for name, typ := range map[string]dto.MetricType{
		"gen_ai_client_inference_duration_seconds":              dto.MetricType_HISTOGRAM,
		"gen_ai_client_inference_time_to_first_chunk_seconds":   dto.MetricType_HISTOGRAM,
		"gen_ai_client_inference_time_per_output_chunk_seconds": dto.MetricType_HISTOGRAM,
		"gen_ai_client_inference_usage_input_tokens_total":      dto.MetricType_COUNTER,
		"gen_ai_client_inference_usage_output_tokens_total":     dto.MetricType_COUNTER,
		"gen_ai_client_inference_operation_input_tokens":        dto.MetricType_HISTOGRAM,
		"gen_ai_client_inference_operation_output_tokens":       dto.MetricType_HISTOGRAM,
	} {
		if fams[name] == nil || fams[name].GetType() != typ {
			t.Errorf("%s: %v, want a %v", name, fams[name].GetType(), typ)
		}
	}
	for _, old := range []string{"gen_ai_client_operation_duration_seconds", "gen_ai_client_token_usage", "gen_ai_client_operation_time_to_first_chunk_seconds"} {
		if fams[old] != nil {
			t.Errorf("%s still on the page with the opt-in", old)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", b)
	}
}

// TestProxyMetricsInFlight: while a streamed call is being served (its
// first text reached the caller, then the upstream stalls), the proxy's
// in-flight gauge reads 1; when the caller leaves, 0.
func TestProxyMetricsInFlight(t *testing.T) {
	cs, srv := openProxy(t, nil)
	if err := cs.Providers.Sim.Server.Inject(sim.Fault{Provider: "openai", Kind: sim.FaultHang, Code: "stall"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"openai/gpt-5.4-mini","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+proxyToken)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n') // the first event: the call is under way
	if err != nil || !strings.HasPrefix(line, "data:") {
		t.Fatalf("first line %q: %v", line, err)
	}
	gauge := func() float64 {
		t.Helper()
		rec := httptest.NewRecorder() // the page the proxy serves, read after its server is gone too
		cs.Telemetry.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		m := fams["limitscope_proxy_calls_in_flight"].GetMetric()
		if len(m) != 1 {
			t.Fatalf("in flight: %v", m)
		}
		return m[0].GetGauge().GetValue()
	}
	if n := gauge(); n != 1 {
		t.Errorf("in flight during the call: %v, want 1", n)
	}
	cancel()
	resp.Body.Close()
	srv.Close() // returns once the handler has
	if n := gauge(); n != 0 {
		t.Errorf("in flight after the caller left: %v, want 0", n)
	}
}
