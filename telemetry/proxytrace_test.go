package telemetry_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"net/http/httptest"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/limitscope/limitscope/telemetry"
)

// TestProxyContinuesTraceContext: a caller sends a W3C traceparent and
// tracestate with its call; the proxy's spans are in the caller's trace:
// a SERVER span for the request, child of the caller's span and carrying
// its tracestate, and the call's spans under it. A request without a
// traceparent starts a trace of its own, still under a SERVER span.
func TestProxyContinuesTraceContext(t *testing.T) {
	rc := &receiver{}
	col := httptest.NewServer(rc)
	defer col.Close()
	cs, srv := openProxy(t, map[string]string{telemetry.EnvEndpoint: col.URL, telemetry.EnvMetricsExporter: "none"})
	const (
		traceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
		parentID = "00f067aa0ba902b7"
		state    = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
	)
	body := `{"model":"openai/gpt-5.4-mini","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	if resp, b := do(t, srv, "POST", "/v1/chat/completions", proxyToken, body,
		"Traceparent", "00-"+traceID+"-"+parentID+"-01", "Tracestate", state); resp.StatusCode != 200 {
		t.Fatalf("the call: %d %s", resp.StatusCode, b)
	}
	if resp, b := do(t, srv, "POST", "/v1/chat/completions", proxyToken, body); resp.StatusCode != 200 {
		t.Fatalf("the call without a traceparent: %d %s", resp.StatusCode, b)
	}
	srv.Close() // every handler has returned: each request's end is handed over
	cs.Close(context.Background(), 5*time.Second)

	rc.mu.Lock()
	defer rc.mu.Unlock()
	want, _ := hex.DecodeString(traceID)
	parent, _ := hex.DecodeString(parentID)
	var servers []*tracepb.Span
	byTrace := map[string][]*tracepb.Span{}
	for _, sp := range rc.spans {
		byTrace[string(sp.TraceId)] = append(byTrace[string(sp.TraceId)], sp)
		if sp.Kind == tracepb.Span_SPAN_KIND_SERVER {
			servers = append(servers, sp)
		}
	}
	if len(servers) != 2 || len(byTrace) != 2 {
		t.Fatalf("%d SERVER spans in %d traces, want 2 in 2 (the caller's and a new one)", len(servers), len(byTrace))
	}
	for _, sv := range servers {
		continued := bytes.Equal(sv.TraceId, want)
		a := attrMap(sv.Attributes)
		if sv.Name != "POST /v1/chat/completions" || str(a, "http.request.method") != "POST" || str(a, "http.route") != "/v1/chat/completions" {
			t.Errorf("SERVER span %q %v", sv.Name, a)
		}
		if st, _ := num(a, "http.response.status_code"); st != 200 {
			t.Errorf("SERVER span status %d", st)
		}
		switch {
		case continued && (!bytes.Equal(sv.ParentSpanId, parent) || sv.TraceState != state):
			t.Errorf("SERVER span parent %x tracestate %q; want the caller's %s, %q", sv.ParentSpanId, sv.TraceState, parentID, state)
		case !continued && len(sv.ParentSpanId) != 0:
			t.Errorf("SERVER span of a request without traceparent has parent %x", sv.ParentSpanId)
		}
		spans := byTrace[string(sv.TraceId)]
		if len(spans) != 4 {
			t.Errorf("trace %x: %d spans, want the SERVER span, the call's, an inference and a request", sv.TraceId, len(spans))
			continue
		}
		st := treeOf(t, spans)
		if !bytes.Equal(st.root.ParentSpanId, sv.SpanId) {
			t.Errorf("the call's span has parent %x, want the SERVER span %x", st.root.ParentSpanId, sv.SpanId)
		}
	}
	if _, ok := byTrace[string(want)]; !ok {
		t.Errorf("no span in the caller's trace %s", traceID)
	}
}
