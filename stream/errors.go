package stream

import (
	"bytes"
	"encoding/json"
	"github.com/limitscope/limitscope/internal/sanitize"
	"net/http"
	"strings"
	"time"
)

// ErrorBody is a provider error body decoded into provider-neutral fields.
// It understands OpenAI-style {"error":{"message","type","code","param"}},
// Anthropic {"type":"error","error":{"type","message","details"},
// "request_id"}, Gemini google.rpc.Status {"error":{"code","message",
// "status","details"}}, Mistral's flat {"object":"error",...}, xAI's flat
// {"code","error"}, a bare {"message"} and FastAPI's {"detail"}.
type ErrorBody struct {
	Found         bool          // an error envelope was recognised
	Code          string        // error.code when a string (OpenAI-style, Mistral, xAI's flat code)
	NumCode       int           // error.code when a number (Gemini: the HTTP status)
	Type          string        // error.type (OpenAI-style, Anthropic) or Mistral's flat type
	Status        string        // Gemini's canonical status, e.g. RESOURCE_EXHAUSTED
	DetailCode    string        // Anthropic error.details.error_code
	Message       string        // the human text (a non-string message is kept as compact JSON)
	QuotaIDs      []string      // Gemini QuotaFailure violations[].quotaId
	RetryDelay    time.Duration // Gemini RetryInfo.retryDelay
	HasRetryDelay bool
	RequestID     string // the body's request_id
}

// ParseErrorBody decodes an error body of any known shape. Leading blank
// lines and whitespace are tolerated; anything it cannot read leaves Found
// false. It never panics.
func ParseErrorBody(body []byte) ErrorBody {
	var b ErrorBody
	var top map[string]json.RawMessage
	if err := json.Unmarshal(bytes.TrimSpace(body), &top); err != nil || top == nil {
		return b
	}
	b.RequestID = jsonString(top["request_id"])
	if raw, ok := top["error"]; ok && !isNull(raw) {
		var inner map[string]json.RawMessage
		if json.Unmarshal(raw, &inner) == nil && inner != nil {
			b.Found = true
			b.Message = jsonText(inner["message"])
			b.Type = jsonString(inner["type"])
			b.Status = jsonString(inner["status"])
			b.Code, b.NumCode = jsonCode(inner["code"])
			parseDetails(&b, inner["details"])
			if b.Message == "" {
				b.Message = jsonText(inner["error"])
			}
		} else if s := jsonText(raw); s != "" {
			// xAI's flat {"code": "...", "error": "..."}.
			b.Found = true
			b.Message = s
			b.Code, b.NumCode = jsonCode(top["code"])
		}
		return b
	}
	if jsonString(top["object"]) == "error" || top["message"] != nil || top["detail"] != nil {
		// Mistral's flat envelope, a bare {"message"}, FastAPI's {"detail"}.
		b.Found = true
		b.Message = jsonText(top["message"])
		if b.Message == "" {
			b.Message = jsonText(top["detail"])
		}
		b.Type = jsonString(top["type"])
		b.Code, b.NumCode = jsonCode(top["code"])
	}
	return b
}

func isNull(raw json.RawMessage) bool {
	s := string(bytes.TrimSpace(raw))
	return s == "" || s == "null" || s == "false" || s == `""` || s == "{}"
}

// jsonString returns raw as a string when it is one.
func jsonString(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// jsonText returns a string value, or any other non-null value as compact
// JSON (Mistral sends {"detail":[...]} as a message).
func jsonText(raw json.RawMessage) string {
	if isNull(raw) {
		return ""
	}
	if s := jsonString(raw); s != "" {
		return s
	}
	var c bytes.Buffer
	if json.Compact(&c, raw) != nil {
		return ""
	}
	return sanitize.Truncate(c.String(), maxMessage)
}

// jsonCode reads a code that may be a string or a number.
func jsonCode(raw json.RawMessage) (string, int) {
	if isNull(raw) {
		return "", 0
	}
	if s := jsonString(raw); s != "" {
		return s, 0
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil && f >= 0 && f < 1e6 {
		return "", int(f)
	}
	return "", 0
}

func parseDetails(b *ErrorBody, raw json.RawMessage) {
	if isNull(raw) {
		return
	}
	// Anthropic: an object {"error_code": ...}.
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil {
		b.DetailCode = jsonString(obj["error_code"])
		return
	}
	// Gemini: an array of typed google.rpc messages.
	var list []map[string]json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return
	}
	for _, d := range list {
		typ := jsonString(d["@type"])
		switch {
		case strings.HasSuffix(typ, "google.rpc.QuotaFailure"):
			var vs []map[string]json.RawMessage
			if json.Unmarshal(d["violations"], &vs) == nil {
				for _, v := range vs {
					if id := jsonString(v["quotaId"]); id != "" {
						b.QuotaIDs = append(b.QuotaIDs, id)
					}
				}
			}
		case strings.HasSuffix(typ, "google.rpc.RetryInfo"):
			if d, ok := ParseDuration(jsonString(d["retryDelay"])); ok && !b.HasRetryDelay {
				b.RetryDelay, b.HasRetryDelay = d, true
			}
		}
	}
}

// ProviderCode returns the provider's most specific code, in its dialect's
// order: Anthropic error.details.error_code else error.type; Gemini
// error.status; the others error.code else error.type.
func (b ErrorBody) ProviderCode(provider string) string {
	p := providerRow(provider)
	return b.providerCode(&p)
}

func (b ErrorBody) providerCode(p *ProviderInfo) string {
	for _, c := range p.spec().codeOrder(b) {
		if c != "" {
			return c
		}
	}
	return ""
}

// impliedStatus is the HTTP status an error inside a 200 stream stands for,
// read from its numeric code or its type/code/status names; 0 when unknown.
func (b ErrorBody) impliedStatus() int {
	if b.NumCode >= 400 && b.NumCode <= 599 {
		return b.NumCode
	}
	for _, name := range []string{b.DetailCode, b.Code, b.Type, b.Status} {
		switch strings.ToLower(name) {
		case "overloaded_error":
			return 529
		case "server_is_overloaded", "service_unavailable_error", "unavailable", "service_unavailable":
			return 503
		case "rate_limit_error", "rate_limit_exceeded", "rate_limited", "resource_exhausted", "slow_down",
			"insufficient_quota", "enforced_spend_limit_reached", "credit_balance_exhausted",
			"organization_spend_limit_exceeded", "project_spend_limit_exceeded", "organization_usage_limit_exceeded":
			return 429
		case "billing_error":
			return 402
		case "invalid_request_error", "invalid_argument", "failed_precondition", "context_length_exceeded":
			return 400
		case "authentication_error", "unauthenticated", "invalid_api_key":
			return 401
		case "permission_error", "permission_denied", "permission-denied":
			return 403
		case "not_found_error", "not_found", "model_not_found":
			return 404
		case "request_too_large":
			return 413
		case "api_error", "server_error", "internal", "internal_error":
			return 500
		case "timeout_error", "deadline_exceeded":
			return 504
		}
	}
	return 0
}

// ParseError classifies an HTTP error response (status, headers, body) from
// provider into an *Error, with its code, message, quota id, request id, the
// server's delay, x-should-retry, and for quota stops the scope and reset.
func ParseError(provider string, status int, h http.Header, body []byte, now time.Time) *Error {
	p := providerRow(provider)
	return parseError(&p, status, h, body, now)
}

func parseError(p *ProviderInfo, status int, h http.Header, body []byte, now time.Time) *Error {
	b := ParseErrorBody(body)
	if fix := p.spec().errorBody; fix != nil {
		fix(h, body, &b)
	}
	e := buildError(p, status, b, h, now)
	e.Status = status
	if flexCapacity(p, Target{}, status, e) {
		// A status that means short flex capacity whatever was asked
		// (Groq's 498); one that needs the request's tier is decided by
		// the attempt.
		e.Class = ClassFlexCapacity
	}
	if !b.Found && len(bytes.TrimSpace(body)) > 0 {
		e.Snippet = snippet(body)
		if e.Message == "" {
			e.Message = http.StatusText(status)
		}
	}
	return e
}

// buildError fills an Error from a decoded body; status is the status used
// for classification (implied, for an error inside a stream).
func buildError(p *ProviderInfo, status int, b ErrorBody, h http.Header, now time.Time) *Error {
	v := classify(p.spec(), status, b)
	e := &Error{
		Class:         v.class,
		ModelSpecific: v.modelSpecific,
		Code:          b.providerCode(p),
		Message:       sanitize.Truncate(b.Message, maxMessage),
		RequestID:     requestID(p, h, b),
	}
	for _, id := range b.QuotaIDs {
		if e.QuotaID == "" || strings.Contains(id, "PerDay") {
			e.QuotaID = id
		}
	}
	e.Delay, e.DelaySource = ServerDelay(h, b, now)
	if h != nil && strings.EqualFold(strings.TrimSpace(h.Get("X-Should-Retry")), "false") {
		e.NoRetry = true
	}
	if v.class == ClassQuota {
		e.Scope = v.scope
		e.ResetAt = quotaReset(v, p.spec(), b, e.Delay, now)
	}
	return e
}

// requestID reads the request id from the provider's header (the table's
// RequestIDHeader, else its dialect's), then from the usual ones (a gateway
// may add its own), then from the body.
func requestID(p *ProviderInfo, h http.Header, b ErrorBody) string {
	if h != nil {
		for _, k := range []string{p.RequestIDHeader, p.spec().requestIDHeader, "X-Request-Id", "Request-Id"} {
			if k == "" {
				continue
			}
			if id := h.Get(k); id != "" {
				return id
			}
		}
	}
	return b.RequestID
}
