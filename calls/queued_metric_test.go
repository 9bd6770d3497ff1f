package calls

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/proxy"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/stream"
)

// The proxy's /metrics counts the calls waiting at a target's gate
// (limitscope_proxy_calls_queued): with the gate's two slow-start slots taken,
// a third request waits, and the scrape says 1.
func TestProxyMetricsCountQueuedCalls(t *testing.T) {
	env := Env{Getenv: func(string) string { return "" }, Stderr: io.Discard, Clock: retrytest.NewFakeClock(time.Now()), Version: "test"}
	f := Flags{History: HistoryFlags{NoHistory: true}, Sim: SimFlags{Sim: true, Seed: 3}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs, err := Open(ctx, env, f, true, "proxy")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background(), time.Second)
	const token = "lsp-test-token-for-metrics-0002"
	h, err := cs.ProxyHandler(token, &proxy.Config{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	tg := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	for range 2 {
		if _, err := cs.Pacer.Acquire(ctx, tg); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _, _ = cs.Pacer.Acquire(ctx, tg) }()
	for cs.Pacer.Queued() != 1 {
		runtime.Gosched()
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	found := false
	for _, l := range strings.Split(string(b), "\n") {
		found = found || (strings.HasPrefix(l, "limitscope_proxy_calls_queued") && strings.HasSuffix(l, " 1"))
	}
	if !found {
		t.Errorf("/metrics has no limitscope_proxy_calls_queued 1:\n%s", grepLines(string(b), "queued"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
