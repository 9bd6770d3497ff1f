package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// openAIDialect is Chat Completions as OpenAI and the OpenAI-compatible
// providers speak it. What differs between them is data: their compat row.
type openAIDialect struct{}

// errSpec is one fixed error answer: status and the envelope's fields.
type errSpec struct {
	status  int
	message string
	typ     string
	code    any // a string, or nil for null
}

// compat is what an OpenAI-compatible provider does differently: paths,
// envelope, headers, stream details and its documented error bodies.
type compat struct {
	paths    []string // chat completion paths below the prefix
	envelope string   // "nested" (OpenAI), "nested-noparam" (Groq), "flat-object" (Mistral: object:error), "flat-code" (xAI: code/error)
	// headers: "per-minute" (x-ratelimit-* per minute), "requests-per-day"
	// (requests per day, tokens per minute), "" (none).
	headers       string
	versionHeader bool // openai-version and openai-processing-ms on answers
	fingerprint   bool // system_fingerprint on answers
	serviceTier   bool // service_tier on answers
	usageDetails  bool // prompt_tokens_details / completion_tokens_details in usage
	xGroq         bool // the first chunk carries x_groq.id
	usageOnFinish bool // usage rides on the finish chunk (Mistral), not its own chunk
	// reasoning is the delta field a thinking phase streams in
	// ("reasoning_content", "reasoning"; "": none, the phase is silence).
	reasoning   string
	forbidden   []string
	rateLimit   func(e errorInfo) reply
	slowDown    func(e errorInfo) reply // nil: the rate limit's answer
	overload    errSpec
	overload503 *errSpec // Code "503" (a plain 503 beside the provider's own overload)
	// flex is the answer to a flex request when flex capacity is short
	// (nil: the overload's).
	flex       *errSpec
	server     errSpec // status comes from the code (500, 502, 504)
	spendCap   func(e errorInfo) reply
	dailyQuota func(e errorInfo) reply // nil: the spend cap's answer
	auth       func(given bool, requestID string) reply
	notFound   func(method, path string) errSpec
	// modelNotFound is the answer to a model the provider does not serve.
	modelNotFound func(model string) errSpec
	tooLarge      func(e errorInfo) reply // nil: a plain 413
	contextLength func(e errorInfo, maxTok, got int64) reply
	invalidCodes  bool // invalid_request_error bodies name missing_required_parameter (OpenAI, DeepSeek)
}

// body wraps message, type and code in the provider's envelope.
func (c *compat) body(message, typ string, code any) []byte {
	switch c.envelope {
	case "nested-noparam":
		e := obj{"message", message, "type", typ}
		if code != nil {
			e = append(e, "code", code)
		}
		return mustJSON(obj{"error", e})
	case "flat-object":
		return mustJSON(obj{"object", "error", "message", message, "type", typ, "param", nil, "code", code})
	case "flat-code":
		c, _ := code.(string)
		if c == "" {
			c = typ
		}
		return mustJSON(obj{"code", c, "error", message})
	}
	return mustJSON(obj{"error", obj{"message", message, "type", typ, "param", nil, "code", code}})
}

func (c *compat) reply(e errSpec) reply { return jsonReply(e.status, c.body(e.message, e.typ, e.code)) }

// ---- route, auth, parse -------------------------------------------------

func (openAIDialect) route(p *provider, r *http.Request, sub string, _ *simRequest) (reply, bool) {
	below := strings.TrimPrefix(r.URL.Path, "/"+p.name)
	for _, path := range p.compat.paths {
		if sub == path {
			if r.Method != http.MethodPost {
				return p.compat.reply(p.compat.notFound(r.Method, below)), false
			}
			return reply{}, true
		}
	}
	return p.compat.reply(p.compat.notFound(r.Method, below)), false
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
		return p.compat.auth(given, requestID), false
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
	return jsonReply(400, mustJSON(obj{"error", obj{"message", message, "type", "invalid_request_error", "param", pp, "code", code}}))
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
		return c.rateLimit(e.withDefaults())
	case FaultSlowDown:
		if c.slowDown != nil {
			if e.retryAfter <= 0 {
				e.retryAfter = defaultRetry(FaultSlowDown)
			}
			return c.slowDown(e)
		}
		return c.rateLimit(e.withDefaults())
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
		return c.spendCap(e)
	case FaultDailyQuota:
		if c.dailyQuota != nil {
			return c.dailyQuota(e)
		}
		return c.spendCap(e)
	case FaultContextLength:
		maxTok, got := e.contextNumbers()
		return c.contextLength(e, maxTok, got)
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
		return c.tooLarge(e)
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

// ---- the providers' data --------------------------------------------------

// openAIBilling holds OpenAI's billing codes and their messages (the help
// center's wording; the exact API text is not published).
var openAIBilling = map[string]string{
	"insufficient_quota":                "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
	"credit_balance_exhausted":          "Your organization has no prepaid credits remaining. Add credits in your billing settings to continue: https://platform.openai.com/settings/organization/billing.",
	"organization_spend_limit_exceeded": "Your organization reached a configured hard spend limit. Raise the limit in your organization's limits settings to continue.",
	"project_spend_limit_exceeded":      "Your project reached a configured hard spend limit. Raise the project's spend limit to continue.",
	"organization_usage_limit_exceeded": "Your organization reached its OpenAI-assigned usage limit. Contact support or wait for the limit to reset.",
}

// openAIContextLength is the context-length 400 most compatible providers
// share.
func openAIContextLength(c **compat) func(e errorInfo, maxTok, got int64) reply {
	return func(e errorInfo, maxTok, got int64) reply {
		msg := fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", maxTok, got)
		if (*c).envelope == "flat-object" {
			return jsonReply(400, (*c).body(msg, "invalid_request_error", "context_length_exceeded"))
		}
		return jsonReply(400, mustJSON(obj{"error", obj{"message", msg, "type", "invalid_request_error", "param", "messages", "code", "context_length_exceeded"}}))
	}
}

var openAICompat, groqCompat, deepseekCompat, mistralCompat, xaiCompat *compat

// initCompat builds the OpenAI-compatible providers' rows (their replies
// refer to their own row, so they are built in a function, not as
// initialized variables).
func initCompat() {
	openAICompat = openAIRow()
	groqCompat = groqRow()
	deepseekCompat = deepseekRow()
	mistralCompat = mistralRow()
	xaiCompat = xaiRow()
}

// openAIRow builds OpenAI's row; its replies reach the row through openAICompat.
func openAIRow() *compat {
	return &compat{
		paths: []string{"/chat/completions"}, envelope: "nested", headers: "per-minute",
		versionHeader: true, fingerprint: true, serviceTier: true, usageDetails: true, invalidCodes: true,
		rateLimit: func(e errorInfo) reply {
			long, ab := perMinuteText(e.unit())
			msg := fmt.Sprintf("Rate limit reached for %s in organization org-simulated on %s (%s): Limit %d, Used %d, Requested %d. Please try again in %s. Visit https://platform.openai.com/account/rate-limits to learn more.",
				e.model, long, ab, e.limit, e.used, e.requested, goDuration(e.retryAfter))
			return withRetryAfter(jsonReply(429, openAICompat.body(msg, e.unit(), "rate_limit_exceeded")), e.retryAfter)
		},
		slowDown: func(e errorInfo) reply {
			msg := "Your traffic grew too quickly, even though you're within your RPM and TPM limits. Please slow down and ramp up your traffic gradually."
			return withRetryAfter(jsonReply(429, openAICompat.body(msg, "rate_limit_error", "slow_down")), e.retryAfter)
		},
		overload: errSpec{503, "Our servers are currently overloaded. Please try again later.", "service_unavailable_error", "server_is_overloaded"},
		// OpenAI documents the flex 429 "Resource Unavailable" and no body
		// or code of its own: this one is assumed.
		flex:   &errSpec{429, "Resource Unavailable: flex processing capacity is short. Retry later, or send the request without service_tier flex.", "server_error", nil},
		server: errSpec{500, "The server had an error while processing your request. Sorry about that!", "server_error", nil},
		spendCap: func(e errorInfo) reply {
			code := e.code
			if _, ok := openAIBilling[code]; !ok {
				code = "insufficient_quota"
			}
			return jsonReply(429, openAICompat.body(openAIBilling[code], "insufficient_quota", code))
		},
		// OpenAI's per-day limits (requests or tokens per day, on some
		// tiers and models) answer the rate-limit 429 naming the day.
		dailyQuota: func(e errorInfo) reply {
			e = e.withDefaults()
			long, ab := "requests per day", "RPD"
			if e.code == "tpd" || e.unit() == "tokens" {
				long, ab = "tokens per day", "TPD"
			}
			msg := fmt.Sprintf("Rate limit reached for %s in organization org-simulated on %s (%s): Limit %d, Used %d, Requested %d. Please try again in %s. Visit https://platform.openai.com/account/rate-limits to learn more.",
				e.model, long, ab, e.limit, e.used, e.requested, goDuration(e.retryAfter))
			return withRetryAfter(jsonReply(429, openAICompat.body(msg, e.unit(), "rate_limit_exceeded")), e.retryAfter)
		},
		auth: func(given bool, _ string) reply {
			if !given {
				return jsonReply(401, openAICompat.body("You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're accessing the API from your browser and are prompted for a username. You can obtain an API key from https://platform.openai.com/account/api-keys.", "invalid_request_error", nil))
			}
			return jsonReply(401, openAICompat.body("Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.", "invalid_request_error", "invalid_api_key"))
		},
		notFound:      invalidURL,
		modelNotFound: modelDoesNotExist,
		tooLarge: func(e errorInfo) reply {
			msg := fmt.Sprintf("Request too large for %s in organization org-simulated on tokens per min (TPM): Limit %d, Requested %d. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.", e.model, e.limit, e.requested)
			return jsonReply(429, openAICompat.body(msg, "tokens", "rate_limit_exceeded"))
		},
		contextLength: openAIContextLength(&openAICompat),
	}
}

// groqRow builds Groq's row; its replies reach the row through groqCompat.
func groqRow() *compat {
	return &compat{
		reasoning: "reasoning",
		paths:     []string{"/chat/completions"}, envelope: "nested-noparam", headers: "requests-per-day", fingerprint: true, xGroq: true,
		rateLimit: func(e errorInfo) reply {
			long, ab := "requests per minute", "RPM"
			if e.unit() == "tokens" {
				long, ab = "tokens per minute", "TPM"
			}
			msg := fmt.Sprintf("Rate limit reached for model `%s` in organization `org_simulated` service tier `on_demand` on %s (%s): Limit %d, Used %d, Requested %d. Please try again in %s. Visit https://console.groq.com/docs/rate-limits for more information.",
				e.model, long, ab, e.limit, e.used, e.requested, goDuration(e.retryAfter))
			return withRetryAfter(jsonReply(429, groqCompat.body(msg, e.unit(), "rate_limit_exceeded")), e.retryAfter)
		},
		overload: errSpec{503, "Service Unavailable", "internal_server_error", nil},
		// Groq documents 498 capacity_exceeded for short flex capacity,
		// not its body: this one is assumed.
		flex:   &errSpec{498, "Flex tier capacity exceeded. This is a transient error: please try again later.", "invalid_request_error", "capacity_exceeded"},
		server: errSpec{500, "The server had an error while processing your request. Sorry about that!", "server_error", nil},
		// Groq documents no billing stop of its own: on the free tier the
		// stop that needs an upgrade is the tokens-per-day limit, which
		// resets; code "spend_limit" is the paid tier's spend limit (400,
		// "organization_spend_limit_exceeded" in Groq's error docs) that
		// needs a person.
		spendCap: func(e errorInfo) reply {
			if e.code == "tpd" {
				return groqDaily(e)
			}
			return jsonReply(400, groqCompat.body("Your organization has reached its spend limit. Raise the limit at https://console.groq.com/settings/billing to continue.", "invalid_request_error", "organization_spend_limit_exceeded"))
		},
		dailyQuota: groqDaily,
		auth: func(bool, string) reply {
			return jsonReply(401, groqCompat.body("Invalid API Key", "invalid_request_error", "invalid_api_key"))
		},
		notFound:      invalidURL,
		modelNotFound: modelDoesNotExist,
		tooLarge: func(e errorInfo) reply {
			msg := fmt.Sprintf("Request too large for model `%s` in organization `org_simulated` service tier `on_demand` on tokens per minute (TPM): Limit %d, Requested %d, please reduce your message size and try again. Visit https://console.groq.com/docs/rate-limits for more information.", e.model, e.limit, e.requested)
			return jsonReply(413, groqCompat.body(msg, "tokens", "rate_limit_exceeded"))
		},
		contextLength: openAIContextLength(&groqCompat),
	}
}

// deepseekRow builds DeepSeek's row; its replies reach the row through deepseekCompat.
func deepseekRow() *compat {
	return &compat{
		reasoning: "reasoning_content",
		paths:     []string{"/chat/completions", "/v1/chat/completions"}, envelope: "nested", fingerprint: true, invalidCodes: true,
		rateLimit: func(errorInfo) reply {
			return jsonReply(429, deepseekCompat.body("Rate Limit Reached", "rate_limit_error", "rate_limit_exceeded"))
		},
		overload: errSpec{503, "Server Overloaded", "unknown_error", "server_overloaded"},
		server:   errSpec{500, "The server had an error while processing your request. Sorry about that!", "server_error", nil},
		spendCap: func(errorInfo) reply {
			return jsonReply(402, deepseekCompat.body("Insufficient Balance", "unknown_error", "invalid_request_error"))
		},
		auth: func(bool, string) reply {
			return jsonReply(401, deepseekCompat.body("Authentication Fails, Your api key is invalid", "authentication_error", "invalid_request_error"))
		},
		notFound: invalidURL,
		// [unsourced] DeepSeek's answer to an unknown model.
		modelNotFound: func(string) errSpec {
			return errSpec{400, "Model Not Exist", "invalid_request_error", "invalid_request_error"}
		},
		contextLength: openAIContextLength(&deepseekCompat),
	}
}

// mistralRow builds Mistral's row; its replies reach the row through mistralCompat.
func mistralRow() *compat {
	return &compat{
		paths: []string{"/chat/completions"}, envelope: "flat-object", usageOnFinish: true,
		forbidden: []string{"max_completion_tokens", "store", "stream_options"},
		rateLimit: func(errorInfo) reply {
			return jsonReply(429, mistralCompat.body("Rate limit exceeded", "rate_limited", "1300"))
		},
		overload: errSpec{503, "Service unavailable, please retry later.", "service_unavailable", "3000"},
		server:   errSpec{500, "Internal server error", "internal_server_error", "3000"},
		spendCap: func(errorInfo) reply {
			return jsonReply(402, mistralCompat.body("Insufficient credits: your workspace has no remaining credits or has reached its spending limit.", "invalid_request_error", "3505"))
		},
		auth: func(_ bool, requestID string) reply {
			return jsonReply(401, mustJSON(obj{"message", "Unauthorized", "request_id", requestID}))
		},
		notFound: func(string, string) errSpec { return errSpec{404, "Not Found", "invalid_request_error", "not_found"} },
		// [unsourced] Mistral's answer to an unknown model.
		modelNotFound: func(m string) errSpec { return errSpec{400, "Invalid model: " + m, "invalid_model", "1500"} },
		contextLength: openAIContextLength(&mistralCompat),
	}
}

// xaiRow builds xAI's row; its replies reach the row through xaiCompat.
func xaiRow() *compat {
	return &compat{
		reasoning: "reasoning_content",
		paths:     []string{"/chat/completions"}, envelope: "flat-code", fingerprint: true, usageDetails: true,
		rateLimit: func(e errorInfo) reply {
			what, unit := "requests", "Requests per Minute"
			if e.unit() == "tokens" {
				what, unit = "tokens", "Tokens per Minute"
			}
			msg := fmt.Sprintf("Too many %s for team 00000000-0000-4000-8000-000000000000 and model %s. Your team's rate limit is — %s (actual/limit): %d/%d. You can view your team rate limits at https://console.x.ai.",
				what, e.model, unit, e.used+e.requested, e.limit)
			return jsonReply(429, xaiCompat.body(msg, "", "Some resource has been exhausted"))
		},
		overload: errSpec{503, "The model is currently overloaded. Please try again later.", "", "The service is currently unavailable"},
		server:   errSpec{500, "An internal error occurred. Please try again later.", "", "Internal error"},
		spendCap: func(e errorInfo) reply {
			status := 403
			if e.code == "429" {
				status = 429
			}
			msg := "Your team 00000000-0000-4000-8000-000000000000 has either used all available credits or reached its monthly spending limit. To continue making API requests, please purchase more credits or raise your spending limit."
			return jsonReply(status, xaiCompat.body(msg, "", "permission-denied"))
		},
		auth: func(bool, string) reply {
			return jsonReply(400, xaiCompat.body("Incorrect API key provided. You can obtain an API key from https://console.x.ai.", "", "Client specified an invalid argument"))
		},
		notFound: func(string, string) errSpec { return errSpec{404, "Not Found", "invalid_request_error", "not_found"} },
		// [unsourced] xAI's answer to an unknown model.
		modelNotFound: func(m string) errSpec {
			return errSpec{404, "The model " + m + " does not exist or your team 00000000-0000-4000-8000-000000000000 does not have access to it.", "", "Some requested entity was not found"}
		},
		contextLength: func(_ errorInfo, maxTok, got int64) reply {
			return jsonReply(400, xaiCompat.body(fmt.Sprintf("This model's maximum prompt length is %d but the request contains %d tokens.", maxTok, got), "", "Client specified an invalid argument"))
		},
	}
}

// modelDoesNotExist is OpenAI's (and Groq's) 404 for a model it does not
// serve.
func modelDoesNotExist(model string) errSpec {
	return errSpec{404, "The model `" + model + "` does not exist or you do not have access to it.", "invalid_request_error", "model_not_found"}
}

// invalidURL is OpenAI's (and Groq's, DeepSeek's) 404 for a path it does
// not serve.
func invalidURL(method, path string) errSpec {
	return errSpec{404, fmt.Sprintf("Invalid URL (%s %s)", method, path), "invalid_request_error", nil}
}

// groqDaily is Groq's per-day 429 (requests, or tokens with code "tpd").
func groqDaily(e errorInfo) reply {
	if e.retryAfter <= 0 {
		e.retryAfter = 9*time.Minute + 38016*time.Millisecond
	}
	long, ab, typ := "requests per day", "RPD", "requests"
	if e.code == "tpd" || strings.Contains(e.metric, "tokens") {
		long, ab, typ = "tokens per day", "TPD", "tokens"
	}
	if e.limit == 0 {
		e.limit, e.used = 14400, 14400
	}
	if e.requested == 0 {
		e.requested = 1
	}
	msg := fmt.Sprintf("Rate limit reached for model `%s` in organization `org_simulated` service tier `on_demand` on %s (%s): Limit %d, Used %d, Requested %d. Please try again in %s. Need more tokens? Upgrade to Dev Tier today at https://console.groq.com/settings/billing",
		e.model, long, ab, e.limit, e.used, e.requested, goDuration(e.retryAfter))
	return withRetryAfter(jsonReply(429, groqCompat.body(msg, typ, "rate_limit_exceeded")), e.retryAfter)
}
