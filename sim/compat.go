package sim

import (
	"strconv"
	"strings"
	"time"
)

// errSpec is one error answer as data: its status and the envelope's
// message, type and code. Message and type may name fields in braces,
// which render fills from the error: {model}, {limit}, {used},
// {requested}, {actual} (used plus requested), {retry}, {unit}
// ("requests" or "tokens"), {per} and {per_abbrev} (the per-minute
// window in the provider's words), {day_unit}, {per_day} and
// {per_day_abbrev} (the per-day window), {max} and {got} (a context
// length's maximum and request), {method} and {path} (a request's route).
type errSpec struct {
	status  int
	message string
	typ     string
	code    any // a string, or nil for null
}

// render fills the named fields in the message and the type. A value is
// inserted as is: it is not read again for fields.
func (s errSpec) render(pairs ...string) errSpec {
	r := strings.NewReplacer(pairs...)
	s.message = r.Replace(s.message)
	s.typ = r.Replace(s.typ)
	return s
}

// windowName names a limit's window in a message: the long words and the
// abbreviation ("requests per min", "RPM").
type windowName struct{ long, abbrev string }

// windowWords names one window for each unit.
type windowWords struct{ requests, tokens windowName }

// of returns the words for unit ("tokens", else requests).
func (w windowWords) of(unit string) windowName {
	if unit == "tokens" {
		return w.tokens
	}
	return w.requests
}

// perDayWords names the per-day window; the providers that answer a
// per-day limit word it the same.
var perDayWords = windowWords{windowName{"requests per day", "RPD"}, windowName{"tokens per day", "TPD"}}

// rateDefaults are the rate-limit body's numbers the state may leave out.
var rateDefaults = errorInfo{retryAfter: 2 * time.Second, metric: "requests", limit: 60, used: 60, requested: 1}

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
	reasoning string
	forbidden []string
	// perMinute names the per-minute window in rate-limit messages.
	perMinute windowWords
	// retryAfter: the rate-limit, slow-down and per-day answers carry
	// Retry-After.
	retryAfter  bool
	rateLimit   errSpec
	slowDown    *errSpec // nil: the rate limit's answer
	overload    errSpec
	overload503 *errSpec // Code "503" (a plain 503 beside the provider's own overload)
	// flex is the answer to a flex request when flex capacity is short
	// (nil: the overload's).
	flex   *errSpec
	server errSpec // status comes from the code (500, 502, 504)
	// spendCap is the spend stop's answer by the fault's code; "" is the
	// answer to any other code.
	spendCap map[string]errSpec
	// tpdIsDaily: a spend stop with code "tpd" is the free tier's
	// tokens-per-day limit and answers as dailyQuota.
	tpdIsDaily bool
	dailyQuota *errSpec // nil: the spend cap's answer
	// dailyDefaults are the per-day body's numbers the state may leave out.
	dailyDefaults errorInfo
	auth          errSpec  // a key that is not valid
	authMissing   *errSpec // no Authorization header (nil: auth)
	// authBare: the auth answer is {message, request_id}, outside the
	// envelope.
	authBare bool
	notFound errSpec
	// modelNotFound is the answer to a model the provider does not serve.
	modelNotFound errSpec
	tooLarge      *errSpec // nil: a plain 413
	// contextLength is the context-length 400 in the envelope (nil: the
	// nested body naming param "messages", whatever the envelope).
	contextLength *errSpec
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
	return nestedBody(message, typ, nil, code)
}

// nestedBody is OpenAI's error envelope with its param.
func nestedBody(message, typ string, param, code any) []byte {
	return mustJSON(obj{"error", obj{"message", message, "type", typ, "param", param, "code", code}})
}

func (c *compat) reply(e errSpec) reply { return jsonReply(e.status, c.body(e.message, e.typ, e.code)) }

// fields are the named fields of e's answer.
func (c *compat) fields(e errorInfo) []string {
	unit := e.unit()
	dayUnit := unit
	if e.code == "tpd" {
		dayUnit = "tokens"
	}
	minute, day := c.perMinute.of(unit), perDayWords.of(dayUnit)
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	return []string{
		"{model}", e.model, "{limit}", n(e.limit), "{used}", n(e.used), "{requested}", n(e.requested),
		"{actual}", n(e.used + e.requested), "{retry}", goDuration(e.retryAfter), "{unit}", unit,
		"{per}", minute.long, "{per_abbrev}", minute.abbrev,
		"{day_unit}", dayUnit, "{per_day}", day.long, "{per_day_abbrev}", day.abbrev,
	}
}

// limited renders a rate-limit, slow-down or per-day answer, with
// Retry-After where the provider sends it.
func (c *compat) limited(s errSpec, e errorInfo) reply {
	r := c.reply(s.render(c.fields(e)...))
	if c.retryAfter {
		r = withRetryAfter(r, e.retryAfter)
	}
	return r
}

// spendCapReply is the answer to a spend stop.
func (c *compat) spendCapReply(e errorInfo) reply {
	if c.tpdIsDaily && e.code == "tpd" {
		return c.dailyReply(e)
	}
	s, ok := c.spendCap[e.code]
	if !ok {
		s = c.spendCap[""]
	}
	return c.reply(s.render(c.fields(e)...))
}

// dailyReply is the answer to a per-day limit.
func (c *compat) dailyReply(e errorInfo) reply {
	return c.limited(*c.dailyQuota, e.fill(c.dailyDefaults))
}

// authReply is the answer to a missing (given false) or invalid key.
func (c *compat) authReply(given bool, requestID string) reply {
	s := c.auth
	if !given && c.authMissing != nil {
		s = *c.authMissing
	}
	if c.authBare {
		return jsonReply(s.status, mustJSON(obj{"message", s.message, "request_id", requestID}))
	}
	return c.reply(s)
}

// notFoundReply is the answer to a route the provider does not serve.
func (c *compat) notFoundReply(method, path string) reply {
	return c.reply(c.notFound.render("{method}", method, "{path}", path))
}

// contextLengthMessage is the context-length message most compatible
// providers share.
const contextLengthMessage = "This model's maximum context length is {max} tokens. However, your messages resulted in {got} tokens. Please reduce the length of the messages."

// contextLengthReply is the answer to a request above the context window.
func (c *compat) contextLengthReply(maxTok, got int64) reply {
	pairs := []string{"{max}", strconv.FormatInt(maxTok, 10), "{got}", strconv.FormatInt(got, 10)}
	if c.contextLength != nil {
		return c.reply(c.contextLength.render(pairs...))
	}
	msg := strings.NewReplacer(pairs...).Replace(contextLengthMessage)
	return jsonReply(400, nestedBody(msg, "invalid_request_error", "messages", "context_length_exceeded"))
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

// openAISpendCaps answers each billing code with its message; any other
// code is insufficient_quota.
func openAISpendCaps() map[string]errSpec {
	m := map[string]errSpec{"": {429, openAIBilling["insufficient_quota"], "insufficient_quota", "insufficient_quota"}}
	for code, msg := range openAIBilling {
		m[code] = errSpec{429, msg, "insufficient_quota", code}
	}
	return m
}

const (
	openAIRateLimitMessage = "Rate limit reached for {model} in organization org-simulated on {per} ({per_abbrev}): Limit {limit}, Used {used}, Requested {requested}. Please try again in {retry}. Visit https://platform.openai.com/account/rate-limits to learn more."
	groqLimitPrefix        = "Rate limit reached for model `{model}` in organization `org_simulated` service tier `on_demand` on "
	xaiTeam                = "00000000-0000-4000-8000-000000000000"
	xaiSpendMessage        = "Your team " + xaiTeam + " has either used all available credits or reached its monthly spending limit. To continue making API requests, please purchase more credits or raise your spending limit."
)

// invalidURL is OpenAI's (and Groq's, DeepSeek's) 404 for a path it does
// not serve.
var invalidURL = errSpec{404, "Invalid URL ({method} {path})", "invalid_request_error", nil}

// modelDoesNotExist is OpenAI's (and Groq's) 404 for a model it does not
// serve.
var modelDoesNotExist = errSpec{404, "The model `{model}` does not exist or you do not have access to it.", "invalid_request_error", "model_not_found"}

// serverHadAnError is the 500 OpenAI, Groq and DeepSeek answer.
var serverHadAnError = errSpec{500, "The server had an error while processing your request. Sorry about that!", "server_error", nil}

var openAICompat = &compat{
	paths: []string{"/chat/completions"}, envelope: "nested", headers: "per-minute",
	versionHeader: true, fingerprint: true, serviceTier: true, usageDetails: true, invalidCodes: true,
	perMinute:  windowWords{windowName{"requests per min", "RPM"}, windowName{"tokens per min", "TPM"}},
	retryAfter: true,
	rateLimit:  errSpec{429, openAIRateLimitMessage, "{unit}", "rate_limit_exceeded"},
	slowDown:   &errSpec{429, "Your traffic grew too quickly, even though you're within your RPM and TPM limits. Please slow down and ramp up your traffic gradually.", "rate_limit_error", "slow_down"},
	overload:   errSpec{503, "Our servers are currently overloaded. Please try again later.", "service_unavailable_error", "server_is_overloaded"},
	// OpenAI documents the flex 429 "Resource Unavailable" and no body
	// or code of its own: this one is assumed.
	flex:     &errSpec{429, "Resource Unavailable: flex processing capacity is short. Retry later, or send the request without service_tier flex.", "server_error", nil},
	server:   serverHadAnError,
	spendCap: openAISpendCaps(),
	// OpenAI's per-day limits (requests or tokens per day, on some
	// tiers and models) answer the rate-limit 429 naming the day.
	dailyQuota:    &errSpec{429, strings.ReplaceAll(strings.ReplaceAll(openAIRateLimitMessage, "{per}", "{per_day}"), "{per_abbrev}", "{per_day_abbrev}"), "{unit}", "rate_limit_exceeded"},
	dailyDefaults: rateDefaults,
	authMissing:   &errSpec{401, "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're accessing the API from your browser and are prompted for a username. You can obtain an API key from https://platform.openai.com/account/api-keys.", "invalid_request_error", nil},
	auth:          errSpec{401, "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.", "invalid_request_error", "invalid_api_key"},
	notFound:      invalidURL,
	modelNotFound: modelDoesNotExist,
	tooLarge:      &errSpec{429, "Request too large for {model} in organization org-simulated on tokens per min (TPM): Limit {limit}, Requested {requested}. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.", "tokens", "rate_limit_exceeded"},
}

var groqCompat = &compat{
	reasoning: "reasoning",
	paths:     []string{"/chat/completions"}, envelope: "nested-noparam", headers: "requests-per-day", fingerprint: true, xGroq: true,
	perMinute:  windowWords{windowName{"requests per minute", "RPM"}, windowName{"tokens per minute", "TPM"}},
	retryAfter: true,
	rateLimit:  errSpec{429, groqLimitPrefix + "{per} ({per_abbrev}): Limit {limit}, Used {used}, Requested {requested}. Please try again in {retry}. Visit https://console.groq.com/docs/rate-limits for more information.", "{unit}", "rate_limit_exceeded"},
	overload:   errSpec{503, "Service Unavailable", "internal_server_error", nil},
	// Groq documents 498 capacity_exceeded for short flex capacity,
	// not its body: this one is assumed.
	flex:   &errSpec{498, "Flex tier capacity exceeded. This is a transient error: please try again later.", "invalid_request_error", "capacity_exceeded"},
	server: serverHadAnError,
	// Groq documents no billing stop of its own: on the free tier the
	// stop that needs an upgrade is the tokens-per-day limit, which
	// resets; code "spend_limit" is the paid tier's spend limit (400,
	// "organization_spend_limit_exceeded" in Groq's error docs) that
	// needs a person.
	spendCap:   map[string]errSpec{"": {400, "Your organization has reached its spend limit. Raise the limit at https://console.groq.com/settings/billing to continue.", "invalid_request_error", "organization_spend_limit_exceeded"}},
	tpdIsDaily: true,
	// Groq's per-day 429 (requests, or tokens with code "tpd").
	dailyQuota:    &errSpec{429, groqLimitPrefix + "{per_day} ({per_day_abbrev}): Limit {limit}, Used {used}, Requested {requested}. Please try again in {retry}. Need more tokens? Upgrade to Dev Tier today at https://console.groq.com/settings/billing", "{day_unit}", "rate_limit_exceeded"},
	dailyDefaults: errorInfo{retryAfter: 9*time.Minute + 38016*time.Millisecond, limit: 14400, used: 14400, requested: 1},
	auth:          errSpec{401, "Invalid API Key", "invalid_request_error", "invalid_api_key"},
	notFound:      invalidURL,
	modelNotFound: modelDoesNotExist,
	tooLarge:      &errSpec{413, "Request too large for model `{model}` in organization `org_simulated` service tier `on_demand` on tokens per minute (TPM): Limit {limit}, Requested {requested}, please reduce your message size and try again. Visit https://console.groq.com/docs/rate-limits for more information.", "tokens", "rate_limit_exceeded"},
}

var deepseekCompat = &compat{
	reasoning: "reasoning_content",
	paths:     []string{"/chat/completions", "/v1/chat/completions"}, envelope: "nested", fingerprint: true, invalidCodes: true,
	rateLimit: errSpec{429, "Rate Limit Reached", "rate_limit_error", "rate_limit_exceeded"},
	overload:  errSpec{503, "Server Overloaded", "unknown_error", "server_overloaded"},
	server:    serverHadAnError,
	spendCap:  map[string]errSpec{"": {402, "Insufficient Balance", "unknown_error", "invalid_request_error"}},
	auth:      errSpec{401, "Authentication Fails, Your api key is invalid", "authentication_error", "invalid_request_error"},
	notFound:  invalidURL,
	// [unsourced] DeepSeek's answer to an unknown model.
	modelNotFound: errSpec{400, "Model Not Exist", "invalid_request_error", "invalid_request_error"},
}

var mistralCompat = &compat{
	paths: []string{"/chat/completions"}, envelope: "flat-object", usageOnFinish: true,
	forbidden: []string{"max_completion_tokens", "store", "stream_options"},
	rateLimit: errSpec{429, "Rate limit exceeded", "rate_limited", "1300"},
	overload:  errSpec{503, "Service unavailable, please retry later.", "service_unavailable", "3000"},
	server:    errSpec{500, "Internal server error", "internal_server_error", "3000"},
	spendCap:  map[string]errSpec{"": {402, "Insufficient credits: your workspace has no remaining credits or has reached its spending limit.", "invalid_request_error", "3505"}},
	auth:      errSpec{401, "Unauthorized", "", nil},
	authBare:  true,
	notFound:  errSpec{404, "Not Found", "invalid_request_error", "not_found"},
	// [unsourced] Mistral's answer to an unknown model.
	modelNotFound: errSpec{400, "Invalid model: {model}", "invalid_model", "1500"},
	contextLength: &errSpec{400, contextLengthMessage, "invalid_request_error", "context_length_exceeded"},
}

var xaiCompat = &compat{
	reasoning: "reasoning_content",
	paths:     []string{"/chat/completions"}, envelope: "flat-code", fingerprint: true, usageDetails: true,
	perMinute: windowWords{windowName{"requests", "Requests per Minute"}, windowName{"tokens", "Tokens per Minute"}},
	rateLimit: errSpec{429, "Too many {per} for team " + xaiTeam + " and model {model}. Your team's rate limit is — {per_abbrev} (actual/limit): {actual}/{limit}. You can view your team rate limits at https://console.x.ai.", "", "Some resource has been exhausted"},
	overload:  errSpec{503, "The model is currently overloaded. Please try again later.", "", "The service is currently unavailable"},
	server:    errSpec{500, "An internal error occurred. Please try again later.", "", "Internal error"},
	spendCap: map[string]errSpec{
		"":    {403, xaiSpendMessage, "", "permission-denied"},
		"429": {429, xaiSpendMessage, "", "permission-denied"},
	},
	auth:     errSpec{400, "Incorrect API key provided. You can obtain an API key from https://console.x.ai.", "", "Client specified an invalid argument"},
	notFound: errSpec{404, "Not Found", "invalid_request_error", "not_found"},
	// [unsourced] xAI's answer to an unknown model.
	modelNotFound: errSpec{404, "The model {model} does not exist or your team " + xaiTeam + " does not have access to it.", "", "Some requested entity was not found"},
	contextLength: &errSpec{400, "This model's maximum prompt length is {max} but the request contains {got} tokens.", "", "Client specified an invalid argument"},
}
