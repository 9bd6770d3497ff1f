package telemetry_test

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
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

// failoverRun is one call run through the real engine, stream client and
// simulator with export to an in-test collector: a 500 (backoff, retried),
// then a 429 asking 30s (more than the failover wait: the call fails over),
// then the fallback answers.
type failoverRun struct {
	rc     *receiver
	res    retry.Result
	texts  int // text chunks of the serving attempt
	port   int64
	stderr bytes.Buffer
	tel    *telemetry.Telemetry
}

var (
	oaTarget = stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	anTarget = stream.Target{Provider: "anthropic", Model: "claude-haiku-4-5"}
)

func runFailover(t *testing.T, extra map[string]string, sampler sdktrace.Sampler) *failoverRun {
	t.Helper()
	fr := &failoverRun{rc: &receiver{}}
	srv := httptest.NewServer(fr.rc)
	t.Cleanup(srv.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20"+otlpToken) // read by the SDK
	env := map[string]string{telemetry.EnvEndpoint: srv.URL}
	for k, v := range extra {
		env[k] = v
	}
	r, router := startSim(t)
	tel, err := telemetry.New(context.Background(), telemetry.Options{Getenv: func(k string) string { return env[k] },
		Version: "test", Command: "send", Stderr: &fr.stderr, Sampler: sampler,
		BaseURL: func(tg stream.Target) string { return router.Endpoints[tg.Provider].BaseURL }})
	if err != nil || tel == nil {
		t.Fatalf("New: %v, %v", tel, err)
	}
	fr.tel = tel
	u, _ := url.Parse(router.Endpoints["openai"].BaseURL)
	p, _ := strconv.Atoi(u.Port())
	fr.port = int64(p)
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
	call := retry.Call{ID: "call-failover", Chain: []stream.Target{oaTarget, anTarget}, Prompt: "secret prompt text", MaxTokens: 64}
	count := func(ev retry.Event) {
		switch ev.Kind {
		case retry.EventAttemptStart:
			fr.texts = 0
		case retry.EventText:
			fr.texts++
		}
	}
	fr.res = eng.Run(context.Background(), call, tel.Sink(call, count))
	if fr.res.Outcome != retry.OutcomeOK || len(fr.res.Attempts) != 3 || fr.res.ServedBy == nil || fr.res.ServedBy.Provider != "anthropic" {
		t.Fatalf("the call: %s, %d attempts, served by %v; want ok, 3, anthropic", fr.res.Outcome, len(fr.res.Attempts), fr.res.ServedBy)
	}
	if err := tel.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return fr
}

// spanTree is the spans of one trace by role.
type spanTree struct {
	root       *tracepb.Span
	inferences []*tracepb.Span // in start order
	requests   []*tracepb.Span // by limitscope.attempt
	byID       map[string]*tracepb.Span
}

func treeOf(t *testing.T, spans []*tracepb.Span) spanTree {
	t.Helper()
	st := spanTree{byID: map[string]*tracepb.Span{}}
	for _, sp := range spans {
		st.byID[string(sp.SpanId)] = sp
	}
	for _, sp := range spans {
		switch {
		case sp.Name == telemetry.SpanCall:
			st.root = sp
		case strings.HasPrefix(sp.Name, "chat "):
			st.inferences = append(st.inferences, sp)
		case sp.Name == "POST" && sp.Kind == tracepb.Span_SPAN_KIND_CLIENT:
			st.requests = append(st.requests, sp)
		}
	}
	slices.SortFunc(st.inferences, func(a, b *tracepb.Span) int { return cmp.Compare(a.StartTimeUnixNano, b.StartTimeUnixNano) })
	slices.SortFunc(st.requests, func(a, b *tracepb.Span) int {
		x, _ := num(attrMap(a.Attributes), "limitscope.attempt")
		y, _ := num(attrMap(b.Attributes), "limitscope.attempt")
		return cmp.Compare(x, y)
	})
	if st.root == nil {
		t.Fatalf("no %s span among %d", telemetry.SpanCall, len(spans))
	}
	return st
}

// TestOTLPExportOfAFailoverCall: the collector receives one trace: the
// call's internal span; under it one GenAI inference span per target
// tried, each pairing its own provider and model, with the v1.41.0
// attributes (server.*, stream, response model and usage on the one that
// answered, error.type on the one that failed over); under those an HTTP
// client span per request with the HTTP conventions' attributes; the wait
// and failover events; and the metrics: one operation duration point per
// inference, one http.client.request.duration point per request, time to
// first chunk and per chunk, token usage with the request model, the
// rate-limit gauges per unit, and no zero-length wait. The OTLP header
// reached the collector and was never printed.
func TestOTLPExportOfAFailoverCall(t *testing.T) {
	fr := runFailover(t, nil, nil)
	res, rc := fr.res, fr.rc
	if s := fr.tel.Stats(); s.Calls != 1 || s.Dropped != 0 || s.Spans != 6 || s.SpansExported != 6 {
		t.Errorf("stats %+v: want 1 call, 6 spans exported", s)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, h := range rc.headers {
		if h != "Bearer "+otlpToken {
			t.Errorf("collector got Authorization %q, want the OTLP header", h)
		}
	}
	if strings.Contains(fr.stderr.String(), otlpToken) {
		t.Errorf("the OTLP header value was printed: %s", fr.stderr.String())
	}
	if len(rc.spans) != 6 {
		t.Fatalf("%d spans, want 6 (the call, two inferences, three requests)", len(rc.spans))
	}
	st := treeOf(t, rc.spans)
	root := st.root
	ra := attrMap(root.Attributes)
	if root.Kind != tracepb.Span_SPAN_KIND_INTERNAL || len(root.ParentSpanId) != 0 {
		t.Errorf("call span kind %v parent %x: want an internal root", root.Kind, root.ParentSpanId)
	}
	for k, want := range map[string]string{
		"limitscope.outcome": "ok", "limitscope.call.id": "call-failover", "limitscope.served_by": "anthropic/" + res.ServedBy.Model,
	} {
		if got := str(ra, k); got != want {
			t.Errorf("call span %s = %q, want %q", k, got, want)
		}
	}
	if _, has := ra["gen_ai.operation.name"]; has {
		t.Error("the call span carries gen_ai.operation.name: a GenAI backend would count it as one more inference")
	}
	if _, ok := ra["gen_ai.input.messages"]; ok {
		t.Error("the prompt was exported without the opt-in")
	}

	// The inferences: one per target, provider and model belonging together.
	if len(st.inferences) != 2 {
		t.Fatalf("%d inference spans, want 2 (openai, then anthropic)", len(st.inferences))
	}
	for i, w := range []struct {
		tg                stream.Target
		provider, errType string
		ok                bool
		attempts          []int
	}{
		{oaTarget, "openai", "rate_limit", false, []int{1, 2}},
		{anTarget, "anthropic", "", true, []int{3}},
	} {
		sp := st.inferences[i]
		a := attrMap(sp.Attributes)
		if sp.Name != "chat "+w.tg.Model || sp.Kind != tracepb.Span_SPAN_KIND_CLIENT || !bytes.Equal(sp.ParentSpanId, root.SpanId) {
			t.Errorf("inference %d: %q kind %v: want a client span %q under the call's", i, sp.Name, sp.Kind, "chat "+w.tg.Model)
		}
		if str(a, "gen_ai.operation.name") != "chat" || str(a, "gen_ai.provider.name") != w.provider || str(a, "gen_ai.request.model") != w.tg.Model {
			t.Errorf("inference %d: operation %q provider %q model %q; want chat %s %s", i,
				str(a, "gen_ai.operation.name"), str(a, "gen_ai.provider.name"), str(a, "gen_ai.request.model"), w.provider, w.tg.Model)
		}
		if str(a, "server.address") != "127.0.0.1" {
			t.Errorf("inference %d: server.address %q", i, str(a, "server.address"))
		}
		if p, _ := num(a, "server.port"); p != fr.port {
			t.Errorf("inference %d: server.port %d, want %d", i, p, fr.port)
		}
		if !a["gen_ai.request.stream"].GetBoolValue() {
			t.Errorf("inference %d: gen_ai.request.stream %v, want true", i, a["gen_ai.request.stream"])
		}
		if n, _ := num(a, "gen_ai.request.max_tokens"); n != 64 {
			t.Errorf("inference %d: max_tokens %d", i, n)
		}
		if str(a, "error.type") != w.errType || (sp.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR) == w.ok {
			t.Errorf("inference %d: error.type %q status %v; want %q", i, str(a, "error.type"), sp.Status, w.errType)
		}
		_, hasResp := a["gen_ai.response.model"]
		if hasResp != w.ok {
			t.Errorf("inference %d: response model %q; want one only on the inference that answered", i, str(a, "gen_ai.response.model"))
		}
		for _, n := range w.attempts {
			if rq := st.requests[n-1]; !bytes.Equal(rq.ParentSpanId, sp.SpanId) {
				t.Errorf("request %d is not under inference %d", n, i)
			}
		}
	}
	an := attrMap(st.inferences[1].Attributes)
	if id := str(an, "gen_ai.response.id"); id == "" || id != res.Attempts[2].ResponseID || !strings.HasPrefix(id, "msg_") {
		t.Errorf("gen_ai.response.id %q, want the simulator's message id %q", id, res.Attempts[2].ResponseID)
	}
	if str(an, "gen_ai.response.model") != res.ServedBy.Model {
		t.Errorf("response model %q, want %q", str(an, "gen_ai.response.model"), res.ServedBy.Model)
	}
	if n, ok := num(an, "gen_ai.usage.output_tokens"); !ok || n <= 0 || int(n) != res.Usage.OutputTokens {
		t.Errorf("gen_ai.usage.output_tokens = %d (%v), want %d", n, ok, res.Usage.OutputTokens)
	}
	if fr := an["gen_ai.response.finish_reasons"].GetArrayValue().GetValues(); len(fr) != 1 || fr[0].GetStringValue() != res.FinishReason {
		t.Errorf("finish reasons %v, want [%s]", fr, res.FinishReason)
	}
	if ttft := res.Attempts[2].TTFT; ttft > 0 {
		if got := an["gen_ai.response.time_to_first_chunk"].GetDoubleValue(); got != ttft.Seconds() {
			t.Errorf("time_to_first_chunk %v, want %v", got, ttft.Seconds())
		}
	}

	// The requests: HTTP client spans.
	if len(st.requests) != 3 {
		t.Fatalf("%d request spans, want 3", len(st.requests))
	}
	for i, w := range []struct {
		status  int64
		errType string
		resends int64
	}{{500, "500", 0}, {429, "429", 1}, {200, "", 0}} {
		a := attrMap(st.requests[i].Attributes)
		if str(a, "http.request.method") != "POST" || str(a, "server.address") != "127.0.0.1" {
			t.Errorf("request %d: method %q server %q", i+1, str(a, "http.request.method"), str(a, "server.address"))
		}
		if p, _ := num(a, "server.port"); p != fr.port {
			t.Errorf("request %d: server.port %d", i+1, p)
		}
		if st, _ := num(a, "http.response.status_code"); st != w.status {
			t.Errorf("request %d: status %d, want %d", i+1, st, w.status)
		}
		if str(a, "error.type") != w.errType {
			t.Errorf("request %d: error.type %q, want %q", i+1, str(a, "error.type"), w.errType)
		}
		if n, _ := num(a, "http.request.resend_count"); n != w.resends {
			t.Errorf("request %d: resend count %d, want %d", i+1, n, w.resends)
		}
		for _, k := range []string{"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model"} {
			if _, has := a[k]; has {
				t.Errorf("request %d carries %s: it would read as an inference", i+1, k)
			}
		}
		if wantTarget := []stream.Target{oaTarget, oaTarget, anTarget}[i].String(); str(a, "limitscope.target") != wantTarget {
			t.Errorf("request %d: limitscope.target %q, want %q", i+1, str(a, "limitscope.target"), wantTarget)
		}
	}
	if a := attrMap(st.requests[1].Attributes); func() int64 { n, _ := num(a, "limitscope.retry_after_ms"); return n }() != 30000 {
		t.Errorf("request 2: retry_after_ms %v, want 30000", a["limitscope.retry_after_ms"])
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
	if str(fa, "limitscope.failover.from") != oaTarget.String() || str(fa, "limitscope.failover.to") != anTarget.String() ||
		str(fa, "error.type") != "rate_limit" || str(fa, "limitscope.reason") == "" {
		t.Errorf("failover event attributes %v", fa)
	}
	var waits []*tracepb.Span_Event
	for _, sp := range rc.spans {
		for _, ev := range sp.Events {
			if ev.Name == telemetry.EventWait || ev.Name == telemetry.EventPacing {
				waits = append(waits, ev)
			}
		}
	}
	if len(waits) != 1 {
		t.Fatalf("%d wait and pacing events, want the one backoff (none of zero length)", len(waits))
	}
	if wa := attrMap(waits[0].Attributes); str(wa, "limitscope.delay_source") != "backoff" {
		t.Errorf("wait event %v", wa)
	} else if n, _ := num(wa, "limitscope.waited_ms"); n != res.Attempts[0].Waited.Milliseconds() || n <= 0 {
		t.Errorf("wait event waited %d ms, the engine waited %v", n, res.Attempts[0].Waited)
	}

	// Metrics.
	got := map[string]*metricpb.Metric{}
	for _, m := range rc.metrics {
		got[m.Name] = m
	}
	for _, gone := range []string{telemetry.LatestInferenceDuration, telemetry.LatestUsageInputTokens} {
		if got[gone] != nil {
			t.Errorf("%s emitted without the opt-in", gone)
		}
	}
	points := func(name string) []*metricpb.HistogramDataPoint {
		m := got[name]
		if m == nil || m.GetHistogram() == nil {
			t.Fatalf("no %s histogram in %v", name, keys(got))
		}
		return m.GetHistogram().DataPoints
	}
	if u := got[telemetry.MetricOperationDuration].GetUnit(); u != "s" {
		t.Errorf("operation duration unit %q", u)
	}
	ops := map[string]uint64{}
	for _, dp := range points(telemetry.MetricOperationDuration) {
		a := attrMap(dp.Attributes)
		ops[str(a, "gen_ai.provider.name")+" "+str(a, "gen_ai.request.model")+" "+str(a, "gen_ai.response.model")+" "+str(a, "error.type")] += dp.Count
		if str(a, "server.address") != "127.0.0.1" {
			t.Errorf("operation point without server.address: %v", a)
		}
		if p, _ := num(a, "server.port"); p != fr.port {
			t.Errorf("operation point server.port %d", p)
		}
	}
	wantOps := map[string]uint64{"openai gpt-5.4-mini  rate_limit": 1, "anthropic claude-haiku-4-5 " + res.ServedBy.Model + " ": 1}
	if !maps.Equal(ops, wantOps) {
		t.Errorf("operation duration points %v, want one per inference %v", ops, wantOps)
	}
	reqs := map[string]uint64{}
	for _, dp := range points(telemetry.MetricHTTPDuration) {
		a := attrMap(dp.Attributes)
		reqs[str(a, "error.type")] += dp.Count
		if str(a, "http.request.method") != "POST" || str(a, "server.address") != "127.0.0.1" {
			t.Errorf("http duration point %v", a)
		}
	}
	if !maps.Equal(reqs, map[string]uint64{"500": 1, "429": 1, "": 1}) {
		t.Errorf("http.client.request.duration by error.type %v, want one each of 500, 429, ok", reqs)
	}
	if h := got[telemetry.MetricCallAttempts].GetHistogram(); h == nil || len(h.DataPoints) != 1 || h.DataPoints[0].Sum == nil || *h.DataPoints[0].Sum != 3 {
		t.Errorf("attempts per call: %v, want one call of 3", got[telemetry.MetricCallAttempts])
	}
	tokens := map[string]float64{}
	for _, dp := range points(telemetry.MetricTokenUsage) {
		a := attrMap(dp.Attributes)
		tokens[str(a, "gen_ai.token.type")] += dp.GetSum()
		if str(a, "gen_ai.request.model") != anTarget.Model || str(a, "gen_ai.response.model") != res.ServedBy.Model || str(a, "server.address") == "" {
			t.Errorf("token usage attributes %v", a)
		}
	}
	if int(tokens["output"]) != res.Usage.OutputTokens || int(tokens["input"]) != res.Usage.InputTokens {
		t.Errorf("token usage %v, want %+v", tokens, res.Usage)
	}
	var ttfcWant uint64
	for _, i := range []int{1, 2} { // each inference's last request
		if res.Attempts[i].TTFT > 0 {
			ttfcWant++
		}
	}
	var ttfc, tpoc uint64
	if ttfcWant > 0 {
		for _, dp := range points(telemetry.MetricTimeToFirstChunk) {
			ttfc += dp.Count
		}
	}
	if fr.texts > 1 {
		for _, dp := range points(telemetry.MetricTimePerOutputChunk) {
			tpoc += dp.Count
		}
	}
	if ttfc != ttfcWant || tpoc != uint64(max(fr.texts-1, 0)) {
		t.Errorf("time to first chunk %d points (want %d), per output chunk %d (want %d: the chunks after the first)", ttfc, ttfcWant, tpoc, fr.texts-1)
	}
	var waitPoints uint64
	for _, dp := range points(telemetry.MetricWaitDuration) {
		waitPoints += dp.Count
		if src := str(attrMap(dp.Attributes), "limitscope.delay_source"); src != "backoff" {
			t.Errorf("a %s wait point: only the backoff was waited", src)
		}
	}
	if waitPoints != 1 {
		t.Errorf("%d wait points, want the one backoff", waitPoints)
	}
	for name, unit := range map[string]string{telemetry.MetricRequestsRemaining: "{request}", telemetry.MetricTokensRemaining: "{token}"} {
		m := got[name]
		if m == nil || m.GetGauge() == nil || len(m.GetGauge().DataPoints) == 0 || m.Unit != unit {
			t.Errorf("%s: %v; want a gauge in %s", name, m, unit)
			continue
		}
		for _, dp := range m.GetGauge().DataPoints {
			a := attrMap(dp.Attributes)
			if name == telemetry.MetricRequestsRemaining && str(a, "limitscope.ratelimit.window") != "" {
				t.Errorf("requests gauge with a window attribute %v", a)
			}
		}
	}
}

// TestOTLPLatestGenAINames: with OTEL_SEMCONV_STABILITY_OPT_IN=
// gen_ai_latest_experimental the same call's metrics carry
// semantic-conventions-genai's names (the inference duration, streaming
// metrics and token counters and histograms) and none of v1.41.0's.
func TestOTLPLatestGenAINames(t *testing.T) {
	fr := runFailover(t, map[string]string{telemetry.EnvSemconvOptIn: "http," + telemetry.OptInGenAILatest}, nil)
	res, rc := fr.res, fr.rc
	rc.mu.Lock()
	defer rc.mu.Unlock()
	got := map[string]*metricpb.Metric{}
	for _, m := range rc.metrics {
		got[m.Name] = m
	}
	for _, old := range []string{telemetry.MetricOperationDuration, telemetry.MetricTokenUsage, telemetry.MetricTimeToFirstChunk, telemetry.MetricTimePerOutputChunk} {
		if got[old] != nil {
			t.Errorf("%s still emitted with the opt-in", old)
		}
	}
	var n uint64
	for _, dp := range got[telemetry.LatestInferenceDuration].GetHistogram().GetDataPoints() {
		n += dp.Count
	}
	if n != 2 || got[telemetry.LatestInferenceDuration].GetUnit() != "s" {
		t.Errorf("%s: %d points, want one per inference (2)", telemetry.LatestInferenceDuration, n)
	}
	for name, want := range map[string]int{telemetry.LatestUsageInputTokens: res.Usage.InputTokens, telemetry.LatestUsageOutputTokens: res.Usage.OutputTokens} {
		m := got[name]
		if m.GetSum() == nil || !m.GetSum().IsMonotonic || m.Unit != "{token}" || len(m.GetSum().DataPoints) != 1 {
			t.Errorf("%s: %v, want a monotonic counter in {token}", name, m)
			continue
		}
		dp := m.GetSum().DataPoints[0]
		a := attrMap(dp.Attributes)
		if int(dp.GetAsInt()) != want || str(a, "gen_ai.request.model") != anTarget.Model || str(a, "gen_ai.provider.name") != "anthropic" {
			t.Errorf("%s = %d %v, want %d for anthropic's %s", name, dp.GetAsInt(), a, want, anTarget.Model)
		}
		if _, has := a["gen_ai.token.type"]; has {
			t.Errorf("%s carries gen_ai.token.type", name)
		}
	}
	for _, name := range []string{telemetry.LatestOperationInputToks, telemetry.LatestOperationOutputToks} {
		if h := got[name].GetHistogram(); h == nil || len(h.DataPoints) != 1 || h.DataPoints[0].Count != 1 {
			t.Errorf("%s: %v, want one inference's point", name, got[name])
		}
	}
	if len(rc.spans) != 6 {
		t.Errorf("%d spans, want the same 6", len(rc.spans))
	}
}

// recordingSampler samples everything and keeps what each span's sampling
// decision was given.
type recordingSampler struct {
	mu    sync.Mutex
	seen  map[string][]attribute.KeyValue // by span name
	kinds map[string]trace.SpanKind
}

func (s *recordingSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[p.Name] = slices.Clone(p.Attributes)
	s.kinds[p.Name] = p.Kind
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
}

func (s *recordingSampler) Description() string { return "recording" }

// TestSamplerSeesStartAttributes: a sampler deciding an inference span sees
// its operation, provider, request model and server; one deciding an HTTP
// request span sees its method and server.
func TestSamplerSeesStartAttributes(t *testing.T) {
	rs := &recordingSampler{seen: map[string][]attribute.KeyValue{}, kinds: map[string]trace.SpanKind{}}
	fr := runFailover(t, map[string]string{telemetry.EnvMetricsExporter: "none"}, rs)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for name, want := range map[string]map[string]string{
		"chat " + anTarget.Model: {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic",
			"gen_ai.request.model": anTarget.Model, "server.address": "127.0.0.1", "server.port": strconv.FormatInt(fr.port, 10)},
		"chat " + oaTarget.Model: {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": oaTarget.Model},
		"POST":                   {"http.request.method": "POST", "server.address": "127.0.0.1"},
		telemetry.SpanCall:       {"limitscope.call.id": "call-failover"},
	} {
		attrs, ok := rs.seen[name]
		if !ok {
			t.Errorf("the sampler never saw %q", name)
			continue
		}
		m := map[string]string{}
		for _, kv := range attrs {
			m[string(kv.Key)] = kv.Value.String()
		}
		for k, v := range want {
			if m[k] != v {
				t.Errorf("%q at start: %s = %q, want %q (saw %v)", name, k, m[k], v, m)
			}
		}
	}
	if rs.kinds["chat "+anTarget.Model] != trace.SpanKindClient {
		t.Errorf("inference span kind at start %v", rs.kinds["chat "+anTarget.Model])
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
// on the inference span that answered.
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
		if !strings.HasPrefix(sp.Name, "chat ") {
			continue
		}
		a := attrMap(sp.Attributes)
		if !strings.Contains(str(a, "gen_ai.input.messages"), "the opted-in prompt") || res.Text == "" ||
			!strings.Contains(str(a, "gen_ai.output.messages"), `"role":"assistant"`) {
			t.Errorf("root span content: %q / %q", str(a, "gen_ai.input.messages"), str(a, "gen_ai.output.messages"))
		}
		return
	}
	t.Fatal("no inference span")
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

// TestResponseIDFromEachDialect: the stream client keeps the provider's
// response id (gen_ai.response.id) in each dialect that sends one, as the
// simulator sends it in the providers' formats.
func TestResponseIDFromEachDialect(t *testing.T) {
	_, router := startSim(t)
	for provider, prefix := range map[string]string{"openai": "chatcmpl-", "groq": "chatcmpl-", "anthropic": "msg_",
		"openai:responses": "resp", "gemini": ""} {
		info, _ := stream.Provider(provider)
		res := router.Do(context.Background(), stream.Request{Target: stream.Target{Provider: provider, Model: info.DefaultModel}, Prompt: "hi", MaxTokens: 8}, nil)
		if res.Err != nil {
			t.Errorf("%s: %v", provider, res.Err)
			continue
		}
		if res.ResponseID == "" || !strings.HasPrefix(res.ResponseID, prefix) {
			t.Errorf("%s: response id %q, want one starting %q", provider, res.ResponseID, prefix)
		}
	}
}

// TestProviderNameFromTheTable: gen_ai.provider.name is the provider
// table's GenAIName column, for API variants and named accounts too.
func TestProviderNameFromTheTable(t *testing.T) {
	for in, want := range map[string]string{"openai": "openai", "anthropic": "anthropic", "gemini": "gcp.gemini",
		"gemini:interactions": "gcp.gemini", "openai:responses": "openai", "mistral": "mistral_ai", "xai": "x_ai",
		"bedrock": "aws.bedrock", "groq": "groq", "deepseek": "deepseek", "openai@team": "openai", "acme": "acme"} {
		if got := telemetry.ProviderName(in); got != want {
			t.Errorf("ProviderName(%q) = %q, want %q", in, got, want)
		}
	}
}
