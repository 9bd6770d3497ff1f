package sim

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitscope/limitscope/stream"
)

func TestAdminEndpoint(t *testing.T) {
	s, ts, clk := newTestSim(t, Options{})
	ctx := t.Context()
	a := &Admin{URL: ts.URL}

	if err := a.SetScenario(ctx, "busy"); err != nil {
		t.Fatal(err)
	}
	if s.Scenario() != "busy" {
		t.Fatalf("scenario %q", s.Scenario())
	}
	if err := a.SetScenario(ctx, "nope"); err == nil || !strings.Contains(err.Error(), "unknown scenario") {
		t.Errorf("bad scenario: %v", err)
	}
	if err := a.SetScenario(ctx, "calm"); err != nil {
		t.Fatal(err)
	}

	// "next request to openai gets a 429 with retry-after 20"
	if err := a.Inject(ctx, Fault{Provider: "openai", Kind: FaultRateLimit, RetryAfter: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	st, err := a.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Scenario != "calm" || len(st.Pending) != 1 || st.Pending[0].RetryAfter != 20*time.Second || st.Pending[0].Count != 1 {
		t.Fatalf("status %+v", st)
	}
	// Another provider is untouched; openai gets it once.
	if r := call(t, s, "anthropic", true); r.status != 200 {
		t.Errorf("anthropic %d", r.status)
	}
	r := call(t, s, "openai", true)
	if r.status != 429 || r.header.Get("retry-after") != "20" {
		t.Fatalf("openai %d retry-after %q", r.status, r.header.Get("retry-after"))
	}
	// A retry before the Retry-After has passed is refused with what is
	// left of the wait; after it, the fault is gone.
	clk.Advance(5 * time.Second)
	if r := call(t, s, "openai", true); r.status != 429 || r.header.Get("retry-after") != "15" {
		t.Errorf("a retry 5s into a 20s Retry-After: %d retry-after %q, want 429 and 15", r.status, r.header.Get("retry-after"))
	}
	clk.Advance(15 * time.Second)
	if r := call(t, s, "openai", true); r.status != 200 {
		t.Errorf("the fault hit twice: %d", r.status)
	}

	if err := a.Inject(ctx, Fault{Kind: "meteor"}); err == nil || !strings.Contains(err.Error(), "unknown fault kind") {
		t.Errorf("bad kind: %v", err)
	}
	if err := a.Inject(ctx, Fault{Provider: "acme", Kind: FaultReset}); err == nil {
		t.Error("bad provider accepted")
	}

	// Count, and "" for every provider.
	if err := a.Inject(ctx, Fault{Kind: FaultOverload, Count: 2}); err != nil {
		t.Fatal(err)
	}
	if call(t, s, "gemini", true).status != 503 || call(t, s, "anthropic", true).status != 529 || call(t, s, "gemini", true).status != 200 {
		t.Error("a count-2 any-provider overload did not hit exactly the next two requests")
	}

	// failover-demo degrades the primary for a while.
	if err := a.Inject(ctx, Fault{Kind: FaultFailoverDemo, RetryAfter: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	st, _ = a.Status(ctx)
	if st.Providers[0].Provider != "openai" || st.Providers[0].DegradedUntil == nil {
		t.Fatalf("openai not degraded: %+v", st.Providers[0])
	}
	if r := call(t, s, "openai", true); r.status == 200 {
		t.Error("degraded primary answered 200")
	}
	clk.Advance(11 * time.Second)
	if r := call(t, s, "openai", true); r.status != 200 {
		t.Errorf("after the degradation: %d", r.status)
	}

	// Status carries each provider's limits.
	st, _ = a.Status(ctx)
	var oa ProviderStatus
	for _, p := range st.Providers {
		if p.Provider == "openai" {
			oa = p
		}
	}
	if oa.Requests < 4 || oa.Errors < 2 || len(oa.Limits) != 2 || oa.Limits[0].Name != "requests/min" || oa.Limits[0].Limit != 500 {
		t.Errorf("openai status %+v", oa)
	}
}

func TestAdminRawJSON(t *testing.T) {
	_, ts, _ := newTestSim(t, Options{})
	post := func(route, body string) (int, string) {
		resp, err := http.Post(ts.URL+"/_sim/"+route, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post("fault", `{"provider":"openai","kind":"rate_limit","retry_after":20}`); code != 200 || !strings.Contains(body, `"retry_after": "20s"`) {
		t.Errorf("%d %s", code, body)
	}
	if code, body := post("fault", `{"kind":"rate_limit","retry_after":"soon"}`); code != 400 || !strings.Contains(body, "error") {
		t.Errorf("%d %s", code, body)
	}
	if code, _ := post("fault", `not json`); code != 400 {
		t.Errorf("bad JSON: %d", code)
	}
	if code, body := post("nothing", `{}`); code != 404 || !strings.Contains(body, "/_sim/status") {
		t.Errorf("%d %s", code, body)
	}
	for _, route := range []string{"status", "scenarios", "faults"} {
		resp, err := http.Get(ts.URL + "/_sim/" + route)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("%s: %d %v", route, resp.StatusCode, err)
		}
	}
}

func TestFaultJSON(t *testing.T) {
	f := Fault{Provider: "anthropic", Kind: FaultSpendCap, RetryAfter: 1500 * time.Millisecond, Count: 3, Code: "billing_error"}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var back Fault
	if err := json.Unmarshal(b, &back); err != nil || back != f {
		t.Fatalf("round trip %s -> %+v (%v)", b, back, err)
	}
	if err := json.Unmarshal([]byte(`{"kind":"hang","retry_after_ms":250}`), &back); err != nil || back.RetryAfter != 250*time.Millisecond {
		t.Errorf("%+v %v", back, err)
	}
}

// Start, the base URLs, the env lines, and Close (also by ctx).
func TestStartAndClose(t *testing.T) {
	clearEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	r, err := Start(ctx, "", Options{TokensPerSecond: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.URL, "http://127.0.0.1:") {
		t.Errorf("URL %q", r.URL)
	}
	want := map[string]string{"openai": "/openai/v1", "anthropic": "/anthropic", "gemini": "/gemini",
		"groq": "/groq/openai/v1", "deepseek": "/deepseek", "mistral": "/mistral/v1", "xai": "/xai/v1"}
	for p, suffix := range want {
		if got := r.BaseURL(p); got != r.URL+suffix {
			t.Errorf("%s base URL %q", p, got)
		}
	}
	env := strings.Join(r.Env(), "\n")
	for _, v := range []string{"OPENAI_BASE_URL=" + r.URL + "/openai/v1", "GOOGLE_GEMINI_BASE_URL=" + r.URL + "/gemini", "ANTHROPIC_API_KEY=" + FakeKey} {
		if !strings.Contains(env, v) {
			t.Errorf("env lacks %s:\n%s", v, env)
		}
	}
	res := (&stream.Client{}).Do(ctx, r.Endpoint("xai"), stream.Request{Target: stream.Target{Provider: "xai", Model: "grok-4"}, Prompt: "hi"}, nil)
	if res.Err != nil || res.Text == "" {
		t.Errorf("xai through Start: %+v", res.Err)
	}
	// A hung request is released by Close.
	if err := r.Server.Inject(Fault{Kind: FaultHang}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		res := (&stream.Client{}).Do(context.Background(), r.Endpoint("openai"), stream.Request{Target: stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}, Prompt: "hi"}, nil)
		if res.Err == nil {
			t.Error("a hung request succeeded")
		}
	}()
	for r.Server.Status().Providers[0].Requests == 0 {
		time.Sleep(time.Millisecond) // wait until the request is inside the handler
	}
	cancel()
	wg.Wait()
	if err := r.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if _, err := http.Get(r.URL + "/_sim/status"); err == nil {
		t.Error("still serving after Close")
	}
}

// Many clients at once (run with -race).
func TestConcurrentClients(t *testing.T) {
	s, ts, _ := newTestSim(t, Options{Scenario: "flaky"})
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			p := providerNames[i%len(providerNames)]
			for j := 0; j < 5; j++ {
				r := send(t, ts, p, modelFor(p), stream.Options{})
				if r.Err != nil && r.Err.Class != stream.ClassConnection && r.Err.Class != stream.ClassServer {
					t.Errorf("%s: unexpected %v", p, r.Err)
				}
			}
		}(i)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for j := 0; j < 20; j++ {
			_ = s.Status()
			_ = s.Inject(Fault{Kind: FaultServerError})
		}
	}()
	wg.Wait()
}
