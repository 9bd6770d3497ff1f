package stream

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"github.com/limitscope/limitscope/internal/sanitize"
	"io"
	"iter"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	sse "github.com/tmaxmax/go-sse"
)

// Options bound what one attempt may read and how long it may wait. Zero
// fields take DefaultOptions; a negative timeout or grace disables it.
type Options struct {
	HeaderTimeout     time.Duration // to the response headers (default 30s)
	FirstTokenTimeout time.Duration // from sending to the first content (default 60s)
	StallTimeout      time.Duration // of silence on the wire, measured on raw bytes (default 30s)
	MaxEventSize      int           // largest SSE event accepted (default 1 MiB)
	MaxBodySize       int64         // largest error or non-stream body read (default 1 MiB)
	UsageGrace        time.Duration // after an OpenAI-style finish_reason (or Gemini's finishReason), wait this long for usage and [DONE] or EOF (default 2s)
	// MaxStreamSize is the largest 200 stream read (default 64 MiB), in
	// decoded bytes (after any Content-Encoding; the bytes on the wire are
	// capped at the same size too): a server that never stops, or a gzip
	// bomb, is cut off with a server error marked Error.Oversize.
	MaxStreamSize int64
	// NoProgressTimeout bounds the time since the last model output (text,
	// reasoning or tool delta), from the first one on (before it,
	// FirstTokenTimeout applies); keep-alive comments and empty events do
	// not count. An attempt past it ends as a timeout (fails over like a
	// stall). Default 60s; time in the caller's onText does not count.
	NoProgressTimeout time.Duration
	// MaxPartialText caps the text kept in Result.Text, in decoded bytes
	// (default 1 MiB; negative: no cap): the rest still streams to onText
	// but is not kept, and Result.TextTruncated says so.
	MaxPartialText int
}

// A stream that ends without its end signal after nearly a stall timeout
// of silence (or nearly a no-progress timeout without output) stalled: the
// server closing it at about the moment the timer fires ends it the same
// way as the timer, a timeout, whichever comes first. "Nearly" is within
// raceSlack of the timeout.
func raceSlack(d time.Duration) time.Duration { return min(d/10, 2*time.Second) }

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{
		HeaderTimeout:     30 * time.Second,
		FirstTokenTimeout: 60 * time.Second,
		StallTimeout:      30 * time.Second,
		MaxEventSize:      1 << 20,
		MaxBodySize:       1 << 20,
		UsageGrace:        2 * time.Second,
		MaxStreamSize:     64 << 20,
		NoProgressTimeout: 60 * time.Second,
		MaxPartialText:    1 << 20,
	}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.HeaderTimeout == 0 {
		o.HeaderTimeout = d.HeaderTimeout
	}
	if o.FirstTokenTimeout == 0 {
		o.FirstTokenTimeout = d.FirstTokenTimeout
	}
	if o.StallTimeout == 0 {
		o.StallTimeout = d.StallTimeout
	}
	if o.MaxEventSize <= 0 {
		o.MaxEventSize = d.MaxEventSize
	}
	if o.MaxBodySize <= 0 {
		o.MaxBodySize = d.MaxBodySize
	}
	if o.UsageGrace == 0 {
		o.UsageGrace = d.UsageGrace
	}
	if o.MaxStreamSize <= 0 {
		o.MaxStreamSize = d.MaxStreamSize
	}
	if o.NoProgressTimeout == 0 {
		o.NoProgressTimeout = d.NoProgressTimeout
	}
	if o.MaxPartialText == 0 {
		o.MaxPartialText = d.MaxPartialText
	}
	return o
}

// Client sends one attempt to one endpoint. It never retries. A Client must
// not be copied after first use.
type Client struct {
	HTTP    *http.Client     // nil: a client with no overall timeout that follows no redirect carrying credentials across hosts
	Options Options          // zero fields take DefaultOptions
	Now     func() time.Time // nil: time.Now

	// instances maps an endpoint's base URL to the simulator instance that
	// last answered on it (SimInstanceHeader), for Router.Scope.
	instances sync.Map

	// drainWait bounds the wait for the rest of a body after its end
	// signal (0: defaultDrainWait), and drained (nil: none) hears each
	// drain end; see drain. Tests set them.
	drainWait time.Duration
	drained   func()
}

// After a stream's end signal, the rest of its body (an HTTP/1.1 chunked
// body's last chunk, usually already on its way) is read in the background,
// up to drainMax bytes as they came on the wire and for at most the drain
// wait, so that the connection goes back to the pool: closing a body before
// its end makes net/http close the connection, and the next call would dial
// (and shake hands) again.
const (
	drainMax         = 4 << 10
	defaultDrainWait = 100 * time.Millisecond
)

// SimInstanceHeader is the response header by which limitscope's simulator
// names its instance. Cooldowns caused by an endpoint that sent it are
// scoped to that instance (see Router.Scope).
const SimInstanceHeader = "X-Limitscope-Sim-Instance"

// noteInstance remembers which simulator instance (if any) answered on
// base, from the latest response.
func (c *Client) noteInstance(base string, h http.Header) {
	id := h.Get(SimInstanceHeader)
	if id == "" {
		c.instances.Delete(base)
		return
	}
	c.instances.Store(base, instanceID(id))
}

// instanceID keeps an instance id to 64 letters, digits, '.', '_' and '-'
// (others become '_'), so it can neither hide in nor break a scope key.
func instanceID(id string) string {
	b := []byte(id[:min(len(id), 64)])
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// simInstance returns the simulator instance last seen answering on base,
// "" when none.
func (c *Client) simInstance(base string) string {
	if v, ok := c.instances.Load(base); ok {
		return v.(string)
	}
	return ""
}

// MaxRedirects is how many redirects the default HTTP client follows.
const MaxRedirects = 3

// ErrRedirect is wrapped by the error of a redirect the default HTTP client
// refused: too many, or one to another host (or from https to http) while
// the request carries a credential.
var ErrRedirect = errors.New("redirect refused")

// NewHTTPClient returns the HTTP client Client uses when its HTTP field is
// nil: no overall timeout (streams are long; Client's own timeouts bound
// each phase), at most MaxRedirects redirects, and none to another host or
// from https to http while the request carries a credential.
func NewHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Many calls at once to one provider (the proxy, bench) reuse their
	// connections instead of a new TLS handshake each: Go's default keeps 2.
	tr.MaxIdleConnsPerHost = 64
	// A fast stream arrives in bursts bigger than the default 4 KB read
	// buffer: read them in one system call rather than one per 4 KB.
	tr.ReadBufferSize = 32 << 10
	return &http.Client{Transport: tr, CheckRedirect: checkRedirect}
}

func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return fmt.Errorf("%w: more than %d redirects", ErrRedirect, MaxRedirects)
	}
	first := via[0]
	crossHost := !strings.EqualFold(req.URL.Host, first.URL.Host) ||
		(first.URL.Scheme == "https" && req.URL.Scheme != "https")
	if crossHost && carriesCredential(first) {
		return fmt.Errorf("%w: from %s to another host (%s) with an API key", ErrRedirect, first.URL.Host, req.URL.Host)
	}
	return nil
}

func carriesCredential(r *http.Request) bool {
	for _, h := range []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key"} {
		if r.Header.Get(h) != "" {
			return true
		}
	}
	return keyParamRE.MatchString("?" + r.URL.RawQuery)
}

// defaultHTTP is shared by every Client without its own, like
// http.DefaultClient, so connections are reused; it is built once and its
// settings never change.
var defaultHTTP = sync.OnceValue(NewHTTPClient)

// CloseIdleConnections closes the idle connections of the HTTP client
// shared by every Client whose HTTP field is nil (tests that check for
// leaked goroutines call it).
func CloseIdleConnections() { defaultHTTP().CloseIdleConnections() }

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return defaultHTTP()
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// timeoutCause is why the watchdog cancelled an attempt.
type timeoutCause struct {
	what string
	d    time.Duration
}

func (t *timeoutCause) Error() string { return fmt.Sprintf("%s (%s)", t.what, t.d) }

// errGraceOver ends the wait for a usage chunk after the end was signalled.
var errGraceOver = errors.New("usage grace over")

// watchdog runs the attempt's timers; each cancels the attempt's context
// with its own cause.
//
// The two idle timers (stall: silence on the wire; progress: no model
// output) are never stopped or reset from outside: touch, progressed and
// resume only note the time of the last sign of life, and the timer, when
// it fires, checks that time and either cancels (the wire really was
// silent, or the model really was, for its timeout), re-arms itself for the
// rest, or (while the caller's onText holds the reader) leaves resume to
// re-arm it. No interleaving of a firing with a touch, a pause or a resume
// can lose the timeout.
type watchdog struct {
	cancel context.CancelCauseFunc
	o      Options

	mu                   sync.Mutex
	header, first, grace *time.Timer
	stall, progress      idleTimer
	paused               bool // onText is running: not silence on the wire
	stopped              bool
}

// idleTimer fires d after the last sign of life it was told of.
type idleTimer struct {
	d     time.Duration
	t     *time.Timer
	cause *timeoutCause
	last  time.Time // the last sign of life, or the end of a pause
	due   bool      // it fired while paused
	off   bool      // disarmed for good
}

func (w *watchdog) arm(t **time.Timer, d time.Duration, cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || d <= 0 || *t != nil {
		return
	}
	*t = time.AfterFunc(d, func() { w.cancel(cause) })
}

func (w *watchdog) disarm(t **time.Timer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if *t != nil {
		(*t).Stop()
	}
}

// armIdle starts an idle timer: from now on, d without a sign of life
// cancels the attempt with cause.
func (w *watchdog) armIdle(it *idleTimer, d time.Duration, cause *timeoutCause) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || d <= 0 || it.t != nil || it.off {
		return
	}
	it.d, it.last, it.cause = d, time.Now(), cause
	it.t = time.AfterFunc(d, func() { w.idleFired(it) })
}

func (w *watchdog) idleFired(it *idleTimer) {
	w.mu.Lock()
	if w.stopped || it.off {
		w.mu.Unlock()
		return
	}
	if w.paused {
		it.due = true
		w.mu.Unlock()
		return
	}
	if left := it.d - time.Since(it.last); left > 0 {
		it.t.Reset(left)
		w.mu.Unlock()
		return
	}
	cause := it.cause
	w.mu.Unlock()
	w.cancel(cause)
}

// disarmIdle stops an idle timer for good.
func (w *watchdog) disarmIdle(it *idleTimer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	it.off = true
	if it.t != nil {
		it.t.Stop()
	}
}

// touch notes a sign of life: bytes arrived.
func (w *watchdog) touch() {
	w.mu.Lock()
	w.stall.last = time.Now()
	w.mu.Unlock()
}

// progressed notes model output; the first arms the no-progress timer.
func (w *watchdog) progressed(cause *timeoutCause) {
	w.mu.Lock()
	armed := w.progress.t != nil
	w.progress.last = time.Now()
	w.mu.Unlock()
	if !armed {
		w.armIdle(&w.progress, w.o.NoProgressTimeout, cause)
	}
}

// pause stops counting silence while the caller's onText runs.
func (w *watchdog) pause() {
	w.mu.Lock()
	w.paused = true
	w.mu.Unlock()
}

// resume counts silence again, from now.
func (w *watchdog) resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.paused = false
	now := time.Now()
	for _, it := range []*idleTimer{&w.stall, &w.progress} {
		it.last = now
		if it.due && !w.stopped && !it.off {
			it.due = false
			it.t.Reset(it.d)
		}
	}
}

// overdue returns the cause of an idle timer that is within raceSlack of
// firing (or past it), nil if none: a stream the server ends now ended
// because it stalled.
func (w *watchdog) overdue() *timeoutCause {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, it := range []*idleTimer{&w.stall, &w.progress} {
		if it.t != nil && !it.off && time.Since(it.last) >= it.d-raceSlack(it.d) {
			return it.cause
		}
	}
	return nil
}

func (w *watchdog) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	for _, t := range []*time.Timer{w.header, w.first, w.stall.t, w.progress.t, w.grace} {
		if t != nil {
			t.Stop()
		}
	}
}

// wireReader counts the raw bytes of a body as they arrive (so comments and
// pings count as alive) and keeps the first ones for a snippet.
type wireReader struct {
	r      io.Reader
	touch  func()
	before func() // nil, or the caller's hook before each read (WithReadHook)
	n      int64
	head   []byte
	limit  int64 // 0: none
	eof    bool  // the body returned io.EOF: nothing is left to drain
}

// errStreamTooBig ends a stream that passed Options.MaxStreamSize.
var errStreamTooBig = errors.New("stream too large")

func (w *wireReader) Read(p []byte) (int, error) {
	if w.limit > 0 && w.n >= w.limit {
		return 0, errStreamTooBig
	}
	if w.limit > 0 && int64(len(p)) > w.limit-w.n {
		p = p[:w.limit-w.n]
	}
	if w.before != nil {
		w.before()
	}
	n, err := w.r.Read(p)
	if err == io.EOF {
		w.eof = true
	}
	if n > 0 {
		w.n += int64(n)
		if len(w.head) < SnippetSize {
			w.head = append(w.head, p[:min(n, SnippetSize-len(w.head))]...)
		}
		w.touch()
	}
	return n, err
}

// capReader ends a decoded body that passes limit bytes with
// errStreamTooBig.
type capReader struct {
	r     io.Reader
	n     int64
	limit int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n >= c.limit {
		return 0, errStreamTooBig
	}
	if int64(len(p)) > c.limit-c.n {
		p = p[:c.limit-c.n]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// headReader keeps the first bytes of a (decoded) body for a snippet.
type headReader struct {
	r    io.Reader
	head []byte
}

func (h *headReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if n > 0 && len(h.head) < SnippetSize {
		h.head = append(h.head, p[:min(n, SnippetSize-len(h.head))]...)
	}
	return n, err
}

// attempt is the state of one Do call.
type attempt struct {
	c          *Client
	o          Options
	p          ProviderInfo // the provider's row, resolved once
	d          *dialectSpec // its dialect
	target     Target       // the request's target (its tier)
	parent     context.Context
	ctx        context.Context
	wd         *watchdog
	start      time.Time
	res        Result
	onText     func(string)  // the caller's (may be nil); gets deltas with the key scrubbed
	onThinking func()        // Request.OnThinking (may be nil)
	onUsage    func(Usage)   // Request.OnUsage (may be nil; cleared once called)
	onHeaders  func(*Limits) // Request.OnHeaders (may be nil)
	red        redactor
	// drain: the stream ended well before its body did; the body is
	// drained in the background when the attempt returns (see drain).
	drain bool
}

// emitText hands a scrubbed delta to the caller, pausing the idle timers
// (time in onText is not silence on the wire).
func (a *attempt) emitText(s string) {
	if s == "" || a.onText == nil {
		return
	}
	a.wd.pause()
	a.onText(s)
	a.wd.resume()
}

// thinking notes a reasoning delta: the result says so and the caller's
// OnThinking hears it (the idle timers paused, as for onText).
func (a *attempt) thinking() {
	a.res.Thinking = true
	if a.onThinking == nil {
		return
	}
	a.wd.pause()
	a.onThinking()
	a.wd.resume()
}

// earlyUsage hands the usage a decoder read before any text to the
// caller's OnUsage, once (the idle timers paused, as for onText). Text
// already given, it is never called: the usage then comes with the end.
func (a *attempt) earlyUsage(st *decoded) {
	if a.res.TTFText != 0 {
		a.onUsage = nil
		return
	}
	if st.usage == nil {
		return
	}
	f := a.onUsage
	a.onUsage = nil
	a.wd.pause()
	f(*st.usage)
	a.wd.resume()
}

// firstText notes the time to the first visible text.
func (a *attempt) firstText(out string) {
	if out != "" && a.res.TTFText == 0 {
		a.res.TTFText = max(a.c.now().Sub(a.start), time.Nanosecond)
	}
}

// Do sends req to ep and reads the answer to its end, calling onText (which
// may be nil) with each text delta as it arrives. It returns the Result;
// Result.Err is nil only when the stream signalled its own end.
func (c *Client) Do(ctx context.Context, ep Endpoint, req Request, onText func(string)) Result {
	if c == nil {
		c = &Client{}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	red := newRedactor(ep.Key, ep.awsSecrets(ctx)...)
	a := &attempt{c: c, o: c.Options.withDefaults(), parent: ctx, start: c.now(), red: red, onText: onText, onThinking: req.OnThinking, onUsage: req.OnUsage, onHeaders: req.OnHeaders}
	res := a.run(ep, req)
	return red.scrub(res)
}

func (a *attempt) fail(e *Error) Result {
	if e.Status == 0 {
		e.Status = a.res.Status
	}
	if e.RequestID == "" {
		e.RequestID = a.res.RequestID
	}
	a.res.Err = e
	return a.res
}

func (a *attempt) run(ep Endpoint, req Request) Result {
	if err := a.parent.Err(); err != nil {
		return a.fail(&Error{Class: ClassCancelled, Message: "cancelled before sending", Err: err})
	}
	name := ep.Provider
	if name == "" {
		name = req.Target.Provider
	}
	p, ok := lookupProvider(name)
	if !ok {
		err := fmt.Errorf("unknown provider %q", name)
		return a.fail(&Error{Class: ClassCaller, Message: err.Error(), Err: err})
	}
	a.p, a.d = p, p.spec()
	a.o = tierOptions(a.o, &a.p, req.Target)
	a.target = req.Target

	ctx, cancel := context.WithCancelCause(a.parent)
	defer func() {
		if !a.drain {
			cancel(nil)
		}
	}()
	a.ctx = ctx
	a.wd = &watchdog{cancel: cancel, o: a.o}
	defer a.wd.stop()

	hreq, err := buildRequestAt(ctx, &a.p, ep, req, a.c.now())
	if err != nil {
		return a.fail(&Error{Class: ClassCaller, Message: err.Error(), Err: err})
	}
	a.wd.arm(&a.wd.header, a.o.HeaderTimeout, &timeoutCause{"no response headers within the header timeout", a.o.HeaderTimeout})
	a.wd.arm(&a.wd.first, a.o.FirstTokenTimeout, &timeoutCause{"no content within the first-token timeout", a.o.FirstTokenTimeout})

	resp, err := a.c.httpClient().Do(hreq)
	a.wd.disarm(&a.wd.header)
	if err != nil {
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		return a.transportError(err)
	}
	// Belt and braces: a transport that does not abort reads on
	// cancellation still ends when the body is closed.
	stopClose := context.AfterFunc(ctx, func() { resp.Body.Close() })
	defer func() {
		if a.drain {
			go func() {
				drain(resp.Body, a.c.drainWait, cancel, stopClose)
				if a.c.drained != nil {
					a.c.drained()
				}
			}()
			return
		}
		stopClose()
		resp.Body.Close()
	}()

	a.c.noteInstance(ep.BaseURL, resp.Header)
	a.res.Status = resp.StatusCode
	a.res.RequestID = requestID(&a.p, resp.Header, ErrorBody{})
	a.res.Limits = parseLimits(&a.p, resp.Header, a.c.now())
	a.res.ServedTier = servedHeader(&a.p, resp.Header)
	if a.onHeaders != nil && resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		a.onHeaders(a.res.Limits)
	}

	a.wd.armIdle(&a.wd.stall, a.o.StallTimeout, &timeoutCause{"no bytes on the wire within the stall timeout", a.o.StallTimeout})
	wire := &wireReader{r: resp.Body, touch: a.wd.touch, before: readHook(a.parent)}

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		a.wd.disarm(&a.wd.first)
		return a.httpError(resp, wire)
	}
	return a.stream(resp, wire)
}

// readCause classifies a failed read or round trip by why the context
// ended: the caller (cancelled) or one of our timers (timeout). nil when the
// context is still live.
func (a *attempt) readCause(err error) *Error {
	if a.parent.Err() != nil {
		return &Error{Class: ClassCancelled, Message: "cancelled", Err: a.parent.Err()}
	}
	var tc *timeoutCause
	if cause := context.Cause(a.ctx); errors.As(cause, &tc) {
		return &Error{Class: ClassTimeout, Message: tc.Error(), Err: err}
	}
	return nil
}

func (a *attempt) transportError(err error) Result {
	if e := a.readCause(err); e != nil {
		return a.fail(e)
	}
	if errors.Is(err, ErrRedirect) {
		return a.fail(&Error{Class: ClassCaller, Message: a.red.text(err.Error()), Err: err})
	}
	return a.fail(&Error{Class: ClassConnection, Message: "no response: " + a.red.text(err.Error()), Err: err})
}

// readLimited reads at most limit bytes, reporting whether there was more.
func readLimited(r io.Reader, limit int64) ([]byte, bool, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if int64(len(data)) > limit {
		return data[:limit], true, err
	}
	return data, false, err
}

func (a *attempt) httpError(resp *http.Response, wire *wireReader) Result {
	body, _, derr := decodeBody(resp, wire)
	if derr != nil {
		if e := a.readCause(derr); e != nil && e.Class == ClassCancelled {
			return a.fail(e)
		}
		e := parseError(&a.p, resp.StatusCode, resp.Header, nil, a.c.now())
		e.Message = fmt.Sprintf("HTTP %d; %v", resp.StatusCode, derr)
		_, _ = io.CopyN(io.Discard, wire, SnippetSize)
		e.Snippet = snippet(wire.head)
		return a.fail(e)
	}
	data, tooBig, err := readLimited(body, a.o.MaxBodySize)
	if err != nil {
		if e := a.readCause(err); e != nil && e.Class == ClassCancelled {
			return a.fail(e)
		}
		// A cut or slow error body still has a status to classify by.
	}
	e := parseError(&a.p, resp.StatusCode, resp.Header, data, a.c.now())
	if flexCapacity(&a.p, a.target, resp.StatusCode, e) {
		e.Class = ClassFlexCapacity
	}
	switch {
	case tooBig:
		e.Message = fmt.Sprintf("error body larger than MaxBodySize (%d bytes); not read", a.o.MaxBodySize)
		e.Snippet = snippet(data)
	case err != nil && !ParseErrorBody(data).Found:
		e.Message = fmt.Sprintf("HTTP %d; error body unreadable: %s", resp.StatusCode, a.red.text(err.Error()))
		e.Err = err
		if len(data) > 0 {
			e.Snippet = snippet(data)
		}
	}
	if e.RequestID != "" {
		a.res.RequestID = e.RequestID
	}
	return a.fail(e)
}

// decodeBody undoes a Content-Encoding the server applied although none was
// asked for. Only gzip is understood.
func decodeBody(resp *http.Response, wire io.Reader) (io.Reader, string, error) {
	enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
	switch enc {
	case "", "identity":
		return wire, "", nil
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(wire)
		if err != nil {
			return nil, enc, fmt.Errorf("body claims gzip but does not decode: %w", err)
		}
		return &gzipErrReader{zr}, enc, nil
	}
	return nil, enc, fmt.Errorf("unsupported Content-Encoding %q", sanitize.Truncate(enc, 64))
}

// errUndecodable marks a body whose bytes could not be decoded.
var errUndecodable = errors.New("body does not decode")

type gzipErrReader struct{ zr *gzip.Reader }

func (g *gzipErrReader) Read(p []byte) (int, error) {
	n, err := g.zr.Read(p)
	if err != nil && err != io.EOF && !errors.Is(err, context.Canceled) {
		var tc *timeoutCause
		if !errors.As(err, &tc) {
			err = fmt.Errorf("%w: gzip: %w", errUndecodable, err)
		}
	}
	return n, err
}

// mediaType is mime.ParseMediaType's media type, without the parameters it
// would parse (and allocate) for nothing: the part before any ';',
// lowercased and trimmed, whether the rest parses or not.
func mediaType(h http.Header) string {
	mt, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.TrimSpace(strings.ToLower(mt))
}

// sniff returns the first byte that is not whitespace or a BOM, reading
// (and keeping buffered) as little as needed.
func sniff(br *bufio.Reader) (byte, error) {
	for i := 1; i <= 512; i++ {
		b, err := br.Peek(i)
		if len(b) < i {
			return 0, err
		}
		if bytes.HasPrefix(b, []byte("\xef\xbb\xbf")) && i <= 3 {
			continue
		}
		if c := b[i-1]; c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return c, nil
		}
	}
	return ' ', nil
}

func (a *attempt) stream(resp *http.Response, wire *wireReader) Result {
	wire.limit = a.o.MaxStreamSize
	body, _, derr := decodeBody(resp, wire)
	if derr != nil {
		if e := a.readCause(derr); e != nil {
			return a.fail(e)
		}
		_, _ = io.CopyN(io.Discard, wire, SnippetSize) // for the snippet
		return a.fail(&Error{Class: ClassServer, Message: derr.Error(), Snippet: snippet(wire.head), Err: derr})
	}
	// Every cap counts decoded bytes: the decompressing reader sits inside
	// this one.
	body = &capReader{r: body, limit: a.o.MaxStreamSize}
	head := &headReader{r: body}
	mt := mediaType(resp.Header)
	var r io.Reader = head
	if mt == "text/html" {
		return a.notStream(head, "an HTML page came back where an SSE stream was expected (a proxy, a captive portal or a wrong base URL?)")
	}
	if mt != "text/event-stream" {
		br := bufio.NewReader(head)
		first, err := sniff(br)
		if err != nil && err != io.EOF {
			if e := a.readCause(err); e != nil {
				return a.fail(e)
			}
			return a.fail(a.cutError(err, wire))
		}
		switch {
		case first == '<':
			return a.notStream(br, "an HTML page came back where an SSE stream was expected (a proxy, a captive portal or a wrong base URL?)")
		case !a.d.bareJSON && (first == '{' || first == '['):
			return a.jsonInsteadOfStream(br, head)
		}
		r = br
	}
	if a.d.bareJSON {
		r = newGeminiBareReader(r)
	}
	return a.readEvents(r, wire, head)
}

// notStream reports a 200 whose body is plainly not an SSE stream.
func (a *attempt) notStream(r io.Reader, why string) Result {
	data, _, _ := readLimited(r, SnippetSize)
	return a.fail(&Error{Class: ClassServer, Message: why, Snippet: snippet(data)})
}

// jsonInsteadOfStream reads a JSON body sent where a stream was asked for.
// An error envelope in it is classified like an error inside a stream (by
// what its body says); anything else is a server error.
func (a *attempt) jsonInsteadOfStream(r io.Reader, head *headReader) Result {
	data, tooBig, err := readLimited(r, a.o.MaxBodySize)
	if err != nil {
		if e := a.readCause(err); e != nil {
			return a.fail(e)
		}
	}
	b := ParseErrorBody(data)
	if !tooBig && b.Found {
		e := buildError(&a.p, b.impliedStatus(), b, nil, a.c.now())
		e.Snippet = snippet(data)
		if e.RequestID != "" {
			a.res.RequestID = e.RequestID
		}
		return a.fail(e)
	}
	msg := "a JSON body came back where an SSE stream was expected"
	if tooBig {
		msg = fmt.Sprintf("a JSON body larger than MaxBodySize (%d bytes) came back where an SSE stream was expected", a.o.MaxBodySize)
	}
	return a.fail(&Error{Class: ClassServer, Message: msg, Snippet: snippet(head.head)})
}

func (a *attempt) cutError(err error, wire *wireReader) *Error {
	e := &Error{Class: ClassConnection, MidStream: true, Err: err}
	if wire.n == 0 {
		e.Message = "the connection ended after the headers, before any data: " + a.red.text(err.Error())
	} else {
		e.Message = "the stream was cut before its end: " + a.red.text(err.Error())
	}
	return e
}

// readEvents decodes the SSE stream with the dialect until its end signal.
func (a *attempt) readEvents(r io.Reader, wire *wireReader, head *headReader) Result {
	dec := a.d.newDecoder()
	st := dec.state() // the decoder's own state: stable, updated in place
	deltas := a.red.deltas()
	noProgress := &timeoutCause{"no model output within the no-progress timeout", a.o.NoProgressTimeout}
	var (
		text       strings.Builder
		truncated  bool
		finished   bool
		recognized bool
		gotContent bool
		readErr    error
		midErr     *ErrorBody
		ended      bool // the loop stopped at the stream's own end (step.done)
	)
	frames := a.d.frames
	if frames == nil {
		frames = sseEvents
	}
	for ev, err := range frames(r, a.o.MaxEventSize) {
		if err != nil {
			readErr = err
			break
		}
		s := dec.handle(ev.Type, ev.Data)
		if a.res.ServedTier == "" {
			a.res.ServedTier = servedInEvent(a.p.Tiers.ServedField, ev.Data)
		}
		recognized = recognized || s.recognize
		if s.progress && !gotContent {
			gotContent = true
			a.res.TTFT = a.c.now().Sub(a.start)
			a.wd.disarm(&a.wd.first)
		}
		if s.progress && !finished {
			a.wd.progressed(noProgress)
		}
		if s.thinking {
			a.thinking()
		}
		if a.onUsage != nil {
			a.earlyUsage(st)
		}
		if s.text != "" {
			out := deltas.Text(s.text)
			truncated = keep(&text, out, a.o.MaxPartialText) || truncated
			a.firstText(out)
			a.emitText(out)
		}
		if s.err != nil {
			midErr = s.err
			break
		}
		if s.finished && !finished {
			finished = true
			a.wd.disarm(&a.wd.first)
			a.wd.disarmIdle(&a.wd.progress)
			if a.o.UsageGrace < 0 {
				break
			}
			a.wd.arm(&a.wd.grace, a.o.UsageGrace, errGraceOver)
		}
		if s.done {
			ended = true
			break
		}
	}
	a.drain = ended && finished && !wire.eof
	if out := deltas.Flush(); out != "" {
		truncated = keep(&text, out, a.o.MaxPartialText) || truncated
		a.firstText(out)
		a.emitText(out)
	}
	a.res.Text = text.String()
	a.res.TextTruncated = truncated
	a.res.FinishReason = st.finish
	a.res.Usage = st.usage
	a.res.ReasoningTokens = st.reasoning
	a.res.Model = st.model
	a.res.ResponseID = st.respID
	if a.res.RequestID == "" {
		a.res.RequestID = st.requestID
	}

	switch {
	case midErr != nil:
		e := buildError(&a.p, midErr.impliedStatus(), *midErr, nil, a.c.now())
		e.Status = a.res.Status
		e.MidStream = true
		if e.Message == "" {
			e.Message = "error inside the stream"
		}
		return a.fail(e)
	case finished:
		// The end was signalled; a cut, stall or the grace ending while
		// waiting for the usage chunk costs nothing.
		return a.res
	case readErr != nil:
		if e := a.readCause(readErr); e != nil {
			e.MidStream = wire.n > 0
			return a.fail(e)
		}
		if errors.Is(readErr, bufio.ErrTooLong) {
			return a.fail(&Error{Class: ClassServer, MidStream: true, Oversize: true, Err: readErr,
				Message: fmt.Sprintf("an SSE event was larger than MaxEventSize (%d bytes)", a.o.MaxEventSize)})
		}
		if errors.Is(readErr, errStreamTooBig) {
			return a.fail(&Error{Class: ClassServer, MidStream: true, Oversize: true, Err: readErr,
				Message: fmt.Sprintf("the stream passed MaxStreamSize (%d bytes) of decoded data without ending", a.o.MaxStreamSize)})
		}
		if tc := a.wd.overdue(); tc != nil && !errors.Is(readErr, errUndecodable) {
			return a.fail(&Error{Class: ClassTimeout, MidStream: true, Message: tc.Error(), Err: readErr})
		}
		if errors.Is(readErr, errUndecodable) {
			return a.fail(&Error{Class: ClassServer, MidStream: true, Err: readErr,
				Message: a.red.text(readErr.Error()), Snippet: snippet(wire.head)})
		}
		return a.fail(a.cutError(readErr, wire))
	}
	if tc := a.wd.overdue(); tc != nil {
		// The server closed the stream as it stalled: the same end as the
		// timer's.
		return a.fail(&Error{Class: ClassTimeout, MidStream: true, Message: tc.Error()})
	}
	switch {
	case !recognized && len(head.head) > 0:
		return a.fail(&Error{Class: ClassServer, Snippet: snippet(head.head),
			Message: fmt.Sprintf("the body is not an SSE stream in the %s format", a.d.name)})
	case !recognized:
		return a.fail(&Error{Class: ClassConnection, MidStream: true,
			Message: "the stream ended before any event"})
	}
	return a.fail(&Error{Class: ClassConnection, MidStream: true,
		Message: fmt.Sprintf("the stream ended before its end signal (%s)", a.d.endSignal)})
}

// drain reads what is left of the body of an attempt that returned after
// its stream's end signal (see drainMax), so that net/http can reuse its
// connection, then closes it and ends the attempt's context (cancel, with
// stopClose: the attempt's). The attempt's caller does not wait for it; it
// reads raw bytes (a compressed body is not decoded) and gives up, the
// connection then closed as before, past drainMax bytes, past wait (0:
// defaultDrainWait) or when the caller's context ends.
func drain(body io.ReadCloser, wait time.Duration, cancel context.CancelCauseFunc, stopClose func() bool) {
	if wait <= 0 {
		wait = defaultDrainWait
	}
	t := time.AfterFunc(wait, func() { cancel(errDrainOver) })
	_, _ = io.CopyN(io.Discard, body, drainMax+1)
	t.Stop()
	stopClose()
	body.Close()
	cancel(nil)
}

// errDrainOver ends the wait for the rest of a body after its end signal.
var errDrainOver = errors.New("drain wait over")

// sseEvents reads SSE events (the default framing).
func sseEvents(r io.Reader, maxEvent int) iter.Seq2[wireEvent, error] {
	return func(yield func(wireEvent, error) bool) {
		for ev, err := range sse.Read(r, &sse.ReadConfig{MaxEventSize: maxEvent}) {
			if !yield(wireEvent{Type: ev.Type, Data: ev.Data}, err) {
				return
			}
		}
	}
}

// keep appends s to text up to max bytes in all (max < 0: no cap), cut on
// a rune boundary; it reports whether anything was left out.
func keep(text *strings.Builder, s string, max int) bool {
	if max < 0 || text.Len()+len(s) <= max {
		text.WriteString(s)
		return false
	}
	room := max - text.Len()
	if room <= 0 {
		return s != ""
	}
	for room > 0 && !utf8.RuneStart(s[room]) {
		room--
	}
	text.WriteString(s[:room])
	return true
}
