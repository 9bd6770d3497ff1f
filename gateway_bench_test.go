package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gatewayStub is a light OpenAI upstream of the benchmarks' own: it
// streams Chat Completions chunks at a rate its model name says, and
// advertises request and token limits far above the load, so the proxy's
// pacer is never what holds a call back. Models:
//
//	slow: 150 one-word chunks at 5 a second (a 30 s stream)
//	fast: 5 chunks at once (a short call, zero delay)
//	big:  50 MiB of text in 32 KiB chunks, as fast as it is read
type gatewayStub struct {
	srv      *http.Server
	ln       net.Listener
	handlers sync.WaitGroup
}

func startGatewayStub(b *testing.B) *gatewayStub {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := &gatewayStub{ln: ln}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve)}
	go func() { _ = s.srv.Serve(ln) }()
	b.Cleanup(func() {
		_ = s.srv.Close() // closes every connection: a handler's next write fails
		s.handlers.Wait()
	})
	return s
}

func (s *gatewayStub) addr() string { return s.ln.Addr().String() }

func (s *gatewayStub) serve(w http.ResponseWriter, r *http.Request) {
	s.handlers.Add(1)
	defer s.handlers.Done()
	body, _ := io.ReadAll(r.Body)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("x-ratelimit-limit-requests", "1000000")
	h.Set("x-ratelimit-remaining-requests", "999999")
	h.Set("x-ratelimit-reset-requests", "1ms")
	h.Set("x-ratelimit-limit-tokens", "1000000000")
	h.Set("x-ratelimit-remaining-tokens", "999999999")
	h.Set("x-ratelimit-reset-tokens", "1ms")
	w.WriteHeader(http.StatusOK)
	fl := http.NewResponseController(w)
	chunk := func(text string) {
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", text)
	}
	n, every, text := 5, time.Duration(0), "word "
	switch {
	case strings.Contains(string(body), `"slow"`):
		n, every = 150, 200*time.Millisecond
	case strings.Contains(string(body), `"big"`):
		n, text = 50<<20/(32<<10), strings.Repeat("a", 32<<10)
	}
	for i := range n {
		if i > 0 && every > 0 {
			select {
			case <-time.After(every):
			case <-r.Context().Done():
				return
			}
		}
		chunk(text)
		if every > 0 || i == 0 {
			if fl.Flush() != nil {
				return
			}
		}
	}
	fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":5,\"total_tokens\":8}}\n\ndata: [DONE]\n\n")
}

// vmHWM is a process's peak resident set (VmHWM), in MiB.
func vmHWM(b *testing.B, pid int) float64 {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	b.Fatal("no VmHWM")
	return 0
}

// gatewayRig is a fresh `limitscope proxy` process (history on) over the
// stub, and optionally the floor: httputil.ReverseProxy as a process of
// its own over the same stub.
type gatewayRig struct {
	stub             *gatewayStub
	proxyAddr, floor string
	token            string
	proxy, floorCmd  *exec.Cmd
	hc               *http.Client
	refused          atomic.Int64
}

func newGatewayRig(b *testing.B, withFloor bool) *gatewayRig {
	dir := b.TempDir()
	env, token := childEnv(b, dir)
	g := &gatewayRig{stub: startGatewayStub(b), token: token, proxyAddr: freeAddr(b)}
	penv := append(env, "OPENAI_BASE_URL=http://"+g.stub.addr()+"/v1", "OPENAI_API_KEY=sk-bench-0123456789abcdef")
	if a := os.Getenv(proxyPprofEnv); a != "" {
		penv = append(penv, "LIMITSCOPE_PPROF="+a) // the proxy child's only (a -tags pprof build)
	}
	g.proxy = startChild(b, penv, g.proxyAddr, "proxy", "--listen", g.proxyAddr, "--quiet")
	if withFloor {
		g.floor = freeAddr(b)
		g.floorCmd = startChild(b, append(env, e2eMainEnv+"=0", bareProxyEnv+"="+g.floor+" "+g.stub.addr()), g.floor, "bare-reverse-proxy")
	}
	g.hc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2000, MaxConnsPerHost: 0, DisableCompression: true}}
	b.Cleanup(g.hc.CloseIdleConnections)
	return g
}

// stream makes one streamed call of model through the proxy (or the
// floor), returns its time to the first text, and reads it to its end
// unless hold says to stop after the first text (then it returns the
// open body for the caller to close).
func (g *gatewayRig) stream(ctx context.Context, viaFloor bool, model string, readAll bool) (time.Duration, io.ReadCloser, error) {
	url, key, m := "http://"+g.proxyAddr+"/v1/chat/completions", g.token, "openai/"+model
	if viaFloor {
		url, key, m = "http://"+g.floor+"/v1/chat/completions", "sk-bench-0123456789abcdef", model
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"model":"`+m+`","max_tokens":200,"stream":true,"messages":[{"role":"user","content":"go"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := g.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		g.refused.Add(1)
		return 0, nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	var ttft time.Duration
	for ttft == 0 {
		line, err := br.ReadString('\n')
		if err != nil {
			resp.Body.Close()
			return 0, nil, err
		}
		if strings.Contains(line, `"content":"`) {
			ttft = time.Since(t0)
		}
	}
	if !readAll {
		return ttft, resp.Body, nil
	}
	_, err = io.Copy(io.Discard, br)
	resp.Body.Close()
	return ttft, nil, err
}

func pct(v []time.Duration, p float64) time.Duration {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkGateway is the proxy as a team's gateway, each a fresh
// `limitscope proxy` process with its history on, over the stub (above);
// peak RSS is the proxy process's VmHWM. The driver holds two sockets per
// stream (caller and stub side) and the proxy two: `ulimit -n` of at least
// 4096 for the 1,000 streams.
//
//	go test -run '^$' -bench 'Gateway/1000-streams' -benchtime 1x -timeout 10m .
//	go test -run '^$' -bench 'Gateway/short-beside-500' -benchtime 1x -timeout 10m .
//	go test -run '^$' -bench 'Gateway/20-nonreaders' -benchtime 1x -timeout 10m .
//	go test -run '^$' -bench 'Gateway/open-loop' -benchtime 1x -timeout 30m .
func BenchmarkGateway(b *testing.B) {
	b.Run("1000-streams", benchThousandStreams)
	b.Run("short-beside-500", benchShortBeside500)
	b.Run("20-nonreaders", benchNonReaders)
	b.Run("open-loop", benchOpenLoop)
}

// benchThousandStreams: 1,000 concurrent 30-s streams (5 tokens/s) through
// one fresh proxy: how many were refused, the 95th percentile of the time
// to first token, the proxy's peak RSS.
func benchThousandStreams(b *testing.B) {
	for b.Loop() {
		g := newGatewayRig(b, false)
		var mu sync.Mutex
		var ttfts []time.Duration
		var wg sync.WaitGroup
		for range 1000 {
			wg.Go(func() {
				d, _, err := g.stream(context.Background(), false, "slow", true)
				if err == nil {
					mu.Lock()
					ttfts = append(ttfts, d)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		within := 0
		for _, d := range ttfts {
			if d <= 10*time.Second {
				within++
			}
		}
		b.ReportMetric(float64(g.refused.Load()), "refused")
		b.ReportMetric(float64(1000-len(ttfts)), "failed")
		b.ReportMetric(pct(ttfts, 0.95).Seconds(), "ttft-p95-s")
		b.ReportMetric(float64(within)/10, "%-ttft-within-10s")
		b.ReportMetric(vmHWM(b, g.proxy.Process.Pid), "proxy-VmHWM-MiB")
	}
}

// benchShortBeside500: with 500 streams held open, 500 sequential short
// calls through the proxy and through the floor: the time to first token
// the proxy adds, p50 and p99.
func benchShortBeside500(b *testing.B) {
	for b.Loop() {
		g := newGatewayRig(b, true)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var held atomic.Int64
		for range 500 {
			wg.Go(func() {
				if _, body, err := g.stream(ctx, false, "slow", false); err == nil {
					held.Add(1)
					<-ctx.Done()
					body.Close()
				}
			})
		}
		for held.Load() < 500 && g.refused.Load() == 0 {
			time.Sleep(10 * time.Millisecond) // a benchmark's setup, not a test's assertion
		}
		var floorFailed, proxyFailed atomic.Int64
		measure := func(viaFloor bool) []time.Duration {
			var out []time.Duration
			for range 500 {
				d, _, err := g.stream(context.Background(), viaFloor, "fast", true)
				if err != nil {
					if viaFloor {
						floorFailed.Add(1) // ReverseProxy now and then loses its upstream connection mid-body
					} else {
						proxyFailed.Add(1)
					}
					continue
				}
				out = append(out, d)
			}
			return out
		}
		measure(true) // warm both hops
		measure(false)
		floor, proxied := measure(true), measure(false)
		cancel()
		wg.Wait()
		b.ReportMetric(float64((pct(proxied, 0.5)-pct(floor, 0.5)).Microseconds())/1000, "added-ttft-p50-ms")
		b.ReportMetric(float64((pct(proxied, 0.99)-pct(floor, 0.99)).Microseconds())/1000, "added-ttft-p99-ms")
		b.ReportMetric(float64(pct(floor, 0.5).Microseconds())/1000, "floor-ttft-p50-ms")
		b.ReportMetric(float64(floorFailed.Load()), "floor-failed-calls")
		b.ReportMetric(float64(proxyFailed.Load()), "proxy-failed-calls")
		b.ReportMetric(float64(held.Load()), "held-streams")
	}
}

// benchNonReaders: 20 callers open 50 MiB streams and stop reading; the
// proxy's peak RSS, and the time to first token of a call made meanwhile.
func benchNonReaders(b *testing.B) {
	for b.Loop() {
		g := newGatewayRig(b, false)
		var bodies []io.ReadCloser
		for range 20 {
			_, body, err := g.stream(context.Background(), false, "big", false)
			if err != nil {
				b.Fatal(err)
			}
			bodies = append(bodies, body)
		}
		time.Sleep(5 * time.Second) // let the proxy read what it will of the 20 answers
		d, _, err := g.stream(context.Background(), false, "fast", true)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(vmHWM(b, g.proxy.Process.Pid), "proxy-VmHWM-MiB")
		b.ReportMetric(d.Seconds(), "meanwhile-ttft-s")
		for _, body := range bodies {
			body.Close()
		}
	}
}

// call makes one short streamed call ("fast") straight to the stub, through
// the floor or through the proxy, read to its end.
func (g *gatewayRig) shortCall(to string) error {
	url, key, m := "http://"+g.proxyAddr+"/v1/chat/completions", g.token, "openai/fast"
	switch to {
	case "direct":
		url, key, m = "http://"+g.stub.addr()+"/v1/chat/completions", "sk-bench-0123456789abcdef", "fast"
	case "floor":
		url, key, m = "http://"+g.floor+"/v1/chat/completions", "sk-bench-0123456789abcdef", "fast"
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"model":"`+m+`","max_tokens":20,"stream":true,"messages":[{"role":"user","content":"go"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && (resp.StatusCode != http.StatusOK || n == 0) {
		err = fmt.Errorf("status %d, %d bytes", resp.StatusCode, n)
	}
	return err
}

// benchOpenLoop measures overhead the way gateways publish it: a
// zero-delay upstream (the stub's "fast"), the floor's saturation measured
// first (the median of 7 rounds of 1 s, 64 callers in a closed loop, after
// one round of warm-up), then an open-loop generator
// at 25% and 50% of it, LIMITSCOPE_BENCH_OPENLOOP_N calls per rate and
// target (default 10,000), each call's latency counted from its scheduled
// start (no coordinated omission): the latency the proxy adds at p50, p99
// and p99.9, against calling the stub directly and against the floor.
// LIMITSCOPE_BENCH_OPENLOOP_SHARES (e.g. "0.05,0.1") runs other shares;
// LIMITSCOPE_BENCH_OPENLOOP_RATE (calls/s) one fixed rate instead, its
// metrics named @100%; LIMITSCOPE_BENCH_OPENLOOP_PROXY_ONLY=1 calls
// the proxy alone. proxy-cpu-ms/call is the proxy process's CPU (user
// and system, from /proc) over its calls at that rate.
func benchOpenLoop(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("LIMITSCOPE_BENCH_OPENLOOP_N")); err == nil && v > 0 {
		n = v
	}
	for b.Loop() {
		g := newGatewayRig(b, true)
		sat, spread := g.floorSaturation(satRounds, satRound)
		b.ReportMetric(sat, "floor-saturation-calls/s")
		b.ReportMetric(spread[0], "floor-saturation-min-calls/s")
		b.ReportMetric(spread[1], "floor-saturation-max-calls/s")
		shares := []float64{0.25, 0.5}
		if v := os.Getenv("LIMITSCOPE_BENCH_OPENLOOP_SHARES"); v != "" { // e.g. "0.05,0.1"
			shares = nil
			for _, f := range strings.Split(v, ",") {
				if x, err := strconv.ParseFloat(strings.TrimSpace(f), 64); err == nil && x > 0 {
					shares = append(shares, x)
				}
			}
		}
		if v, err := strconv.ParseFloat(os.Getenv("LIMITSCOPE_BENCH_OPENLOOP_RATE"), 64); err == nil && v > 0 {
			shares, sat = []float64{1}, v // one fixed rate (calls/s) instead of shares of the saturation: for A/B runs
		}
		targets := []string{"direct", "floor", "proxy"}
		if os.Getenv("LIMITSCOPE_BENCH_OPENLOOP_PROXY_ONLY") != "" {
			targets = []string{"proxy"} // A/B runs of the proxy alone: no added latency then
		}
		for _, share := range shares {
			every := time.Duration(float64(time.Second) / (share * sat))
			lat := map[string][]time.Duration{}
			for _, to := range targets {
				out := make([]time.Duration, n)
				var failed atomic.Int64
				var why sync.Map // the failures' kinds, one example each
				cpu0 := procCPU(b, g.proxy.Process.Pid)
				start := time.Now()
				var wg sync.WaitGroup
				for i := range n {
					at := start.Add(time.Duration(i) * every)
					time.Sleep(time.Until(at)) // the open loop's schedule
					wg.Go(func() {
						if err := g.shortCall(to); err != nil {
							failed.Add(1)
							why.LoadOrStore(failureKind(err), err.Error())
						}
						out[i] = time.Since(at)
					})
				}
				wg.Wait()
				if to == "proxy" { // the proxy process's CPU per call, its history's commits included
					cpu := procCPU(b, g.proxy.Process.Pid) - cpu0
					b.ReportMetric(float64(cpu.Microseconds())/1000/float64(n), fmt.Sprintf("proxy-cpu-ms/call@%.0f%%", share*100))
				}
				lat[to] = out
				b.ReportMetric(float64(failed.Load()), fmt.Sprintf("%s-failed@%.0f%%", to, share*100))
				why.Range(func(k, v any) bool {
					b.Logf("%s at %.0f%%: failures like %q", to, share*100, v)
					return true
				})
			}
			if len(lat) < 3 {
				for _, q := range []float64{0.5, 0.99} {
					b.ReportMetric(float64(pct(lat["proxy"], q).Microseconds())/1000, fmt.Sprintf("proxy-p%g-ms@%.0f%%", q*100, share*100))
				}
				continue
			}
			for _, p := range []struct {
				name string
				q    float64
			}{{"p50", 0.5}, {"p99", 0.99}, {"p99.9", 0.999}} {
				px := pct(lat["proxy"], p.q)
				b.ReportMetric(float64((px-pct(lat["direct"], p.q)).Microseconds())/1000, fmt.Sprintf("added-vs-direct-%s-ms@%.0f%%", p.name, share*100))
				b.ReportMetric(float64((px-pct(lat["floor"], p.q)).Microseconds())/1000, fmt.Sprintf("added-vs-floor-%s-ms@%.0f%%", p.name, share*100))
			}
		}
	}
}

// satRounds and satRound are the floor's saturation measurement: the
// median of satRounds closed-loop rounds of satRound each, so that one
// round that meets a busier or a quieter moment of a shared machine does
// not set both rates.
const (
	satRounds = 7
	satRound  = time.Second
)

// floorSaturation measures the floor's saturation: rounds closed-loop
// rounds of 64 callers making short calls through it for d each, after a
// warm-up round that is not counted. It returns the median round's
// calls/s, and the slowest and the fastest round's.
func (g *gatewayRig) floorSaturation(rounds int, d time.Duration) (float64, [2]float64) {
	var rates []float64
	for r := range rounds + 1 {
		var done atomic.Int64
		t0 := time.Now()
		stop := t0.Add(d)
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for time.Now().Before(stop) {
					if g.shortCall("floor") == nil {
						done.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if r > 0 { // the first round warms the connections up
			rates = append(rates, float64(done.Load())/time.Since(t0).Seconds())
		}
	}
	slices.Sort(rates)
	return rates[len(rates)/2], [2]float64{rates[0], rates[len(rates)-1]}
}

// failureKind names a failed call's kind: its status, or its error with
// the addresses and numbers taken out.
func failureKind(err error) string {
	var sb strings.Builder
	for _, r := range err.Error() {
		if r >= '0' && r <= '9' {
			continue
		}
		sb.WriteRune(r)
	}
	return sb.String()
}
