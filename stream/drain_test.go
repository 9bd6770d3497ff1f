package stream

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const drainStream = "data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n" +
	"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
	"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n" +
	"data: [DONE]\n\n"

// sawDone wraps the client's connections and releases the current call's
// server once a read has returned the stream's last event, "[DONE]\n\n"
// (the reads of one connection are sequential: the transport's read loop).
type sawDone struct {
	net.Conn
	e    *drainEnv
	tail []byte
}

func (c *sawDone) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.tail = append(c.tail, p[:n]...)
	if bytes.Contains(c.tail, []byte("[DONE]\n\n")) {
		c.tail = c.tail[:0]
		c.e.release()
	} else if len(c.tail) > 16 {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-16:]...)
	}
	return n, err
}

// drainEnv is a server that writes drainStream and then waits (the end
// of its chunked body, written when the handler returns, does not go
// out) until the client has read [DONE]: the client sees the end signal
// before the body's end, every time. It counts the connections it
// accepted.
type drainEnv struct {
	c     *Client
	ep    Endpoint
	conns atomic.Int32
	mu    sync.Mutex
	done  chan struct{} // the current call's: closed when the client read [DONE]
	freed bool          // done is closed
}

// release lets the current call's server end its body.
func (e *drainEnv) release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.freed {
		e.freed = true
		close(e.done)
	}
}

func newDrainEnv(t *testing.T, after func(w http.ResponseWriter)) *drainEnv {
	clearEnv(t)
	e := &drainEnv{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		done := e.done
		e.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(drainStream))
		w.(http.Flusher).Flush()
		select {
		case <-done:
		case <-r.Context().Done():
		}
		if after != nil {
			after(w)
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			e.conns.Add(1)
		}
	}
	srv.Start()
	tr := NewHTTPClient().Transport.(*http.Transport)
	var d net.Dialer
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &sawDone{Conn: c, e: e}, nil
	}
	hc := &http.Client{Transport: tr}
	t.Cleanup(func() {
		hc.CloseIdleConnections()
		srv.CloseClientConnections()
		srv.Close()
	})
	e.c = &Client{HTTP: hc}
	e.ep = Endpoint{Provider: "openai", BaseURL: srv.URL + "/v1", Key: testKey}
	return e
}

// call makes one streaming call (from any goroutine: it reports with
// t.Errorf) and checks it succeeded.
func (e *drainEnv) call(t *testing.T) {
	t.Helper()
	e.mu.Lock()
	e.done, e.freed = make(chan struct{}), false
	e.mu.Unlock()
	defer e.release() // whatever happened, the server may end
	res, deltas := doReq(e.c, e.ep, "m")
	if res.Err != nil || strings.Join(deltas, "") != "Hi" || res.FinishReason != "stop" || res.Usage == nil {
		t.Errorf("err %v, deltas %q, finish %q, usage %v", res.Err, deltas, res.FinishReason, res.Usage)
	}
}

// After [DONE] the client reads the body's end, so the connection is
// reused: sequential calls all go over one connection (closing the body
// before its end made net/http drop it, and every call dialled anew).
func TestStreamEndKeepsConnection(t *testing.T) {
	e := newDrainEnv(t, nil)
	e.c.drainWait = time.Minute // the server's last chunk follows at once; a loaded machine may be slow
	drained := make(chan struct{}, 1)
	e.c.drained = func() { drained <- struct{}{} }
	const n = 5
	for i := range n {
		e.call(t)
		// The drain runs after the call returned: the next call finds the
		// connection idle once it is over (an old client does not drain,
		// so nothing is waited for).
		if i < n-1 {
			select {
			case <-drained:
			case <-time.After(time.Minute):
				t.Fatal("no drain ended")
			}
		}
	}
	if got := e.conns.Load(); got != 1 {
		t.Fatalf("%d sequential calls used %d connections, want 1", n, got)
	}
}

// waitDrained waits for a drain to end.
func waitDrained(t *testing.T, drained <-chan struct{}, why string) {
	t.Helper()
	select {
	case <-drained:
	case <-time.After(time.Minute):
		t.Fatal(why)
	}
}

// A server that keeps sending after [DONE] is not read past drainMax: the
// call ends, successfully, the drain gives up, and the connection is not
// reused.
func TestStreamEndDrainBoundedBytes(t *testing.T) {
	junk := bytes.Repeat([]byte(": keep-alive\n"), 1<<20/13)
	e := newDrainEnv(t, func(w http.ResponseWriter) {
		for {
			if _, err := w.Write(junk); err != nil {
				return
			}
		}
	})
	e.c.drainWait = time.Hour
	e.c.Options = Options{UsageGrace: time.Hour, StallTimeout: time.Hour}
	drained := make(chan struct{}, 1)
	e.c.drained = func() { drained <- struct{}{} }
	e.call(t)
	waitDrained(t, drained, "the drain read on past its cap")
	e.call(t)
	waitDrained(t, drained, "the drain read on past its cap")
	if got := e.conns.Load(); got != 2 {
		t.Fatalf("calls used %d connections, want 2 (an undrained one is not reused)", got)
	}
}

// A server that holds the body open after [DONE] (no last chunk, no
// bytes) has the drain give up after the drain wait, not after the usage
// grace or the stall timeout; the call itself did not wait for it.
func TestStreamEndDrainBoundedTime(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	e := newDrainEnv(t, func(http.ResponseWriter) { <-hold })
	e.c.drainWait = time.Millisecond
	e.c.Options = Options{UsageGrace: time.Hour, StallTimeout: time.Hour}
	drained := make(chan struct{}, 1)
	e.c.drained = func() { drained <- struct{}{} }
	e.call(t)
	waitDrained(t, drained, "the drain waited for the body's end past the drain wait")
}
