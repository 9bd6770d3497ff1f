package sim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// simRequest is one request, as every dialect reduces it.
type simRequest struct {
	provider     string
	model        string
	stream       bool
	includeUsage bool // OpenAI stream_options.include_usage
	geminiSSE    bool // ?alt=sse on streamGenerateContent
	maxTokens    int  // 0: not given
	inputTokens  int
	prompt       string // all the text sent, for the answer's seed
}

const maxRequestBody = 32 << 20

// serveProvider answers one request to a simulated provider.
func (s *Server) serveProvider(w http.ResponseWriter, r *http.Request, provider, sub string) {
	req := &simRequest{provider: provider}
	fallbackID := s.newID(provider)
	idHeader := "x-request-id"
	switch provider {
	case "anthropic":
		idHeader = "request-id"
	case "gemini":
		idHeader = "" // Gemini sends no request-id header
	}
	send := func(rp reply) {
		if idHeader != "" {
			rp.header.Set(idHeader, fallbackID)
		}
		writeReply(w, rp)
	}

	// Route: the real API's paths under the provider's prefix.
	var geminiMethod string
	switch provider {
	case "anthropic":
		if sub != "/v1/messages" {
			send(notFoundReply(provider, sub, fallbackID))
			return
		}
	case "gemini":
		m, method, ok := geminiPath(sub)
		if !ok {
			send(notFoundReply(provider, sub, fallbackID))
			return
		}
		req.model, geminiMethod = m, method
	default:
		if sub != openAIPath(provider) && !(provider == "deepseek" && sub == "/v1/chat/completions") {
			send(notFoundReply(provider, sub, fallbackID))
			return
		}
	}
	if r.Method != http.MethodPost {
		send(notFoundReply(provider, r.Method+" "+sub, fallbackID))
		return
	}

	// Authenticate as the real API does.
	key, given := apiKey(provider, r)
	if key != FakeKey {
		send(authReply(provider, given, fallbackID))
		return
	}
	if provider == "anthropic" && r.Header.Get("anthropic-version") == "" {
		send(invalidReply(provider, "anthropic-version: header is required", "", fallbackID))
		return
	}

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			send(tooLargeReply(errorInfo{provider: provider, model: req.model, requestID: fallbackID}))
		}
		return
	}
	var bad reply
	var ok bool
	switch provider {
	case "anthropic":
		bad, ok = parseAnthropic(body, req, fallbackID)
	case "gemini":
		bad, ok = parseGemini(body, req, geminiMethod, r.URL.Query().Get("alt") == "sse")
	default:
		bad, ok = parseOpenAI(body, req)
	}
	if !ok {
		send(bad)
		return
	}

	pieces, truncated := answer(s.opts.Seed, req.model, req.prompt, req.maxTokens)
	text := strings.Join(pieces, "")
	out := tokensOf(text)

	s.mu.Lock()
	d := s.decide(req, out)
	cfg := *s.state[provider].cfg
	s.mu.Unlock()

	h := w.Header()
	for k, vs := range d.header {
		h[k] = vs
	}
	if idHeader != "" {
		h.Set(idHeader, d.requestID)
	}
	if provider == "openai" {
		h.Set("openai-version", "2020-10-01")
		h.Set("openai-processing-ms", strconv.Itoa(50+int(d.idSeed%400)))
	}
	if d.reply != nil {
		rp := *d.reply
		if provider == "anthropic" && !rp.noRetry && (rp.status == 429 || rp.status >= 500) {
			rp.header.Set("x-should-retry", "true")
		}
		writeReply(w, rp)
		return
	}

	pace := s.pacing(&cfg)
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
		created: s.clock.Now(), ids: d.idSeed}
	if !req.stream {
		if !pace.sleep(ctx, s.closed, pace.firstToken+pace.perToken*time.Duration(out)) {
			return
		}
		switch d.kind {
		case FaultCut, FaultMidStream, FaultHang:
			// A plain JSON answer cannot break part-way: drop the connection.
			resetConn(w)
			return
		}
		writeJSONAnswer(w, a)
		return
	}
	o := newSSE(w)
	switch provider {
	case "anthropic":
		s.streamAnthropic(ctx, o, a)
	case "gemini":
		if !req.geminiSSE {
			s.streamGeminiArray(ctx, o, a)
		} else {
			s.streamGemini(ctx, o, a)
		}
	default:
		s.streamOpenAI(ctx, o, a, &cfg)
	}
}

// newID makes a request id for an answer given before any decision.
func (s *Server) newID(provider string) string {
	s.mu.Lock()
	seed := s.rng.Uint64()
	s.mu.Unlock()
	return requestID(provider, seed)
}

func openAIPath(provider string) string {
	switch provider {
	case "groq":
		return "/openai/v1/chat/completions"
	case "deepseek":
		return "/chat/completions"
	}
	return "/v1/chat/completions"
}

// geminiPath parses /v1beta/models/{model}:{method}.
func geminiPath(sub string) (model, method string, ok bool) {
	rest, found := strings.CutPrefix(sub, "/v1beta/models/")
	if !found {
		if rest, found = strings.CutPrefix(sub, "/v1/models/"); !found {
			return "", "", false
		}
	}
	model, method, ok = strings.Cut(rest, ":")
	if !ok || model == "" || (method != "streamGenerateContent" && method != "generateContent") {
		return "", "", false
	}
	return model, method, true
}

// apiKey returns the key the provider's auth scheme carries, and whether
// one was given at all.
func apiKey(provider string, r *http.Request) (string, bool) {
	switch provider {
	case "anthropic":
		k := r.Header.Get("x-api-key")
		return k, k != ""
	case "gemini":
		if k := r.Header.Get("x-goog-api-key"); k != "" {
			return k, true
		}
		k := r.URL.Query().Get("key")
		return k, k != ""
	}
	a := r.Header.Get("Authorization")
	if a == "" {
		return "", false
	}
	scheme, k, _ := strings.Cut(a, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(k), true
}

// ---- request parsing ------------------------------------------------------

type openAIMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// contentText reads a message content: a string, or an array of parts
// with "text" fields.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return ""
}

func parseOpenAI(body []byte, req *simRequest) (reply, bool) {
	var in struct {
		Model         string          `json:"model"`
		Messages      []openAIMessage `json:"messages"`
		Stream        *bool           `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		MaxTokens           *int `json:"max_tokens"`
		MaxCompletionTokens *int `json:"max_completion_tokens"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return invalidReply(req.provider, "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The API expects a JSON payload, but what was sent was not valid JSON.)", "", ""), false
	}
	if req.provider == "mistral" {
		if bad, ok := mistralExtra(body); !ok {
			return bad, false
		}
	}
	if in.Model == "" {
		return invalidReply(req.provider, "you must provide a model parameter", "", ""), false
	}
	if len(in.Messages) == 0 {
		return invalidReply(req.provider, "Missing required parameter: 'messages'.", "messages", ""), false
	}
	req.model = in.Model
	req.stream = in.Stream != nil && *in.Stream
	req.includeUsage = in.StreamOptions != nil && in.StreamOptions.IncludeUsage
	for _, p := range []*int{in.MaxCompletionTokens, in.MaxTokens} {
		if p != nil {
			if *p < 1 {
				return invalidReply(req.provider, "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got "+strconv.Itoa(*p)+" instead.", "max_tokens", ""), false
			}
			if req.maxTokens == 0 {
				req.maxTokens = *p
			}
		}
	}
	var b strings.Builder
	for _, m := range in.Messages {
		t := contentText(m.Content)
		b.WriteString(t)
		b.WriteByte('\n')
		req.inputTokens += tokensOf(t) + 4
	}
	req.prompt = b.String()
	return reply{}, true
}

// mistralForbidden are OpenAI parameters Mistral's validation rejects with
// 422 extra_forbidden (seen in captured errors: stream_options,
// max_completion_tokens, store).
var mistralForbidden = []string{"max_completion_tokens", "store", "stream_options"}

// mistralExtra is Mistral's 422 for a forbidden top-level field.
func mistralExtra(body []byte) (reply, bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return reply{}, true
	}
	var detail []any
	for _, k := range mistralForbidden {
		if v, ok := top[k]; ok {
			var in any
			_ = json.Unmarshal(v, &in)
			detail = append(detail, obj{"type", "extra_forbidden", "loc", []any{"body", k}, "msg", "Extra inputs are not permitted", "input", in})
		}
	}
	if detail == nil {
		return reply{}, true
	}
	return jsonReply(422, mustJSON(obj{"object", "error", "message", obj{"detail", detail},
		"type", "invalid_request_error", "param", nil, "code", nil})), false
}

func parseAnthropic(body []byte, req *simRequest, requestID string) (reply, bool) {
	var in struct {
		Model     string          `json:"model"`
		Messages  []openAIMessage `json:"messages"`
		System    json.RawMessage `json:"system"`
		MaxTokens *int            `json:"max_tokens"`
		Stream    bool            `json:"stream"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return invalidReply("anthropic", "There was an issue with your request body: it is not valid JSON.", "", requestID), false
	}
	switch {
	case in.MaxTokens == nil:
		return invalidReply("anthropic", "max_tokens: Field required", "", requestID), false
	case *in.MaxTokens < 1:
		return invalidReply("anthropic", "max_tokens: Input should be greater than or equal to 1", "", requestID), false
	case in.Model == "":
		return invalidReply("anthropic", "model: Field required", "", requestID), false
	case in.Messages == nil:
		return invalidReply("anthropic", "messages: Field required", "", requestID), false
	case len(in.Messages) == 0:
		return invalidReply("anthropic", "messages: at least one message is required", "", requestID), false
	}
	req.model, req.stream, req.maxTokens = in.Model, in.Stream, *in.MaxTokens
	sys := contentText(in.System)
	var b strings.Builder
	b.WriteString(sys)
	req.inputTokens = tokensOf(sys) + 3
	for _, m := range in.Messages {
		t := contentText(m.Content)
		b.WriteString(t)
		b.WriteByte('\n')
		req.inputTokens += tokensOf(t) + 4
	}
	req.prompt = b.String()
	return reply{}, true
}

func parseGemini(body []byte, req *simRequest, method string, sse bool) (reply, bool) {
	type part struct {
		Text string `json:"text"`
	}
	type content struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	}
	var in struct {
		Contents          []content `json:"contents"`
		SystemInstruction *content  `json:"systemInstruction"`
		GenerationConfig  *struct {
			MaxOutputTokens *int `json:"maxOutputTokens"`
		} `json:"generationConfig"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return invalidReply("gemini", "Invalid JSON payload received. Unexpected token.", "", ""), false
	}
	if len(in.Contents) == 0 {
		return invalidReply("gemini", "* GenerateContentRequest.contents: contents is not specified\n", "", ""), false
	}
	req.stream = method == "streamGenerateContent"
	req.geminiSSE = sse
	if g := in.GenerationConfig; g != nil && g.MaxOutputTokens != nil && *g.MaxOutputTokens > 0 {
		req.maxTokens = *g.MaxOutputTokens
	}
	var b strings.Builder
	all := in.Contents
	if in.SystemInstruction != nil {
		all = append([]content{*in.SystemInstruction}, all...)
	}
	for _, c := range all {
		for _, p := range c.Parts {
			b.WriteString(p.Text)
			req.inputTokens += tokensOf(p.Text)
		}
		b.WriteByte('\n')
	}
	if req.inputTokens == 0 {
		req.inputTokens = 1
	}
	req.prompt = b.String()
	return reply{}, true
}

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
