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
	retryAfter time.Duration // > 0: a retry-after header
	retryable  bool          // no provider was called: the SDK may retry (x-should-retry: true)
}

// statusOf is the HTTP status for a provider's error: its own status when it
// was an HTTP error, else (mid-stream, no response) the one its class stands
// for in the caller's dialect.
func statusOf(e *stream.Error, caller stream.Dialect) int {
	if e.Status >= 400 && e.Status <= 599 && (caller == stream.DialectAnthropic || http.StatusText(e.Status) != "") {
		return e.Status
	}
	// An OpenAI-dialect caller (Chat Completions, Responses) never gets a
	// status of another API's own, such as Anthropic's or Bedrock's 529 or
	// Groq's 498: its class's status in the caller's dialect stands in.
	switch e.Class {
	case stream.ClassQuota:
		if e.Code == "billing_error" {
			return http.StatusPaymentRequired
		}
		return http.StatusTooManyRequests
	case stream.ClassRateLimit:
		return http.StatusTooManyRequests
	case stream.ClassOverload:
		if caller == stream.DialectAnthropic {
			return 529
		}
		return http.StatusServiceUnavailable
	case stream.ClassCaller:
		return http.StatusBadRequest
	case stream.ClassTimeout:
		return http.StatusGatewayTimeout
	case stream.ClassServer:
		if e.MidStream || e.Status == 200 {
			return http.StatusBadGateway
		}
		return http.StatusInternalServerError
	}
	return http.StatusBadGateway // connection and anything unknown
}

// fromStream is the caller's error for a provider's error.
func fromStream(e *stream.Error, caller stream.Dialect) *apiError {
	msg := e.Message
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if msg == "" {
		msg = string(e.Class)
	}
	return &apiError{status: statusOf(e, caller), class: e.Class, code: e.Code, message: msg}
}

// callError turns a call that did not succeed into the caller's error. now
// is for the time left before a retry.
func callError(res retry.Result, caller stream.Dialect, now time.Time) *apiError {
	e := res.Err
	if e == nil {
		e = &stream.Error{Class: stream.ClassServer, Message: "the call ended as " + string(res.Outcome)}
	}
	ae := fromStream(e, caller)
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
