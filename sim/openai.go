package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// openAIDialect is Chat Completions as OpenAI and the OpenAI-compatible
// providers speak it. What differs between them is data: their compat row.
type openAIDialect struct{}

// ---- route, auth, parse -------------------------------------------------

func (openAIDialect) route(p *provider, r *http.Request, sub string, _ *simRequest) (reply, bool) {
	below := strings.TrimPrefix(r.URL.Path, "/"+p.name)
	for _, path := range p.compat.paths {
		if sub == path {
			if r.Method != http.MethodPost {
				return p.compat.notFoundReply(r.Method, below), false
			}
			return reply{}, true
		}
	}
	return p.compat.notFoundReply(r.Method, below), false
}

// bearer reads "Authorization: Bearer KEY": the key, and whether an
// Authorization header was given at all.
func bearer(r *http.Request) (string, bool) {
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

func (openAIDialect) auth(p *provider, r *http.Request, requestID string) (reply, bool) {
	key, given := bearer(r)
	if !validKey(key) {
		return p.compat.authReply(given, requestID), false
	}
	return reply{}, true
}

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

func (d openAIDialect) invalid(p *provider, message, param string) reply {
	c := p.compat
	if !c.invalidCodes {
		return jsonReply(400, c.body(message, "invalid_request_error", nil))
	}
	var pp any
	if param != "" {
		pp = param
	}
	code := any(nil)
	if strings.HasPrefix(message, "Missing required parameter") {
		code = "missing_required_parameter"
	}
	return jsonReply(400, nestedBody(message, "invalid_request_error", pp, code))
}

func (d openAIDialect) parse(p *provider, body []byte, _ *http.Request, req *simRequest, _ string) (reply, bool) {
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
		return d.invalid(p, "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The API expects a JSON payload, but what was sent was not valid JSON.)", ""), false
	}
	if len(p.compat.forbidden) > 0 {
		if bad, ok := extraForbidden(body, p.compat.forbidden); !ok {
			return bad, false
		}
	}
	if in.Model == "" {
		return d.invalid(p, "you must provide a model parameter", ""), false
	}
	if len(in.Messages) == 0 {
		return d.invalid(p, "Missing required parameter: 'messages'.", "messages"), false
	}
	req.model = in.Model
	req.stream = in.Stream != nil && *in.Stream
	req.includeUsage = in.StreamOptions != nil && in.StreamOptions.IncludeUsage
	for _, mt := range []*int{in.MaxCompletionTokens, in.MaxTokens} {
		if mt != nil {
			if *mt < 1 {
				return d.invalid(p, "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got "+strconv.Itoa(*mt)+" instead.", "max_tokens"), false
			}
			if req.maxTokens == 0 {
				req.maxTokens = *mt
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

// extraForbidden is Mistral's 422 for a forbidden top-level field (seen in
// captured errors: stream_options, max_completion_tokens, store).
func extraForbidden(body []byte, forbidden []string) (reply, bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return reply{}, true
	}
	var detail []any
	for _, k := range forbidden {
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

// ---- answers --------------------------------------------------------------

type oaDelta struct {
	Role             string  `json:"role,omitempty"`
	Content          *string `json:"content,omitempty"`
	ReasoningContent *string `json:"reasoning_content,omitempty"` // DeepSeek, xAI: a thinking phase
	Reasoning        *string `json:"reasoning,omitempty"`         // Groq: a thinking phase
}

type oaChoice struct {
	Index        int       `json:"index"`
	Delta        oaDelta   `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"` // always null here
	FinishReason *string   `json:"finish_reason"`
}

type oaChunk struct {
	ID                string     `json:"id"`
	Object            string     `json:"object"`
	Created           int64      `json:"created"`
	Model             string     `json:"model"`
	SystemFingerprint string     `json:"system_fingerprint,omitempty"`
	ServiceTier       string     `json:"service_tier,omitempty"`
	Choices           []oaChoice `json:"choices"`
	// Usage is omitted when nil; null when it holds a nil pointer (every
	// chunk of a stream that asked for usage but the last). Not a
	// json.RawMessage: encoding/json calls and compacts a Marshaler per
	// chunk, which cost a proxied stream (that asks for usage) about a
	// fifth more of the simulator's CPU.
	Usage any `json:"usage,omitempty"`
	XGroq any `json:"x_groq,omitempty"`
}

// usage is the answer's usage object, with the details the provider sends.
func (a *answerPlan) openAIUsage(c *compat) obj {
	out := a.out + a.thinkTokens() // completion tokens include the reasoning
	u := obj{"prompt_tokens", a.req.inputTokens, "completion_tokens", out, "total_tokens", a.req.inputTokens + out}
	if c.usageDetails {
		u = append(u, "prompt_tokens_details", obj{"cached_tokens", 0, "audio_tokens", 0},
			"completion_tokens_details", obj{"reasoning_tokens", a.thinkTokens(), "audio_tokens", 0,
				"accepted_prediction_tokens", 0, "rejected_prediction_tokens", 0})
	}
	return u
}

func (a *answerPlan) fingerprint() string { return "fp_" + a.id("", hexDigits, 10) }

func (openAIDialect) answer(a *answerPlan) (string, any) {
	c := providerOf(a.req.provider).compat
	body := obj{"id", a.id("chatcmpl-", alnum, 29), "object", "chat.completion", "created", a.created.Unix(),
		"model", a.req.model, "choices", []any{obj{"index", 0,
			"message", obj{"role", "assistant", "content", a.text, "refusal", nil, "annotations", []any{}},
			"logprobs", nil, "finish_reason", a.finish}},
		"usage", a.openAIUsage(c)}
	if c.serviceTier {
		body = append(body, "service_tier", a.servedOr("default"))
	}
	if c.fingerprint {
		body = append(body, "system_fingerprint", a.fingerprint())
	}
	return "application/json", body
}

func (openAIDialect) stream(s *Server, ctx context.Context, o *sseOut, a *answerPlan) {
	c := providerOf(a.req.provider).compat
	chunk := oaChunk{ID: a.id("chatcmpl-", alnum, 29), Object: "chat.completion.chunk", Created: a.created.Unix(),
		Model: a.req.model}
	if c.fingerprint {
		chunk.SystemFingerprint = a.fingerprint()
	}
	if c.serviceTier && a.req.tier != "" {
		// Every chunk names the tier that serves it (the usage chunk
		// always does).
		chunk.ServiceTier = a.servedOr("default")
	}
	if a.req.includeUsage {
		chunk.Usage = (*struct{})(nil) // null
	}
	usage := a.openAIUsage(c)
	o.start("text/event-stream; charset=utf-8")
	if !s.queue(ctx, o, a.pace) {
		return
	}
	empty := ""
	first := chunk
	first.Choices = []oaChoice{{Delta: oaDelta{Role: "assistant", Content: &empty}}}
	if c.xGroq {
		first.XGroq = obj{"id", a.d.requestID}
	}
	o.data(first)
	if !a.pace.sleep(ctx, s.closed, a.pace.firstToken) {
		return
	}
	var emitThought func(string)
	if c.reasoning != "" {
		emitThought = func(p string) {
			ch := chunk
			d := oaDelta{ReasoningContent: &p}
			if c.reasoning == "reasoning" {
				d = oaDelta{Reasoning: &p}
			}
			ch.Choices = []oaChoice{{Delta: d}}
			o.data(ch)
		}
	}
	if !s.think(ctx, o, a, emitThought) {
		return
	}
	pieces, _ := a.upToBreak(a.pieces)
	ok := s.paced(ctx, o, a, pieces, func(p string) {
		c := chunk
		c.Choices = []oaChoice{{Delta: oaDelta{Content: &p}}}
		o.data(c)
	})
	if !ok {
		return
	}
	if s.broke(ctx, o, a) {
		if a.d.kind == FaultMidStream {
			msg, typ, code := "Our servers are currently overloaded. Please try again later.", "service_unavailable_error", "server_is_overloaded"
			if a.d.code == "server_error" {
				msg, typ, code = "The server had an error while processing your request. Sorry about that!", "server_error", "server_error"
			}
			o.data(obj{"error", obj{"message", msg, "type", typ, "param", nil, "code", code}})
		}
		return
	}
	o.ending()
	fin := a.finish
	last := chunk
	last.Choices = []oaChoice{{Delta: oaDelta{}, FinishReason: &fin}}
	if c.usageOnFinish {
		last.Usage = usage
	}
	o.data(last)
	if a.req.includeUsage && !c.usageOnFinish {
		u := obj{"id", chunk.ID, "object", chunk.Object, "created", chunk.Created, "model", chunk.Model}
		if c.serviceTier {
			u = append(u, "service_tier", a.servedOr("default"))
		}
		if chunk.SystemFingerprint != "" {
			u = append(u, "system_fingerprint", chunk.SystemFingerprint)
		}
		u = append(u, "choices", []any{}, "usage", usage)
		o.data(u)
	}
	o.raw("data: [DONE]\n\n")
}

// ---- errors ---------------------------------------------------------------

func (openAIDialect) errorReply(e errorInfo) reply {
	c := providerOf(e.provider).compat
	switch e.kind {
	case FaultRateLimit:
		return c.limited(c.rateLimit, e.withDefaults())
	case FaultSlowDown:
		if c.slowDown != nil {
			if e.retryAfter <= 0 {
				e.retryAfter = defaultRetry(FaultSlowDown)
			}
			return c.limited(*c.slowDown, e)
		}
		return c.limited(c.rateLimit, e.withDefaults())
	case FaultFlexCapacity:
		if c.flex != nil {
			return c.reply(*c.flex)
		}
		return c.reply(c.overload)
	case FaultOverload, FaultFailoverDemo:
		if e.code == "503" && c.overload503 != nil {
			return c.reply(*c.overload503)
		}
		return c.reply(c.overload)
	case FaultSpendCap:
		return c.spendCapReply(e)
	case FaultDailyQuota:
		if c.dailyQuota != nil {
			return c.dailyReply(e)
		}
		return c.spendCapReply(e)
	case FaultContextLength:
		return c.contextLengthReply(e.contextNumbers())
	case FaultRequestTooLarge:
		return openAIDialect{}.tooLarge(e)
	}
	sp := c.server
	sp.status = e.serverStatus()
	return c.reply(sp)
}

func (openAIDialect) midStreamAsHTTP(e errorInfo) reply {
	c := providerOf(e.provider).compat
	if e.code == "server_error" {
		sp := c.server
		sp.status = 500
		return c.reply(sp)
	}
	return c.reply(c.overload)
}

func (openAIDialect) tooLarge(e errorInfo) reply {
	c := providerOf(e.provider).compat
	if e.limit == 0 {
		e.limit = 30000
	}
	if e.requested <= e.limit {
		e.requested = e.limit + 601
	}
	if c.tooLarge != nil {
		return c.reply(c.tooLarge.render(c.fields(e)...))
	}
	return jsonReply(413, c.body("Request too large", "invalid_request_error", "request_too_large"))
}

func (openAIDialect) limitHeaders(p *provider, v limitView, h http.Header) {
	c := p.compat
	if c.headers == "" {
		return
	}
	req, reqHold := v.st.rpm, true
	if c.headers == "requests-per-day" {
		req, reqHold = v.st.rpd, false // Groq: requests are per day, tokens per minute
	}
	if req != nil {
		rem, reset := v.level(req, reqHold)
		h.Set("x-ratelimit-limit-requests", fmt.Sprint(req.Limit()))
		h.Set("x-ratelimit-remaining-requests", fmt.Sprint(rem))
		h.Set("x-ratelimit-reset-requests", goDuration(reset))
	}
	if l := v.st.tpm; l != nil {
		rem, reset := v.level(l, false)
		h.Set("x-ratelimit-limit-tokens", fmt.Sprint(l.Limit()))
		h.Set("x-ratelimit-remaining-tokens", fmt.Sprint(rem))
		h.Set("x-ratelimit-reset-tokens", goDuration(reset))
	}
}
