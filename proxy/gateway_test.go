package proxy

import (
	"context"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/stream"
)

// longStreams is a Doer whose every answer begins at once ("first") and
// then holds until release closes: a long stream.
func longStreams(started chan<- struct{}, release <-chan struct{}) *funcDoer {
	return &funcDoer{f: func(ctx context.Context, req stream.Request, onText func(string)) stream.Result {
		started <- struct{}{}
		onText("first ")
		select {
		case <-release:
		case <-ctx.Done():
			return stream.Result{Err: &stream.Error{Class: stream.ClassCancelled, Err: ctx.Err()}}
		}
		onText("last")
		return stream.Result{Text: "first last", FinishReason: "stop"}
	}}
}

// streamCalls starts n streamed calls and returns a wait for their
// statuses.
func streamCalls(t *testing.T, e *env, n int) func() []int {
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := e.client().Do(e.openAIReq(`{"model":"openai/gpt-5.4-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
			codes[i] = resp.StatusCode
		}()
	}
	return func() []int { wg.Wait(); return codes }
}

// A fresh proxy does not starve: slow start opens a slot as each stream's
// answer begins, so 10 long streams all start before any of them ends.
func TestTenLongStreamsAllStartOnAFreshProxy(t *testing.T) {
	started, release := make(chan struct{}, 10), make(chan struct{})
	pacer := retry.NewPacer()
	_, srv := newServer(t, Options{Engine: &retry.Engine{Doer: longStreams(started, release), Pacer: pacer}})
	e := &env{t: t, srv: srv}
	wait := streamCalls(t, e, 10)
	bound := time.After(8 * time.Second) // a failure bound, not a wait: the starts come at once
	for i := range 10 {
		select {
		case <-started:
		case <-bound:
			close(release)
			t.Fatalf("%d of 10 long streams started before any ended; %d queued", i, pacer.Queued())
		}
	}
	st := pacer.State(stream.Target{Provider: "openai", Model: "gpt-5.4-mini"})
	close(release)
	for i, c := range wait() {
		if c != http.StatusOK {
			t.Errorf("stream %d: status %d", i, c)
		}
	}
	if st.InFlight != 10 || st.Queued != 0 || st.Concurrency < 10 {
		t.Errorf("pacing while all streamed: %+v, want 10 in flight, none queued", st)
	}
}

// Calls waiting at a full gate are counted (Pacer.Queued, the gauge the
// proxy's metrics read) and the wait is recorded on the call's attempt
// (Attempt.Paced, kept in the history): with a ceiling of one for the
// provider, the second call waits for the first, 3 s on the engine's clock.
func TestQueuedCallsCountedAndTheirWaitRecorded(t *testing.T) {
	started, release := make(chan struct{}, 2), make(chan struct{})
	pacer := &retry.Pacer{TargetMax: map[string]int{"openai": 1}}
	clock := retrytest.NewFakeClock(time.Unix(1_000_000, 0))
	var mu sync.Mutex
	var paced []time.Duration
	_, srv := newServer(t, Options{Engine: &retry.Engine{Doer: longStreams(started, release), Pacer: pacer, Clock: clock},
		Record: func(c retry.Call, next func(retry.Event)) func(retry.Event) {
			return func(ev retry.Event) {
				if ev.Kind == retry.EventCallEnd && ev.Result != nil && len(ev.Result.Attempts) == 1 {
					mu.Lock()
					paced = append(paced, ev.Result.Attempts[0].Paced)
					mu.Unlock()
				}
				next(ev)
			}
		}})
	e := &env{t: t, srv: srv}
	wait := streamCalls(t, e, 2)
	<-started
	bound := time.Now().Add(8 * time.Second)
	for pacer.Queued() != 1 { // the second call reaches the gate
		if time.Now().After(bound) {
			close(release)
			t.Fatalf("%d calls queued, want 1", pacer.Queued())
		}
		runtime.Gosched()
	}
	clock.Advance(3 * time.Second)
	close(release)
	for i, c := range wait() {
		if c != http.StatusOK {
			t.Errorf("call %d: status %d", i, c)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paced) != 2 || min(paced[0], paced[1]) != 0 || max(paced[0], paced[1]) != 3*time.Second {
		t.Errorf("gate waits recorded %v, want 0 and 3s", paced)
	}
	if pacer.Queued() != 0 {
		t.Errorf("%d still queued", pacer.Queued())
	}
}

// The config in the README's team section parses, and names every limit
// with its default value (the README's "defaults shown").
func TestREADMETeamConfig(t *testing.T) {
	b, err := os.ReadFile("../docs/proxy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "## A team's gateway")
	_, rest, ok2 := strings.Cut(rest, "```json\n")
	doc, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("no JSON config in the README's team section")
	}
	c, err := ParseConfig([]byte(doc))
	if err != nil {
		t.Fatalf("the README's config: %v", err)
	}
	if c.MaxInFlight != DefaultMaxInFlight || c.MaxConcurrency != retry.DefaultMaxConcurrency || c.WriteTimeout != DefaultWriteTimeout ||
		c.StreamBuffer != DefaultStreamBuffer || c.MaxQueued != DefaultMaxQueued || c.MaxAnswer != DefaultMaxAnswer ||
		c.TargetMax["openai"] != retry.DefaultMaxConcurrency || c.Aliases["fast"].MaxInFlight != 500 {
		t.Errorf("the README's config %+v does not show the defaults", c)
	}
}
