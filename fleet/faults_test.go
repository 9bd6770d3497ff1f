package fleet

import (
	"context"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/limitscope/limitscope/fleet/fleettest"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// silentListener accepts connections and never answers: a Redis that is
// there but does not reply (a hung server, a black-holed route).
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	})
	return "redis://" + ln.Addr().String() + "/0"
}

// A Redis that does not answer at start: the first call runs on local state
// after one short timeout (well within a second), the warning is given
// once, and no later call waits on Redis at all.
func TestUnreachableAtStartFallsBack(t *testing.T) {
	for name, url := range map[string]string{
		"silent":  silentListener(t),
		"refused": "redis://127.0.0.1:" + itoa(fleettest.FreePort(t)) + "/0",
	} {
		t.Run(name, func(t *testing.T) {
			var warns []string
			var mu sync.Mutex
			start := time.Now()
			p := newProcess(t, url, Options{Timeout: 100 * time.Millisecond, Probe: time.Hour, Warn: func(m string) {
				mu.Lock()
				warns = append(warns, m)
				mu.Unlock()
			}}, okReply)
			for i := 0; i < 5; i++ {
				if res := p.call(t); res.Outcome != retry.OutcomeOK {
					t.Fatalf("call %d: %s, want ok on local state", i, res.Outcome)
				}
			}
			if el := time.Since(start); el >= time.Second {
				t.Fatalf("open and 5 calls took %s with Redis away, want under a second", el)
			}
			if p.f.Up() {
				t.Fatal("Up with no Redis")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(warns) != 1 || !strings.Contains(warns[0], "unreachable") {
				t.Fatalf("warnings %q, want one saying Redis is unreachable", warns)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// Redis killed while calls run and started again: no call fails, the
// warning comes once (and once that it is back), the shared state resumes
// (a stop recorded while it was away reaches the other process), and
// nothing leaks.
func TestRedisKilledMidRun(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	r := fleettest.Start(t)
	states := make(chan bool, 16)
	var warnings atomic.Int32
	var warnText sync.Map
	// A generous timeout: on a loaded machine a slow answer must not
	// count as an outage (a dead server fails at once anyway).
	o := Options{Timeout: 2 * time.Second, Probe: 20 * time.Millisecond,
		Warn:    func(m string) { warnText.Store(warnings.Add(1), m) },
		OnState: func(up bool) { states <- up }}
	ctx := context.Background()
	fa, err := Open(ctx, r.URL(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !<-states {
		t.Fatal("A not up at start")
	}
	da := &fakeDoer{results: []stream.Result{okReply}}
	a := &process{f: fa, doer: da, cds: NewCooldowns(fa, nil)}
	a.eng = &retry.Engine{Doer: Doer{Next: da, Fleet: fa}, Cooldowns: a.cds, Pacer: NewPacing(fa, nil, nil)}

	// Workers call all along; the test kills and restarts Redis under them.
	stop := make(chan struct{})
	var failed atomic.Int32
	var calls atomic.Int32
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if res := a.call(t); res.Outcome != retry.OutcomeOK {
					failed.Add(1)
				}
				calls.Add(1)
			}
		}()
	}
	waitCalls := func(n int32) {
		for target := calls.Load() + n; calls.Load() < target; {
			runtime.Gosched()
		}
	}
	waitCalls(20)
	r.Stop()
	if <-states {
		t.Fatal("A still up after Redis was killed")
	}
	waitCalls(20) // calls go on while Redis is away
	// A stop recorded while Redis is away: local at once, shared when back.
	if err := a.cds.Set(retry.Cooldown{Scope: "account:z", Since: time.Now(), Code: "billing"}); err != nil {
		t.Fatal(err)
	}
	r.Restart()
	if !<-states {
		t.Fatal("A not back up after Redis restarted")
	}
	waitCalls(20)
	close(stop)
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d calls failed across the outage", n, calls.Load())
	}
	// A process started after the outage reads A's stop from Redis.
	fb, err := Open(ctx, r.URL(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	cb := NewCooldowns(fb, nil)
	if !fb.Up() {
		t.Fatal("B not up")
	}
	if cd, ok, err := cb.Get("account:z"); err != nil || !ok || cd.Code != "billing" {
		t.Fatalf("B after the outage: %+v %v %v, want A's stop recorded while Redis was away", cd, ok, err)
	}
	if n := warnings.Load(); n != 2 {
		t.Fatalf("%d warnings, want 2 (away once, back once)", n)
	}
	if m, _ := warnText.Load(int32(1)); !strings.Contains(m.(string), "unreachable") {
		t.Fatalf("first warning %q", m)
	}
	_ = fa.Close()
	_ = fb.Close()
	r.Stop() // before goleak looks: the helper reads the server's output
}
