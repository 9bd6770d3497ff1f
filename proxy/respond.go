package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// openAIFinish maps any provider's finish reason to Chat Completions'.
func openAIFinish(fr string) string {
	switch fr {
	case "length", "max_tokens", "MAX_TOKENS":
		return "length"
	case "content_filter", "refusal", "SAFETY", "RECITATION", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY":
		return "content_filter"
	case "tool_calls", "tool_use", "function_call":
		return "tool_calls"
	}
	return "stop"
}

// anthropicStop maps any provider's finish reason to a Messages stop_reason.
func anthropicStop(fr string) string {
	switch fr {
	case "length", "max_tokens", "MAX_TOKENS":
		return "max_tokens"
	case "stop_sequence":
		return "stop_sequence"
	case "content_filter", "refusal", "SAFETY", "RECITATION", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY":
		return "refusal"
	case "tool_calls", "tool_use", "function_call":
		return "tool_use"
	case "pause_turn":
		return "pause_turn"
	}
	return "end_turn"
}

func usageOrZero(u *stream.Usage) stream.Usage {
	if u == nil {
		return stream.Usage{}
	}
	return *u
}

func openAIUsage(u *stream.Usage) map[string]any {
	uz := usageOrZero(u)
	return map[string]any{"prompt_tokens": uz.InputTokens, "completion_tokens": uz.OutputTokens,
		"total_tokens": uz.InputTokens + uz.OutputTokens}
}

// writer answers one call in the caller's dialect. The stream methods
// append events to b and return it (the caller writes and flushes).
type writer interface {
	// message writes a complete, non-streamed answer (headers already set).
	message(w http.ResponseWriter, res retry.Result, model string)
	// start begins a stream; text adds a delta; end completes it; fail ends
	// it with the dialect's error event.
	start(b []byte, model string) []byte
	text(b []byte, s string) []byte
	end(b []byte, res retry.Result, model string) []byte
	fail(b []byte, e *apiError) []byte
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeFlush writes b and flushes it.
func writeFlush(w http.ResponseWriter, b []byte) {
	_, _ = w.Write(b)
	_ = http.NewResponseController(w).Flush()
}

// appendEvent appends one event; v is a string written as is, or a value
// encoded as JSON.
func appendEvent(buf []byte, event string, v any) []byte {
	if event != "" {
		buf = append(buf, "event: "...)
		buf = append(buf, event...)
		buf = append(buf, '\n')
	}
	buf = append(buf, "data: "...)
	if s, ok := v.(string); ok {
		buf = append(buf, s...)
	} else {
		b, _ := json.Marshal(v)
		buf = append(buf, b...)
	}
	return append(buf, "\n\n"...)
}

// sseOut is a started stream's output. Events are appended to a buffer by
// the call's goroutine, and one flusher goroutine writes and flushes
// whatever is ready, once per batch: a burst of tokens costs one write, a
// slow stream still goes out token by token. When the upstream's reads
// call the proxy's read hook (callState.beforeRead), a batch is what one
// upstream read brought: the flusher is woken before the next read, not
// per delta. The two buffers are swapped, not reallocated, and come from a
// pool.
//
// Backpressure: once the call's pending bytes reach its cap (flow.perCall),
// or the bytes pending for all callers reach theirs (flow.total) while it
// has some pending, the call's goroutine waits in text for its flusher to
// take them; the engine's reading of the upstream waits with it (the time
// spent in a text callback is not silence on the wire). Each write has the
// write timeout as its deadline: a caller that takes nothing for that long
// is dropped, and gone is called with the reason.
type sseOut struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	flow  *flow
	gone  func(error) // the caller stopped taking the answer (called once)
	mu    sync.Mutex
	buf   *[]byte // pending events; guarded by mu
	held  int     // bytes appended and not yet written (buf and the batch in write); guarded by mu
	spare *[]byte // the flusher's
	kick  chan struct{}
	room  chan struct{} // the flusher took a batch
	stop  chan struct{}
	done  chan struct{}
	dead  chan struct{} // closed when a write failed: the caller is gone
	once  sync.Once     // closes dead
	ended bool
}

// fail marks the caller gone after a write failed with err (once).
func (o *sseOut) fail(err error) {
	o.once.Do(func() {
		close(o.dead)
		o.gone(&errCallerGone{timeout: o.flow.timeout, err: err})
	})
}

// flow is the proxy's accounting of answer bytes queued for callers:
// streams' pending events and the answers held whole until their call
// ends.
type flow struct {
	perCall int
	total   int64
	timeout time.Duration // a write's deadline, and the longest a held answer waits for room
	queued  atomic.Int64  // bytes pending for all callers
	peak    atomic.Int64  // the most ever pending at once (tests read it)
	waits   atomic.Int64  // times a call waited on its caller
	// holding counts the held answers waiting for room under total now
	// (the proxy's metrics read it), heldWaits the times one did.
	holding   atomic.Int64
	heldWaits atomic.Int64
	mu        sync.Mutex
	room      chan struct{} // closed when bytes are given back while a held answer waits; guarded by mu
}

func (f *flow) add(n int64) {
	v := f.queued.Add(n)
	if n < 0 && f.holding.Load() > 0 {
		f.mu.Lock()
		if f.room != nil {
			close(f.room)
			f.room = nil
		}
		f.mu.Unlock()
	}
	f.notePeak(v)
}

func (f *flow) notePeak(v int64) {
	for {
		p := f.peak.Load()
		if v <= p || f.peak.CompareAndSwap(p, v) {
			return
		}
	}
}

// tryHold counts n more bytes of a held answer when they fit under total.
func (f *flow) tryHold(n int64) bool {
	for {
		v := f.queued.Load()
		if v+n > f.total {
			return false
		}
		if f.queued.CompareAndSwap(v, v+n) {
			f.notePeak(v + n)
			return true
		}
	}
}

// hold counts n more bytes of an answer held whole, waiting while they do
// not fit under the total cap until other calls give bytes back, ctx ends
// or the write timeout passes (errNoRoom). It returns how long it waited.
func (f *flow) hold(ctx context.Context, n int64) (time.Duration, error) {
	if f.tryHold(n) {
		return 0, nil
	}
	f.holding.Add(1)
	defer f.holding.Add(-1)
	f.heldWaits.Add(1)
	start := time.Now()
	timer := time.NewTimer(f.timeout)
	defer timer.Stop()
	for {
		f.mu.Lock()
		if f.room == nil {
			f.room = make(chan struct{})
		}
		room := f.room
		f.mu.Unlock()
		if f.tryHold(n) {
			return time.Since(start), nil
		}
		select {
		case <-room:
		case <-ctx.Done():
			return time.Since(start), context.Cause(ctx)
		case <-timer.C:
			return time.Since(start), &errNoRoom{total: f.total, waited: f.timeout}
		}
	}
}

// errNoRoom ends a call whose held answer found no room under the total
// cap within the write timeout.
type errNoRoom struct {
	total  int64
	waited time.Duration
}

func (e *errNoRoom) Error() string {
	return fmt.Sprintf("the answers held for callers are at the proxy's cap of %d bytes (max_queued, --max-queued) and this one found no room for %s (the write timeout, --write-timeout); retry shortly, stream it, or raise the cap",
		e.total, e.waited)
}

// errCallerGone is the cause of a call ended because its caller stopped
// taking the answer.
type errCallerGone struct {
	timeout time.Duration
	err     error
}

func (e *errCallerGone) Error() string {
	return fmt.Sprintf("the caller went away: it took none of the answer for %s (the proxy's write timeout, --write-timeout)", e.timeout)
}

func (e *errCallerGone) Unwrap() error { return e.err }

// bufPool holds stream buffers; big ones are not kept.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

const maxPooled = 64 << 10

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) <= maxPooled {
		*b = (*b)[:0]
		bufPool.Put(b)
	}
}

// setDeadline gives the next write to w the write timeout.
func setDeadline(rc *http.ResponseController, d time.Duration) {
	_ = rc.SetWriteDeadline(time.Now().Add(d)) // a writer without deadlines (tests' recorders) has none
}

// newSSEOut starts the flusher of a stream whose headers are written.
func newSSEOut(w http.ResponseWriter, f *flow, gone func(error)) *sseOut {
	o := &sseOut{w: w, rc: http.NewResponseController(w), flow: f, gone: gone, buf: getBuf(), spare: getBuf(),
		kick: make(chan struct{}, 1), room: make(chan struct{}, 1), stop: make(chan struct{}),
		done: make(chan struct{}), dead: make(chan struct{})}
	go o.loop()
	return o
}

func (o *sseOut) loop() {
	defer close(o.done)
	for {
		select {
		case <-o.kick:
		case <-o.stop:
			return
		}
		o.mu.Lock()
		b := o.buf
		o.buf = o.spare
		o.mu.Unlock()
		n := int64(len(*b))
		if n > 0 {
			setDeadline(o.rc, o.flow.timeout)
			_, err := o.w.Write(*b)
			if err == nil {
				err = o.rc.Flush()
			}
			o.flow.add(-n)
			o.mu.Lock()
			o.held -= int(n)
			o.mu.Unlock()
			if err != nil {
				*b = (*b)[:0]
				o.spare = b
				o.fail(err)
				return
			}
		}
		*b = (*b)[:0]
		o.spare = b
		select {
		case o.room <- struct{}{}:
		default:
		}
	}
}

func (o *sseOut) signal() {
	select {
	case o.kick <- struct{}{}:
	default: // a flush is already due: it takes this too
	}
}

// text appends a delta. Unless batch is set it has the flusher write it at
// once; with batch (the upstream's reads call push, see
// callState.beforeRead) it leaves it for the next push, so that the deltas
// of one upstream read go to the caller in one write and one flush. Past
// the caps it has the flusher write, and waits for the caller to take what
// is pending (or to be dropped).
func (o *sseOut) text(out writer, s string, batch bool) {
	o.mu.Lock()
	n := len(*o.buf)
	*o.buf = out.text(*o.buf, s)
	added := len(*o.buf) - n
	o.held += added
	held := o.held
	o.mu.Unlock()
	o.flow.add(int64(added))
	if batch && held < o.flow.perCall && o.flow.queued.Load() < o.flow.total {
		return
	}
	o.signal()
	for {
		o.mu.Lock()
		pending, held := len(*o.buf), o.held
		o.mu.Unlock()
		if pending == 0 || (held < o.flow.perCall && o.flow.queued.Load() < o.flow.total) {
			return
		}
		o.flow.waits.Add(1)
		select {
		case <-o.room:
		case <-o.dead:
			return
		}
	}
}

// push has the flusher write and flush what is pending, if anything.
func (o *sseOut) push() {
	o.mu.Lock()
	n := len(*o.buf)
	o.mu.Unlock()
	if n > 0 {
		o.signal()
	}
}

// finish stops the flusher, appends the last events with f, and writes
// everything left from the calling goroutine, unflushed: the handler
// returns next, and net/http then sends the rest of it with the stream's
// end (the chunked body's last chunk), where a flush here cost a write of
// its own.
func (o *sseOut) finish(f func([]byte) []byte) {
	o.stopFlusher()
	select {
	case <-o.dead:
		o.close()
		return
	default:
	}
	pending := int64(len(*o.buf))
	b := f(*o.buf)
	setDeadline(o.rc, o.flow.timeout)
	_, _ = o.w.Write(b)
	o.flow.add(-pending)
	*o.buf = b[:0]
	o.held = 0
	o.close()
}

// stopFlusher ends the flusher goroutine (once); what is pending stays in
// o.buf.
func (o *sseOut) stopFlusher() {
	if o.ended {
		return
	}
	o.ended = true
	close(o.stop)
	<-o.done
	putBuf(o.spare)
	o.spare = nil
}

// close stops the flusher and gives the buffers back, and their bytes to
// the flow; the handler defers it, so it runs whatever happened.
func (o *sseOut) close() {
	o.stopFlusher()
	if o.buf != nil {
		o.mu.Lock()
		o.flow.add(-int64(len(*o.buf)))
		*o.buf = (*o.buf)[:0]
		o.mu.Unlock()
		putBuf(o.buf)
		o.buf = nil
	}
}

// openAIWriter speaks Chat Completions.
type openAIWriter struct {
	id           string
	created      int64
	includeUsage bool
	chunkHead    []byte // a chunk up to its choices
	textHead     []byte // a text chunk up to its content
}

func newOpenAIWriter(id string, now time.Time, includeUsage bool) *openAIWriter {
	return &openAIWriter{id: "chatcmpl-" + id, created: now.Unix(), includeUsage: includeUsage}
}

func (o *openAIWriter) message(w http.ResponseWriter, res retry.Result, model string) {
	v := map[string]any{
		"id": o.id, "object": "chat.completion", "created": o.created, "model": model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": res.Text, "refusal": nil},
			"logprobs":      nil,
			"finish_reason": openAIFinish(res.FinishReason),
		}},
	}
	if res.Usage != nil {
		v["usage"] = openAIUsage(res.Usage)
	}
	if t := servedTier(res, stream.DialectOpenAI); t != "" {
		v["service_tier"] = t
	}
	writeJSON(w, http.StatusOK, v)
}

// head is a chunk's envelope up to its choices, encoded once per stream:
// every chunk of the stream differs only after it.
func (o *openAIWriter) head(model string) []byte {
	if o.chunkHead == nil {
		b := append([]byte(`data: {"id":`), appendJSONString(nil, o.id)...)
		b = append(b, `,"object":"chat.completion.chunk","created":`...)
		b = strconv.AppendInt(b, o.created, 10)
		b = append(b, `,"model":`...)
		o.chunkHead = append(appendJSONString(b, model), ',')
	}
	return o.chunkHead
}

func (o *openAIWriter) start(b []byte, model string) []byte {
	b = append(b, o.head(model)...)
	b = append(b, `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	o.textHead = append(append([]byte(nil), o.head(model)...), `"choices":[{"index":0,"delta":{"content":`...)
	return b
}

func (o *openAIWriter) text(b []byte, s string) []byte {
	return appendText(b, o.textHead, s, `},"logprobs":null,"finish_reason":null}]}`)
}

// appendText appends head, s as a JSON string, tail and an event's end:
// the hot path of a stream, without building maps or allocating.
func appendText(b, head []byte, s, tail string) []byte {
	b = append(b, head...)
	b = appendJSONString(b, s)
	b = append(b, tail...)
	return append(b, "\n\n"...)
}

func (o *openAIWriter) end(b []byte, res retry.Result, model string) []byte {
	b = append(b, o.head(model)...)
	if t := servedTier(res, stream.DialectOpenAI); t != "" {
		b = append(appendJSONString(append(b, `"service_tier":`...), t), ',')
	}
	b = append(b, `"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":`...)
	b = appendJSONString(b, openAIFinish(res.FinishReason))
	b = append(b, "}]}\n\n"...)
	if o.includeUsage {
		u := usageOrZero(res.Usage)
		b = append(b, o.head(model)...)
		b = append(b, `"choices":[],"usage":{"prompt_tokens":`...)
		b = strconv.AppendInt(b, int64(u.InputTokens), 10)
		b = append(b, `,"completion_tokens":`...)
		b = strconv.AppendInt(b, int64(u.OutputTokens), 10)
		b = append(b, `,"total_tokens":`...)
		b = strconv.AppendInt(b, int64(u.InputTokens+u.OutputTokens), 10)
		b = append(b, "}}\n\n"...)
	}
	return append(b, "data: [DONE]\n\n"...)
}

func (o *openAIWriter) fail(b []byte, e *apiError) []byte {
	return appendEvent(b, "", errorJSON(e, stream.DialectOpenAI, ""))
}

// errorJSON is the error body as a raw JSON value.
func errorJSON(e *apiError, d stream.Dialect, requestID string) json.RawMessage {
	return json.RawMessage(errorBody(e, d, requestID))
}

func startSSE(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}

// anthropicWriter speaks Messages.
type anthropicWriter struct {
	id        string
	requestID string
	// inputTokens goes in message_start: the real count when it is known
	// before the stream's first text is written (a buffered answer, or an
	// upstream that reports it before its text: Anthropic's message_start,
	// Gemini's usageMetadata), else 0 (Chat Completions and Bedrock report
	// usage only at the end; message_delta then carries it).
	inputTokens int
}

func newAnthropicWriter(id string) *anthropicWriter {
	return &anthropicWriter{id: "msg_" + id, requestID: id}
}

func (a *anthropicWriter) message(w http.ResponseWriter, res retry.Result, model string) {
	u := usageOrZero(res.Usage)
	content := []any{}
	if res.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": res.Text})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": a.id, "type": "message", "role": "assistant", "model": model, "content": content,
		"stop_reason": anthropicStop(res.FinishReason), "stop_sequence": nil,
		"usage": anthropicUsage(u, servedTier(res, stream.DialectAnthropic)),
	})
}

func (a *anthropicWriter) start(b []byte, model string) []byte {
	b = append(b, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"...)
	b = appendJSONString(b, a.id)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = appendJSONString(b, model)
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(a.inputTokens), 10)
	b = append(b, `,"output_tokens":0}}}`+"\n\n"...)
	return append(b, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"...)
}

var anthropicTextHead = []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":")

func (a *anthropicWriter) text(b []byte, s string) []byte {
	return appendText(b, anthropicTextHead, s, "}}")
}

func (a *anthropicWriter) end(b []byte, res retry.Result, _ string) []byte {
	u := usageOrZero(res.Usage)
	b = append(b, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"...)
	b = append(b, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"...)
	b = appendJSONString(b, anthropicStop(res.FinishReason))
	b = append(b, `,"stop_sequence":null},"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.InputTokens), 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(u.OutputTokens), 10)
	if t := servedTier(res, stream.DialectAnthropic); t != "" {
		b = appendJSONString(append(b, `,"service_tier":`...), t)
	}
	b = append(b, "}}\n\n"...)
	return append(b, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
}

func (a *anthropicWriter) fail(b []byte, e *apiError) []byte {
	return appendEvent(b, "error", errorJSON(e, stream.DialectAnthropic, a.requestID))
}

// appendJSONString appends s as a JSON string, as encoding/json writes it
// (invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped) except that <, >
// and & are left as they are.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
