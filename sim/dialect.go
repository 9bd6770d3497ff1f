package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// dialect is one wire dialect the simulator speaks (OpenAI-compatible,
// Anthropic, Gemini): everything about a request and its answer that
// differs by dialect. The limits, faults and decisions around it are
// shared (server.go, limits.go, faults.go). Each dialect keeps its own wire
// code on purpose: the simulator is the independent oracle that catches the
// stream package's mistakes, so it never borrows stream's encoders.
type dialect interface {
	// route checks the path and method below the provider's prefix, filling
	// what the path carries (Gemini: the model and the method). A false
	// return comes with the provider's 404.
	route(p *provider, r *http.Request, sub string, req *simRequest) (reply, bool)
	// auth checks the key in the provider's documented forms; a false
	// return comes with the provider's own auth (or version) error.
	auth(p *provider, r *http.Request, requestID string) (reply, bool)
	// parse reads the body into req; a false return comes with the
	// provider's validation error.
	parse(p *provider, body []byte, r *http.Request, req *simRequest, requestID string) (reply, bool)
	// stream writes a streamed answer, broken as the plan says.
	stream(s *Server, ctx context.Context, o *sseOut, a *answerPlan)
	// answer is the plain JSON answer (no stream): content type and body.
	answer(a *answerPlan) (string, any)
	// errorReply is the provider's documented HTTP error for a failure kind.
	errorReply(e errorInfo) reply
	// midStreamAsHTTP is the HTTP error a non-streaming request gets where a
	// stream would have broken with a mid-stream error (same kind and code).
	midStreamAsHTTP(e errorInfo) reply
	// tooLarge is the answer to a body above the simulator's size limit.
	tooLarge(e errorInfo) reply
	// limitHeaders sets the provider's rate-limit headers from the state.
	limitHeaders(p *provider, v limitView, h http.Header)
	// modelNotFound is the provider's documented answer to a model outside
	// its catalogue (catalogue_wire.go), the simulator's hint appended.
	modelNotFound(p *provider, model, requestID string) reply
}

// provider is one simulated provider: its place under the root, its
// dialect, and the facts that differ between providers of one dialect.
// The table below is the only place provider names are compared.
type provider struct {
	name     string
	prefix   string // the real base URL's path, below /{name}
	d        dialect
	idHeader string                    // the request-id response header ("": none)
	newID    func(r *rand.Rand) string // a request id in the provider's shape
	// failuresCount: failed requests count against the per-minute requests
	// limit (OpenAI documents it).
	failuresCount bool
	// dayCountsFailures: every request counts against the per-day quota,
	// even a 503 (Gemini).
	dayCountsFailures bool
	// dayAtMidnight: the per-day limits reset at midnight Pacific (Gemini);
	// otherwise a day-long bucket (Groq's documented reset times).
	dayAtMidnight bool
	// tokensAtAdmission: the tokens-per-minute limit counts input plus
	// max_tokens when the request is admitted, and a request above the whole
	// limit is "Request too large" (OpenAI, Groq).
	tokensAtAdmission bool
	compat            *compat // OpenAI-compatible providers' data; nil for the others
	// limitHeaders: the answers carry rate-limit headers and a 429 a
	// Retry-After header (the answers' text says so only then).
	limitHeaders bool
	// tiers are the provider's service tiers (tiers.go).
	tiers simTiers
	// apis are the provider's other APIs, by their path below the prefix
	// (OpenAI's Responses API at /responses): the same account, limits and
	// faults, another wire dialect.
	apis map[string]dialect
	// limits are the provider's default limits, prices and pace in every
	// scenario: the per-minute and per-day limits as given (0: none), the
	// others where set (zero: defaultProvider's base values).
	limits providerConfig
	// profileModels: a model may be named by an inference profile's ARN or a
	// cross-Region profile ("us.", "eu.", ...), which stand for a catalogue
	// model (Bedrock).
	profileModels bool
	// sigV4Service is the service name SigV4 signatures must be scoped to
	// ("": the provider takes no SigV4).
	sigV4Service string
	// models are catalogue entries the row adds to models.go's catalogue
	// (at init): a provider new to the table brings its models here.
	models []ModelInfo
}

// dialectAt is the dialect that serves sub, the path below the prefix.
func (p *provider) dialectAt(sub string) dialect {
	if d, ok := p.apis[sub]; ok {
		return d
	}
	return p.d
}

// providers is the provider table, in display order; providerNames
// their names. Both are set once by init and never written after.
var (
	providers     []*provider
	providerNames []string
)

func init() {
	providers = providerTable()
	for _, p := range providers {
		providerNames = append(providerNames, p.name)
		if len(p.models) > 0 {
			catalogue[p.name] = append(catalogue[p.name], p.models...)
		}
	}
}

func providerTable() []*provider {
	return []*provider{
		{name: "openai", prefix: "/openai/v1", d: openAIDialect{}, idHeader: "x-request-id", newID: hexID, limitHeaders: true,
			failuresCount: true, tokensAtAdmission: true, compat: openAICompat, tiers: openAISimTiers,
			apis: map[string]dialect{"/responses": responsesDialect{}},
			// Continuous replenishment: x-ratelimit-reset-* is the time until
			// the limit is full again (about 120 ms after 1 of 500 RPM).
			limits: providerConfig{LimitKind: "bucket", RPM: 500, TPM: 200000, PriceIn: 0.25, PriceOut: 2, TokensPerSecond: 80, ContextWindow: 400000}},
		{name: "anthropic", prefix: "/anthropic", d: anthropicDialect{}, idHeader: "request-id", newID: anthropicID, limitHeaders: true, tiers: anthropicSimTiers,
			limits: providerConfig{LimitKind: "bucket", RPM: 50, ITPM: 30000, OTPM: 8000, PriceIn: 3, PriceOut: 15,
				FirstTokenDelay: 600 * time.Millisecond, ContextWindow: 200000}},
		{name: "gemini", prefix: "/gemini", d: geminiDialect{}, newID: hexID,
			dayCountsFailures: true, dayAtMidnight: true, tiers: geminiSimTiers,
			apis: map[string]dialect{"/v1beta/interactions": interactionsDialect{}, "/v1/interactions": interactionsDialect{}},
			limits: providerConfig{RPM: 10, TPM: 250000, RPD: 250, PriceIn: 0.3, PriceOut: 2.5, TokensPerSecond: 120,
				FirstTokenDelay: 500 * time.Millisecond, ContextWindow: 1048576}},
		{name: "groq", prefix: "/groq/openai/v1", d: openAIDialect{}, idHeader: "x-request-id", newID: groqID, limitHeaders: true,
			tokensAtAdmission: true, compat: groqCompat, tiers: groqSimTiers,
			limits: providerConfig{LimitKind: "bucket", RPM: 30, TPM: 12000, RPD: 14400, TPD: 500000, PriceIn: 0.59, PriceOut: 0.79,
				TokensPerSecond: 300, FirstTokenDelay: 150 * time.Millisecond, ContextWindow: 131072}},
		// DeepSeek documents no rate limit: under load it queues instead.
		{name: "deepseek", prefix: "/deepseek", d: openAIDialect{}, idHeader: "x-request-id", newID: hexID, compat: deepseekCompat,
			limits: providerConfig{PriceIn: 0.28, PriceOut: 0.42, TokensPerSecond: 40, FirstTokenDelay: 800 * time.Millisecond}},
		{name: "mistral", prefix: "/mistral/v1", d: openAIDialect{}, idHeader: "x-request-id", newID: hexID, compat: mistralCompat,
			limits: providerConfig{RPM: 60, TPM: 500000, PriceIn: 0.4, PriceOut: 2, TokensPerSecond: 70}},
		{name: "xai", prefix: "/xai/v1", d: openAIDialect{}, idHeader: "x-request-id", newID: hexID, compat: xaiCompat,
			limits: providerConfig{RPM: 60, TPM: 16000, PriceIn: 3, PriceOut: 15, ContextWindow: 256000}},
		// Bedrock: on-demand quotas per model and Region (requests and tokens
		// per minute, a fixed window), Claude Haiku's prices.
		{name: "bedrock", prefix: "/bedrock", d: bedrockDialect{}, idHeader: "x-amzn-RequestId", newID: uuidID,
			limits: providerConfig{RPM: 250, TPM: 400000, PriceIn: 1, PriceOut: 5, TokensPerSecond: 70,
				FirstTokenDelay: 500 * time.Millisecond, ContextWindow: 200000},
			profileModels: true, sigV4Service: "bedrock", tiers: bedrockSimTiers},
	}
}

// providerOf returns the named provider's row, or nil.
func providerOf(name string) *provider {
	for _, p := range providers {
		if p.name == name {
			return p
		}
	}
	return nil
}

func hexID(r *rand.Rand) string       { return "req_" + randChars(r, hexDigits, 32) }
func anthropicID(r *rand.Rand) string { return "req_011C" + randChars(r, base58, 20) }
func groqID(r *rand.Rand) string      { return "req_01" + randChars(r, lowerAlnum, 24) }

// simRequest is one request, as every dialect reduces it.
type simRequest struct {
	provider     string
	account      string // the key's account ("" = FakeKey's; see AccountKey)
	model        string
	stream       bool
	includeUsage bool   // OpenAI stream_options.include_usage
	geminiSSE    bool   // ?alt=sse on streamGenerateContent
	method       string // Gemini: generateContent or streamGenerateContent
	maxTokens    int    // 0: not given
	inputTokens  int
	prompt       string // all the text sent, for the answer and the request's fingerprint
	ixLegacy     bool   // Interactions: Api-Revision 2026-05-07, the legacy event names
	requestID    string // the id an answer given before the decision carries
	tier         string // the service tier asked for ("": none)
}

const maxRequestBody = 32 << 20

// serveProvider answers one request to a simulated provider: route, auth,
// parse (the dialect's), then the shared decision, then the dialect's
// answer or error.
func (s *Server) serveProvider(w http.ResponseWriter, r *http.Request, p *provider, sub string) {
	pd := p.dialectAt(sub)
	fallbackID := s.newID(p)
	req := &simRequest{provider: p.name, requestID: fallbackID}
	if !s.admit(w, r, p, pd, sub, req, fallbackID) {
		return
	}
	pieces, truncated := s.answerText(req)
	text := strings.Join(pieces, "")
	out := tokensOf(text)

	s.mu.Lock()
	d := s.decide(p, req, out)
	cfg := *s.state[p.name].cfg
	s.mu.Unlock()

	h := w.Header()
	for k, vs := range d.header {
		h[k] = vs
	}
	if p.idHeader != "" {
		h.Set(p.idHeader, d.requestID)
	}
	if d.reply != nil {
		rp := *d.reply
		if _, variant := p.apis[sub]; variant {
			// An API variant answers in its own envelope (the decision is
			// the provider's: one account).
			rp = pd.errorReply(d.info)
		}
		writeReply(w, rp)
		return
	}

	pace := s.pacingFor(&cfg, d)
	ctx := r.Context()
	switch {
	case d.kind == FaultReset:
		resetConn(w)
		return
	case d.kind == FaultHang && d.code != "stall":
		if s.hang(ctx) {
			resetConn(w) // the simulator is closing: drop the connection, never a fake 200
		}
		return
	}

	finish := "stop"
	if truncated {
		finish = "length"
	}
	a := &answerPlan{req: req, d: d, pieces: pieces, text: text, out: out, finish: finish, pace: pace,
		created: s.clock.Now(), ids: d.idSeed, cfg: &cfg, thinking: s.thinkingPieces(req)}
	if !req.stream {
		s.answerWhole(ctx, w, pd, a)
		return
	}
	o := newSSE(w)
	o.h2 = r.ProtoMajor == 2
	pd.stream(s, ctx, o, a)
}

// admit takes a request to provider p as far as the shared decision:
// route, auth, body, parse (pd's), and a model the simulator serves. It
// answers a request it refuses and says whether it goes on.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, p *provider, pd dialect, sub string, req *simRequest, fallbackID string) bool {
	send := func(rp reply) {
		if p.idHeader != "" {
			rp.header.Set(p.idHeader, fallbackID)
		}
		writeReply(w, rp)
	}
	if c, ok := pd.(catalogueAPI); ok {
		if rp, handled := c.catalogue(s, p, r, sub, req); handled {
			send(rp)
			return false
		}
	}
	if bad, ok := pd.route(p, r, sub, req); !ok {
		send(bad)
		return false
	}
	if bad, ok := pd.auth(p, r, fallbackID); !ok {
		send(bad)
		return false
	}
	req.account = requestAccount(r)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			send(pd.tooLarge(errorInfo{provider: p.name, model: req.model, requestID: fallbackID}))
		}
		return false
	}
	if bad, ok := pd.parse(p, body, r, req, fallbackID); !ok {
		send(bad)
		return false
	}
	if bad := admitTier(p, body, req); bad != nil {
		send(*bad)
		return false
	}
	if _, ok := s.model(p.name, req.model); !ok && req.model != "" {
		// Before any limit is spent or any stream starts, as the providers do.
		send(pd.modelNotFound(p, req.model, fallbackID))
		return false
	}
	return true
}

// answerWhole sends a's answer as one JSON document after its pace's
// time, or the fault a stands for (a mid-stream one as its HTTP error).
func (s *Server) answerWhole(ctx context.Context, w http.ResponseWriter, pd dialect, a *answerPlan) {
	if !a.pace.sleep(ctx, s.closed, a.pace.firstToken+a.pace.perToken*time.Duration(a.out)) {
		return
	}
	h, d := w.Header(), a.d
	switch d.kind {
	case FaultMidStream:
		// A plain JSON answer cannot break part-way: the failure a
		// stream would have carried comes as the HTTP error it stands for.
		rp := pd.midStreamAsHTTP(d.info)
		for k, vs := range rp.header {
			h[k] = vs
		}
		writeReply(w, rp)
		return
	case FaultCut:
		ct, body := pd.answer(a)
		cutJSON(w, ct, mustJSON(body), d.code)
		return
	case FaultHang:
		if s.hang(ctx) {
			resetConn(w)
		}
		return
	}
	ct, body := pd.answer(a)
	w.Header().Set("Content-Type", ct)
	writeReply(w, reply{status: http.StatusOK, header: http.Header{}, body: mustJSON(body)})
}

// newID makes a request id for an answer given before any decision.
func (s *Server) newID(p *provider) string {
	s.mu.Lock()
	seed := s.nextSeed()
	s.mu.Unlock()
	return p.newID(idRand(seed))
}

// notFound is the simulator's own 404 for a path outside every provider.
func notFound(path string) reply {
	return jsonReply(404, mustJSON(map[string]any{"error": map[string]any{
		"message": fmt.Sprintf("simulator: no provider at %q; providers are mounted at /%s", path, strings.Join(providerNames, ", /")),
		"type":    "not_found"}}))
}
