package proxy

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitscope/limitscope/internal/sanitize"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// Headers the proxy adds to every answer.
const (
	HeaderServedBy  = "X-Limitscope-Served-By"  // provider/model that answered
	HeaderAttempts  = "X-Limitscope-Attempts"   // HTTP requests the call made
	HeaderRequestID = "X-Limitscope-Request-Id" // the call's id (in the history too)
	HeaderIgnored   = "X-Limitscope-Ignored"    // request fields accepted but not sent on
	// HeaderBuffered, on a request, turns the buffered mode on ("true") or
	// off ("false") whatever the alias says; on an answer, it says the
	// answer was held until complete.
	HeaderBuffered = "X-Limitscope-Buffered"
)

// DefaultMaxBody bounds a request body.
const DefaultMaxBody = 32 << 20

// Options configure a Handler. Token and Engine are required.
type Options struct {
	Token string // what callers present as their API key
	// Engine runs every proxied call: the engine the commands build
	// (calls.Open), with its Doer, clock, cooldowns, pacer, breaker and
	// fleet state, so a proxied call is paced, broken and cooled down with
	// every other call of the process. The proxy builds none of its own.
	Engine *retry.Engine
	Config *Config // nil: no aliases, default policy
	// DefaultPolicy is the command's policy flags: below the config file's
	// policy and an alias's own (Config.RoutePolicy), above
	// retry.DefaultPolicy. Zero fields: not set.
	DefaultPolicy retry.Policy
	// Available reports whether a provider has a key; routes to others are
	// refused (or skipped in an alias's chain). Nil: every provider.
	Available func(provider string) bool
	// Events receives every event of every proxied call with the call, from
	// the handler's goroutines (concurrently across calls, in order within
	// one): the TUI's feed.
	Events func(c retry.Call, ev retry.Event)
	// Record wraps a call's sink so its events reach the history too (the history
	// recorder's Sink, calls/).
	Record func(c retry.Call, next func(retry.Event)) func(retry.Event)
	// Commit, when set, makes a call's history record durable: it is called
	// with the call's id (retry.Call.ID, Event.CallID) after the call's
	// call_end event went through Record, and before the answer is
	// completed (the last stream event, or the whole non-streamed answer,
	// is written only when it returns), so a proxy killed right after
	// answering has lost nothing it answered. Its ctx ends after 10 s; an
	// error is logged (Logf) and the answer still goes out.
	Commit  func(ctx context.Context, callID string) error
	Now     func() time.Time                 // nil: time.Now
	Logf    func(format string, args ...any) // one line per call; nil: silent
	MaxBody int64                            // request body cap (0: DefaultMaxBody); over it: 413
	// MaxInFlight caps the completion calls served at once (0:
	// DefaultMaxInFlight); MaxBuffered caps the request body bytes they
	// hold (0: DefaultMaxBuffered, never below MaxBody). Past either cap a
	// call is refused at once with 503 and retry-after, in the caller's
	// dialect, before its body is read.
	MaxInFlight int
	MaxBuffered int64
	// WriteTimeout is how long a caller may take none of its answer's bytes
	// (0: Config.WriteTimeout, else DefaultWriteTimeout): past it the caller
	// is dropped, its upstream request closed, and the call recorded as
	// ended because the caller went away.
	WriteTimeout time.Duration
	// StreamBuffer caps the answer bytes queued for one caller (0:
	// Config.StreamBuffer, else DefaultStreamBuffer), MaxQueued those
	// queued for all callers (0: Config.MaxQueued, else DefaultMaxQueued):
	// past either, a call reads its upstream no faster than its caller
	// takes the answer. The time a call waits on its caller is not silence
	// on the wire: it trips none of the engine's stall or no-progress timers.
	StreamBuffer int
	MaxQueued    int64
	// MaxAnswer caps a non-streamed or buffered answer, held whole until
	// the call ends (0: Config.MaxAnswer, else DefaultMaxAnswer): past it
	// the caller gets an error in its dialect naming the cap, never part of
	// the answer.
	MaxAnswer int64
	// BodyTimeout bounds reading one request body (0: DefaultBodyTimeout);
	// past it: 408 and the connection is closed.
	BodyTimeout time.Duration
	// ReplayWindow is how long a call's final failure answers the same
	// caller's identical retry without going upstream (HeaderReplayed),
	// never longer than the wait the failure suggested. 0:
	// DefaultReplayWindow; negative: off.
	ReplayWindow time.Duration
	// Metrics, when set, serves GET /metrics (Prometheus), behind the token
	// like every other endpoint.
	Metrics http.Handler
	// Trace, when set, wraps every request at the handler's entry (before
	// the checks): the caller's trace context and the request's SERVER span
	// (telemetry.Telemetry.Server).
	Trace func(http.Handler) http.Handler
	// RecordContext, when set, is Record with the request's context (where
	// Trace put its trace context); it is used instead of Record.
	RecordContext func(ctx context.Context, c retry.Call, next func(retry.Event)) func(retry.Event)
}

// Handler is the proxy, an http.Handler.
type Handler struct {
	o      Options
	cfg    *Config
	entry  http.Handler // serve, or Trace's wrapper of it
	mux    *http.ServeMux
	lim    limits
	replay *replays
	flow   *flow
	// aliasCalls counts each capped alias's calls in flight.
	aliasMu    sync.Mutex
	aliasCalls map[string]int
	// aliasGates are the concurrency ceilings of the aliases that have one
	// (Alias.MaxConcurrency), built once in New.
	aliasGates map[string]*aliasGate
}

// aliasGate is an alias's concurrency ceiling: a call past it waits for a
// slot, first come first served (a channel's senders are woken in order).
type aliasGate struct {
	slots   chan struct{}
	waiting atomic.Int64
}

// enter takes a slot, waiting for one until ctx ends; it returns how long
// it waited.
func (g *aliasGate) enter(ctx context.Context, now func() time.Time) (time.Duration, error) {
	select {
	case g.slots <- struct{}{}:
		return 0, nil
	default:
	}
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	start := now()
	select {
	case g.slots <- struct{}{}:
		return now().Sub(start), nil
	case <-ctx.Done():
		return now().Sub(start), context.Cause(ctx)
	}
}

func (g *aliasGate) leave() { <-g.slots }

// Queued is the number of calls waiting at the aliases' concurrency
// ceilings (besides those waiting at their targets' gates, which the
// engine's pacer counts).
func (h *Handler) Queued() int {
	n := 0
	for _, g := range h.aliasGates {
		n += int(g.waiting.Load())
	}
	return n
}

// New returns the proxy's handler.
func New(o Options) (*Handler, error) {
	if strings.TrimSpace(o.Token) == "" {
		return nil, errors.New("proxy: no token")
	}
	if o.Engine == nil || o.Engine.Doer == nil {
		return nil, errors.New("proxy: no Engine (with its Doer)")
	}
	h := &Handler{o: o, cfg: o.Config}
	if h.cfg == nil {
		h.cfg = &Config{}
	}
	if h.o.Now == nil {
		h.o.Now = time.Now
	}
	if h.o.MaxBody <= 0 {
		h.o.MaxBody = DefaultMaxBody
	}
	h.o.MaxInFlight = first(h.o.MaxInFlight, h.cfg.MaxInFlight, DefaultMaxInFlight)
	h.o.WriteTimeout = first(h.o.WriteTimeout, h.cfg.WriteTimeout, DefaultWriteTimeout)
	h.o.StreamBuffer = first(h.o.StreamBuffer, h.cfg.StreamBuffer, DefaultStreamBuffer)
	h.o.MaxQueued = first(h.o.MaxQueued, h.cfg.MaxQueued, DefaultMaxQueued)
	h.o.MaxAnswer = first(h.o.MaxAnswer, h.cfg.MaxAnswer, DefaultMaxAnswer)
	// A held answer counts toward the total: it can never be larger.
	h.o.MaxAnswer = min(h.o.MaxAnswer, h.o.MaxQueued)
	if h.o.MaxBuffered <= 0 {
		h.o.MaxBuffered = DefaultMaxBuffered
	}
	h.o.MaxBuffered = max(h.o.MaxBuffered, h.o.MaxBody)
	if h.o.BodyTimeout <= 0 {
		h.o.BodyTimeout = DefaultBodyTimeout
	}
	switch {
	case h.o.ReplayWindow == 0 && h.cfg.ReplayWindow != nil:
		h.replay = newReplays(*h.cfg.ReplayWindow)
	case h.o.ReplayWindow == 0:
		h.replay = newReplays(DefaultReplayWindow)
	default:
		h.replay = newReplays(h.o.ReplayWindow)
	}
	h.lim = limits{maxCalls: int64(h.o.MaxInFlight), maxBytes: h.o.MaxBuffered}
	for name, a := range h.cfg.Aliases {
		if a.MaxConcurrency > 0 {
			if h.aliasGates == nil {
				h.aliasGates = map[string]*aliasGate{}
			}
			h.aliasGates[name] = &aliasGate{slots: make(chan struct{}, a.MaxConcurrency)}
		}
	}
	h.flow = &flow{perCall: h.o.StreamBuffer, total: h.o.MaxQueued, timeout: h.o.WriteTimeout}
	mux := http.NewServeMux()
	for _, p := range []string{"/v1/chat/completions", "/chat/completions"} {
		mux.HandleFunc(p, h.post(stream.DialectOpenAI, parseOpenAI))
	}
	for _, p := range []string{"/v1/messages", "/messages"} {
		mux.HandleFunc(p, h.post(stream.DialectAnthropic, parseAnthropic))
	}
	for _, p := range []string{"/v1/responses", "/responses"} {
		mux.HandleFunc(p, h.post(stream.DialectResponses, parseResponses))
	}
	for _, p := range []string{"/v1/models", "/models"} {
		mux.HandleFunc(p, h.models)
		mux.HandleFunc(p+"/{id...}", h.models)
	}
	if o.Metrics != nil {
		mux.Handle("GET /metrics", o.Metrics)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		refuseAndClose(w, r, &apiError{status: http.StatusNotFound, class: stream.ClassCaller, code: "not_found",
			message: "limitscope proxy: no endpoint " + r.Method + " " + r.URL.Path +
				" (served: POST /v1/chat/completions, POST /v1/responses, POST /v1/messages, GET /v1/models)"}, callerDialect(r), "")
	})
	h.mux = mux
	h.entry = http.HandlerFunc(h.serve)
	if o.Trace != nil {
		h.entry = o.Trace(h.entry)
	}
	return h, nil
}

// first returns the first positive value of vs (the last when none is).
func first[T int | int64 | time.Duration](vs ...T) T {
	for _, v := range vs {
		if v > 0 {
			return v
		}
	}
	return vs[len(vs)-1]
}

// callerDialect guesses the dialect of a request for its errors.
func callerDialect(r *http.Request) stream.Dialect {
	if strings.HasSuffix(r.URL.Path, "/messages") || r.Header.Get("Anthropic-Version") != "" {
		return stream.DialectAnthropic
	}
	return stream.DialectOpenAI
}

// ServeHTTP checks the Host and Origin (DNS rebinding, browsers) and the
// token, then serves the endpoint. A refusal closes the connection without
// reading the body.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.entry.ServeHTTP(w, r) }

// InFlight is the number of completion calls being served.
func (h *Handler) InFlight() int64 { return h.lim.calls.Load() }

// HeldWaiting is the number of non-streamed or buffered answers waiting
// for room under the cap on answer bytes queued for callers (MaxQueued).
func (h *Handler) HeldWaiting() int64 { return h.flow.holding.Load() }

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	d := callerDialect(r)
	if r.Header.Get("Origin") != "" {
		refuseAndClose(w, r, &apiError{status: http.StatusForbidden, class: stream.ClassCaller, code: "origin_refused",
			message: "limitscope proxy: requests from a web page (with an Origin header) are refused"}, d, "")
		return
	}
	if !h.hostAllowed(r.Host) {
		refuseAndClose(w, r, &apiError{status: http.StatusForbidden, class: stream.ClassCaller, code: "host_refused",
			message: "limitscope proxy: the Host header names another server (add it to allowed_hosts in the config if it is yours)"}, d, "")
		return
	}
	if !h.authorized(r) {
		e := &apiError{status: http.StatusUnauthorized, class: stream.ClassCaller, code: "invalid_api_key",
			message: "limitscope proxy: wrong or missing token; use the proxy's token as the API key (limitscope info shows it)"}
		if d == stream.DialectAnthropic {
			e.code = "authentication_error"
		}
		refuseAndClose(w, r, e, d, "")
		return
	}
	h.mux.ServeHTTP(w, r)
}

// hostAllowed accepts IP literals, localhost and the configured names: a
// DNS-rebinding page reaches us under its own domain name.
func (h *Handler) hostAllowed(host string) bool {
	if host == "" {
		return false
	}
	name := host
	if hn, _, err := net.SplitHostPort(host); err == nil {
		name = hn
	}
	name = strings.ToLower(strings.TrimSuffix(strings.Trim(name, "[]"), "."))
	if name == "localhost" || net.ParseIP(name) != nil {
		return true
	}
	for _, a := range h.cfg.AllowedHosts {
		if a == name {
			return true
		}
	}
	return false
}

// authorized compares the caller's key with the token in constant time.
func (h *Handler) authorized(r *http.Request) bool {
	got := r.Header.Get("X-Api-Key")
	if got == "" {
		if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
			got = strings.TrimSpace(a[7:])
		}
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(h.o.Token)) == 1
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// post serves a completion endpoint of one dialect: admission (the caps),
// the body within its timeout and budget, then the call.
func (h *Handler) post(d stream.Dialect, parse func([]byte) (*inbound, *apiError)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			refuseAndClose(w, r, &apiError{status: http.StatusMethodNotAllowed, class: stream.ClassCaller,
				message: "limitscope proxy: use POST"}, d, "")
			return
		}
		if !h.lim.enter() {
			refuseAndClose(w, r, busy(fmt.Sprintf("%d calls are in flight, the cap", h.lim.maxCalls)), d, "")
			return
		}
		defer h.lim.leave()
		body, held, e := h.readBody(w, r)
		if e != nil {
			refuseAndClose(w, r, e, d, "")
			return
		}
		// The conversation parsed from the body is held for the call's life
		// (retries resend it): so are its bytes in the budget.
		defer h.lim.release(held)
		var key [32]byte
		if h.replay.on() {
			key = replayKey(r, body)
			if v, ok := h.replay.get(key, h.o.Now()); ok {
				if h.o.Logf != nil {
					h.o.Logf("proxy: call %s replayed: the same request failed for good %s ago; not sent upstream again",
						v.id, h.o.Now().Sub(v.at).Round(time.Millisecond))
				}
				v.write(w, h.o.Now())
				return
			}
		}
		in, e := parse(body)
		if e != nil {
			writeError(w, e, d, "")
			return
		}
		h.serveCall(w, r, in, key)
	}
}

// enterAlias takes one of a capped alias's call slots; false when they
// are all taken.
func (h *Handler) enterAlias(rt Alias) bool {
	h.aliasMu.Lock()
	defer h.aliasMu.Unlock()
	if h.aliasCalls[rt.Name] >= rt.MaxInFlight {
		return false
	}
	if h.aliasCalls == nil {
		h.aliasCalls = map[string]int{}
	}
	h.aliasCalls[rt.Name]++
	return true
}

func (h *Handler) leaveAlias(rt Alias) {
	h.aliasMu.Lock()
	defer h.aliasMu.Unlock()
	if h.aliasCalls[rt.Name]--; h.aliasCalls[rt.Name] <= 0 {
		delete(h.aliasCalls, rt.Name)
	}
}

// route resolves a model name to a chain, policy and token cap.
func (h *Handler) route(model string) (Alias, *apiError) {
	avail := func(p string) bool { return h.o.Available == nil || h.o.Available(p) }
	noKey := func(p string) *apiError {
		info, _ := stream.Provider(p)
		return &apiError{status: http.StatusBadRequest, class: stream.ClassCaller, code: "provider_not_configured",
			message: "limitscope proxy: " + (&stream.MissingKeyError{Provider: p, Vars: info.KeyEnv}).Error() +
				" (in the proxy's environment)"}
	}
	if a, ok := h.cfg.Aliases[model]; ok {
		out := a
		out.Chain = nil
		for _, t := range a.Chain {
			if avail(t.Provider) {
				out.Chain = append(out.Chain, t)
			}
		}
		if len(out.Chain) == 0 {
			return Alias{}, noKey(a.Chain[0].Provider)
		}
		return out, nil
	}
	var t stream.Target
	if strings.Contains(model, "/") {
		var err error
		if t, err = stream.ParseTarget(model); err != nil {
			return Alias{}, &apiError{status: http.StatusNotFound, class: stream.ClassCaller, code: "model_not_found",
				message: "limitscope proxy: " + err.Error()}
		}
	} else if p := inferProvider(model); p != "" {
		t = stream.Target{Provider: p, Model: model}
	} else {
		return Alias{}, &apiError{status: http.StatusNotFound, class: stream.ClassCaller, code: "model_not_found",
			message: fmt.Sprintf("limitscope proxy: no route for model %q: use provider/model (e.g. openai/gpt-5.4-mini) or an alias from the config%s",
				model, h.aliasList())}
	}
	if !avail(t.Provider) {
		return Alias{}, noKey(t.Provider)
	}
	return Alias{Name: model, Chain: []stream.Target{t}}, nil
}

func (h *Handler) aliasList() string {
	names := h.aliasNames()
	if len(names) == 0 {
		return ""
	}
	return " (aliases: " + strings.Join(names, ", ") + ")"
}

// inferProvider names the provider of a bare model name an SDK's code
// already uses (claude-..., gpt-..., gemini-...), or "": the provider
// table's model prefixes.
func inferProvider(model string) string {
	p, _ := stream.ProviderForModel(model)
	return p.Name
}

// callState is one call's progress toward the caller.
type callState struct {
	w       http.ResponseWriter
	flow    *flow
	gone    func(error) // the caller stopped taking the answer: ends the call
	out     writer
	stream  bool
	target  stream.Target // of the attempt in flight
	n       int           // its number
	usage   *stream.Usage // the attempt's usage as reported before its text (EventUsage), nil when none
	started bool          // the caller's stream began: nothing can be taken back
	sse     *sseOut       // the started stream's output
	// batch: the attempt's reads of its upstream call beforeRead (its
	// Doer honours stream.WithReadHook), so a delta waits there to go out
	// with the rest of its read's.
	batch bool
	// keep: the text sent is kept in sent, for a continuation's prefill.
	keep bool
	sent []byte
	// trim is how many leading whitespace bytes of a continuation's text
	// to drop: the prefill's trailing whitespace, which the caller has and
	// the provider refuses in a prefill.
	trim int
	// whole: the answer is held until the call ends (not streamed, or
	// buffered); text is the attempt's text so far, at most maxAnswer
	// bytes, counted in flow (waiting for room under its total cap; held
	// is how long); past them, or with no room in time, tooBig is the
	// caller's error and cancel ends the call.
	whole     bool
	text      []byte
	maxAnswer int64
	tooBig    *apiError
	ctx       context.Context
	cancel    context.CancelCauseFunc
	held      time.Duration
}

// errAnswerTooBig ends a call whose held answer passed the cap.
type errAnswerTooBig struct{ max int64 }

func (e *errAnswerTooBig) Error() string {
	return fmt.Sprintf("the answer passed the proxy's cap on a non-streamed or buffered answer (max_answer, --max-answer: %d bytes); stream it, or raise the cap", e.max)
}

// holdText adds an attempt's text to the answer held whole.
func (cs *callState) holdText(text string) {
	if cs.tooBig != nil {
		return
	}
	if int64(len(cs.text)+len(text)) > cs.maxAnswer {
		e := &errAnswerTooBig{max: cs.maxAnswer}
		cs.tooBig = &apiError{status: http.StatusBadGateway, class: stream.ClassServer, code: "answer_too_large",
			message: "limitscope proxy: " + e.Error()}
		cs.dropWhole()
		cs.cancel(e)
		return
	}
	waited, err := cs.flow.hold(cs.ctx, int64(len(text)))
	cs.held += waited
	if err != nil {
		var nr *errNoRoom
		if errors.As(err, &nr) {
			cs.tooBig = &apiError{status: http.StatusServiceUnavailable, class: stream.ClassOverload, code: "proxy_busy",
				message: "limitscope proxy: " + nr.Error(), retryAfter: time.Second, retryable: true}
		}
		cs.dropWhole()
		cs.cancel(err)
		return
	}
	cs.text = append(cs.text, text...)
}

// dropWhole gives the held answer's bytes back to the flow.
func (cs *callState) dropWhole() {
	cs.flow.add(-int64(len(cs.text)))
	cs.text = nil
}

// beforeRead is the upstream read hook (stream.WithReadHook): the deltas
// of the read before this one go out to the caller now, in one write.
func (cs *callState) beforeRead() {
	cs.batch = true
	if cs.sse != nil {
		cs.sse.push()
	}
}

// event is the call's own sink: it streams text to the caller.
func (cs *callState) event(ev retry.Event) {
	if ev.Kind != retry.EventText && cs.sse != nil {
		cs.sse.push() // text held for a read's end goes out before anything else happens
	}
	switch ev.Kind {
	case retry.EventAttemptStart:
		if ev.Attempt != nil {
			cs.target, cs.n = ev.Attempt.Target, ev.Attempt.N
		}
		cs.usage = nil
		cs.batch = false // until this attempt's first read says its Doer calls the hook
		if cs.whole && cs.tooBig == nil {
			cs.dropWhole() // a retry's answer replaces the failed attempt's
		}
	case retry.EventUsage:
		cs.usage = ev.Usage
	case retry.EventText:
		if !cs.stream {
			if cs.whole {
				cs.holdText(ev.Text)
			}
			return
		}
		text := ev.Text
		for cs.trim > 0 && text != "" && isSpace(text[0]) {
			text, cs.trim = text[1:], cs.trim-1
		}
		if text == "" {
			return
		}
		cs.trim = 0
		if cs.keep {
			cs.sent = append(cs.sent, text...)
		}
		if !cs.started {
			cs.begin(text)
			return
		}
		cs.sse.text(cs.out, text, cs.batch)
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

// begin sends the headers, the stream's opening events and its first
// text, written and flushed from the call's goroutine (the socket's buffer
// is empty: no wait, and no hand-off to the flusher before the first
// token), then starts the flusher for the rest.
func (cs *callState) begin(text string) {
	h := cs.w.Header()
	h.Set(HeaderServedBy, cs.target.String())
	h.Set(HeaderAttempts, strconv.Itoa(cs.n))
	if aw, ok := cs.out.(*anthropicWriter); ok && cs.usage != nil {
		aw.inputTokens = cs.usage.InputTokens // the upstream reported it before the text
	}
	rc := http.NewResponseController(cs.w)
	setDeadline(rc, cs.flow.timeout)
	startSSE(cs.w)
	b := getBuf()
	*b = cs.out.text(cs.out.start(*b, cs.target.Model), text)
	_, err := cs.w.Write(*b)
	if err == nil {
		err = rc.Flush()
	}
	putBuf(b)
	cs.sse = newSSEOut(cs.w, cs.flow, cs.gone)
	cs.started = true
	if err != nil {
		cs.sse.fail(err)
	}
}

// acceptsPrefill reports whether t continues an answer from a trailing
// assistant turn (a prefill): the Messages API does, and so do Anthropic's
// models on Bedrock (Converse hands them the turns; Bedrock's Claude
// Messages page: "If the final message uses the assistant role, the
// response content will continue immediately from the content in that
// message"); Chat Completions, Gemini and Bedrock's other models answer
// such a turn anew.
func acceptsPrefill(t stream.Target) bool {
	info, ok := stream.Provider(t.Provider)
	switch {
	case !ok:
		return false
	case info.Dialect == stream.DialectAnthropic:
		return true
	case info.Dialect == stream.DialectBedrock:
		return bedrockClaude(t.Model)
	}
	return false
}

// bedrockClaude reports whether a Bedrock model is one of Anthropic's: a
// model id "anthropic.claude-...", an inference profile
// "us.anthropic.claude-..." (or eu., apac., global. ...), or an ARN ending
// in either, with or without the target's leading Region segment.
func bedrockClaude(model string) bool {
	_, id := stream.BedrockModel(model, "")
	id = id[strings.LastIndexByte(id, '/')+1:]
	if strings.HasPrefix(id, "anthropic.") {
		return true
	}
	_, rest, ok := strings.Cut(id, ".")
	return ok && strings.HasPrefix(rest, "anthropic.")
}

// buffered reports whether a streamed call's answer is held until it is
// complete: the request's HeaderBuffered, else its alias's setting.
func buffered(r *http.Request, rt Alias) bool {
	if v, err := strconv.ParseBool(r.Header.Get(HeaderBuffered)); err == nil {
		return v
	}
	return rt.Buffered
}

// serveCall runs one call through the retry core and answers it. key names
// the request for replays.
func (h *Handler) serveCall(w http.ResponseWriter, r *http.Request, in *inbound, key [32]byte) {
	id := newID()
	hd := w.Header()
	hd.Set(HeaderRequestID, id)
	if len(in.ignored) > 0 {
		hd.Set(HeaderIgnored, strings.Join(in.ignored, ","))
	}
	rt, e := h.route(in.model)
	if e != nil {
		writeError(w, e, in.dialect, id)
		return
	}
	if rt.MaxInFlight > 0 {
		if !h.enterAlias(rt) {
			writeError(w, busy(fmt.Sprintf("%d calls of alias %q are in flight, its max_in_flight", rt.MaxInFlight, rt.Name)), in.dialect, id)
			return
		}
		defer h.leaveAlias(rt)
	}
	// A streamed answer's text is the caller's as soon as it is written: a
	// retry's answer must not be glued onto it. Unstreamed (or buffered),
	// nothing reached the caller before the call ends, so everything may
	// be retried.
	live := in.stream && !buffered(r, rt)
	if in.stream && !live {
		hd.Set(HeaderBuffered, "true")
	}
	call := h.callOf(r, in, rt, id, live)
	call.Chain = withCallerTier(call.Chain, in.tier)
	out := newWriter(in, id, h.o.Now())
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	if g := h.aliasGates[rt.Name]; g != nil {
		// Past the alias's ceiling the call waits, within its deadline
		// (the wait counts toward it, and is recorded as paced).
		wctx, wcancel := context.WithTimeout(ctx, call.Policy.WithDefaults().Deadline)
		waited, err := g.enter(wctx, h.o.Now)
		wcancel()
		if err != nil {
			if r.Context().Err() == nil {
				writeError(w, busy(fmt.Sprintf("no slot under alias %q's max_concurrency (%d) within the call's deadline (%s)",
					rt.Name, rt.MaxConcurrency, call.Policy.WithDefaults().Deadline)), in.dialect, id)
			}
			return
		}
		defer g.leave()
		if waited > 0 {
			call.Queued = waited
			call.Policy.Deadline = max(call.Policy.WithDefaults().Deadline-waited, time.Millisecond)
		}
	}
	cs := &callState{w: w, out: out, stream: live, flow: h.flow, maxAnswer: h.o.MaxAnswer, whole: !live, ctx: ctx, cancel: cancel}
	cs.gone = func(err error) {
		if h.o.Logf != nil {
			h.o.Logf("proxy: call %s: %s; its upstream request is closed", id, err)
		}
		cancel(err)
	}
	defer cs.dropWhole()
	if live {
		for _, t := range rt.Chain[1:] {
			cs.keep = cs.keep || acceptsPrefill(t)
		}
	}
	defer func() {
		if cs.sse != nil {
			cs.sse.close() // whatever happened, its goroutine ends with the handler
		}
	}()
	eng := h.o.Engine
	res := h.run(ctx, eng, call, cs)
	for cs.started && cs.keep && res.Outcome != retry.OutcomeOK && res.Outcome != retry.OutcomeCancelled && ctx.Err() == nil {
		next, ok := continuation(call, in, cs, res)
		if !ok {
			break
		}
		if h.o.Logf != nil {
			h.o.Logf("proxy: call %s broke after %d bytes of text reached the caller; continuing on %s with them as a prefill (call %s)",
				call.ID, len(cs.sent), next.Chain[0], next.ID)
		}
		call = next
		res = h.run(ctx, eng, call, cs)
	}
	if cs.held > 0 && h.o.Logf != nil {
		h.o.Logf("proxy: call %s: its held answer waited %s for room under the proxy's cap on queued answer bytes (%d, max_queued)",
			id, cs.held.Round(time.Millisecond), h.o.MaxQueued)
	}
	if cs.tooBig != nil && r.Context().Err() == nil {
		hd.Set(HeaderAttempts, strconv.Itoa(len(res.Attempts)))
		setDeadline(http.NewResponseController(w), h.flow.timeout)
		writeError(w, cs.tooBig, in.dialect, id)
		return
	}
	if ctx.Err() != nil {
		return // the caller left, or stopped reading; nobody to answer
	}
	if cs.whole && len(cs.text) >= len(res.Text) {
		res.Text = string(cs.text) // the whole answer: the result keeps only its first stream.Options.MaxPartialText bytes
	}
	if !cs.started { // a started stream's flusher sets its own
		setDeadline(http.NewResponseController(w), h.flow.timeout)
	}
	h.answer(w, in, key, id, res, cs, out)
}

// callOf is the call a request makes on alias rt: the alias's policy (no
// retry after text when the answer streams live) and the first max tokens
// the request, the alias or the config gives.
func (h *Handler) callOf(r *http.Request, in *inbound, rt Alias, id string, live bool) retry.Call {
	pol := h.cfg.RoutePolicy(rt, h.o.DefaultPolicy)
	pol.NoRetryAfterText = live
	maxTokens := in.maxTokens
	if maxTokens == 0 {
		maxTokens = rt.MaxTokens
	}
	if maxTokens == 0 {
		maxTokens = h.cfg.MaxTokens
	}
	if maxTokens == 0 {
		maxTokens = stream.DefaultMaxTokens
	}
	return retry.Call{
		ID: id, Chain: rt.Chain, Prompt: in.lastUser(), MaxTokens: maxTokens, Policy: pol,
		System: in.system, Messages: in.messages, Sampling: in.sampling,
		Route: in.model, Client: r.UserAgent(),
	}
}

// newWriter is the answer's writer in the request's dialect.
func newWriter(in *inbound, id string, now time.Time) writer {
	switch in.dialect {
	case stream.DialectAnthropic:
		return newAnthropicWriter(id)
	case stream.DialectResponses:
		return newResponsesWriter(id, now)
	}
	return newOpenAIWriter(id, now, in.includeUsage)
}

// answer answers the call's result: it ends a started stream (cleanly or
// as broken), writes a whole answer, or writes the error (kept for a
// replay of the request named key, unless a quota stop answers it).
func (h *Handler) answer(w http.ResponseWriter, in *inbound, key [32]byte, id string, res retry.Result, cs *callState, out writer) {
	hd := w.Header()
	switch {
	case cs.started && res.Outcome == retry.OutcomeOK:
		model := servedModel(res, cs.target)
		cs.sse.finish(func(b []byte) []byte { return out.end(b, res, model) })
	case cs.started:
		ae := brokenStream(res, in.dialect, h.o.Now())
		cs.sse.finish(func(b []byte) []byte { return out.fail(b, ae) })
	case res.Outcome == retry.OutcomeOK:
		hd.Set(HeaderAttempts, strconv.Itoa(len(res.Attempts)))
		model := servedModel(res, cs.target)
		served := *res.ServedBy
		served.Model = model
		hd.Set(HeaderServedBy, served.String()) // with the account: openai@team/gpt-5.4
		if in.stream {
			if aw, ok := out.(*anthropicWriter); ok && res.Usage != nil {
				aw.inputTokens = res.Usage.InputTokens // known before the stream is written
			}
			startSSE(w)
			b := out.start(nil, model)
			if res.Text != "" {
				b = out.text(b, res.Text)
			}
			writeFlush(w, out.end(b, res, model))
		} else {
			out.message(w, res, model)
		}
	default:
		hd.Set(HeaderAttempts, strconv.Itoa(len(res.Attempts)))
		ae := h.unknownModel(res, in.dialect, h.o.Now())
		if ae == nil {
			ae = callError(res, in.dialect, h.o.Now())
		}
		if res.Outcome != retry.OutcomeStopped { // a quota stop's cooldown already answers a repeat without a request
			h.replay.put(key, ae, in.dialect, id, h.o.Now())
		}
		writeError(w, ae, in.dialect, id)
	}
}

// run runs one call of a request with its sinks (the caller's stream, the
// feed, the history), logs it and makes its record durable.
func (h *Handler) run(ctx context.Context, eng *retry.Engine, call retry.Call, cs *callState) retry.Result {
	sink := cs.event
	if h.o.Events != nil {
		own, events := sink, h.o.Events
		sink = func(ev retry.Event) {
			events(call, ev)
			own(ev)
		}
	}
	switch {
	case h.o.RecordContext != nil:
		sink = h.o.RecordContext(ctx, call, sink)
	case h.o.Record != nil:
		sink = h.o.Record(call, sink)
	}
	// The upstream's reads mark where the deltas of one read end: they go
	// to the caller as one write (callState.beforeRead).
	res := eng.Run(stream.WithReadHook(ctx, cs.beforeRead), call, sink)
	h.logCall(call, res)
	h.commit(ctx, call.ID)
	return res
}

// continuation is the call that continues a stream broken after its text
// reached the caller: the rest of the chain after the target that broke,
// those that accept a prefill, with the text sent as the assistant's
// prefill (after the caller's own, when its last turn was one), and what
// is left of the attempt budget and of the deadline. False when there is
// none.
func continuation(prev retry.Call, in *inbound, cs *callState, res retry.Result) (retry.Call, bool) {
	i := slices.Index(prev.Chain, cs.target)
	if i < 0 {
		return retry.Call{}, false
	}
	var chain []stream.Target
	for _, t := range prev.Chain[i+1:] {
		if acceptsPrefill(t) {
			chain = append(chain, t)
		}
	}
	left := prev.Policy.MaxAttempts - len(res.Attempts)
	leftTime := prev.Policy.Deadline - (res.Ended.Sub(res.Started) - res.SinkTime) // the caller's reading does not count
	if len(chain) == 0 || left < 1 || leftTime <= 0 || len(cs.sent) == 0 {
		return retry.Call{}, false
	}
	msgs := slices.Clone(in.messages)
	prefill := string(cs.sent)
	if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
		prefill = msgs[n-1].Content + prefill
		msgs = msgs[:n-1]
	}
	trimmed := strings.TrimRight(prefill, " \t\r\n")
	cs.trim = len(prefill) - len(trimmed)
	if trimmed == "" {
		return retry.Call{}, false
	}
	msgs = append(msgs, stream.Message{Role: "assistant", Content: trimmed})
	next := prev
	next.ID = newID()
	next.Chain = chain
	next.Messages = msgs
	next.Policy.MaxAttempts = left
	next.Policy.Deadline = leftTime
	return next, true
}

// commit makes the call's record durable before its answer completes.
func (h *Handler) commit(ctx context.Context, id string) {
	if h.o.Commit == nil {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if err := h.o.Commit(cctx, id); err != nil && h.o.Logf != nil {
		h.o.Logf("proxy: call %s: the history did not record it: %s", id, sanitize.Text(sanitize.Secrets(err.Error())))
	}
}

// brokenStream is the error event for a call whose stream to the caller
// began and did not end well.
func brokenStream(res retry.Result, caller stream.Dialect, now time.Time) *apiError {
	if res.Err == nil || res.Outcome == retry.OutcomeCancelled {
		return callError(res, caller, now)
	}
	ae := fromStream(res.Err, caller, upstreamOf(res))
	ae.message = "limitscope: the stream broke after it began and cannot be retried without repeating text: " + ae.message
	return ae
}

// servedModel is the model that answered, as its provider named it.
func servedModel(res retry.Result, fallback stream.Target) string {
	if res.ServedBy != nil && res.ServedBy.Model != "" {
		return res.ServedBy.Model
	}
	return fallback.Model
}

func (h *Handler) logCall(c retry.Call, res retry.Result) {
	if h.o.Logf == nil {
		return
	}
	served := "-"
	if res.ServedBy != nil {
		served = res.ServedBy.String()
	}
	h.o.Logf("proxy: call %s model=%q client=%q outcome=%s served_by=%s attempts=%d took=%s",
		c.ID, sanitize.Text(sanitize.Secrets(c.Route)), sanitize.Text(sanitize.Secrets(c.Client)), res.Outcome, served, len(res.Attempts), res.Ended.Sub(res.Started).Round(time.Millisecond))
}
