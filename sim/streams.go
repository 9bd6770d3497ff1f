package sim

import (
	"context"
	"io"
	"net/http"
	"time"
)

// answerPlan is one answer to write: its text, usage, ids and pace, and the
// fault (cut, mid_stream, stall) that interrupts it, if any.
type answerPlan struct {
	req      *simRequest
	d        decision
	pieces   []string
	thinking []string // the thinking phase before the text (thinking.go); nil: none
	text     string
	out      int
	finish   string // "stop" or "length"
	pace     pacing
	created  time.Time
	ids      uint64
	cfg      *providerConfig
}

// upToBreak returns the pieces sent before a cut, a mid-stream error or a
// stall (half of them, at least one; one for a stall), and whether the
// stream breaks at all.
func (a *answerPlan) upToBreak(ps []string) ([]string, bool) {
	brk := -1
	switch a.d.kind {
	case FaultCut, FaultMidStream:
		brk = max(1, len(ps)/2)
	case FaultHang:
		brk = 1
	}
	if brk < 0 {
		return ps, false
	}
	return ps[:min(brk, len(ps))], true
}

func (a *answerPlan) id(prefix, set string, n int) string {
	return prefix + randChars(idRand(a.ids^0x1d5), set, n)
}

// sseOut writes SSE frames and flushes each (while paced holds them, only
// when paced says); the first write error sticks.
type sseOut struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	err  error
	hold bool // paced flushes: frames are written, not flushed
	h2   bool // an HTTP/2 request: a cut resets the stream (no connection to close)
}

func newSSE(w http.ResponseWriter) *sseOut {
	return &sseOut{w: w, rc: http.NewResponseController(w)}
}

// cut ends the body without its end: on HTTP/1.1 the connection closes
// (see closeConn); on HTTP/2, which has no connection of its own to drop,
// the stream is reset (RST_STREAM), which the client reads as an error.
func (o *sseOut) cut(reset bool) {
	if !closeConn(o.w, reset) && o.h2 {
		panic(http.ErrAbortHandler) // net/http resets the HTTP/2 stream
	}
}

func (o *sseOut) start(contentType string) {
	o.w.Header().Set("Content-Type", contentType)
	o.w.Header().Set("Cache-Control", "no-cache")
	o.w.WriteHeader(http.StatusOK)
	o.flush()
}

func (o *sseOut) raw(s string) {
	if o.err != nil {
		return
	}
	if _, o.err = io.WriteString(o.w, s); o.err == nil && !o.hold {
		o.flush()
	}
}

// ending says the frames written from now on end the stream and follow
// each other without a wait: they are written, not flushed, and go out with
// the body's end when the handler returns (one write, not one per frame
// and another for the end of the chunked body).
func (o *sseOut) ending() { o.hold = true }

func (o *sseOut) flush() {
	if o.err == nil {
		o.err = o.rc.Flush()
	}
}

func (o *sseOut) data(v any) { o.raw("data: " + string(mustJSON(v)) + "\n\n") }
func (o *sseOut) event(name string, v any) {
	o.raw("event: " + name + "\ndata: " + string(mustJSON(v)) + "\n\n")
}

// queue sends keep-alive comments while a DeepSeek-style queue delay runs.
func (s *Server) queue(ctx context.Context, o *sseOut, p pacing) bool {
	for left := p.queue; left > 0; left -= time.Second {
		if !p.sleep(ctx, s.closed, min(left, time.Second)) {
			return false
		}
		o.raw(": keep-alive\n\n")
	}
	return o.err == nil
}

// flushTick is how long paced lets written pieces wait for their flush,
// and the shortest wait it sleeps: pieces due closer together than this go
// out in one write.
const flushTick = 4 * time.Millisecond

// maxLag bounds the time paced makes up for: a stream held back longer
// (a client not reading) resumes at the pace, not in a burst.
const maxLag = 250 * time.Millisecond

// paced streams the answer's pieces through emit at the plan's pace. A
// piece is due once the tokens up to it (about four characters each) have
// taken their time at the asked rate, counted from the first piece, so a
// late timer or a slow write costs nothing: the pieces after it are due
// already and go out at once. Pieces are written as they fall due and
// flushed together: the first at once, then before each wait, after it
// (the piece waited for) and at least every flushTick, so a rate beyond
// what one flush per piece can carry is still delivered (at 5,000 tokens a
// second about 16 words a flush; at 200, one). It returns false when the
// client went away.
func (s *Server) paced(ctx context.Context, o *sseOut, a *answerPlan, pieces []string, emit func(string)) bool {
	o.hold = true
	defer func() {
		o.hold = false
		o.flush()
	}()
	start := time.Now()
	flushed := start.Add(-flushTick) // the first piece is flushed at once
	var due time.Duration            // of the current piece, from start
	for _, p := range pieces {
		due += time.Duration(float64(a.pace.perToken) * float64(len(p)) / 4)
		now := time.Now()
		switch wait := start.Add(due).Sub(now); {
		case wait >= flushTick:
			o.flush()
			if !a.pace.sleep(ctx, s.closed, wait) {
				return false
			}
			now = time.Now()
			flushed = now.Add(-flushTick) // this piece is due now: flush it at once
		case wait < -maxLag:
			start = now.Add(-maxLag - due)
		}
		emit(p)
		if o.err != nil {
			return false
		}
		if now.Sub(flushed) >= flushTick {
			o.flush()
			flushed = now
		}
	}
	return o.err == nil
}

// broke ends a stream the plan breaks here, and reports whether it did. A
// mid-stream error is the caller's to write (in its dialect's framing)
// after broke returns true; a cut ends the body without its end signal
// (code "reset": a TCP reset; "clean": the body ends cleanly, which SDKs
// read as success; otherwise the connection closes without the last chunk,
// an unexpected EOF); a stall hangs after the first text.
func (s *Server) broke(ctx context.Context, o *sseOut, a *answerPlan) bool {
	switch a.d.kind {
	case FaultMidStream:
		return true
	case FaultCut:
		if a.d.code != "clean" {
			o.cut(a.d.code == "reset")
		}
		return true
	case FaultHang:
		if s.hang(ctx) {
			resetConn(o.w)
		}
		return true
	}
	return false
}
