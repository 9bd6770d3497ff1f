// Package proxy is limitscope's local OpenAI- and Anthropic-compatible
// endpoint. An application's SDK points at it (OPENAI_BASE_URL=
// http://127.0.0.1:4000/v1, ANTHROPIC_BASE_URL=http://127.0.0.1:4000) and
// every call goes through the retry core: the request is read from the
// caller's dialect, routed by its model (provider/model, or an alias with a
// fallback chain and policy), sent by the engine to whichever provider
// serves it, and the answer (text, usage, streaming included) or the error
// is written back in the caller's dialect.
//
// The proxy never parses a provider's wire format: the upstream side is
// retry -> stream. Callers present the proxy's token, never a provider key.
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
	"strconv"
	"strings"
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
)

// DefaultMaxBody bounds a request body.
const DefaultMaxBody = 32 << 20

// Options configure a Handler. Token and Doer are required.
type Options struct {
	Token     string          // what callers present as their API key
	Doer      retry.Doer      // sends attempts; normally a stream.Router
	Clock     retry.Clock     // nil: the wall clock
	Cooldowns retry.Cooldowns // nil: in memory, for the handler's life
	Pacer     retry.Pacing    // nil: no pacing (retry.NewPacer() is the in-memory one)
	Config    *Config         // nil: no aliases, default policy
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
	// Record wraps a call's sink so its events reach the history too (the
	// command's historyHook.sink).
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
	// BodyTimeout bounds reading one request body (0: DefaultBodyTimeout);
	// past it: 408 and the connection is closed.
	BodyTimeout time.Duration
	// Metrics, when set, serves GET /metrics (Prometheus), behind the token
	// like every other endpoint.
	Metrics http.Handler
}

// Handler is the proxy, an http.Handler.
type Handler struct {
	o     Options
	cfg   *Config
	cools retry.Cooldowns
	mux   *http.ServeMux
	lim   limits
}

// New returns the proxy's handler.
func New(o Options) (*Handler, error) {
	if strings.TrimSpace(o.Token) == "" {
		return nil, errors.New("proxy: no token")
	}
	if o.Doer == nil {
		return nil, errors.New("proxy: no Doer")
	}
	h := &Handler{o: o, cfg: o.Config, cools: o.Cooldowns}
	if h.cfg == nil {
		h.cfg = &Config{}
	}
	if h.cools == nil {
		h.cools = retry.NewMemoryCooldowns()
	}
	if h.o.Now == nil {
		h.o.Now = time.Now
	}
	if h.o.MaxBody <= 0 {
		h.o.MaxBody = DefaultMaxBody
	}
	if h.o.MaxInFlight <= 0 {
		h.o.MaxInFlight = DefaultMaxInFlight
	}
	if h.o.MaxBuffered <= 0 {
		h.o.MaxBuffered = DefaultMaxBuffered
	}
	h.o.MaxBuffered = max(h.o.MaxBuffered, h.o.MaxBody)
	if h.o.BodyTimeout <= 0 {
		h.o.BodyTimeout = DefaultBodyTimeout
	}
	h.lim = limits{maxCalls: int64(h.o.MaxInFlight), maxBytes: h.o.MaxBuffered}
	mux := http.NewServeMux()
	for _, p := range []string{"/v1/chat/completions", "/chat/completions"} {
		mux.HandleFunc(p, h.post(stream.DialectOpenAI, parseOpenAI))
	}
	for _, p := range []string{"/v1/messages", "/messages"} {
		mux.HandleFunc(p, h.post(stream.DialectAnthropic, parseAnthropic))
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
				" (served: POST /v1/chat/completions, POST /v1/messages, GET /v1/models)"}, callerDialect(r), "")
	})
	h.mux = mux
	return h, nil
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
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
		in, e := parse(body)
		if e != nil {
			writeError(w, e, d, "")
			return
		}
		h.serveCall(w, r, in)
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
	out     writer
	stream  bool
	target  stream.Target // of the attempt in flight
	n       int           // its number
	started bool          // the caller's stream began: nothing can be taken back
	sse     *sseOut       // the started stream's output
}

// event is the call's own sink: it streams text to the caller.
func (cs *callState) event(ev retry.Event) {
	switch ev.Kind {
	case retry.EventAttemptStart:
		if ev.Attempt != nil {
			cs.target, cs.n = ev.Attempt.Target, ev.Attempt.N
		}
	case retry.EventText:
		if !cs.stream {
			return
		}
		if !cs.started {
			cs.begin()
		}
		cs.sse.text(cs.out, ev.Text)
	}
}

// begin sends the headers and the stream's opening events (they go out
// with its first text).
func (cs *callState) begin() {
	h := cs.w.Header()
	h.Set(HeaderServedBy, cs.target.String())
	h.Set(HeaderAttempts, strconv.Itoa(cs.n))
	startSSE(cs.w)
	cs.sse = newSSEOut(cs.w)
	cs.sse.start(cs.out, cs.target.Model)
	cs.started = true
}

// serveCall runs one call through the retry core and answers it.
func (h *Handler) serveCall(w http.ResponseWriter, r *http.Request, in *inbound) {
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
	pol := h.cfg.RoutePolicy(rt, h.o.DefaultPolicy)
	// A streamed answer's text is the caller's as soon as it is written: a
	// retry's answer must not be glued onto it. Unstreamed, nothing reached
	// the caller before the call ends, so everything may be retried.
	pol.NoRetryAfterText = in.stream
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
	call := retry.Call{
		ID: id, Chain: rt.Chain, Prompt: in.lastUser(), MaxTokens: maxTokens, Policy: pol,
		System: in.system, Messages: in.messages, Sampling: in.sampling,
		Route: in.model, Client: r.UserAgent(),
	}
	now := h.o.Now()
	var out writer
	if in.dialect == stream.DialectAnthropic {
		out = newAnthropicWriter(id)
	} else {
		out = newOpenAIWriter(id, now, in.includeUsage)
	}
	cs := &callState{w: w, out: out, stream: in.stream}
	defer func() {
		if cs.sse != nil {
			cs.sse.close() // whatever happened, its goroutine ends with the handler
		}
	}()
	eng := &retry.Engine{Doer: h.o.Doer, Clock: h.o.Clock, Cooldowns: h.cools, Pacer: h.o.Pacer}
	sink := cs.event
	if h.o.Events != nil {
		own, events := sink, h.o.Events
		sink = func(ev retry.Event) {
			events(call, ev)
			own(ev)
		}
	}
	if h.o.Record != nil {
		sink = h.o.Record(call, sink)
	}
	res := eng.Run(r.Context(), call, sink)
	h.logCall(call, res)
	h.commit(r.Context(), id)
	if r.Context().Err() != nil {
		return // the caller left; nobody to answer
	}
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
		hd.Set(HeaderServedBy, res.ServedBy.Provider+"/"+model)
		if in.stream {
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
		writeError(w, callError(res, in.dialect, h.o.Now()), in.dialect, id)
	}
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
	ae := fromStream(res.Err, caller)
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
