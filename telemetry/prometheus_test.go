package telemetry_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// TestProxyMetricsScrape runs `limitscope proxy`'s wiring (calls.Open for
// "proxy" on the simulator, its ProxyHandler), sends a call that is retried
// once after a 500, and scrapes /metrics: refused without the token, and
// with it a Prometheus text page the official parser reads, whose names are
// the OTel metrics' under Prometheus naming rules, counting that call.
func TestProxyMetricsScrape(t *testing.T) {
	env := calls.Env{Getenv: func(string) string { return "" }, Stderr: io.Discard, Clock: retrytest.NewFakeClock(time.Now()), Version: "test"}
	f := calls.Flags{History: calls.HistoryFlags{NoHistory: true}, Sim: calls.SimFlags{Sim: true, Seed: 3}}
	cs, err := calls.Open(context.Background(), env, f, true, "proxy")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background(), time.Second)
	if cs.Telemetry == nil {
		t.Fatal("the proxy has no telemetry: /metrics needs it")
	}
	const token = "lsp-test-token-for-metrics-0001"
	h, err := cs.ProxyHandler(token, &proxy.Config{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.Providers.Sim.Server.Inject(sim.Fault{Provider: "openai", Kind: sim.FaultServerError}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	do := func(method, path, auth, body string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, b := do("POST", "/v1/chat/completions", token, `{"model":"openai/gpt-5.4-mini","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get(proxy.HeaderAttempts) != "2" {
		t.Fatalf("the call: %d, %s attempts: %s", resp.StatusCode, resp.Header.Get(proxy.HeaderAttempts), b)
	}
	if resp, _ := do("GET", "/metrics", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/metrics without the token: %d, want 401", resp.StatusCode)
	}
	if resp, _ := do("GET", "/metrics", "wrong-token", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/metrics with a wrong token: %d, want 401", resp.StatusCode)
	}
	// The metrics are recorded off the call's goroutine: wait for that.
	if err := cs.Telemetry.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, b = do("GET", "/metrics", token, "")
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, b)
	}
	for _, name := range []string{"gen_ai_client_operation_duration_seconds", "gen_ai_client_token_usage", "limitscope_call_attempts",
		"limitscope_call_duration_seconds", "limitscope_wait_duration_seconds", "limitscope_ratelimit_remaining", "limitscope_ratelimit_limit",
		"limitscope_telemetry_dropped_total"} {
		if fams[name] == nil {
			t.Errorf("no %s in /metrics:\n%s", name, b)
		}
	}
	if t.Failed() {
		return
	}
	if m := fams["limitscope_call_attempts"].Metric; fams["limitscope_call_attempts"].GetType() != dto.MetricType_HISTOGRAM ||
		len(m) != 1 || m[0].GetHistogram().GetSampleCount() != 1 || m[0].GetHistogram().GetSampleSum() != 2 {
		t.Errorf("attempts per call: %v, want one call of 2 attempts", fams["limitscope_call_attempts"])
	}
	byType := map[string]uint64{}
	for _, m := range fams["gen_ai_client_operation_duration_seconds"].Metric {
		lbl := map[string]string{}
		for _, l := range m.Label {
			lbl[l.GetName()] = l.GetValue()
		}
		if lbl["gen_ai_provider_name"] != "openai" || lbl["gen_ai_request_model"] != "gpt-5.4-mini" {
			t.Errorf("operation duration labels %v", lbl)
		}
		byType[lbl["error_type"]] += m.GetHistogram().GetSampleCount()
	}
	if byType["server"] != 1 || byType[""] != 1 {
		t.Errorf("requests by error_type %v, want a server error and a success", byType)
	}
	if fams["limitscope_ratelimit_remaining"].GetType() != dto.MetricType_GAUGE {
		t.Errorf("remaining is a %v, want a gauge", fams["limitscope_ratelimit_remaining"].GetType())
	}
	if bytes.Contains(b, []byte(token)) {
		t.Error("the proxy token is in /metrics")
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
	if len(rc.spans) != 2 {
		t.Fatalf("%d spans exported, want the call's and its attempt's", len(rc.spans))
	}
	for _, sp := range rc.spans {
		if a := attrMap(sp.Attributes); str(a, "gen_ai.provider.name") != "anthropic" {
			t.Errorf("span %q: provider %q", sp.Name, str(a, "gen_ai.provider.name"))
		}
	}
}
