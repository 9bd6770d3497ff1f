package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// funcDoer answers every attempt with f.
type funcDoer struct {
	f     func(ctx context.Context, req stream.Request, onText func(string)) stream.Result
	count atomic.Int64
}

func (d *funcDoer) Do(ctx context.Context, req stream.Request, onText func(string)) stream.Result {
	d.count.Add(1)
	return d.f(ctx, req, onText)
}

func (d *funcDoer) Scope(t stream.Target, s stream.Scope) string { return t.Provider }

// okDoer answers "fine" at once.
func okDoer() *funcDoer {
	return &funcDoer{f: func(ctx context.Context, req stream.Request, onText func(string)) stream.Result {
		onText("fine")
		return stream.Result{Text: "fine", FinishReason: "stop"}
	}}
}

// gate is a Doer whose attempts wait until released, announcing each one.
type gate struct {
	*funcDoer
	entered chan struct{}
	release chan struct{}
}

func newGate() *gate {
	g := &gate{entered: make(chan struct{}, 100), release: make(chan struct{})}
	g.funcDoer = &funcDoer{f: func(ctx context.Context, req stream.Request, onText func(string)) stream.Result {
		g.entered <- struct{}{}
		select {
		case <-g.release:
		case <-ctx.Done():
			return stream.Result{Err: &stream.Error{Class: stream.ClassCancelled, Err: ctx.Err()}}
		}
		onText("fine")
		return stream.Result{Text: "fine", FinishReason: "stop"}
	}}
	return g
}

func newServer(t *testing.T, o Options) (*Handler, *httptest.Server) {
	t.Helper()
	clearEnv(t)
	o.Token = testToken
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv
}

// rawConn opens a connection and writes head (request line and headers,
// CRLF-separated, without the blank line) and the first bytes of a body
// that never comes whole.
func rawConn(t *testing.T, addr, head, partialBody string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := io.WriteString(c, head+"\r\n\r\n"+partialBody); err != nil {
		t.Fatal(err)
	}
	// Generous: only a failing test waits this long.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

// closedAfter reads what follows a response: the connection must be closed
// by the server (EOF), not left waiting for the rest of the body.
func closedAfter(t *testing.T, br *bufio.Reader) {
	t.Helper()
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Errorf("after the refusal the connection is still open: %v", err)
	}
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// A refusal is sent at once, whatever the body does: an unauthenticated
// request whose body is dribbled (here: one byte of 1000, then nothing)
// gets its 401 without the body being waited for or drained, and the
// connection is closed.
func TestRefusalDoesNotWaitForTheBody(t *testing.T) {
	d := okDoer()
	_, srv := newServer(t, Options{Engine: eng(d), MaxBody: 500})
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, c := range []struct {
		name, head string
		status     int
		errType    string
	}{
		{"no token", "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000", 401, "authentication_error"},
		{"no token, chunked", "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked", 401, "authentication_error"},
		{"wrong token, anthropic", "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Api-Key: nope\r\nAnthropic-Version: 2023-06-01\r\nContent-Length: 1000", 401, "authentication_error"},
		{"origin", "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://evil.example\r\nAuthorization: Bearer " + testToken + "\r\nContent-Length: 1000", 403, "permission_error"},
		{"too large", "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + testToken + "\r\nContent-Length: 100000", 413, "invalid_request_error"},
		{"wrong method", "PUT /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + testToken + "\r\nContent-Length: 1000", 405, "invalid_request_error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := "{"
			if strings.Contains(c.head, "chunked") {
				body = "1\r\n{\r\n"
			}
			_, br := rawConn(t, addr, c.head, body)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer while the body is pending: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || !strings.Contains(string(b), `"`+c.errType+`"`) {
				t.Errorf("status %d body %s, want %d with %s", resp.StatusCode, b, c.status, c.errType)
			}
			if !resp.Close {
				t.Error("the refusal does not say Connection: close")
			}
			closedAfter(t, br)
		})
	}
	if n := d.count.Load(); n != 0 {
		t.Errorf("the provider was called %d times", n)
	}
}

// An authenticated body that does not arrive within the body timeout is a
// 408 and a closed connection, not a held goroutine.
func TestBodyReadTimeout(t *testing.T) {
	d := okDoer()
	_, srv := newServer(t, Options{Engine: eng(d), BodyTimeout: 30 * time.Millisecond})
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, c := range []struct{ name, head, body, errType string }{
		{"openai", "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + testToken + "\r\nContent-Length: 1000", `{"model":`, "invalid_request_error"},
		{"anthropic chunked", "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Api-Key: " + testToken + "\r\nTransfer-Encoding: chunked", "2\r\n{\"\r\n", "invalid_request_error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, br := rawConn(t, addr, c.head, c.body)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "did not arrive within") {
				t.Errorf("status %d body %s, want 408", resp.StatusCode, b)
			}
			if !strings.Contains(string(b), `"`+c.errType+`"`) {
				t.Errorf("body %s, want type %s", b, c.errType)
			}
			closedAfter(t, br)
		})
	}
	if n := d.count.Load(); n != 0 {
		t.Errorf("the provider was called %d times", n)
	}
}

// The body deadline ends with the body: a call that streams for longer
// than the body timeout is answered whole (the server's read deadline
// would otherwise cancel it as if the caller had left).
func TestBodyTimeoutDoesNotBoundTheCall(t *testing.T) {
	const bodyTimeout = 20 * time.Millisecond
	d := &funcDoer{f: func(ctx context.Context, req stream.Request, onText func(string)) stream.Result {
		onText("one ")
		select { // outlast the body timeout several times over
		case <-time.After(10 * bodyTimeout):
		case <-ctx.Done():
			return stream.Result{Text: "one ", Err: &stream.Error{Class: stream.ClassCancelled, Err: ctx.Err()}}
		}
		onText("two")
		return stream.Result{Text: "one two", FinishReason: "stop"}
	}}
	_, srv := newServer(t, Options{Engine: eng(d), BodyTimeout: bodyTimeout})
	e := &env{t: t, srv: srv}
	r := e.do(e.openAIReq(`{"model":"openai/m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	s := readOpenAIStream(t, r.body)
	if r.status != 200 || s.text != "one two" || !s.done || s.err != nil {
		t.Errorf("status %d text %q done %v err %v", r.status, s.text, s.done, s.err)
	}
}

// ServeWith closes a keep-alive connection left idle.
func TestIdleConnectionClosed(t *testing.T) {
	clearEnv(t)
	h, err := New(Options{Token: testToken, Engine: eng(okDoer())})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeWith(ctx, ln, h, ServeOptions{IdleTimeout: 30 * time.Millisecond}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	_, br := rawConn(t, ln.Addr().String(), "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "+testToken, "")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("status %d close %v: want a kept-alive 200", resp.StatusCode, resp.Close)
	}
	closedAfter(t, br) // the idle timeout, well before the 10 s read deadline
}

// Past the cap on calls in flight, a call is refused at once with a 503 in
// the caller's dialect, retry-after, and the SDK allowed to retry; the
// calls in flight are not disturbed.
func TestInFlightCap(t *testing.T) {
	g := newGate()
	_, srv := newServer(t, Options{Engine: eng(g), MaxInFlight: 2})
	e := &env{t: t, srv: srv}
	var wg sync.WaitGroup
	replies := make([]reply, 2)
	for i := range replies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := e.client().Do(e.openAIReq(`{"model":"openai/m","messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			replies[i] = reply{status: resp.StatusCode, body: b}
		}()
	}
	<-g.entered
	<-g.entered
	r := e.do(e.openAIReq(`{"model":"openai/m","messages":[{"role":"user","content":"hi"}]}`))
	if r.status != 503 || r.header.Get("Retry-After") != "1" || r.header.Get("X-Should-Retry") != "true" {
		t.Errorf("openai: status %d retry-after %q x-should-retry %q", r.status, r.header.Get("Retry-After"), r.header.Get("X-Should-Retry"))
	}
	if m := r.json(t); dig(m, "error", "type") != "service_unavailable_error" || dig(m, "error", "code") != "proxy_busy" ||
		!strings.Contains(dig(m, "error", "message").(string), "2 calls are in flight") {
		t.Errorf("openai body %v", m)
	}
	r = e.do(e.anthropicReq(`{"model":"anthropic/m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
	if m := r.json(t); r.status != 503 || dig(m, "type") != "error" || dig(m, "error", "type") != "overloaded_error" {
		t.Errorf("anthropic: status %d body %v", r.status, m)
	}
	close(g.release)
	wg.Wait()
	for i, rp := range replies {
		if rp.status != 200 {
			t.Errorf("call %d in flight: %d %s", i, rp.status, rp.body)
		}
	}
	if n := g.count.Load(); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
	// The slots are free again.
	if r := e.do(e.openAIReq(`{"model":"openai/m","messages":[{"role":"user","content":"hi"}]}`)); r.status != 200 {
		t.Errorf("after the calls ended: %d %s", r.status, r.body)
	}
}

// bigBody is a request body of about n bytes, made as it is read (the test
// holds no copy).
type bigBody struct {
	head, tail string
	n, off     int
}

func newBigBody(n int) *bigBody {
	return &bigBody{head: `{"model":"openai/m","messages":[{"role":"user","content":"`, tail: `"}]}`, n: n}
}

func (b *bigBody) size() int { return len(b.head) + b.n + len(b.tail) }

func (b *bigBody) Read(p []byte) (int, error) {
	total := b.size()
	if b.off >= total {
		return 0, io.EOF
	}
	// In spans, not byte by byte: a 30 MB body is read in well under a
	// second even with -race.
	n := 0
	for n < len(p) && b.off < total {
		var k int
		switch {
		case b.off < len(b.head):
			k = copy(p[n:], b.head[b.off:])
		case b.off < len(b.head)+b.n:
			k = min(len(p)-n, len(b.head)+b.n-b.off)
			fillX(p[n : n+k])
		default:
			k = copy(p[n:], b.tail[b.off-len(b.head)-b.n:])
		}
		n += k
		b.off += k
	}
	return n, nil
}

// xs is a span of the big body's filler.
var xs = bytes.Repeat([]byte{'x'}, 32<<10)

// fillX fills p with 'x'.
func fillX(p []byte) {
	for len(p) > 0 {
		p = p[copy(p, xs):]
	}
}

// heapPeak samples the live heap until stop is called, which returns the
// highest value seen.
func heapPeak() (stop func() uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Uint64
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-quit:
				return
			case <-tk.C:
			}
		}
	}()
	return func() uint64 {
		close(quit)
		<-done
		return peak.Load()
	}
}

// 20 concurrent bodies of nearly the body cap: as many as fit in the
// buffered-bytes budget are served, the others are refused at once with a
// 503 before their bodies are read, and the heap stays far from what 20
// bodies and their parsed copies take without a budget. The caps are the
// defaults' ratio (a budget of four bodies) at a quarter of their size:
// 7.5 MB bodies under a 32 MiB budget move 30 MB through loopback, which
// -race reads in a second or two where 30 MB bodies took 7-20 s.
func TestBufferedBytesCap(t *testing.T) {
	const n, size = 20, 15 << 19
	const maxBody, maxBuffered = DefaultMaxBody / 4, DefaultMaxBuffered / 4
	g := newGate()
	h, srv := newServer(t, Options{Engine: eng(g), MaxBody: maxBody, MaxBuffered: maxBuffered})
	hc := newTestClient(t)
	hc.Transport.(*http.Transport).ExpectContinueTimeout = time.Minute // a refused body is never sent
	stop := heapPeak()
	var wg sync.WaitGroup
	statuses := make([]int, n)
	bodies := make([]string, n)
	finished := make(chan struct{}, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bb := newBigBody(size)
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", bb)
			req.ContentLength = int64(bb.size())
			req.Header.Set("Authorization", "Bearer "+testToken)
			req.Header.Set("Expect", "100-continue")
			resp, err := hc.Do(req)
			if err != nil {
				t.Error(err)
				finished <- struct{}{}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			statuses[i], bodies[i] = resp.StatusCode, string(b)
			finished <- struct{}{}
		}()
	}
	admitted := int(maxBuffered / (size + 100))
	for range admitted {
		<-g.entered // every body that fits is being served...
	}
	for range n - admitted {
		<-finished // ...and every other call has its answer before any is released
	}
	close(g.release)
	wg.Wait()
	peak := stop()
	ok, busy := 0, 0
	for i, st := range statuses {
		switch st {
		case 200:
			ok++
		case 503:
			busy++
			if !strings.Contains(bodies[i], "proxy_busy") || !strings.Contains(bodies[i], strconv.Itoa(maxBuffered)) {
				t.Errorf("503 body %s", bodies[i])
			}
		default:
			t.Errorf("status %d: %.200s", st, bodies[i])
		}
	}
	if ok != admitted || busy != n-admitted {
		t.Errorf("%d served and %d refused, want %d and %d", ok, busy, admitted, n-admitted)
	}
	if p := h.lim.peak.Load(); p > maxBuffered {
		t.Errorf("buffered bytes peaked at %d, over the cap %d", p, maxBuffered)
	}
	if h.lim.bytes.Load() != 0 || h.lim.calls.Load() != 0 {
		t.Errorf("after the calls: %d bytes and %d calls still held", h.lim.bytes.Load(), h.lim.calls.Load())
	}
	t.Logf("live heap peaked at %d MiB", peak>>20)
	if peak > 256<<20 {
		t.Errorf("live heap peaked at %d MiB, want under 256 MiB (a quarter of the GiB at full size)", peak>>20)
	}
}

// A body of unknown length (chunked) is read within the budget too.
func TestChunkedBody(t *testing.T) {
	_, srv := newServer(t, Options{Engine: eng(okDoer()), MaxBody: 200 << 10, MaxBuffered: 400 << 10})
	e := &env{t: t, srv: srv}
	send := func(n int) reply {
		req := e.openAIReq("")
		req.Body = io.NopCloser(newBigBody(n))
		req.ContentLength = -1 // chunked
		return e.do(req)
	}
	if r := send(100 << 10); r.status != 200 {
		t.Errorf("100 KiB chunked: %d %s", r.status, r.body)
	}
	// Just over the cap, so the client has written it all when the 413
	// comes (a client still writing a large body may see the close first).
	if r := send(200<<10 + 100); r.status != 413 {
		t.Errorf("a chunked body over the 200 KiB cap: %d %s", r.status, r.body)
	}
}

var _ retry.Doer = (*funcDoer)(nil)

// A caller that sends its whole (large) body at once still reads the
// refusal, not a connection reset: the server half-closes and lingers.
func TestRefusalReachesAnEagerCaller(t *testing.T) {
	_, srv := newServer(t, Options{Engine: eng(okDoer()), MaxBody: 1 << 20})
	e := &env{t: t, srv: srv}
	for i := range 5 {
		req := e.openAIReq("")
		bb := newBigBody(4 << 20)
		req.Body, req.ContentLength = io.NopCloser(bb), int64(bb.size())
		if i%2 == 1 {
			req.Header.Del("Authorization")
		}
		want := map[int]int{0: 413, 1: 401}[i%2]
		if r := e.do(req); r.status != want {
			t.Errorf("status %d, want %d: %s", r.status, want, r.body)
		}
	}
}
