package proxy

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/limitscope/limitscope/retry"
)

// An alias's concurrency ceiling (max_concurrency): past it a call waits
// for one of the alias's calls to end, first come first served, counted in
// Queued while it waits and recorded as paced on its first attempt; the
// upstream never sees more of the alias's calls at once than the ceiling.
func TestAliasConcurrencyCeiling(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"aliases": {"batch": {"chain": ["openai/gpt-5.4-mini"], "max_concurrency": 2}}}`))
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		up := &sseUpstream{size: 64, chunk: 32, hold: func(int64) { <-release }}
		h, ends := backpressureProxy(t, up, Options{Config: cfg})
		var wg sync.WaitGroup
		codes := make([]int, 5)
		for i := range codes {
			wg.Go(func() {
				r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
					strings.NewReader(`{"model":"batch","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
				r.Header.Set("Authorization", "Bearer "+testToken)
				r.Host = "127.0.0.1"
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				codes[i] = w.Code
			})
		}
		synctest.Wait()
		if n, q := up.requests.Load(), h.Queued(); n != 2 || q != 3 {
			t.Errorf("%d upstream requests and %d calls queued, want the ceiling's 2 and 3", n, q)
		}
		time.Sleep(3 * time.Second)
		close(release)
		wg.Wait()
		paced := 0
		for _, res := range ends() {
			if res.Outcome != retry.OutcomeOK || len(res.Attempts) != 1 {
				t.Errorf("a call: %s after %d attempts, want ok in one", res.Outcome, len(res.Attempts))
				continue
			}
			if res.Attempts[0].Paced >= 3*time.Second {
				paced++
			}
		}
		if paced != 3 || h.Queued() != 0 || up.requests.Load() != 5 {
			t.Errorf("%d calls recorded a 3 s wait, %d still queued, %d upstream requests: want 3, 0, 5", paced, h.Queued(), up.requests.Load())
		}
		for i, c := range codes {
			if c != http.StatusOK {
				t.Errorf("call %d: status %d", i, c)
			}
		}
	})
}

// An alias's max_concurrency that is not a positive number is a one-line
// error naming it.
func TestAliasCeilingKnobErrors(t *testing.T) {
	for _, v := range []string{"0", "-1", `"many"`, "1.5"} {
		_, err := ParseConfig([]byte(`{"aliases": {"fast": {"chain": ["openai/gpt-5.4-mini"], "max_concurrency": ` + v + `}}}`))
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "max_concurrency") {
			t.Errorf("max_concurrency %s: %v, want a one-line error naming it", v, err)
		}
		if err != nil && (v == "0" || v == "-1") && !strings.Contains(err.Error(), "aliases.fast.max_concurrency") {
			t.Errorf("max_concurrency %s: %v, want the knob's whole name", v, err)
		}
	}
}
