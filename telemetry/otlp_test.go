package telemetry_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"go.opentelemetry.io/otel"
	colmetric "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/telemetry"
)

// receiver is an OTLP/HTTP collector: it decodes what it is sent with the
// official OTLP proto types.
type receiver struct {
	mu      sync.Mutex
	spans   []*tracepb.Span
	metrics []*metricpb.Metric
	headers []string // the Authorization header of each request
	paths   []string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.headers = append(rc.headers, r.Header.Get("Authorization"))
	rc.paths = append(rc.paths, r.URL.Path)
	switch r.URL.Path {
	case "/v1/traces":
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				rc.spans = append(rc.spans, ss.Spans...)
			}
		}
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	case "/v1/metrics":
		var req colmetric.ExportMetricsServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				rc.metrics = append(rc.metrics, sm.Metrics...)
			}
		}
		out, _ := proto.Marshal(&colmetric.ExportMetricsServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	default:
		http.NotFound(w, r)
	}
}

func attrMap(kvs []*commonpb.KeyValue) map[string]*commonpb.AnyValue {
	m := map[string]*commonpb.AnyValue{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

func str(m map[string]*commonpb.AnyValue, k string) string {
	if v, ok := m[k]; ok {
		return v.GetStringValue()
	}
	return ""
}

func num(m map[string]*commonpb.AnyValue, k string) (int64, bool) {
	v, ok := m[k]
	if !ok {
		return 0, false
	}
	return v.GetIntValue(), true
}

const otlpToken = "otlp-header-canary-7f3a9c"

// startSim is a simulator with fast streams; its limits headers feed the
// gauges.
func startSim(t testing.TB) (*sim.Running, *stream.Router) {
	t.Helper()
	return startSimClock(t, nil)
}

// startSimClock is startSim on the simulator's clock c (nil: the wall's).
func startSimClock(t testing.TB, c sim.Clock) (*sim.Running, *stream.Router) {
	t.Helper()
	r, err := sim.Start(context.Background(), "127.0.0.1:0", sim.Options{Scenario: "calm", Seed: 7, TokensPerSecond: 1e6, Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	hc := stream.NewHTTPClient()
	t.Cleanup(hc.CloseIdleConnections)
	eps := map[string]stream.Endpoint{}
	for _, p := range stream.Providers() {
		eps[p.Name] = r.Endpoint(p.Name)
	}
	return r, &stream.Router{Client: &stream.Client{HTTP: hc}, Endpoints: eps}
}

// TestOTLPExportOfAFailoverCall runs one call through the real engine,
// stream client and simulator: a 500 (backoff, retried), then a 429 asking
// 30s (more than the failover wait: the call fails over), then the fallback
// answers. The in-test collector must receive one trace of a root span and
// three attempt spans with the GenAI and limitscope attributes, the wait
// and failover events, and the metrics; the OTLP header reached it and was
// never printed.
func TestOTLPExportOfAFailoverCall(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20"+otlpToken) // read by the SDK
	env := map[string]string{telemetry.EnvEndpoint: srv.URL}
	var stderr bytes.Buffer
	tel, err := telemetry.New(context.Background(), telemetry.Options{Getenv: func(k string) string { return env[k] },
		Version: "test", Command: "send", Stderr: &stderr})
	if err != nil || tel == nil {
		t.Fatalf("New: %v, %v", tel, err)
	}
	r, router := startSim(t)
	for _, f := range []sim.Fault{
		{Provider: "openai", Kind: sim.FaultServerError},
		{Provider: "openai", Kind: sim.FaultRateLimit, RetryAfter: 30 * time.Second},
	} {
		if err := r.Server.Inject(f); err != nil {
			t.Fatal(err)
		}
	}
	// A fixed jitter: the backoff after the 500 is half its base (250 ms),
	// never under the millisecond the wait event counts in.
	eng := &retry.Engine{Doer: router, Clock: retrytest.NewFakeClock(time.Now()), Rand: func() float64 { return 0.5 }}
	oa := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	an := stream.Target{Provider: "anthropic", Model: "claude-haiku-4-5"}
	call := retry.Call{ID: "call-failover", Chain: []stream.Target{oa, an}, Prompt: "secret prompt text", MaxTokens: 64}
	res := eng.Run(context.Background(), call, tel.Sink(call, nil))
	if res.Outcome != retry.OutcomeOK || len(res.Attempts) != 3 || res.ServedBy == nil || res.ServedBy.Provider != "anthropic" {
		t.Fatalf("the call: %s, %d attempts, served by %v; want ok, 3, anthropic", res.Outcome, len(res.Attempts), res.ServedBy)
	}
	if err := tel.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if s := tel.Stats(); s.Calls != 1 || s.Dropped != 0 || s.Spans != 4 || s.SpansExported != 4 {
		t.Errorf("stats %+v: want 1 call, 4 spans exported", s)
	}

	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, h := range rc.headers {
		if h != "Bearer "+otlpToken {
			t.Errorf("collector got Authorization %q, want the OTLP header", h)
		}
	}
	if strings.Contains(stderr.String(), otlpToken) {
		t.Errorf("the OTLP header value was printed: %s", stderr.String())
	}
	if len(rc.spans) != 4 {
		t.Fatalf("%d spans, want 4 (the call and three attempts)", len(rc.spans))
	}
	var root *tracepb.Span
	var atts []*tracepb.Span
	for _, sp := range rc.spans {
		if len(sp.ParentSpanId) == 0 {
			root = sp
		} else {
			atts = append(atts, sp)
		}
	}
	if root == nil {
		t.Fatal("no root span")
	}
	ra := attrMap(root.Attributes)
	for k, want := range map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic", "gen_ai.request.model": "gpt-5.4-mini",
		"gen_ai.response.model": res.ServedBy.Model, "limitscope.outcome": "ok", "limitscope.call.id": "call-failover",
		"limitscope.served_by": "anthropic/" + res.ServedBy.Model,
	} {
		if got := str(ra, k); got != want {
			t.Errorf("root %s = %q, want %q", k, got, want)
		}
	}
	if n, ok := num(ra, "gen_ai.usage.output_tokens"); !ok || n <= 0 || int(n) != res.Usage.OutputTokens {
		t.Errorf("root gen_ai.usage.output_tokens = %d (%v), want %d", n, ok, res.Usage.OutputTokens)
	}
	if _, ok := ra["gen_ai.input.messages"]; ok {
		t.Error("the prompt was exported without the opt-in")
	}
	var failover *tracepb.Span_Event
	for _, ev := range root.Events {
		if ev.Name == telemetry.EventFailover {
			failover = ev
		}
	}
	if failover == nil {
		t.Fatal("no failover event on the call's span")
	}
	fa := attrMap(failover.Attributes)
	if str(fa, "limitscope.failover.from") != oa.String() || str(fa, "limitscope.failover.to") != an.String() ||
		str(fa, "error.type") != "rate_limit" || str(fa, "limitscope.reason") == "" {
		t.Errorf("failover event attributes %v", fa)
	}
	// The attempts, in order.
	byN := map[int64]*tracepb.Span{}
	for _, sp := range atts {
		if sp.TraceId == nil || !bytes.Equal(sp.TraceId, root.TraceId) || !bytes.Equal(sp.ParentSpanId, root.SpanId) {
			t.Errorf("attempt span %q is not a child of the call's span", sp.Name)
		}
		if sp.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("attempt span kind %v, want client", sp.Kind)
		}
		n, _ := num(attrMap(sp.Attributes), "limitscope.attempt")
		byN[n] = sp
	}
	want := []struct {
		provider, class, errType, decision, source string
		status                                     int64
	}{
		{"openai", "server", "server", "retry", "backoff", 500},
		{"openai", "rate_limit", "rate_limit", "fail over", "", 429},
		{"anthropic", "ok", "", "done", "", 200},
	}
	for i, w := range want {
		sp := byN[int64(i+1)]
		if sp == nil {
			t.Fatalf("no span for attempt %d", i+1)
		}
		a := attrMap(sp.Attributes)
		if str(a, "gen_ai.provider.name") != w.provider || str(a, "limitscope.class") != w.class ||
			str(a, "error.type") != w.errType || str(a, "limitscope.decision") != w.decision {
			t.Errorf("attempt %d: provider %q class %q error.type %q decision %q; want %+v", i+1,
				str(a, "gen_ai.provider.name"), str(a, "limitscope.class"), str(a, "error.type"), str(a, "limitscope.decision"), w)
		}
		if st, _ := num(a, "http.response.status_code"); st != w.status {
			t.Errorf("attempt %d: status %d, want %d", i+1, st, w.status)
		}
		if w.source != "" && str(a, "limitscope.delay_source") != w.source {
			t.Errorf("attempt %d: delay source %q, want %q", i+1, str(a, "limitscope.delay_source"), w.source)
		}
		if (w.class == "ok") != (sp.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR) {
			t.Errorf("attempt %d: status %v", i+1, sp.Status)
		}
	}
	if ra := attrMap(byN[2].Attributes); func() int64 { n, _ := num(ra, "limitscope.retry_after_ms"); return n }() != 30000 {
		t.Errorf("attempt 2: retry_after_ms %v, want 30000", ra["limitscope.retry_after_ms"])
	}
	// One inference: the call's span is the conventions' inference span
	// (a client span over the retries); an attempt names its target but
	// not the operation, or a GenAI backend would count three inferences.
	if root.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("call span kind %v, want client (the GenAI inference span)", root.Kind)
	}
	for n, sp := range byN {
		a := attrMap(sp.Attributes)
		if _, has := a["gen_ai.operation.name"]; has {
			t.Errorf("attempt %d carries gen_ai.operation.name: it would count as an inference of its own", n)
		}
		if wantTarget := []stream.Target{oa, oa, an}[n-1].String(); str(a, "limitscope.target") != wantTarget {
			t.Errorf("attempt %d: limitscope.target %q, want %q", n, str(a, "limitscope.target"), wantTarget)
		}
	}
	var wait *tracepb.Span_Event
	for _, ev := range byN[1].Events {
		if ev.Name == telemetry.EventWait {
			wait = ev
		}
	}
	if wait == nil {
		t.Fatal("no wait event after attempt 1 (the backoff)")
	}
	if wa := attrMap(wait.Attributes); str(wa, "limitscope.delay_source") != "backoff" {
		t.Errorf("wait event %v", wa)
	} else if n, _ := num(wa, "limitscope.waited_ms"); n != res.Attempts[0].Waited.Milliseconds() || n <= 0 {
		t.Errorf("wait event waited %d ms, the engine waited %v", n, res.Attempts[0].Waited)
	}

	// Metrics.
	got := map[string]*metricpb.Metric{}
	for _, m := range rc.metrics {
		got[m.Name] = m
	}
	opd := got[telemetry.MetricOperationDuration]
	if opd == nil || opd.Unit != "s" || opd.GetHistogram() == nil {
		t.Fatalf("no %s histogram in %v", telemetry.MetricOperationDuration, keys(got))
	}
	var requests uint64
	classes := map[string]uint64{}
	for _, dp := range opd.GetHistogram().DataPoints {
		requests += dp.Count
		classes[str(attrMap(dp.Attributes), "error.type")] += dp.Count
	}
	if requests != 3 || classes["server"] != 1 || classes["rate_limit"] != 1 || classes[""] != 1 {
		t.Errorf("operation duration: %d requests by error.type %v, want 3: server, rate_limit, ok", requests, classes)
	}
	if h := got[telemetry.MetricCallAttempts].GetHistogram(); h == nil || len(h.DataPoints) != 1 || h.DataPoints[0].Sum == nil || *h.DataPoints[0].Sum != 3 {
		t.Errorf("attempts per call: %v, want one call of 3", got[telemetry.MetricCallAttempts])
	}
	tokens := map[string]float64{}
	for _, dp := range got[telemetry.MetricTokenUsage].GetHistogram().GetDataPoints() {
		tokens[str(attrMap(dp.Attributes), "gen_ai.token.type")] += dp.GetSum()
	}
	if int(tokens["output"]) != res.Usage.OutputTokens || int(tokens["input"]) != res.Usage.InputTokens {
		t.Errorf("token usage %v, want %+v", tokens, res.Usage)
	}
	var waitSources []string
	for _, dp := range got[telemetry.MetricWaitDuration].GetHistogram().GetDataPoints() {
		waitSources = append(waitSources, str(attrMap(dp.Attributes), "limitscope.delay_source"))
	}
	if len(waitSources) == 0 || waitSources[0] != "backoff" {
		t.Errorf("waits by source %v, want the backoff", waitSources)
	}
	rem := got[telemetry.MetricRateLimitLeft].GetGauge()
	if rem == nil || len(rem.DataPoints) == 0 {
		t.Fatalf("no rate-limit remaining gauge in %v", keys(got))
	}
	windows := map[string]bool{}
	for _, dp := range rem.DataPoints {
		a := attrMap(dp.Attributes)
		windows[str(a, "gen_ai.provider.name")+" "+str(a, "limitscope.ratelimit.window")] = true
	}
	if !windows["anthropic requests"] {
		t.Errorf("remaining gauges %v: want anthropic's requests window", windows)
	}
}

func keys(m map[string]*metricpb.Metric) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestNothingExportedWhenUnset: without an OTLP endpoint (and no
// Prometheus) there is no telemetry, and the sink is the next one as is.
func TestNothingExportedWhenUnset(t *testing.T) {
	tel, err := telemetry.New(context.Background(), telemetry.Options{Getenv: func(string) string { return "" }})
	if err != nil || tel != nil {
		t.Fatalf("New with nothing set: %v, %v; want nil, nil", tel, err)
	}
	called := 0
	sink := tel.Sink(retry.Call{}, func(retry.Event) { called++ })
	sink(retry.Event{Kind: retry.EventCallEnd, Result: &retry.Result{}})
	if called != 1 {
		t.Errorf("next called %d times", called)
	}
	if tel.Close(context.Background()) != nil || tel.MetricsHandler() != nil {
		t.Error("a nil Telemetry must do nothing")
	}
	for _, env := range []map[string]string{
		{telemetry.EnvEndpoint: "http://127.0.0.1:1", telemetry.EnvSDKDisabled: "true"},
		{telemetry.EnvEndpoint: "http://127.0.0.1:1", telemetry.EnvTracesExporter: "none", telemetry.EnvMetricsExporter: "none"},
	} {
		if tr, me := telemetry.Enabled(func(k string) string { return env[k] }); tr != "" || me != "" {
			t.Errorf("%v: enabled (%q, %q)", env, tr, me)
		}
	}
	tr, me := telemetry.Enabled(func(k string) string {
		return map[string]string{telemetry.EnvEndpoint: "http://c:4318/", telemetry.EnvMetricsEndpoint: "http://m/x"}[k]
	})
	if tr != "http://c:4318/v1/traces" || me != "http://m/x" {
		t.Errorf("endpoints %q, %q", tr, me)
	}
}

// TestContentOnlyOnOptIn: with the GenAI opt-in the prompt and answer are
// on the call's span.
func TestContentOnlyOnOptIn(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	env := map[string]string{telemetry.EnvEndpoint: srv.URL, telemetry.EnvCaptureContent: "true", telemetry.EnvMetricsExporter: "none"}
	tel, err := telemetry.New(context.Background(), telemetry.Options{Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	_, router := startSim(t)
	eng := &retry.Engine{Doer: router, Clock: retrytest.NewFakeClock(time.Now())}
	call := retry.Call{Chain: []stream.Target{{Provider: "openai", Model: "gpt-5.4-mini"}}, Prompt: "the opted-in prompt", MaxTokens: 16}
	res := eng.Run(context.Background(), call, tel.Sink(call, nil))
	if err := tel.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, p := range rc.paths {
		if p != "/v1/traces" {
			t.Errorf("OTEL_METRICS_EXPORTER=none, yet %s was posted", p)
		}
	}
	for _, sp := range rc.spans {
		if len(sp.ParentSpanId) != 0 {
			continue
		}
		a := attrMap(sp.Attributes)
		if !strings.Contains(str(a, "gen_ai.input.messages"), "the opted-in prompt") || res.Text == "" ||
			!strings.Contains(str(a, "gen_ai.output.messages"), `"role":"assistant"`) {
			t.Errorf("root span content: %q / %q", str(a, "gen_ai.input.messages"), str(a, "gen_ai.output.messages"))
		}
		return
	}
	t.Fatal("no root span")
}

// TestUnreachableCollectorNeverFailsACall sends calls with the collector's
// port closed and a queue of one: every call is answered, what could not
// be exported is counted, and the one line printed names no header value.
func TestUnreachableCollectorNeverFailsACall(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-honeycomb-team="+otlpToken)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "200")
	env := map[string]string{telemetry.EnvEndpoint: "http://" + dead}
	var stderr bytes.Buffer
	tel, err := telemetry.New(context.Background(), telemetry.Options{Getenv: func(k string) string { return env[k] }, QueueSize: 1, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	_, router := startSim(t)
	eng := &retry.Engine{Doer: router, Clock: retrytest.NewFakeClock(time.Now())}
	const n = 20
	for i := range n {
		call := retry.Call{Chain: []stream.Target{{Provider: "openai", Model: "gpt-5.4-mini"}}, Prompt: "hi", MaxTokens: 8}
		if res := eng.Run(context.Background(), call, tel.Sink(call, nil)); res.Outcome != retry.OutcomeOK {
			t.Fatalf("call %d: %s", i, res.Outcome)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_ = tel.Close(ctx)
	s := tel.Stats()
	if s.Calls != n || s.SpansExported != 0 {
		t.Errorf("stats %+v: want %d calls handed over, none exported", s, n)
	}
	if lost := s.Dropped + (s.Spans - s.SpansExported); lost == 0 {
		t.Errorf("stats %+v: nothing counted as lost", s)
	}
	out := stderr.String()
	if !strings.Contains(out, "not exported") || strings.Contains(out, otlpToken) {
		t.Errorf("stderr %q: want the count of what was not exported, never the header", out)
	}
}

// TestMalformedHeadersNeverPrinted: the SDK logs an OTEL_EXPORTER_OTLP_HEADERS
// entry it cannot parse, value and all, through OpenTelemetry's global
// logger (stderr). New silences that logger and says which variable is
// malformed, without its value.
func TestMalformedHeadersNeverPrinted(t *testing.T) {
	for _, v := range []string{
		"authorization=Bearer%zz" + otlpToken,       // a bad %-escape
		"Bearer " + otlpToken,                       // no key=
		"authorization: Bearer " + otlpToken + "=x", // not a header name
	} {
		t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", v) // read by the SDK
		env := map[string]string{telemetry.EnvEndpoint: "http://127.0.0.1:9", telemetry.EnvHeaders: v}
		var stderr bytes.Buffer
		otel.SetLogger(funcr.New(func(prefix, args string) { stderr.WriteString(prefix + args + "\n") }, funcr.Options{}))
		tel, err := telemetry.New(context.Background(), telemetry.Options{Getenv: func(k string) string { return env[k] }, Stderr: &stderr})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_ = tel.Close(ctx)
		cancel()
		out := stderr.String()
		if strings.Contains(out, otlpToken) {
			t.Errorf("headers %q: the value was printed: %s", v, out)
		}
		if !strings.Contains(out, "OTEL_EXPORTER_OTLP_HEADERS has a malformed entry") {
			t.Errorf("headers %q: stderr %q does not name the malformed variable", v, out)
		}
	}
}
