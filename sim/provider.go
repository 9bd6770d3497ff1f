package sim

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"
)

// ---- pacing ---------------------------------------------------------------

type pacing struct {
	perToken   time.Duration
	firstToken time.Duration
	queue      time.Duration // DeepSeek-style keep-alive wait before the answer
	hangLimit  time.Duration
}

func (s *Server) pacing(cfg *providerConfig) pacing {
	p := pacing{queue: cfg.QueueDelay, hangLimit: s.opts.HangLimit}
	tps := cfg.TokensPerSecond
	p.firstToken = cfg.FirstTokenDelay
	if s.opts.TokensPerSecond > 0 {
		tps = s.opts.TokensPerSecond
		p.firstToken = max(0, s.opts.FirstTokenDelay)
	} else if s.opts.FirstTokenDelay > 0 {
		p.firstToken = s.opts.FirstTokenDelay
	}
	if tps > 0 {
		p.perToken = time.Duration(float64(time.Second) / tps)
	}
	return p
}

// sleep waits d, or until ctx ends or the simulator closes (false).
func (p pacing) sleep(ctx context.Context, closed <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-closed:
		return false
	}
}

// hang waits until the client gives up (false) or the simulator closes or
// the hang limit passes (true).
func (s *Server) hang(ctx context.Context) bool {
	t := time.NewTimer(s.opts.HangLimit)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-s.closed:
		return true
	case <-t.C:
		return true
	}
}

// resetConn drops the connection with a TCP reset (SO_LINGER 0), so the
// client sees "connection reset by peer".
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // net/http closes the connection without logging
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// closeConn drops the connection after what was written so far: with
// reset, a TCP reset; otherwise a plain close, which a client reading a
// chunked or Content-Length body sees as an unexpected EOF (no terminating
// chunk). It reports false when the connection cannot be taken over (a
// recorder in tests).
func closeConn(w http.ResponseWriter, reset bool) bool {
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	conn, _, err := rc.Hijack()
	if err != nil {
		return false
	}
	if tc, ok := conn.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
	return true
}

// cutJSON sends a plain JSON answer that breaks part-way: the headers
// promise the whole body, half of it arrives, then the connection ends
// (code "reset": a TCP reset; otherwise an unexpected EOF).
func cutJSON(w http.ResponseWriter, contentType string, body []byte, code string) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body[:len(body)/2])
	if !closeConn(w, code == "reset") {
		panic(http.ErrAbortHandler)
	}
}
