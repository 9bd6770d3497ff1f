package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// sseUpstream is an OpenAI upstream whose answer is size bytes of text,
// made as it is read, at full speed, in chunks of chunk bytes.
type sseUpstream struct {
	size, chunk int
	requests    atomic.Int64
	closed      atomic.Bool // the proxy closed an answer's body
	// hold, when set, is called with the request's number (from 1) once
	// its text is read, before its end: it returns when the end may come.
	hold func(n int64)
}

func (u *sseUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	n := u.requests.Add(1)
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	h := http.Header{}
	h.Set("Content-Type", "text/event-stream")
	return &http.Response{StatusCode: http.StatusOK, Header: h, Request: r, ContentLength: -1,
		Body: &sseBody{u: u, n: n, left: u.size, text: strings.Repeat("a", u.chunk)}}, nil
}

// sseBody is the answer's body.
type sseBody struct {
	u       *sseUpstream
	n       int64 // the request's number
	left    int
	text    string
	pending []byte
	ended   bool
	closed  atomic.Bool // the stream client closes a body from two goroutines
}

func (b *sseBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errors.New("closed")
	}
	if len(b.pending) == 0 {
		switch {
		case b.left > 0:
			n := min(b.left, len(b.text))
			b.left -= n
			b.pending = []byte(`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + b.text[:n] + `"},"finish_reason":null}]}` + "\n\n")
		case !b.ended:
			if b.u.hold != nil {
				b.u.hold(b.n)
			}
			b.ended = true
			b.pending = []byte(`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	return n, nil
}

func (b *sseBody) Close() error { b.closed.Store(true); b.u.closed.Store(true); return nil }

// slowCaller is a caller's connection: it takes per bytes every every,
// and once it has taken stopAfter bytes (0: never) it takes nothing more,
// so a write waits until its deadline and fails as a socket's does.
type slowCaller struct {
	hdr       http.Header
	status    int
	per       int
	every     time.Duration
	stopAfter int64
	deadline  time.Time
	got       int64
	tail      []byte // the last bytes taken
}

func (w *slowCaller) Header() http.Header { return w.hdr }
func (w *slowCaller) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
}
func (w *slowCaller) SetWriteDeadline(t time.Time) error { w.deadline = t; return nil }
func (w *slowCaller) FlushError() error                  { return nil }

func (w *slowCaller) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	n := 0
	for n < len(p) {
		if w.stopAfter > 0 && w.got >= w.stopAfter {
			time.Sleep(time.Until(w.deadline)) // the fake clock of the bubble
			return n, os.ErrDeadlineExceeded
		}
		k := min(w.per, len(p)-n)
		time.Sleep(w.every)
		if !w.deadline.IsZero() && time.Now().After(w.deadline) {
			return n, os.ErrDeadlineExceeded
		}
		w.tail = append(w.tail, p[n:n+k]...)
		if len(w.tail) > 256 {
			w.tail = w.tail[len(w.tail)-256:]
		}
		n += k
		w.got += int64(k)
	}
	return n, nil
}

// backpressureProxy is a proxy over up with the given stream buffer, and
// the call_end results it recorded.
func backpressureProxy(t *testing.T, up *sseUpstream, o Options) (*Handler, func() []retry.Result) {
	var mu sync.Mutex
	var ends []retry.Result
	o.Token = testToken
	o.Engine = &retry.Engine{Doer: stream.Router{Client: &stream.Client{HTTP: &http.Client{Transport: up}},
		Endpoints: map[string]stream.Endpoint{"openai": {Provider: "openai", BaseURL: "http://upstream.invalid/v1", Key: "sk-test-0123456789abcdef"}}}}
	o.Record = func(c retry.Call, next func(retry.Event)) func(retry.Event) {
		return func(ev retry.Event) {
			if ev.Kind == retry.EventCallEnd && ev.Result != nil {
				mu.Lock()
				ends = append(ends, *ev.Result)
				mu.Unlock()
			}
			next(ev)
		}
	}
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return h, func() []retry.Result { mu.Lock(); defer mu.Unlock(); return ends }
}

func streamRequest(t *testing.T) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
		strings.NewReader(`{"model":"openai/gpt-5.4-mini","stream":true,"messages":[{"role":"user","content":"a long one"}]}`))
	r.Header.Set("Authorization", "Bearer "+testToken)
	r.Host = "127.0.0.1"
	return r
}

// A caller reading 64 KB every 50 ms gets a whole 50 MiB answer in one
// attempt: the proxy reads the upstream no faster than the caller takes
// the answer (never more than the stream buffer and one event pending), and
// the time it waits on the caller trips none of the engine's stall,
// no-progress or deadline timers, even past the call's deadline (10 s
// here). On the bubble's fake clock: about 41 s of reading in well under a
// second.
func TestSlowReaderGetsAWhole50MiBInOneAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const size, chunk = 50 << 20, 32 << 10
		up := &sseUpstream{size: size, chunk: chunk}
		// A 10 s deadline: the caller's 41 s of reading do not count.
		h, ends := backpressureProxy(t, up, Options{StreamBuffer: 256 << 10, DefaultPolicy: retry.Policy{Deadline: 10 * time.Second}})
		w := &slowCaller{hdr: http.Header{}, per: 64 << 10, every: 50 * time.Millisecond}
		start := time.Now()
		h.ServeHTTP(w, streamRequest(t))
		took := time.Since(start)
		res := ends()
		if w.status != http.StatusOK || len(res) != 1 || res[0].Outcome != retry.OutcomeOK || len(res[0].Attempts) != 1 || up.requests.Load() != 1 {
			var ends []string
			for _, r := range res {
				ends = append(ends, fmt.Sprintf("%s after %d attempts (%v)", r.Outcome, len(r.Attempts), r.Err))
			}
			t.Fatalf("status %d, results %v, %d upstream requests: want one attempt, answered", w.status, ends, up.requests.Load())
		}
		if w.got < size || !bytes.Contains(w.tail, []byte("data: [DONE]")) {
			t.Errorf("the caller got %d bytes, ending %q: want more than %d and the end", w.got, w.tail, size)
		}
		// 50 MiB at 64 KB per 50 ms is about 41 s: the caller's pace.
		if took < 40*time.Second || took > 2*time.Minute {
			t.Errorf("the answer took %s on the fake clock, want about 41 s", took)
		}
		if peak := h.flow.peak.Load(); peak > 256<<10+2*chunk {
			t.Errorf("%d bytes were queued for the caller at once, want at most the buffer and one event", peak)
		}
		if h.flow.waits.Load() == 0 || h.flow.queued.Load() != 0 {
			t.Errorf("the call waited on its caller %d times, %d bytes still counted", h.flow.waits.Load(), h.flow.queued.Load())
		}
	})
}

// A caller that stops reading is dropped once it has taken nothing for
// the write timeout: its upstream request is closed and the call recorded
// as ended because the caller went away.
func TestNonReadingCallerDroppedByTheWriteTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &sseUpstream{size: 50 << 20, chunk: 32 << 10}
		h, ends := backpressureProxy(t, up, Options{StreamBuffer: 128 << 10, WriteTimeout: 5 * time.Second})
		w := &slowCaller{hdr: http.Header{}, per: 64 << 10, every: time.Millisecond, stopAfter: 1 << 20}
		start := time.Now()
		h.ServeHTTP(w, streamRequest(t))
		took := time.Since(start)
		res := ends()
		if len(res) != 1 || res[0].Outcome != retry.OutcomeCancelled || res[0].Err == nil ||
			!strings.Contains(res[0].Err.Message, "the caller went away") || !strings.Contains(res[0].Err.Message, "5s") {
			t.Fatalf("results %+v: want the call cancelled because the caller went away", res)
		}
		if !up.closed.Load() || up.requests.Load() != 1 {
			t.Errorf("upstream closed %v after %d requests: want its one request closed", up.closed.Load(), up.requests.Load())
		}
		if took < 5*time.Second || took > 10*time.Second {
			t.Errorf("dropped after %s, want the 5 s write timeout", took)
		}
		if w.got > 2<<20 || h.flow.queued.Load() != 0 {
			t.Errorf("the caller took %d bytes; %d still counted as queued", w.got, h.flow.queued.Load())
		}
	})
}

// readsUpstream is an OpenAI upstream whose answer arrives in reads of
// perRead deltas each ("x"), after a pause before each read.
type readsUpstream struct {
	reads, perRead int
	pause          time.Duration
}

func (u *readsUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	ev := `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}` + "\n\n"
	var chunks []string
	for range u.reads {
		chunks = append(chunks, strings.Repeat(ev, u.perRead))
	}
	chunks = append(chunks, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	h := http.Header{}
	h.Set("Content-Type", "text/event-stream")
	return &http.Response{StatusCode: http.StatusOK, Header: h, Request: r, ContentLength: -1,
		Body: &pausedBody{chunks: chunks, pause: u.pause}}, nil
}

// pausedBody returns one chunk per read, each after a pause.
type pausedBody struct {
	chunks []string
	pause  time.Duration
}

func (b *pausedBody) Read(p []byte) (int, error) {
	if len(b.chunks) == 0 {
		return 0, io.EOF
	}
	time.Sleep(b.pause) // the bubble's clock: every other goroutine is idle first
	n := copy(p, b.chunks[0])
	if b.chunks[0] = b.chunks[0][n:]; b.chunks[0] == "" {
		b.chunks = b.chunks[1:]
	}
	return n, nil
}

func (b *pausedBody) Close() error { return nil }

// writesCaller keeps each write to it.
type writesCaller struct {
	hdr    http.Header
	status int
	writes []string
}

func (w *writesCaller) Header() http.Header { return w.hdr }
func (w *writesCaller) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
}
func (w *writesCaller) FlushError() error { return nil }
func (w *writesCaller) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// The deltas of one upstream read reach the caller in one write (and one
// flush): the first delta with the stream's opening, the rest of the
// first read's when the second read begins, and so on; the last read's
// with the stream's end.
func TestOneUpstreamReadIsOneWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &readsUpstream{reads: 4, perRead: 8, pause: 10 * time.Millisecond}
		h, _ := backpressureProxy(t, &sseUpstream{}, Options{})
		h.o.Engine.Doer = stream.Router{Client: &stream.Client{HTTP: &http.Client{Transport: up}},
			Endpoints: map[string]stream.Endpoint{"openai": {Provider: "openai", BaseURL: "http://upstream.invalid/v1", Key: "sk-test-0123456789abcdef"}}}
		w := &writesCaller{hdr: http.Header{}}
		h.ServeHTTP(w, streamRequest(t))
		var got []int
		for _, s := range w.writes {
			got = append(got, strings.Count(s, `"content":"x"`))
		}
		if w.status != http.StatusOK || len(w.writes) == 0 || !strings.Contains(w.writes[len(w.writes)-1], "data: [DONE]") {
			t.Fatalf("status %d, writes %q", w.status, w.writes)
		}
		if want := []int{1, 7, 8, 8, 8, 0}; !slices.Equal(got, want) {
			t.Errorf("deltas per write %v, want %v (one write per upstream read)", got, want)
		}
	})
}

func wholeRequest(t *testing.T) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
		strings.NewReader(`{"model":"openai/gpt-5.4-mini","messages":[{"role":"user","content":"a long one"}]}`))
	r.Header.Set("Authorization", "Bearer "+testToken)
	r.Host = "127.0.0.1"
	return r
}

// Answers held whole (non-streamed or buffered) count toward the total cap
// on answer bytes queued for callers and wait on it: with a 1 MiB cap, a
// second 600 KiB answer waits (counted in HeldWaiting, logged with its
// wait) while the first is held, and both come back whole once the first
// is answered; a wait longer than the write timeout ends in a 503 in the
// caller's dialect naming the cap, never part of the answer.
func TestHeldAnswersWaitOnTheTotalCap(t *testing.T) {
	const size, chunk = 600 << 10, 32 << 10
	setup := func(t *testing.T) (*Handler, chan struct{}, *[]string) {
		release := make(chan struct{})
		up := &sseUpstream{size: size, chunk: chunk, hold: func(n int64) {
			if n == 1 {
				<-release
			}
		}}
		var mu sync.Mutex
		var logs []string
		h, _ := backpressureProxy(t, up, Options{MaxQueued: 1 << 20, WriteTimeout: 5 * time.Second,
			Logf: func(f string, a ...any) { mu.Lock(); logs = append(logs, fmt.Sprintf(f, a...)); mu.Unlock() }})
		return h, release, &logs
	}
	serve := func(h *Handler) (*httptest.ResponseRecorder, chan struct{}) {
		w, done := httptest.NewRecorder(), make(chan struct{})
		go func() { defer close(done); h.ServeHTTP(w, wholeRequest(t)) }()
		return w, done
	}
	whole := func(t *testing.T, w *httptest.ResponseRecorder) {
		t.Helper()
		var v struct {
			Choices []struct{ Message struct{ Content string } }
		}
		if err := json.Unmarshal(w.Body.Bytes(), &v); w.Code != 200 || err != nil || len(v.Choices) != 1 || len(v.Choices[0].Message.Content) != size {
			t.Errorf("status %d (%v): want 200 with the whole %d bytes", w.Code, err, size)
		}
	}
	synctest.Test(t, func(t *testing.T) {
		h, release, logs := setup(t)
		first, firstDone := serve(h)
		synctest.Wait() // the first answer is held, its end held upstream
		if q := h.flow.queued.Load(); q != size {
			t.Fatalf("%d bytes held, want the first answer's %d", q, size)
		}
		second, secondDone := serve(h)
		synctest.Wait()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := h.HeldWaiting(); n != 1 {
			t.Errorf("%d held answers waiting, want the second", n)
		}
		close(release)
		<-firstDone
		<-secondDone
		whole(t, first)
		whole(t, second)
		if p := h.flow.peak.Load(); p > 1<<20 {
			t.Errorf("%d bytes queued at once, over the 1 MiB cap", p)
		}
		if h.flow.heldWaits.Load() != 1 || h.HeldWaiting() != 0 || h.flow.queued.Load() != 0 {
			t.Errorf("%d waits, %d waiting, %d bytes counted: want 1, 0, 0", h.flow.heldWaits.Load(), h.HeldWaiting(), h.flow.queued.Load())
		}
		if !slices.ContainsFunc(*logs, func(l string) bool { return strings.Contains(l, "held answer waited 2s") }) {
			t.Errorf("no log of the second answer's 2 s wait: %q", *logs)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		h, release, _ := setup(t)
		first, firstDone := serve(h)
		synctest.Wait()
		start := time.Now()
		second, secondDone := serve(h)
		<-secondDone
		if took := time.Since(start); took != 5*time.Second {
			t.Errorf("the second call was answered after %s, want the 5 s write timeout", took)
		}
		b := second.Body.String()
		if second.Code != http.StatusServiceUnavailable || !strings.Contains(b, "proxy_busy") || !strings.Contains(b, "max_queued") ||
			!strings.Contains(b, "1048576") || strings.Contains(b, "aaaa") {
			t.Errorf("the second call: %d %.300s: want a 503 naming the cap", second.Code, b)
		}
		close(release)
		<-firstDone
		whole(t, first)
		if h.flow.queued.Load() != 0 {
			t.Errorf("%d bytes still counted", h.flow.queued.Load())
		}
	})
}
