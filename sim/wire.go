package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// reply is a complete non-200 answer: status, headers and body.
type reply struct {
	status  int
	header  http.Header
	body    []byte
	noRetry bool // never set x-should-retry: true
}

// errorInfo is what an error body may mention.
type errorInfo struct {
	provider   string
	model      string
	kind       string        // a Fault* kind
	code       string        // the variant
	retryAfter time.Duration // the server's delay
	metric     string        // "requests" or "tokens" (or "input tokens", "output tokens")
	limit      int64
	used       int64
	requested  int64
	resetAt    time.Time // when a spend or quota stop ends
	requestID  string
}

// obj is a JSON object that keeps its keys in the order written:
// obj{"type", "error", "error", obj{...}}. It reads like the providers'
// own bodies, whose key order a map would lose.
type obj []any

// MarshalJSON writes the pairs in order.
func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i+1 < len(o); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := o[i].(string)
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		vb, err := json.Marshal(o[i+1])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only maps, slices and strings of our own are marshalled here.
		return []byte(`{"error":{"message":"simulator: cannot encode body"}}`)
	}
	return b
}

// ---- envelopes ----------------------------------------------------------

// openAIStyle is the nested {"error":{...}} envelope of OpenAI and the
// OpenAI-compatible providers; Groq omits "param", Mistral is flat with
// "object":"error", xAI is flat {"code","error"}.
func openAIStyle(provider, message, typ string, code any) []byte {
	switch provider {
	case "groq":
		e := obj{"message", message, "type", typ}
		if code != nil {
			e = append(e, "code", code)
		}
		return mustJSON(obj{"error", e})
	case "mistral":
		return mustJSON(obj{"object", "error", "message", message, "type", typ, "param", nil, "code", code})
	case "xai":
		c, _ := code.(string)
		if c == "" {
			c = typ
		}
		return mustJSON(obj{"code", c, "error", message})
	}
	return mustJSON(obj{"error", obj{"message", message, "type", typ, "param", nil, "code", code}})
}

func anthropicBody(typ, message, requestID string, details obj) []byte {
	e := obj{"type", typ, "message", message}
	if details != nil {
		e = append(e, "details", details)
	}
	return mustJSON(obj{"type", "error", "error", e, "request_id", requestID})
}

func geminiBody(code int, status, message string, details []any) []byte {
	e := obj{"code", code, "message", message, "status", status}
	if details != nil {
		e = append(e, "details", details)
	}
	return mustJSON(obj{"error", e})
}

func jsonReply(status int, body []byte) reply {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return reply{status: status, header: h, body: body}
}

func geminiReply(status int, body []byte) reply {
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=UTF-8")
	return reply{status: status, header: h, body: body}
}

// ---- formatting ---------------------------------------------------------

// goDuration formats d the way OpenAI and Groq do in headers and messages
// ("1s", "6m0s", "20ms", "2m59.56s"), to the millisecond.
func goDuration(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return d.Round(time.Millisecond).String()
}

// protoDuration formats d as a protobuf Duration string ("22s", "1.6s").
func protoDuration(d time.Duration) string {
	s := strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	return s + "s"
}

// retryAfterSeconds is the integer retry-after header value: never below
// the real delay.
func retryAfterSeconds(d time.Duration) string {
	s := int64(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}

func regainText(t time.Time) string {
	t = t.UTC()
	return fmt.Sprintf("You will regain access on %s at %s UTC.", t.Format("2006-01-02"), t.Format("15:04"))
}

// ---- error replies per kind ---------------------------------------------

// errorReply builds the documented answer for one failure kind on one
// provider. Kinds that are not HTTP errors (reset, cut, hang, mid_stream)
// are not handled here.
func errorReply(e errorInfo) reply {
	switch e.kind {
	case FaultRateLimit:
		return rateLimitReply(e)
	case FaultSlowDown:
		return slowDownReply(e)
	case FaultOverload, FaultFailoverDemo:
		return overloadReply(e)
	case FaultSpendCap:
		return spendCapReply(e)
	case FaultDailyQuota:
		return dailyQuotaReply(e)
	case FaultServerError:
		return serverErrorReply(e)
	case FaultContextLength:
		return contextLengthReply(e)
	case FaultRequestTooLarge:
		return tooLargeReply(e)
	}
	return serverErrorReply(e)
}

func withRetryAfter(r reply, d time.Duration) reply {
	r.header.Set("Retry-After", retryAfterSeconds(d))
	return r
}

func perMinuteText(metric string) (long, abbrev string) {
	switch metric {
	case "tokens":
		return "tokens per min", "TPM"
	default:
		return "requests per min", "RPM"
	}
}

func rateLimitReply(e errorInfo) reply {
	if e.retryAfter <= 0 {
		e.retryAfter = 2 * time.Second
	}
	if e.metric == "" {
		e.metric = "requests"
	}
	if e.limit == 0 {
		e.limit, e.used = 60, 60
	}
	if e.requested == 0 {
		e.requested = 1
	}
	typ := "requests"
	if strings.Contains(e.metric, "tokens") {
		typ = "tokens"
	}
	switch e.provider {
	case "openai":
		long, ab := perMinuteText(typ)
		msg := fmt.Sprintf("Rate limit reached for %s in organization org-simulated on %s (%s): Limit %d, Used %d, Requested %d. Please try again in %s. Visit https://platform.openai.com/account/rate-limits to learn more.",
			e.model, long, ab, e.limit, e.used, e.requested, goDuration(e.retryAfter))
		return withRetryAfter(jsonReply(429, openAIStyle("openai", msg, typ, "rate_limit_exceeded")), e.retryAfter)
	case "groq":
		long, ab := "requests per minute", "RPM"
		if typ == "tokens" {
			long, ab = "tokens per minute", "TPM"
		}
		msg := fmt.Sprintf("Rate limit reached for model `%s` in organization `org_simulated` service tier `on_demand` on %s (%s): Limit %d, Used %d, Requested %d. Please try again in %s. Visit https://console.groq.com/docs/rate-limits for more information.",
			e.model, long, ab, e.limit, e.used, e.requested, goDuration(e.retryAfter))
		return withRetryAfter(jsonReply(429, openAIStyle("groq", msg, typ, "rate_limit_exceeded")), e.retryAfter)
	case "anthropic":
		unit := e.metric
		if unit == "tokens" {
			unit = "input tokens"
		}
		msg := fmt.Sprintf("This request would exceed your organization's rate limit of %s %s per minute (org: 00000000-0000-4000-8000-000000000000, model: %s). For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later. You may also contact sales at https://www.anthropic.com/contact-sales to discuss your options for a rate limit increase.",
			thousands(e.limit), unit, e.model)
		r := jsonReply(429, anthropicBody("rate_limit_error", msg, e.requestID, nil))
		return withRetryAfter(r, e.retryAfter)
	case "gemini":
		return geminiQuotaReply(e, false)
	case "deepseek":
		return jsonReply(429, openAIStyle("deepseek", "Rate Limit Reached", "rate_limit_error", "rate_limit_exceeded"))
	case "mistral":
		return jsonReply(429, openAIStyle("mistral", "Rate limit exceeded", "rate_limited", "1300"))
	case "xai":
		what, unit := "requests", "Requests per Minute"
		if typ == "tokens" {
			what, unit = "tokens", "Tokens per Minute"
		}
		msg := fmt.Sprintf("Too many %s for team 00000000-0000-4000-8000-000000000000 and model %s. Your team's rate limit is — %s (actual/limit): %d/%d. You can view your team rate limits at https://console.x.ai.",
			what, e.model, unit, e.used+e.requested, e.limit)
		return jsonReply(429, openAIStyle("xai", msg, "", "Some resource has been exhausted"))
	}
	return jsonReply(429, openAIStyle(e.provider, "Rate limit exceeded", "rate_limit_error", "rate_limit_exceeded"))
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// geminiQuotaReply is Gemini's 429 RESOURCE_EXHAUSTED with QuotaFailure,
// Help and RetryInfo details (per minute, or per day).
func geminiQuotaReply(e errorInfo, perDay bool) reply {
	if e.retryAfter <= 0 {
		e.retryAfter = 22 * time.Second
	}
	metric, quotaID, value := "generativelanguage.googleapis.com/generate_content_free_tier_requests",
		"GenerateRequestsPerMinutePerProjectPerModel-FreeTier", e.limit
	switch {
	case perDay:
		quotaID = "GenerateRequestsPerDayPerProjectPerModel-FreeTier"
	case strings.Contains(e.metric, "tokens"):
		metric = "generativelanguage.googleapis.com/generate_content_free_tier_input_token_count"
		quotaID = "GenerateContentInputTokensPerModelPerMinute-FreeTier"
	}
	if value == 0 {
		value = 10
	}
	msg := fmt.Sprintf("You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n* Quota exceeded for metric: %s, limit: %d, model: %s\nPlease retry in %s.",
		metric, value, e.model, protoDuration(e.retryAfter))
	details := []any{
		obj{
			"@type", "type.googleapis.com/google.rpc.QuotaFailure",
			"violations", []any{obj{
				"quotaMetric", metric,
				"quotaId", quotaID,
				"quotaDimensions", obj{"location", "global", "model", e.model},
				"quotaValue", strconv.FormatInt(value, 10),
			}},
		},
		obj{
			"@type", "type.googleapis.com/google.rpc.Help",
			"links", []any{obj{"description", "Learn more about Gemini API quotas", "url", "https://ai.google.dev/gemini-api/docs/rate-limits"}},
		},
		obj{"@type", "type.googleapis.com/google.rpc.RetryInfo", "retryDelay", protoDuration(e.retryAfter.Truncate(time.Second))},
	}
	return geminiReply(429, geminiBody(429, "RESOURCE_EXHAUSTED", msg, details))
}

func slowDownReply(e errorInfo) reply {
	if e.retryAfter <= 0 {
		e.retryAfter = 5 * time.Second
	}
	switch e.provider {
	case "openai":
		msg := "Your traffic grew too quickly, even though you're within your RPM and TPM limits. Please slow down and ramp up your traffic gradually."
		return withRetryAfter(jsonReply(429, openAIStyle("openai", msg, "rate_limit_error", "slow_down")), e.retryAfter)
	case "anthropic":
		msg := "Your organization's usage increased too quickly (acceleration limit). Please ramp up your traffic gradually and try again later. For details, refer to: https://docs.claude.com/en/api/rate-limits."
		return withRetryAfter(jsonReply(429, anthropicBody("rate_limit_error", msg, e.requestID, nil)), e.retryAfter)
	}
	return rateLimitReply(e)
}

func overloadReply(e errorInfo) reply {
	switch e.provider {
	case "openai":
		return jsonReply(503, openAIStyle("openai", "Our servers are currently overloaded. Please try again later.", "service_unavailable_error", "server_is_overloaded"))
	case "anthropic":
		return jsonReply(529, anthropicBody("overloaded_error", "Overloaded", e.requestID, nil))
	case "gemini":
		return geminiReply(503, geminiBody(503, "UNAVAILABLE", "The model is overloaded. Please try again later.", nil))
	case "groq":
		if e.code == "503" {
			return jsonReply(503, openAIStyle("groq", "Service Unavailable", "internal_server_error", nil))
		}
		return jsonReply(498, openAIStyle("groq", "Flex tier capacity exceeded. This is a transient error: please try again later.", "invalid_request_error", "capacity_exceeded"))
	case "deepseek":
		return jsonReply(503, openAIStyle("deepseek", "Server Overloaded", "unknown_error", "server_overloaded"))
	case "mistral":
		return jsonReply(503, openAIStyle("mistral", "Service unavailable, please retry later.", "service_unavailable", "3000"))
	case "xai":
		return jsonReply(503, openAIStyle("xai", "The model is currently overloaded. Please try again later.", "", "The service is currently unavailable"))
	}
	return jsonReply(503, openAIStyle(e.provider, "Service Unavailable", "server_error", nil))
}

// openAIBilling holds OpenAI's billing codes and their messages (the help
// center's wording; the exact API text is not published).
var openAIBilling = map[string]string{
	"insufficient_quota":                "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
	"credit_balance_exhausted":          "Your organization has no prepaid credits remaining. Add credits in your billing settings to continue: https://platform.openai.com/settings/organization/billing.",
	"organization_spend_limit_exceeded": "Your organization reached a configured hard spend limit. Raise the limit in your organization's limits settings to continue.",
	"project_spend_limit_exceeded":      "Your project reached a configured hard spend limit. Raise the project's spend limit to continue.",
	"organization_usage_limit_exceeded": "Your organization reached its OpenAI-assigned usage limit. Contact support or wait for the limit to reset.",
}

func spendCapReply(e errorInfo) reply {
	switch e.provider {
	case "openai":
		code := e.code
		if _, ok := openAIBilling[code]; !ok {
			code = "insufficient_quota"
		}
		return jsonReply(429, openAIStyle("openai", openAIBilling[code], "insufficient_quota", code))
	case "anthropic":
		reset := e.resetAt
		switch e.code {
		case "usage_limit":
			return jsonReply(400, anthropicBody("invalid_request_error", "You have reached your specified API usage limits. "+regainText(reset), e.requestID, nil))
		case "workspace_usage_limit":
			return jsonReply(400, anthropicBody("invalid_request_error", "You have reached your specified workspace API usage limits. "+regainText(reset), e.requestID, nil))
		case "credit_balance":
			return jsonReply(400, anthropicBody("invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.", e.requestID, nil))
		case "billing_error":
			return jsonReply(402, anthropicBody("billing_error", "There's an issue with your billing or payment information. Please check your billing settings in the Claude Console.", e.requestID, nil))
		}
		msg := "You have reached your API usage limits: your organization has crossed its monthly API usage threshold, set based on your organization's API tier. " + regainText(reset)
		r := jsonReply(429, anthropicBody("rate_limit_error", msg, e.requestID, obj{"error_code", "enforced_spend_limit_reached"}))
		r.noRetry = true // the docs: no retry-after; the SDKs' retries fail
		return r
	case "gemini":
		return geminiReply(402, geminiBody(402, "RESOURCE_EXHAUSTED", "Your prepayment credits are depleted. Please go to AI Studio at    https://ai.studio/projects to manage your project and billing. Learn more at https://ai.google.dev/gemini-api/docs/billing#prepay.", nil))
	case "deepseek":
		return jsonReply(402, openAIStyle("deepseek", "Insufficient Balance", "unknown_error", "invalid_request_error"))
	case "groq":
		e.code = "tpd"
		return dailyQuotaReply(e)
	case "mistral":
		return jsonReply(402, openAIStyle("mistral", "Insufficient credits: your workspace has no remaining credits or has reached its spending limit.", "invalid_request_error", "3505"))
	case "xai":
		status := 403
		if e.code == "429" {
			status = 429
		}
		msg := "Your team 00000000-0000-4000-8000-000000000000 has either used all available credits or reached its monthly spending limit. To continue making API requests, please purchase more credits or raise your spending limit."
		return jsonReply(status, openAIStyle("xai", msg, "", "permission-denied"))
	}
	return jsonReply(402, openAIStyle(e.provider, "Payment required", "billing_error", "billing_error"))
}

func dailyQuotaReply(e errorInfo) reply {
	switch e.provider {
	case "gemini":
		return geminiQuotaReply(e, true)
	case "groq":
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
		return withRetryAfter(jsonReply(429, openAIStyle("groq", msg, typ, "rate_limit_exceeded")), e.retryAfter)
	}
	return spendCapReply(e)
}

func serverErrorReply(e errorInfo) reply {
	status := 500
	switch e.code {
	case "502":
		status = 502
	case "504":
		status = 504
	}
	switch e.provider {
	case "anthropic":
		typ, msg := "api_error", "Internal server error"
		if status == 504 {
			typ, msg = "timeout_error", "Request timed out"
		}
		return jsonReply(status, anthropicBody(typ, msg, e.requestID, nil))
	case "gemini":
		if status == 504 {
			return geminiReply(504, geminiBody(504, "DEADLINE_EXCEEDED", "Deadline expired before operation could complete.", nil))
		}
		return geminiReply(500, geminiBody(500, "INTERNAL", "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting", nil))
	case "xai":
		return jsonReply(status, openAIStyle("xai", "An internal error occurred. Please try again later.", "", "Internal error"))
	case "mistral":
		return jsonReply(status, openAIStyle("mistral", "Internal server error", "internal_server_error", "3000"))
	}
	return jsonReply(status, openAIStyle(e.provider, "The server had an error while processing your request. Sorry about that!", "server_error", nil))
}

func contextLengthReply(e errorInfo) reply {
	maxTok, got := e.limit, e.requested
	if maxTok == 0 {
		maxTok = 128000
	}
	if got <= maxTok {
		got = maxTok + 1905
	}
	switch e.provider {
	case "anthropic":
		return jsonReply(400, anthropicBody("invalid_request_error", fmt.Sprintf("prompt is too long: %d tokens > %d maximum", got, maxTok), e.requestID, nil))
	case "gemini":
		return geminiReply(400, geminiBody(400, "INVALID_ARGUMENT", fmt.Sprintf("The input token count (%d) exceeds the maximum number of tokens allowed (%d).", got, maxTok), nil))
	case "xai":
		return jsonReply(400, openAIStyle("xai", fmt.Sprintf("This model's maximum prompt length is %d but the request contains %d tokens.", maxTok, got), "", "Client specified an invalid argument"))
	}
	msg := fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", maxTok, got)
	if e.provider == "mistral" {
		return jsonReply(400, openAIStyle("mistral", msg, "invalid_request_error", "context_length_exceeded"))
	}
	return jsonReply(400, mustJSON(obj{"error", obj{"message", msg, "type", "invalid_request_error", "param", "messages", "code", "context_length_exceeded"}}))
}

func tooLargeReply(e errorInfo) reply {
	if e.limit == 0 {
		e.limit = 30000
	}
	if e.requested <= e.limit {
		e.requested = e.limit + 601
	}
	switch e.provider {
	case "openai":
		msg := fmt.Sprintf("Request too large for %s in organization org-simulated on tokens per min (TPM): Limit %d, Requested %d. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.", e.model, e.limit, e.requested)
		return jsonReply(429, openAIStyle("openai", msg, "tokens", "rate_limit_exceeded"))
	case "groq":
		msg := fmt.Sprintf("Request too large for model `%s` in organization `org_simulated` service tier `on_demand` on tokens per minute (TPM): Limit %d, Requested %d, please reduce your message size and try again. Visit https://console.groq.com/docs/rate-limits for more information.", e.model, e.limit, e.requested)
		return jsonReply(413, openAIStyle("groq", msg, "tokens", "rate_limit_exceeded"))
	case "anthropic":
		return jsonReply(413, anthropicBody("request_too_large", "Request exceeds the maximum allowed number of bytes.", e.requestID, nil))
	case "gemini":
		return geminiReply(400, geminiBody(400, "INVALID_ARGUMENT", "Request payload size exceeds the limit: 20971520 bytes.", nil))
	}
	return jsonReply(413, openAIStyle(e.provider, "Request too large", "invalid_request_error", "request_too_large"))
}

// ---- auth and validation -------------------------------------------------

// authReply is the provider's answer to a missing (given=false) or wrong
// key. It never echoes the key.
func authReply(provider string, given bool, requestID string) reply {
	switch provider {
	case "openai":
		if !given {
			return jsonReply(401, openAIStyle("openai", "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're accessing the API from your browser and are prompted for a username. You can obtain an API key from https://platform.openai.com/account/api-keys.", "invalid_request_error", nil))
		}
		return jsonReply(401, openAIStyle("openai", "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.", "invalid_request_error", "invalid_api_key"))
	case "anthropic":
		msg := "invalid x-api-key"
		if !given {
			msg = "x-api-key header is required"
		}
		return jsonReply(401, anthropicBody("authentication_error", msg, requestID, nil))
	case "gemini":
		if !given {
			return geminiReply(403, geminiBody(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.", nil))
		}
		return geminiReply(400, geminiBody(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", []any{
			obj{"@type", "type.googleapis.com/google.rpc.ErrorInfo", "reason", "API_KEY_INVALID", "domain", "googleapis.com",
				"metadata", obj{"service", "generativelanguage.googleapis.com"}},
		}))
	case "groq":
		return jsonReply(401, openAIStyle("groq", "Invalid API Key", "invalid_request_error", "invalid_api_key"))
	case "deepseek":
		return jsonReply(401, openAIStyle("deepseek", "Authentication Fails, Your api key is invalid", "authentication_error", "invalid_request_error"))
	case "mistral":
		return jsonReply(401, mustJSON(obj{"message", "Unauthorized", "request_id", requestID}))
	case "xai":
		return jsonReply(400, openAIStyle("xai", "Incorrect API key provided. You can obtain an API key from https://console.x.ai.", "", "Client specified an invalid argument"))
	}
	return jsonReply(401, openAIStyle(provider, "Unauthorized", "authentication_error", nil))
}

// invalidReply is the provider's 400 for a malformed request.
func invalidReply(provider, message, param, requestID string) reply {
	switch provider {
	case "anthropic":
		return jsonReply(400, anthropicBody("invalid_request_error", message, requestID, nil))
	case "gemini":
		return geminiReply(400, geminiBody(400, "INVALID_ARGUMENT", message, nil))
	case "openai", "deepseek":
		var p any
		if param != "" {
			p = param
		}
		code := any(nil)
		if strings.HasPrefix(message, "Missing required parameter") {
			code = "missing_required_parameter"
		}
		return jsonReply(400, mustJSON(obj{"error", obj{"message", message, "type", "invalid_request_error", "param", p, "code", code}}))
	}
	return jsonReply(400, openAIStyle(provider, message, "invalid_request_error", nil))
}

// notFoundReply is the provider's 404 for a path it does not serve.
func notFoundReply(provider, path, requestID string) reply {
	switch provider {
	case "anthropic":
		return jsonReply(404, anthropicBody("not_found_error", "The requested resource could not be found.", requestID, nil))
	case "gemini":
		return geminiReply(404, geminiBody(404, "NOT_FOUND", "Requested entity was not found.", nil))
	case "openai", "groq", "deepseek":
		return jsonReply(404, openAIStyle(provider, fmt.Sprintf("Invalid URL (POST %s)", path), "invalid_request_error", nil))
	}
	return jsonReply(404, openAIStyle(provider, "Not Found", "invalid_request_error", "not_found"))
}
