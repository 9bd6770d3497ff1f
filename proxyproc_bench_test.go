package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitscope/limitscope/calls"
	"github.com/limitscope/limitscope/sim"
)

// procCPU is the user and system CPU time process pid has used (from
// /proc, in clock ticks of 10 ms).
func procCPU(tb testing.TB, pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond
}

// startChild starts the test binary as limitscope with args and waits
// until addr accepts connections.
func startChild(b *testing.B, env []string, addr string, args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return cmd
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s did not listen on %s", args[0], addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freeAddr(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// BenchmarkProxyProcess measures the proxy as a user runs it: `limitscope
// sim` and `limitscope proxy` as processes of their own (the proxy on the
// simulator through OPENAI_BASE_URL, recording its history, or not with
// --no-history), driven from this process with streaming calls of about 40
// tokens, 50 at a time, in rounds of a block straight to the simulator and
// a block through the proxy. It reports the medians over rounds of the
// proxy process's CPU per call (from /proc: everything it does, its
// history's commits included), the simulator's per call when called
// directly, and the proxied block's calls/s as a share of the direct
// one's.
//
// The third mode, bare-reverse-proxy, puts net/http/httputil's
// ReverseProxy (a process of its own, flushing every write) where the
// proxy was: it only copies bytes (no decoding, no retry core, no usage
// asked for, no history), so its figures are a floor for any proxy on this
// machine and harness.
//
// The -c1 modes make the same calls one at a time, in blocks of 300: the
// proxy's CPU per call without the sharing of commits, socket writes and
// wake-ups that 50 calls at once give.
//
//	go test -run '^$' -bench ProxyProcess -benchtime 10x .
func BenchmarkProxyProcess(b *testing.B) {
	for _, conc := range []int{50, 1} {
		for _, mode := range []string{"history", "no-history", "bare-reverse-proxy"} {
			name := mode
			if conc == 1 {
				name += "-c1"
			}
			b.Run(name, func(b *testing.B) { benchProxyProcess(b, mode, conc) })
		}
	}
}

// bareProxyEnv, when set to "LISTEN UPSTREAM", makes the test binary a bare
// reverse proxy (bareProxyChild) instead of running tests.
const bareProxyEnv = "LIMITSCOPE_BENCH_BARE_PROXY"

// proxyPprofEnv, set to a loopback address, has the proxy child (of a test
// binary built with -tags pprof) serve net/http/pprof there: the profile
// of `limitscope proxy` under the benchmark's load.
const proxyPprofEnv = "LIMITSCOPE_BENCH_PROXY_PPROF"

// bareProxyChild serves httputil's ReverseProxy on listen, to the upstream
// host:port, until killed.
func bareProxyChild(spec string) {
	listen, upstream, _ := strings.Cut(spec, " ")
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: upstream})
	rp.FlushInterval = -1 // flush every write, as a streaming proxy must
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	fmt.Fprintln(os.Stderr, http.ListenAndServe(listen, rp))
	os.Exit(1)
}

// childEnv is the environment of the benchmarks' child processes (e2eEnv
// in dir) and the proxy token it makes them read.
func childEnv(b *testing.B, dir string) (env []string, token string) {
	env = e2eEnv(b, dir)
	getenv := func(k string) string {
		for _, kv := range slices.Backward(env) {
			if name, v, ok := strings.Cut(kv, "="); ok && name == k {
				return v
			}
		}
		return ""
	}
	token, _, err := calls.ProxyToken(getenv) // made here, read by the children
	if err != nil {
		b.Fatal(err)
	}
	return env, token
}

// startUnlimitedSim starts `limitscope sim` as a child process with no
// limits and instant answers, and returns its address and process.
func startUnlimitedSim(b *testing.B, dir string, env []string) (string, *exec.Cmd) {
	scen := filepath.Join(dir, "unlimited.ini")
	if err := os.WriteFile(scen, []byte("name = unlimited\n[openai]\nrpm = 0\ntpm = 0\ntokens_per_second = 1000000\nfirst_token_delay = 0s\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	addr := freeAddr(b)
	return addr, startChild(b, env, addr, "sim", "--listen", addr, "--scenario-file", scen)
}

func benchProxyProcess(b *testing.B, mode string, conc int) {
	dir := b.TempDir()
	env, token := childEnv(b, dir)
	simAddr, simCmd := startUnlimitedSim(b, dir, env)
	proxyAddr := freeAddr(b)
	args := []string{"proxy", "--listen", proxyAddr, "--quiet"}
	if mode == "no-history" {
		args = append(args, "--no-history")
	}
	var proxyCmd *exec.Cmd
	if mode == "bare-reverse-proxy" {
		// e2eMainEnv=0: the child runs TestMain (which starts the proxy),
		// not main.
		proxyCmd = startChild(b, append(env, e2eMainEnv+"=0", bareProxyEnv+"="+proxyAddr+" "+simAddr), proxyAddr, "bare-reverse-proxy")
	} else {
		penv := append(env, "OPENAI_BASE_URL=http://"+simAddr+"/openai/v1", "OPENAI_API_KEY="+sim.FakeKey)
		if a := os.Getenv(proxyPprofEnv); a != "" {
			penv = append(penv, "LIMITSCOPE_PPROF="+a) // the proxy child's only
		}
		proxyCmd = startChild(b, penv, proxyAddr, args...)
	}

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 100, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	block := 1000
	if conc == 1 {
		block = 300
	}
	var cut atomic.Int64 // bare-reverse-proxy's cut calls
	call := func(direct bool) {
		addr, key, model := "http://"+proxyAddr+"/v1/chat/completions", token, "openai/gpt-5.4-mini"
		switch {
		case direct:
			addr, key, model = "http://"+simAddr+"/openai/v1/chat/completions", sim.FakeKey, "gpt-5.4-mini"
		case mode == "bare-reverse-proxy":
			addr, key, model = "http://"+proxyAddr+"/openai/v1/chat/completions", sim.FakeKey, "gpt-5.4-mini"
		}
		req, _ := http.NewRequest(http.MethodPost, addr, strings.NewReader(`{"model":"`+model+`","max_tokens":40,"stream":true,"messages":[{"role":"user","content":"Say hello"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		text := 0
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"content":"`) {
				text++
			}
		}
		if resp.StatusCode != http.StatusOK || text < 5 || sc.Err() != nil {
			if mode == "bare-reverse-proxy" && !direct {
				// ReverseProxy now and then loses its upstream connection
				// in the middle of a body ("use of closed network
				// connection"), with a trivial upstream as well: counted,
				// since it is only the floor's.
				cut.Add(1)
				return
			}
			b.Errorf("status %d, %d text events, %v", resp.StatusCode, text, sc.Err())
		}
	}
	run := func(n int, direct bool) (proxyCPU, simCPU time.Duration, wall time.Duration) {
		jobs := make(chan struct{}, n)
		for range n {
			jobs <- struct{}{}
		}
		close(jobs)
		p0, s0, t0 := procCPU(b, proxyCmd.Process.Pid), procCPU(b, simCmd.Process.Pid), time.Now()
		var wg sync.WaitGroup
		for range conc {
			wg.Go(func() {
				for range jobs {
					call(direct)
				}
			})
		}
		wg.Wait()
		return procCPU(b, proxyCmd.Process.Pid) - p0, procCPU(b, simCmd.Process.Pid) - s0, time.Since(t0)
	}
	run(200, true) // warm up both hops' connections
	run(200, false)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(block) }
	var proxyMS, simDirectMS, simProxiedMS, ratio []float64
	for i := 0; b.Loop(); i++ {
		var ds, dw, pp, ps, pw time.Duration // the proxy's CPU in a direct block is not wanted
		if i%2 == 0 {
			_, ds, dw = run(block, true)
			pp, ps, pw = run(block, false)
		} else {
			pp, ps, pw = run(block, false)
			_, ds, dw = run(block, true)
		}
		proxyMS, simDirectMS, simProxiedMS = append(proxyMS, ms(pp)), append(simDirectMS, ms(ds)), append(simProxiedMS, ms(ps))
		ratio = append(ratio, dw.Seconds()/pw.Seconds())
	}
	b.ReportMetric(median(proxyMS), "proxy-cpu-ms/call")
	b.ReportMetric(median(simDirectMS), "sim-cpu-ms/call-direct")
	b.ReportMetric(median(simProxiedMS), "sim-cpu-ms/call-proxied")
	b.ReportMetric(median(ratio), "calls/s-ratio")
	if mode == "bare-reverse-proxy" {
		b.ReportMetric(float64(cut.Load()), "cut-calls")
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
