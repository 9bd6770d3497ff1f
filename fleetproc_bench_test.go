package main

import (
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitscope/limitscope/fleet/fleettest"
	"github.com/limitscope/limitscope/sim"
)

// chargingStub is an OpenAI-shaped upstream with a token bucket of rate
// requests a second holding at most burst, that charges every request,
// rejected ones too (OpenAI's rate-limit guide: rejected requests count
// against the limit), down to one burst of debt. A request that finds a
// token is forwarded to the simulator for its answer; one that does not
// gets a 429 with retry-after (whole seconds) and the x-ratelimit-*
// headers. Both carry
// x-ratelimit-limit-requests as the per-minute limit.
type chargingStub struct {
	rate, burst float64
	mu          sync.Mutex
	level       float64
	at          time.Time
	requests    atomic.Int64
	rejected    atomic.Int64
	proxy       *httputil.ReverseProxy
	precise     bool // also retry-after-ms: the exact time to the next token
	charge      bool // rejected requests take a token too
	start       time.Time
	perSecond   [600]atomic.Int32 // rejections by second of the run
}

func newChargingStub(rate, burst float64, simAddr string) *chargingStub {
	s := &chargingStub{rate: rate, burst: burst, level: burst, at: time.Now(), charge: true}
	s.proxy = httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: simAddr})
	s.proxy.FlushInterval = -1
	s.proxy.Transport = &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	return s
}

// take charges one request and returns the level left and whether it
// found a token.
func (s *chargingStub) take(now time.Time) (float64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.level = math.Min(s.burst, s.level+now.Sub(s.at).Seconds()*s.rate)
	s.at = now
	ok := s.level >= 1
	if ok || s.charge {
		s.level = math.Max(-s.burst, s.level-1)
	}
	return s.level, ok
}

func (s *chargingStub) reset() {
	s.mu.Lock()
	s.level, s.at, s.start = s.burst, time.Now(), time.Now()
	s.mu.Unlock()
	for i := range s.perSecond {
		s.perSecond[i].Store(0)
	}
	s.requests.Store(0)
	s.rejected.Store(0)
}

func (s *chargingStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	level, ok := s.take(time.Now())
	h := w.Header()
	h.Set("x-ratelimit-limit-requests", strconv.Itoa(int(s.rate*60)))
	h.Set("x-ratelimit-remaining-requests", strconv.Itoa(int(math.Max(0, math.Floor(level)))))
	full := time.Duration((s.burst - level) / s.rate * float64(time.Second)).Round(time.Millisecond)
	h.Set("x-ratelimit-reset-requests", full.String())
	if !ok {
		s.rejected.Add(1)
		if sec := int(time.Since(s.start).Seconds()); sec >= 0 && sec < len(s.perSecond) {
			s.perSecond[sec].Add(1)
		}
		wait := time.Duration((1 - level) / s.rate * float64(time.Second))
		h.Set("retry-after", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		if s.precise {
			h.Set("retry-after-ms", strconv.FormatInt(wait.Milliseconds(), 10))
		}
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
		return
	}
	s.proxy.ServeHTTP(w, r)
}

// BenchmarkFleetProcesses runs 2 and then 3 `limitscope proxy` processes
// sharing one real redis-server (--state), each driven by 16 clients for
// FLEET_PROC_SECONDS (default 60), against chargingStub (10 requests a
// second, a burst of 10, rejected requests charged), and reports the
// answered requests as a share of what the bucket allowed (its burst and
// 10 a second) and the share of requests rejected, both counted by the
// stub. A client whose call the proxy answers with an error waits the
// retry-after it carries (half a second when none), as an SDK does. The stub's 429 carries retry-after in whole seconds;
// FLEET_PROC_RETRY_AFTER_MS=1 adds retry-after-ms, the exact time to the
// next token; FLEET_PROC_NO_CHARGE=1 stops charging rejected requests. It
// needs redis-server; it is a benchmark, not a test: run it with
//
//	go test -run '^$' -bench FleetProcesses -benchtime 1x -timeout 30m .
func BenchmarkFleetProcesses(b *testing.B) {
	secs := 60
	if v := os.Getenv("FLEET_PROC_SECONDS"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			secs = n
		}
	}
	redis := fleettest.Start(b)
	dir := b.TempDir()
	env, token := childEnv(b, dir)
	simAddr, _ := startUnlimitedSim(b, dir, env)
	stub := newChargingStub(10, 10, simAddr)
	stub.precise = os.Getenv("FLEET_PROC_RETRY_AFTER_MS") != ""
	stub.charge = os.Getenv("FLEET_PROC_NO_CHARGE") == ""
	up := httptest.NewServer(stub)
	defer up.Close()
	for i, n := range []int{2, 3} {
		b.Run(fmt.Sprintf("%d-processes", n), func(b *testing.B) {
			// A database of its own per run: nothing learnt carries over.
			state := strings.TrimSuffix(redis.URL(), "/0") + "/" + strconv.Itoa(i+1)
			var addrs, logs []string
			for range n {
				addr := freeAddr(b)
				logs = append(logs, filepath.Join(dir, fmt.Sprintf("proxy-%d-%s.log", n, strings.ReplaceAll(addr, ":", "_"))))
				startLogged(b, append(env, "OPENAI_BASE_URL="+up.URL+"/openai/v1", "OPENAI_API_KEY="+sim.FakeKey),
					addr, logs[len(logs)-1], "proxy", "--listen", addr, "--quiet", "--no-history", "--state", state)
				addrs = append(addrs, addr)
			}
			stub.reset()
			start := time.Now()
			end := start.Add(time.Duration(secs) * time.Second)
			var answered, failed atomic.Int64
			var statuses sync.Map // the proxies' failure statuses
			var wg sync.WaitGroup
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
			defer hc.CloseIdleConnections()
			for _, addr := range addrs {
				for range 16 {
					wg.Go(func() {
						for time.Now().Before(end) {
							req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions",
								strings.NewReader(`{"model":"openai/gpt-5.4-mini","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`))
							req.Header.Set("Authorization", "Bearer "+token)
							req.Header.Set("Content-Type", "application/json")
							resp, err := hc.Do(req)
							if err != nil {
								failed.Add(1)
								continue
							}
							_, _ = io.Copy(io.Discard, resp.Body)
							_ = resp.Body.Close()
							if resp.StatusCode == http.StatusOK {
								answered.Add(1)
								continue
							}
							failed.Add(1)
							statuses.Store(resp.StatusCode, true)
							// As an SDK does: wait what the proxy's
							// answer asks before the next request, or
							// half a second when it does not say.
							wait := proxyRetryAfter(resp.Header)
							if wait <= 0 {
								wait = 500 * time.Millisecond
							}
							time.Sleep(min(wait, time.Until(end)))
						}
					})
				}
			}
			// The stub's counts at the end of the window (calls still in
			// flight then, waiting out a pace, are not counted).
			time.Sleep(time.Until(end))
			reqs, rej := stub.requests.Load(), stub.rejected.Load()
			el := time.Since(start).Seconds()
			wg.Wait()
			ok := reqs - rej
			limit := stub.burst + stub.rate*el
			b.ReportMetric(100*float64(ok)/limit, "%limit")
			b.ReportMetric(100*float64(rej)/math.Max(1, float64(reqs)), "%rejected")
			var by []string
			for sec := range min(int(el)+1, len(stub.perSecond)) {
				if n := stub.perSecond[sec].Load(); n > 0 {
					by = append(by, fmt.Sprintf("s%d:%d", sec, n))
				}
			}
			for _, l := range logs {
				// The proxies' warnings (the shared state's), if any.
				out, _ := os.ReadFile(l)
				for _, line := range strings.Split(string(out), "\n") {
					if strings.Contains(line, "shared state") {
						b.Logf("%s: %s", filepath.Base(l), line)
					}
				}
			}
			var codes []string
			statuses.Range(func(k, _ any) bool { codes = append(codes, strconv.Itoa(k.(int))); return true })
			b.Logf("the proxies' failure statuses: %s", strings.Join(codes, " "))
			b.Logf("rejections by second: %s", strings.Join(by, " "))
			b.Logf("%d proxies, %.0f s: the stub saw %d requests, %d rejected (%.2f%%), %d answered = %.1f%% of the %.0f allowed; clients: %d answered, %d not",
				n, el, reqs, rej, 100*float64(rej)/math.Max(1, float64(reqs)), ok, 100*float64(ok)/limit, limit, answered.Load(), failed.Load())
		})
	}
}

// startLogged is startChild with the child's stderr in the file at log.
func startLogged(b *testing.B, env []string, addr, log string, args ...string) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(log)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = io.Discard, f
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = f.Close() })
	for deadline := time.Now().Add(20 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s did not listen on %s", args[0], addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// proxyRetryAfter is the wait a proxy's answer asks for (retry-after-ms,
// else retry-after in seconds), as the OpenAI SDKs read it.
func proxyRetryAfter(h http.Header) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("retry-after-ms"), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	if s, err := strconv.ParseFloat(h.Get("retry-after"), 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	return 0
}
