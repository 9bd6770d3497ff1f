package proxy

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// apiError is an error the caller gets, before it is put in the caller's
// dialect.
type apiError struct {
	status     int
	class      stream.Class
	code       string // the provider's code, or the proxy's
	message    string
	param      string
	typ        string        // the caller's error.type, from the vocabulary ("": from the class and status)
	retryAfter time.Duration // > 0: a retry-after header
	retryable  bool          // no provider was called: the SDK may retry (x-should-retry: true)
}

// errKind is a final error as callers' vocabularies tell errors apart: a
// provider's class, with quota split into billing (until a person acts)
// and a quota with a reset, and the provider refusing the proxy's own key
// (authentication) apart from the caller's own mistakes.
type errKind int

const (
	kindServer    errKind = iota // the provider failed (5xx)
	kindOverload                 // the provider's capacity
	kindRateLimit                // the account's per-minute budget
	kindQuota                    // a quota with a reset (per day)
	kindBilling                  // spend limit, credit, billing: until a person acts
	kindCut                      // the answer broke (mid-stream, or the connection)
	kindTimeout                  // no answer in time
	kindCaller                   // the caller's own request is wrong
	kindAuth                     // the provider refused the proxy's key (401, 403)
	kindCount
)

// vocab is one caller dialect's word for a kind of error: its HTTP status,
// error.type and code ("": none of its own).
type vocab struct {
	status    int
	typ, code string
}

// vocabulary is the one table of what each caller gets for each kind of
// error, whichever provider failed: OpenAI's words for Chat Completions and
// Responses callers (openai-go reads the status and error.code), Anthropic's
// for Messages callers (the SDKs read error.type: 402 billing_error is a
// spend limit, 529 overloaded_error an overload). A provider's own code
// reaches the caller only when the provider speaks the caller's dialect
// (sameVocabulary): an OpenAI caller never gets Anthropic's codes.
//
// The provider refusing the proxy's key is 502, not 401: a 401 would tell
// the caller its proxy token is wrong; x-should-retry: false keeps the SDKs
// from retrying it.
var vocabulary = map[stream.Dialect]*[kindCount]vocab{
	stream.DialectOpenAI: {
		kindServer:    {http.StatusInternalServerError, "server_error", "server_error"},
		kindOverload:  {http.StatusServiceUnavailable, "service_unavailable_error", "server_is_overloaded"},
		kindRateLimit: {http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded"},
		kindQuota:     {http.StatusTooManyRequests, "insufficient_quota", "insufficient_quota"},
		kindBilling:   {http.StatusTooManyRequests, "insufficient_quota", "insufficient_quota"},
		kindCut:       {http.StatusBadGateway, "server_error", "server_error"},
		kindTimeout:   {http.StatusGatewayTimeout, "server_error", "timeout"},
		kindCaller:    {http.StatusBadRequest, "invalid_request_error", ""},
		kindAuth:      {http.StatusBadGateway, "server_error", "upstream_authentication_failed"},
	},
	stream.DialectAnthropic: {
		kindServer:    {http.StatusInternalServerError, "api_error", ""},
		kindOverload:  {529, "overloaded_error", ""},
		kindRateLimit: {http.StatusTooManyRequests, "rate_limit_error", ""},
		kindQuota:     {http.StatusTooManyRequests, "rate_limit_error", ""},
		kindBilling:   {http.StatusPaymentRequired, "billing_error", ""},
		kindCut:       {http.StatusInternalServerError, "api_error", ""},
		kindTimeout:   {http.StatusGatewayTimeout, "timeout_error", ""},
		kindCaller:    {http.StatusBadRequest, "invalid_request_error", ""},
		kindAuth:      {http.StatusBadGateway, "api_error", "upstream_authentication_failed"},
	},
}

// vocabOf is caller's table (Responses callers speak OpenAI's).
func vocabOf(caller stream.Dialect) *[kindCount]vocab {
	if caller == stream.DialectAnthropic {
		return vocabulary[stream.DialectAnthropic]
	}
	return vocabulary[stream.DialectOpenAI]
}

// sameVocabulary reports whether a provider speaking upstream uses the
// caller's error words.
func sameVocabulary(upstream, caller stream.Dialect) bool {
	family := func(d stream.Dialect) stream.Dialect {
		if d == stream.DialectResponses {
			return stream.DialectOpenAI
		}
		return d
	}
	return upstream != "" && family(upstream) == family(caller)
}

// kindOf is the kind of a provider's error.
func kindOf(e *stream.Error) errKind {
	switch e.Class {
	case stream.ClassOverload, stream.ClassFlexCapacity:
		// Flex capacity short is capacity the provider lacks for now, as
		// an overload is: a caller of another dialect gets its overload.
		return kindOverload
	case stream.ClassRateLimit:
		return kindRateLimit
	case stream.ClassQuota:
		if e.Delay > 0 {
			return kindQuota
		}
		return kindBilling
	case stream.ClassTimeout:
		return kindTimeout
	case stream.ClassConnection:
		return kindCut
	case stream.ClassCaller:
		if e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden {
			return kindAuth
		}
		return kindCaller
	case stream.ClassServer:
		if e.MidStream || e.Status == http.StatusOK {
			return kindCut
		}
	}
	return kindServer
}

// fromStream is the caller's error for a provider's error, in the caller's
// words (vocabulary); upstream is the dialect of the provider that failed
// ("" when unknown).
func fromStream(e *stream.Error, caller, upstream stream.Dialect) *apiError {
	msg := e.Message
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if msg == "" {
		msg = string(e.Class)
	}
	k := kindOf(e)
	v := vocabOf(caller)[k]
	ae := &apiError{status: v.status, class: e.Class, typ: v.typ, code: v.code, message: msg}
	if k == kindAuth {
		ae.message = fmt.Sprintf("limitscope proxy: the provider refused the proxy's own credentials (HTTP %d); your proxy token is fine, the key where the proxy runs is not: %s", e.Status, msg)
	}
	if k == kindCaller && e.Status >= 400 && e.Status < 500 && http.StatusText(e.Status) != "" {
		ae.status = e.Status // 404, 413, 422: the provider's own word for the caller's mistake
		ae.typ = ""          // from the status (openAIType, anthropicType)
	}
	if sameVocabulary(upstream, caller) && k != kindAuth {
		// The provider speaks the caller's dialect: its own words, as the
		// real API gives them (Anthropic's spend limit is a 429
		// rate_limit_error with enforced_spend_limit_reached; OpenAI's
		// credit_balance_exhausted).
		if e.Code != "" {
			ae.code = e.Code
		}
		if e.Status >= 400 && e.Status <= 599 && !e.MidStream && (caller == stream.DialectAnthropic || http.StatusText(e.Status) != "") {
			// (never a status of another API's own, such as Groq's 498, to
			// an OpenAI-dialect caller)
			ae.status = e.Status
			if caller == stream.DialectAnthropic {
				ae.typ = "" // from its code or status (anthropicType)
			}
		}
	}
	return ae
}

// upstreamOf is the dialect of the provider a call's last attempt went to.
func upstreamOf(res retry.Result) stream.Dialect {
	if n := len(res.Attempts); n > 0 {
		if info, ok := stream.Provider(res.Attempts[n-1].Target.Provider); ok {
			return info.Dialect
		}
	}
	return ""
}

// callError turns a call that did not succeed into the caller's error. now
// is for the time left before a retry.
func callError(res retry.Result, caller stream.Dialect, now time.Time) *apiError {
	e := res.Err
	if e == nil {
		e = &stream.Error{Class: stream.ClassServer, Message: "the call ended as " + string(res.Outcome)}
	}
	ae := fromStream(e, caller, upstreamOf(res))
	n := len(res.Attempts)
	switch res.Outcome {
	case retry.OutcomeStopped:
		// A quota stop keeps the provider's status, code and message.
		if ae.status < 400 || ae.status == http.StatusBadGateway {
			ae.status = http.StatusTooManyRequests
		}
		if res.CooldownHit {
			ae.status = http.StatusTooManyRequests
			ae.message = "limitscope: " + e.Message
			if !res.CooldownUntil.IsZero() {
				ae.retryAfter = res.CooldownUntil.Sub(now)
			}
		}
	case retry.OutcomeDeferred:
		left := res.RetryAt.Sub(now)
		if left < time.Second {
			left = time.Second
		}
		ae.status = http.StatusTooManyRequests
		ae.class = stream.ClassRateLimit
		ae.retryAfter = left
		ae.message = fmt.Sprintf("limitscope deferred the call: the provider asked for a wait longer than max-wait; retry after %s (at %s): %s",
			left.Round(time.Second), res.RetryAt.UTC().Format(time.RFC3339), ae.message)
	case retry.OutcomeGaveUp:
		ae.message = fmt.Sprintf("limitscope gave up after %d attempt%s: %s", n, plural(n), ae.message)
	case retry.OutcomeCancelled:
		ae.status = http.StatusBadGateway
		ae.message = "limitscope: the call was cancelled: " + ae.message
	}
	return ae
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// setErrorHeaders marks a final error: the SDKs must not retry it (the
// retry core already did what could be done). A refusal at the proxy's own
// caps, before any provider was called, is the exception.
func setErrorHeaders(h http.Header, e *apiError) {
	h.Set("Content-Type", "application/json")
	h.Set("X-Should-Retry", strconv.FormatBool(e.retryable))
	if e.retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(e.retryAfter.Seconds())), 10))
	}
}

// openAIType is the error.type an OpenAI SDK expects for an error.
func openAIType(e *apiError) string {
	if e.typ != "" {
		return e.typ
	}
	switch e.class {
	case stream.ClassQuota:
		return "insufficient_quota"
	case stream.ClassRateLimit:
		return "rate_limit_error"
	case stream.ClassOverload:
		return "service_unavailable_error"
	case stream.ClassCaller:
		switch e.status {
		case http.StatusUnauthorized:
			return "authentication_error"
		case http.StatusForbidden:
			return "permission_error"
		case http.StatusNotFound:
			return "not_found_error"
		}
		return "invalid_request_error"
	}
	return "server_error"
}

// anthropicTypes are the Messages API's error types.
var anthropicTypes = map[string]bool{
	"invalid_request_error": true, "authentication_error": true, "permission_error": true, "not_found_error": true,
	"request_too_large": true, "rate_limit_error": true, "api_error": true, "overloaded_error": true,
	"billing_error": true, "timeout_error": true,
}

// anthropicType is the error.type an Anthropic SDK expects for an error.
func anthropicType(e *apiError) string {
	if e.typ != "" {
		return e.typ
	}
	if anthropicTypes[e.code] {
		return e.code
	}
	switch e.status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 503, 529:
		return "overloaded_error"
	case 504:
		return "timeout_error"
	}
	switch e.class {
	case stream.ClassCaller:
		return "invalid_request_error"
	case stream.ClassQuota, stream.ClassRateLimit:
		return "rate_limit_error"
	case stream.ClassOverload:
		return "overloaded_error"
	case stream.ClassTimeout:
		return "timeout_error"
	}
	return "api_error"
}

// errorBody renders e in the caller's dialect.
func errorBody(e *apiError, caller stream.Dialect, requestID string) []byte {
	var v any
	if caller == stream.DialectAnthropic {
		typ := anthropicType(e)
		inner := map[string]any{"type": typ, "message": e.message}
		if e.code != "" && e.code != typ {
			inner["details"] = map[string]any{"error_code": e.code}
		}
		v = map[string]any{"type": "error", "error": inner, "request_id": requestID}
	} else {
		var code, param any
		if e.code != "" {
			code = e.code
		}
		if e.param != "" {
			param = e.param
		}
		v = map[string]any{"error": map[string]any{"message": e.message, "type": openAIType(e), "param": param, "code": code}}
	}
	b, _ := json.Marshal(v)
	return b
}

// writeError sends e as a complete HTTP error response.
func writeError(w http.ResponseWriter, e *apiError, caller stream.Dialect, requestID string) {
	setErrorHeaders(w.Header(), e)
	w.WriteHeader(e.status)
	_, _ = w.Write(append(errorBody(e, caller, requestID), '\n'))
}
