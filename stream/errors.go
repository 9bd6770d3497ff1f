package stream

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
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
	return sanitize(c.String(), maxMessage)
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

// ProviderCode returns the provider's most specific code: Anthropic
// error.details.error_code else error.type; Gemini error.status; the others
// error.code else error.type.
func (b ErrorBody) ProviderCode(provider string) string {
	var order []string
	switch dialectOf(provider) {
	case DialectAnthropic:
		order = []string{b.DetailCode, b.Type, b.Code}
	case DialectGemini:
		order = []string{b.Status, b.Code, b.Type}
	default:
		order = []string{b.Code, b.Type, b.Status}
	}
	for _, c := range order {
		if c != "" {
			return c
		}
	}
	return ""
}

func dialectOf(provider string) Dialect {
	if p, ok := lookupProvider(provider); ok {
		return p.Dialect
	}
	return DialectOpenAI
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

var quotaCodes = map[string]bool{
	"insufficient_quota":                true,
	"credit_balance_exhausted":          true,
	"organization_spend_limit_exceeded": true,
	"project_spend_limit_exceeded":      true,
	"organization_usage_limit_exceeded": true,
	"billing_hard_limit_reached":        true,
}

var (
	contextTooLongRE = regexp.MustCompile(`(?i)(input context is too long|context (?:is )?too long|prompt is too long|exceeds the maximum number of tokens|maximum context length|context window)`)
	regainRE         = regexp.MustCompile(`(?i)regain access on (\d{4}-\d{2}-\d{2})(?: at (\d{1,2}):(\d{2}))? UTC`)
	perDayMsgRE      = regexp.MustCompile(`(?i)(?:tokens|requests) per day|\((?:TPD|RPD)\)`)
)

// verdict is what the classes table says about one error.
type verdict struct {
	class         Class
	modelSpecific bool
	scope         Scope
	perDay        bool // a per-day quota (its reset is the day's)
	spendCap      bool // Anthropic's tier spend cap (resets on the 1st)
}

// classify applies the classes table of the engine issue (first matching row
// wins) to an error of the given HTTP status (for an error inside a 200
// stream, the status its body implies; 0 when unknown).
func classify(provider string, status int, b ErrorBody) verdict {
	code, typ := strings.ToLower(b.Code), strings.ToLower(b.Type)
	msg := b.Message
	d := dialectOf(provider)

	// quota: a person must act.
	switch {
	case quotaCodes[code] || quotaCodes[typ]:
		return verdict{class: ClassQuota, scope: ScopeAccount}
	case b.DetailCode == "enforced_spend_limit_reached":
		return verdict{class: ClassQuota, scope: ScopeAccount, spendCap: true}
	case (status == 400 || status == 429) &&
		(strings.HasPrefix(msg, "You have reached your specified API usage limits") ||
			strings.HasPrefix(msg, "You have reached your specified workspace API usage limits") ||
			strings.HasPrefix(msg, "You have reached your API usage limits")):
		return verdict{class: ClassQuota, scope: ScopeAccount}
	case status == 400 && strings.Contains(strings.ToLower(msg), "credit balance is too low"):
		return verdict{class: ClassQuota, scope: ScopeAccount}
	case status == 402:
		return verdict{class: ClassQuota, scope: ScopeAccount}
	}
	for _, id := range b.QuotaIDs {
		if strings.Contains(id, "PerDay") {
			return verdict{class: ClassQuota, scope: ScopeTarget, perDay: true}
		}
	}
	if perDayMsgRE.MatchString(msg) && (status == 429 || status == 413 || status == 0) {
		return verdict{class: ClassQuota, scope: ScopeTarget, perDay: true}
	}
	if lm := strings.ToLower(msg); strings.Contains(lm, "used all available credits") ||
		strings.Contains(lm, "reached its monthly spending limit") {
		return verdict{class: ClassQuota, scope: ScopeAccount}
	}

	// caller, model-specific: another model may take it.
	switch {
	case code == "context_length_exceeded" || typ == "context_length_exceeded":
		return verdict{class: ClassCaller, modelSpecific: true}
	case (status == 429 || status == 413) && strings.HasPrefix(strings.TrimSpace(msg), "Request too large"):
		return verdict{class: ClassCaller, modelSpecific: true}
	case status == 400 && contextTooLongRE.MatchString(msg):
		return verdict{class: ClassCaller, modelSpecific: true}
	case status == 500 && d == DialectGemini && contextTooLongRE.MatchString(msg):
		return verdict{class: ClassCaller, modelSpecific: true}
	}

	// caller: fix the request.
	switch status {
	case 400, 401, 403, 404, 413, 422:
		return verdict{class: ClassCaller}
	}
	if d == DialectGemini && (status == 504 || status == 0) && strings.EqualFold(b.Status, "DEADLINE_EXCEEDED") {
		return verdict{class: ClassCaller}
	}

	switch {
	case status == 429:
		return verdict{class: ClassRateLimit}
	case status == 503 || status == 529 || status == 498:
		return verdict{class: ClassOverload}
	case status == 500 || status == 502 || status == 504 || status == 408 || status == 409:
		return verdict{class: ClassServer}
	case status >= 400 && status < 500:
		return verdict{class: ClassCaller}
	}
	return verdict{class: ClassServer}
}

// quotaReset says when a quota stop ends, when the provider said so: the
// message's "You will regain access on 2026-09-01 at 00:00 UTC"; Anthropic's
// tier spend cap at 00:00 UTC on the 1st of next month; Gemini's daily quota
// at the next midnight in America/Los_Angeles; another per-day limit after
// the server's delay. Zero when unknown.
func quotaReset(v verdict, provider string, b ErrorBody, delay time.Duration, now time.Time) time.Time {
	if m := regainRE.FindStringSubmatch(b.Message); m != nil {
		if t, err := time.Parse("2006-01-02", m[1]); err == nil {
			if m[2] != "" {
				h, _ := strconv.Atoi(m[2])
				mi, _ := strconv.Atoi(m[3])
				if h < 24 && mi < 60 {
					t = t.Add(time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute)
				}
			}
			return t
		}
	}
	switch {
	case v.spendCap:
		return FirstOfNextMonthUTC(now)
	case v.perDay && dialectOf(provider) == DialectGemini:
		return NextPacificMidnight(now)
	case v.perDay && delay > 0:
		return now.Add(delay)
	}
	return time.Time{}
}

// FirstOfNextMonthUTC returns 00:00 UTC on the first day of the month after
// now's (Anthropic's tier spend cap resets then).
func FirstOfNextMonthUTC(now time.Time) time.Time {
	u := now.UTC()
	return time.Date(u.Year(), u.Month()+1, 1, 0, 0, 0, 0, time.UTC)
}

// NextPacificMidnight returns the next midnight in America/Los_Angeles after
// now, in UTC (Gemini's daily quotas reset then). The zone comes from the
// embedded tzdata, so it works on machines without a zoneinfo database.
func NextPacificMidnight(now time.Time) time.Time {
	loc, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		loc = pacificFallback(now)
	}
	t := now.In(loc)
	y, m, d := t.Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, loc).UTC()
}

// pacificFallback is US Pacific time by the post-2007 DST rule (second
// Sunday of March to first Sunday of November), for the unlikely case the
// embedded zone cannot load.
func pacificFallback(now time.Time) *time.Location {
	u := now.UTC()
	sunday := func(month time.Month, nth int) time.Time {
		t := time.Date(u.Year(), month, 1, 0, 0, 0, 0, time.UTC)
		for t.Weekday() != time.Sunday {
			t = t.AddDate(0, 0, 1)
		}
		return t.AddDate(0, 0, 7*(nth-1))
	}
	start := sunday(time.March, 2).Add(10 * time.Hour) // 02:00 PST
	end := sunday(time.November, 1).Add(9 * time.Hour) // 02:00 PDT
	if !u.Before(start) && u.Before(end) {
		return time.FixedZone("PDT", -7*3600)
	}
	return time.FixedZone("PST", -8*3600)
}

// ParseError classifies an HTTP error response (status, headers, body) from
// provider into an *Error, with its code, message, quota id, request id, the
// server's delay, x-should-retry, and for quota stops the scope and reset.
func ParseError(provider string, status int, h http.Header, body []byte, now time.Time) *Error {
	b := ParseErrorBody(body)
	e := buildError(provider, status, b, h, now)
	e.Status = status
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
func buildError(provider string, status int, b ErrorBody, h http.Header, now time.Time) *Error {
	v := classify(provider, status, b)
	e := &Error{
		Class:         v.class,
		ModelSpecific: v.modelSpecific,
		Code:          b.ProviderCode(provider),
		Message:       sanitize(b.Message, maxMessage),
		RequestID:     requestID(h, b),
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
		e.ResetAt = quotaReset(v, provider, b, e.Delay, now)
	}
	return e
}

func requestID(h http.Header, b ErrorBody) string {
	if h != nil {
		if id := h.Get("X-Request-Id"); id != "" {
			return id
		}
		if id := h.Get("Request-Id"); id != "" {
			return id
		}
	}
	return b.RequestID
}
