package proxy

import (
	"bufio"
	"context"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/store"
)

// firstText sends r and returns the time to the first SSE data line that
// carries text, reading the rest of the stream; ok is false on any failure.
func firstText(hc *http.Client, r *http.Request) (time.Duration, bool) {
	start := time.Now()
	resp, err := hc.Do(r)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, false
	}
	var ttft time.Duration
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if ttft == 0 && strings.HasPrefix(line, "data: ") && strings.Contains(line, `"content":"`) && !strings.Contains(line, `"content":""`) {
			ttft = time.Since(start)
		}
		if line == "data: [DONE]" {
			done = true
		}
	}
	return ttft, done && ttft > 0
}

func pct(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(p*float64(len(s)-1))]
}

const loadBody = `{"model":"openai/gpt-5.4-mini","max_tokens":40,"stream":true,"messages":[{"role":"user","content":"Say hello"}]}`

// measure runs n streaming calls, conc at a time, through the proxy or
// straight to the simulator.
func measure(t *testing.T, e *env, n, conc int, viaProxy bool) []time.Duration {
	t.Helper()
	out := make([]time.Duration, n)
	fails := 0
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, conc)
	hc := e.client()
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var r *http.Request
			if viaProxy {
				r = e.openAIReq(loadBody)
			} else {
				r, _ = http.NewRequest(http.MethodPost, e.sim.BaseURL("openai")+"/chat/completions",
					strings.NewReader(strings.Replace(loadBody, "openai/", "", 1)))
				r.Header.Set("Authorization", "Bearer "+sim.FakeKey)
				r.Header.Set("Content-Type", "application/json")
			}
			d, ok := firstText(hc, r)
			mu.Lock()
			defer mu.Unlock()
			out[i] = d
			if !ok {
				fails++
			}
		}()
	}
	wg.Wait()
	if fails > 0 {
		t.Fatalf("%d of %d calls failed (proxy %v)", fails, n, viaProxy)
	}
	return out
}

// 200 concurrent streaming calls through the proxy: none lost, none
// doubled in the history; the proxy's added time to first text is logged.
func TestLoad200Streams(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	db := filepath.Join(t.TempDir(), "history.db")
	rec := store.NewRecorder(db, store.SessionInfo{Version: "test", Mode: store.ModeSimulated, Command: "proxy"}, store.Options{})
	e := newEnv(t, nil, func(o *Options) {
		o.Events = nil
		o.Record = rec.Sink
		o.Engine.Cooldowns = rec.Cooldowns()
	})
	const n = 200
	measure(t, e, n, n, true)
	if got := e.requests("openai"); got != n {
		t.Errorf("the simulator saw %d requests, want %d", got, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	calls, err := (&store.Reader{Path: db}).List(ctx, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[uint32]bool{}
	for _, c := range calls {
		if ids[c.ID] {
			t.Errorf("call %d listed twice", c.ID)
		}
		ids[c.ID] = true
		if c.Outcome != retry.OutcomeOK || c.Attempts != 1 {
			t.Errorf("call %d: %s after %d attempts", c.ID, c.Outcome, c.Attempts)
		}
	}
	if len(calls) != n {
		t.Errorf("history holds %d calls, want %d", len(calls), n)
	}

	// Added latency: the same calls straight to a fresh simulator, then
	// through the proxy, one at a time and 200 at once.
	e2 := newEnv(t, nil, func(o *Options) { o.Events = nil })
	direct := measure(t, e2, n, 1, false)
	seq := measure(t, e2, n, 1, true)
	e3 := newEnv(t, nil, func(o *Options) { o.Events = nil })
	directConc := measure(t, e3, n, n, false)
	proxied := measure(t, e3, n, n, true)
	t.Logf("time to first text, %d calls one at a time: direct p50 %v p99 %v; proxy p50 %v p99 %v; added p50 %v p99 %v",
		n, pct(direct, .5), pct(direct, .99), pct(seq, .5), pct(seq, .99), pct(seq, .5)-pct(direct, .5), pct(seq, .99)-pct(direct, .99))
	t.Logf("time to first text, %d calls at once: direct p50 %v p99 %v; proxy p50 %v p99 %v; added p50 %v p99 %v",
		n, pct(directConc, .5), pct(directConc, .99), pct(proxied, .5), pct(proxied, .99),
		pct(proxied, .5)-pct(directConc, .5), pct(proxied, .99)-pct(directConc, .99))
}
