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
	"io"
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
	// Available reports whether a provider has a key; routes to others are
	// refused (or skipped in an alias's chain). Nil: every provider.
	Available func(provider string) bool
	// Events receives every event of every proxied call with the call, from
	// the handler's goroutines (concurrently across calls, in order within
	// one): the TUI's feed.
	Events func(c retry.Call, ev retry.Event)
	// Record wraps a call's sink so its events reach the history too (the
	// command's historyHook.sink).
	Record  func(c retry.Call, next func(retry.Event)) func(retry.Event)
	Now     func() time.Time                 // nil: time.Now
	Logf    func(format string, args ...any) // one line per call; nil: silent
	MaxBody int64                            // request body cap (0: DefaultMaxBody)
}

// Handler is the proxy, an http.Handler.
type Handler struct {
	o     Options
	cfg   *Config
	cools retry.Cooldowns
	mux   *http.ServeMux
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
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusNotFound, class: stream.ClassCaller, code: "not_found",
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
// token, then serves the endpoint.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d := callerDialect(r)
	if r.Header.Get("Origin") != "" {
		writeError(w, &apiError{status: http.StatusForbidden, class: stream.ClassCaller, code: "origin_refused",
			message: "limitscope proxy: requests from a web page (with an Origin header) are refused"}, d, "")
		return
	}
	if !h.hostAllowed(r.Host) {
		writeError(w, &apiError{status: http.StatusForbidden, class: stream.ClassCaller, code: "host_refused",
			message: "limitscope proxy: the Host header names another server (add it to allowed_hosts in the config if it is yours)"}, d, "")
		return
	}
	if !h.authorized(r) {
		e := &apiError{status: http.StatusUnauthorized, class: stream.ClassCaller, code: "invalid_api_key",
			message: "limitscope proxy: wrong or missing token; use the proxy's token as the API key (limitscope info shows it)"}
		if d == stream.DialectAnthropic {
			e.code = "authentication_error"
		}
		writeError(w, e, d, "")
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

// post serves a completion endpoint of one dialect.
func (h *Handler) post(d stream.Dialect, parse func([]byte) (*inbound, *apiError)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			writeError(w, &apiError{status: http.StatusMethodNotAllowed, class: stream.ClassCaller,
				message: "limitscope proxy: use POST"}, d, "")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.o.MaxBody))
		if err != nil {
			var mb *http.MaxBytesError
			if errors.As(err, &mb) {
				writeError(w, &apiError{status: http.StatusRequestEntityTooLarge, class: stream.ClassCaller, code: "request_too_large",
					message: fmt.Sprintf("limitscope proxy: the request body is over %d bytes", h.o.MaxBody)}, d, "")
				return
			}
			writeError(w, invalid("", "limitscope proxy: reading the request body: %v", err), d, "")
			return
		}
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
// already uses (claude-..., gpt-..., gemini-...), or "".
func inferProvider(model string) string {
	p, _ := stream.ProviderForModel(model) // the provider table's model-name prefixes
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
	midErr  *stream.Error // the error that ended a started stream
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
		cs.out.text(cs.w, ev.Text)
	}
}

// begin sends the headers and the stream's opening events.
func (cs *callState) begin() {
	h := cs.w.Header()
	h.Set(HeaderServedBy, cs.target.String())
	h.Set(HeaderAttempts, strconv.Itoa(cs.n))
	cs.out.start(cs.w, cs.target.Model)
	cs.started = true
}

// callDoer is the call's Doer: once text has reached the caller, a failed
// attempt ends the call (a retry's answer must not be glued onto what the
// caller already has), by cancelling the call before the engine decides.
type callDoer struct {
	retry.Doer
	cs     *callState
	cancel context.CancelFunc
}

// Do sends one attempt through the real Doer.
func (d *callDoer) Do(ctx context.Context, req stream.Request, onText func(string)) stream.Result {
	res := d.Doer.Do(ctx, req, onText)
	if res.Err != nil && d.cs.started && res.Err.Class != stream.ClassQuota {
		e := *res.Err
		d.cs.midErr = &e
		d.cancel()
	}
	return res
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
	pol := h.cfg.Policy
	if rt.Policy != nil {
		pol = *rt.Policy
	}
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
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	eng := &retry.Engine{Doer: &callDoer{Doer: h.o.Doer, cs: cs, cancel: cancel}, Clock: h.o.Clock,
		Cooldowns: h.cools, Pacer: h.o.Pacer}
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
	res := eng.Run(ctx, call, sink)
	h.logCall(call, res)
	if r.Context().Err() != nil {
		return // the caller left; nobody to answer
	}
	hd.Set(HeaderAttempts, strconv.Itoa(len(res.Attempts)))
	switch {
	case cs.started && res.Outcome == retry.OutcomeOK:
		cs.out.end(w, res, servedModel(res, cs.target))
	case cs.started:
		se := cs.midErr
		if se == nil {
			se = res.Err
		}
		var ae *apiError
		if se == nil || res.Outcome != retry.OutcomeCancelled {
			ae = callError(res, in.dialect, h.o.Now())
		} else {
			ae = fromStream(se, in.dialect)
			ae.message = "limitscope: the stream broke after it began and cannot be retried without repeating text: " + ae.message
		}
		cs.out.fail(w, ae)
	case res.Outcome == retry.OutcomeOK:
		model := servedModel(res, cs.target)
		hd.Set(HeaderServedBy, res.ServedBy.Provider+"/"+model)
		if in.stream {
			cs.out.start(w, model)
			if res.Text != "" {
				cs.out.text(w, res.Text)
			}
			cs.out.end(w, res, model)
		} else {
			cs.out.message(w, res, model)
		}
	default:
		writeError(w, callError(res, in.dialect, h.o.Now()), in.dialect, id)
	}
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
