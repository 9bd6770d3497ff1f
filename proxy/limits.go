package proxy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// The proxy's defaults as a server (see Options and ServeOptions).
const (
	DefaultMaxInFlight = 2048             // calls in flight at once: room for 1,000 streams and more
	DefaultMaxBuffered = 128 << 20        // request body bytes held by calls in flight
	DefaultBodyTimeout = 30 * time.Second // to read one request body
	DefaultIdleTimeout = 15 * time.Second // a keep-alive connection left idle
	// DefaultWriteTimeout is how long a caller may take no bytes of its
	// answer before the proxy drops it and closes its upstream request.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultStreamBuffer is the answer bytes queued for one caller: past
	// it the call reads its upstream no faster than the caller takes them.
	DefaultStreamBuffer = 256 << 10
	// DefaultMaxQueued is the answer bytes queued for all callers at once:
	// past it each call waits for its caller to take what it has queued.
	DefaultMaxQueued = 64 << 20
	// DefaultMaxAnswer caps a non-streamed or buffered answer, held whole
	// until the call ends: past it the caller gets an error naming it.
	DefaultMaxAnswer = 32 << 20
	// DefaultHeaderTimeout bounds reading a request's headers.
	DefaultHeaderTimeout = 10 * time.Second
	// commitTimeout bounds Options.Commit for one call.
	commitTimeout = 10 * time.Second
	// refusalPeek is how long a refusal looks for a body on its way.
	refusalPeek = 20 * time.Millisecond
	// readChunk is how much of a body of unknown length is reserved and
	// read at a time.
	readChunk = 64 << 10
)

// limits admits calls: a cap on calls in flight and on the request bytes
// they hold. Both refuse at once rather than queue: a caller that is told
// 503 with retry-after can back off; a queue would hold its memory anyway.
type limits struct {
	maxCalls int64
	maxBytes int64
	calls    atomic.Int64
	bytes    atomic.Int64
	peak     atomic.Int64 // the most bytes ever held at once (tests read it)
}

// enter takes a call slot; false when every slot is taken.
func (l *limits) enter() bool {
	if l.calls.Add(1) > l.maxCalls {
		l.calls.Add(-1)
		return false
	}
	return true
}

func (l *limits) leave() { l.calls.Add(-1) }

// reserve takes n bytes of the buffer budget; false when they do not fit.
func (l *limits) reserve(n int64) bool {
	v := l.bytes.Add(n)
	if v > l.maxBytes {
		l.bytes.Add(-n)
		return false
	}
	for {
		p := l.peak.Load()
		if v <= p || l.peak.CompareAndSwap(p, v) {
			return true
		}
	}
}

func (l *limits) release(n int64) { l.bytes.Add(-n) }

// busy is the answer when a cap is reached: 503 in the caller's dialect
// (Anthropic's overloaded_error), with retry-after. It is not a final
// error: no provider was called, so the SDK's own retry is welcome.
func busy(what string) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, class: stream.ClassOverload, code: "proxy_busy",
		message: "limitscope proxy: " + what + "; retry shortly", retryAfter: time.Second, retryable: true}
}

// refuseAndClose answers a request whose body will not be read (a wrong
// token, a cap, a method...) and closes the connection, without waiting for
// or draining the body (Go's server otherwise reads up to 256 KiB of an
// unread body before it writes the answer, however slowly it comes). A body
// already on its way (one byte, looked for during refusalPeek) marks the
// request as over its size limit, so that the server half-closes and
// lingers before it closes: a caller still sending reads the answer instead
// of a connection reset. Then a read deadline in the past ends every read.
func refuseAndClose(w http.ResponseWriter, r *http.Request, e *apiError, d stream.Dialect, requestID string) {
	w.Header().Set("Connection", "close")
	rc := http.NewResponseController(w)
	// (Not when the caller waits for 100 Continue: it sends no body.)
	if r.Body != nil && r.Body != http.NoBody && !strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		_ = rc.SetReadDeadline(time.Now().Add(refusalPeek))
		var one [1]byte
		_, _ = http.MaxBytesReader(w, r.Body, 0).Read(one[:])
	}
	_ = rc.SetReadDeadline(time.Unix(1, 0))
	writeError(w, e, d, requestID)
}

// readBody reads r's body within the body timeout and the byte budget. It
// returns the body and the bytes reserved for it (to release when the call
// ends), or the refusal to send with refuseAndClose.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, int64, *apiError) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(h.o.Now().Add(h.o.BodyTimeout))
	// The answer streams for as long as the call takes: no deadline then
	// (the server's background read, which notices a caller that left, must
	// not time out).
	defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	tooLarge := func() *apiError {
		return &apiError{status: http.StatusRequestEntityTooLarge, class: stream.ClassCaller, code: "request_too_large",
			message: fmt.Sprintf("limitscope proxy: the request body is over %d bytes", h.o.MaxBody)}
	}
	if r.ContentLength > h.o.MaxBody {
		return nil, 0, tooLarge()
	}
	// Over the cap, the server half-closes and lingers (see refuseAndClose).
	body := http.MaxBytesReader(w, r.Body, h.o.MaxBody)
	if r.ContentLength >= 0 {
		n := r.ContentLength
		if !h.lim.reserve(n) {
			return nil, 0, busy(fmt.Sprintf("request bodies in flight are at the cap of %d bytes", h.lim.maxBytes))
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(body, buf); err != nil {
			h.lim.release(n)
			return nil, 0, readError(err, h.o.BodyTimeout)
		}
		return buf, n, nil
	}
	// Unknown length (chunked): reserve as it grows, doubling up to one
	// byte past the cap (which tells an over-size body).
	limit := h.o.MaxBody + 1
	var buf []byte
	var held int64
	for {
		if int64(len(buf)) > h.o.MaxBody {
			h.lim.release(held)
			return nil, 0, tooLarge()
		}
		if len(buf) == cap(buf) {
			newCap := min(max(2*int64(cap(buf)), readChunk), limit)
			grow := newCap - int64(cap(buf))
			if !h.lim.reserve(grow) {
				h.lim.release(held)
				return nil, 0, busy(fmt.Sprintf("request bodies in flight are at the cap of %d bytes", h.lim.maxBytes))
			}
			held += grow
			nb := make([]byte, len(buf), newCap)
			copy(nb, buf)
			buf = nb
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, held, nil
		}
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			h.lim.release(held)
			return nil, 0, tooLarge()
		}
		if err != nil {
			h.lim.release(held)
			return nil, 0, readError(err, h.o.BodyTimeout)
		}
	}
}

// readError is the refusal for a body that could not be read.
func readError(err error, timeout time.Duration) *apiError {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return &apiError{status: http.StatusRequestTimeout, class: stream.ClassCaller, code: "request_timeout",
			message: fmt.Sprintf("limitscope proxy: the request body did not arrive within %s", timeout)}
	}
	return invalid("", "limitscope proxy: reading the request body: %v", err)
}
