package calls

import (
	"context"
	"flag"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// Proxied calls run on the commands' engine, breaker included: one
// overloaded target, four proxied calls with different prompts (no
// replay) make 5, 2, 1, 1 upstream requests, as the same calls typed
// would, and the engine's target state (what the console reads) shows the
// circuit open.
func TestProxiedCallsShareTheCommandsBreaker(t *testing.T) {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	var f Flags
	f.Register(fs)
	if err := fs.Parse([]string{"--sim", "--seed", "3", "--no-history"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	clk := retrytest.NewFakeClock(time.Now())
	c, err := Open(ctx, Env{Getenv: func(string) string { return "" }, Clock: clk, Now: clk.Now}, f, true, "proxy")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx, time.Second)
	cfg, err := LoadProxyConfig("", f, fs)
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.ProxyHandler("tok-0123456789", cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	if _, err := c.Providers.Sim.Server.Arm(sim.Fault{Provider: "openai", Kind: sim.FaultOverload, For: time.Hour}); err != nil {
		t.Fatal(err)
	}
	target := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	seen := func() int64 {
		for _, p := range c.Providers.Sim.Server.Status().Providers {
			if p.Provider == "openai" {
				return p.Requests
			}
		}
		return -1
	}
	for i, want := range []int{5, 2, 1, 1} {
		body := `{"model":"openai/gpt-5.4-mini","max_tokens":16,"messages":[{"role":"user","content":"question ` + strconv.Itoa(i) + `"}]}`
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok-0123456789")
		before := seen()
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		n, _ := strconv.Atoi(resp.Header.Get("X-Limitscope-Attempts"))
		if got := seen() - before; resp.StatusCode < 500 || n != want || got != int64(want) {
			t.Errorf("call %d: status %d, %d attempts, %d requests upstream, want an overload error after %d", i+1, resp.StatusCode, n, got, want)
		}
	}
	st := c.Engine.TargetState(target)
	if !st.HasBreaker || !st.Breaker.Open() {
		t.Errorf("the engine's state of %s: %+v, want the circuit open", target, st.Breaker)
	}
}
