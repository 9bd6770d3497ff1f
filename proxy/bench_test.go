package proxy

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/limitscope/limitscope/sim"
)

// cpuTime is the CPU the process used so far (user and system).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// streamBench is the simulator, the proxy in front of it and a client
// keeping 100 connections to each, for the streaming benchmarks.
type streamBench struct {
	e  *env
	hc *http.Client
}

func newStreamBench(b *testing.B) *streamBench {
	// No limits: every call is served, none waits.
	scen := filepath.Join(b.TempDir(), "unlimited.ini")
	if err := os.WriteFile(scen, []byte("name = unlimited\n[openai]\nrpm = 0\ntpm = 0\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	e := newEnvSim(b, sim.Options{ScenarioFile: scen, TokensPerSecond: 1e6}, nil, func(o *Options) { o.Events = nil })
	// Both hops keep their connections (the defaults keep 2 per host,
	// so 50 calls at once would dial 48 new ones each round).
	hc := e.client()
	hc.Transport.(*http.Transport).MaxIdleConnsPerHost = 100
	e.up.Transport.(*http.Transport).MaxIdleConnsPerHost = 100
	return &streamBench{e: e, hc: hc}
}

// call streams one answer to its end, straight to the simulator or through
// the proxy.
func (sb *streamBench) call(b *testing.B, direct bool) {
	var req *http.Request
	if direct {
		req, _ = http.NewRequest(http.MethodPost, sb.e.sim.BaseURL("openai")+"/chat/completions",
			strings.NewReader(strings.Replace(loadBody, "openai/", "", 1)))
		req.Header.Set("Authorization", "Bearer "+sim.FakeKey)
		req.Header.Set("Content-Type", "application/json")
	} else {
		req = sb.e.openAIReq(loadBody)
	}
	resp, err := sb.hc.Do(req)
	if err != nil {
		b.Error(err)
		return
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || n < 200 {
		b.Errorf("status %d, %d bytes", resp.StatusCode, n)
	}
}

// run makes n calls, conc at a time, and returns the process's CPU and the
// wall time they took.
func (sb *streamBench) run(b *testing.B, n, conc int, direct bool) (cpu, wall time.Duration) {
	jobs := make(chan struct{}, n)
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	cpu0, t0 := cpuTime(b), time.Now()
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				sb.call(b, direct)
			}
		}()
	}
	wg.Wait()
	return cpuTime(b) - cpu0, time.Since(t0)
}

// BenchmarkStreamingCall streams b.N answers (about 40 tokens each), 50 at a
// time, from the in-process simulator, straight ("direct") or through the
// proxy (at the default GOGC, and at the proxy command's 400), reporting the process's CPU per call and calls per second. The
// proxy's own cost per call is proxy's cpu-ms/call minus direct's (the
// simulator and the caller run in the same process in both).
//
//	go test -run '^$' -bench StreamingCall -benchtime 4000x ./proxy/
func BenchmarkStreamingCall(b *testing.B) {
	for _, via := range []string{"direct", "proxy", "proxy-gogc400"} {
		b.Run(via, func(b *testing.B) {
			if via == "proxy-gogc400" { // what limitscope proxy runs with (GOGC unset)
				defer debug.SetGCPercent(debug.SetGCPercent(400))
			}
			sb := newStreamBench(b)
			direct := via == "direct"
			for range 100 { // warm the connections
				sb.call(b, direct)
			}
			b.ResetTimer()
			cpu, wall := sb.run(b, b.N, 50, direct)
			b.StopTimer()
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/call")
			b.ReportMetric(float64(b.N)/wall.Seconds(), "calls/s")
		})
	}
}

// BenchmarkProxyCostPaired measures what BenchmarkStreamingCall does in
// one process, in b.N rounds of two blocks of 500 calls, 50 at a time: one
// straight to the simulator and one through the proxy, in alternating
// order, both at GOGC 400 (the proxy command's). The same GOGC for both:
// the simulator and the caller share the process, and at 400 for the
// proxied block only their collections got cheaper too, which once made
// the proxy's own cost read 0.23-0.25 ms where the same GOGC gives
// 0.27-0.28 (and calls/s 0.46 of direct where it gives 0.37-0.38). It reports the medians
// over rounds of the proxy's own CPU per call (the proxied block's CPU per
// call minus the direct one's) and of the proxied block's calls/s as a
// share of the direct one's: on a machine whose load comes and goes, the
// blocks of one round see the same load, where separate runs do not.
//
//	go test -run '^$' -bench ProxyCostPaired -benchtime 20x ./proxy/
func BenchmarkProxyCostPaired(b *testing.B) {
	const block, conc = 500, 50
	sb := newStreamBench(b)
	for range 100 { // warm the connections
		sb.call(b, true)
		sb.call(b, false)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	timed := func(direct bool) (cpuMS, rate float64) {
		cpu, wall := sb.run(b, block, conc, direct)
		return float64(cpu.Microseconds()) / 1000 / block, block / wall.Seconds()
	}
	var own, ratio, dcpu, pcpu []float64
	for i := 0; b.Loop(); i++ {
		var dc, dr, pc, pr float64
		if i%2 == 0 {
			dc, dr = timed(true)
			pc, pr = timed(false)
		} else {
			pc, pr = timed(false)
			dc, dr = timed(true)
		}
		own, ratio = append(own, pc-dc), append(ratio, pr/dr)
		dcpu, pcpu = append(dcpu, dc), append(pcpu, pc)
	}
	b.ReportMetric(median(dcpu), "direct-cpu-ms/call")
	b.ReportMetric(median(pcpu), "proxy-cpu-ms/call")
	b.ReportMetric(median(own), "own-cpu-ms/call")
	b.ReportMetric(median(ratio), "calls/s-ratio")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkSequentialTTFT sends b.N streaming calls one at a time,
// alternating straight to the simulator and through the proxy (the same
// load on the machine for both), and reports the time to first text at p50
// and p99 of each and what the proxy adds.
//
//	go test -run '^$' -bench SequentialTTFT -benchtime 2000x ./proxy/
func BenchmarkSequentialTTFT(b *testing.B) {
	scen := filepath.Join(b.TempDir(), "unlimited.ini")
	if err := os.WriteFile(scen, []byte("name = unlimited\n[openai]\nrpm = 0\ntpm = 0\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	e := newEnvSim(b, sim.Options{ScenarioFile: scen, TokensPerSecond: 1e6}, nil, func(o *Options) { o.Events = nil })
	hc := e.client()
	direct := func() *http.Request {
		r, _ := http.NewRequest(http.MethodPost, e.sim.BaseURL("openai")+"/chat/completions",
			strings.NewReader(strings.Replace(loadBody, "openai/", "", 1)))
		r.Header.Set("Authorization", "Bearer "+sim.FakeKey)
		r.Header.Set("Content-Type", "application/json")
		return r
	}
	one := func(r *http.Request) time.Duration {
		d, ok := firstText(hc, r)
		if !ok {
			b.Fatal("a call failed")
		}
		return d
	}
	for range 50 { // warm the connections
		one(direct())
		one(e.openAIReq(loadBody))
	}
	var ds, ps []time.Duration
	b.ResetTimer()
	for range b.N {
		ds = append(ds, one(direct()))
		ps = append(ps, one(e.openAIReq(loadBody)))
	}
	b.StopTimer()
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(us(pct(ds, .5)), "direct-p50-us")
	b.ReportMetric(us(pct(ps, .5)), "proxy-p50-us")
	b.ReportMetric(us(pct(ps, .5)-pct(ds, .5)), "added-p50-us")
	b.ReportMetric(us(pct(ps, .99)-pct(ds, .99)), "added-p99-us")
}
