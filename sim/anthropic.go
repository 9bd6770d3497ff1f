package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
)

// anthropicDialect is the Messages API.
type anthropicDialect struct{}

// anthropicVersions are the anthropic-version values the API accepts (the
// versioning page); anything else is a 400.
var anthropicVersions = map[string]bool{"2023-01-01": true, "2023-06-01": true, "2026-10-21": true}

func anthropicBody(typ, message, requestID string, details obj) []byte {
	e := obj{"type", typ, "message", message}
	if details != nil {
		e = append(e, "details", details)
	}
	return mustJSON(obj{"type", "error", "error", e, "request_id", requestID})
}

func anthropicError(status int, typ, message, requestID string) reply {
	r := jsonReply(status, anthropicBody(typ, message, requestID, nil))
	if status == 429 || status >= 500 {
		r.header.Set("x-should-retry", "true")
	}
	return r
}

func (anthropicDialect) route(_ *provider, r *http.Request, sub string, req *simRequest) (reply, bool) {
	if sub != "/v1/messages" || r.Method != http.MethodPost {
		return jsonReply(404, anthropicBody("not_found_error", "The requested resource could not be found.", req.requestID, nil)), false
	}
	return reply{}, true
}

// auth accepts the key as x-api-key or as Authorization: Bearer (the
// current SDK majors send it as a bearer token), then requires a known
// anthropic-version.
func (anthropicDialect) auth(_ *provider, r *http.Request, requestID string) (reply, bool) {
	xKey := r.Header.Get("x-api-key")
	bKey, bGiven := bearer(r)
	switch {
	case validKey(xKey) || (xKey == "" && validKey(bKey)):
	case xKey != "":
		return anthropicError(401, "authentication_error", "invalid x-api-key", requestID), false
	case bGiven:
		// [unsourced] the 401 text for a bad bearer key.
		return anthropicError(401, "authentication_error", "invalid bearer token", requestID), false
	default:
		return anthropicError(401, "authentication_error", "x-api-key header is required", requestID), false
	}
	vs := r.Header.Values("anthropic-version")
	v := strings.Join(vs, ", ")
	switch {
	case len(vs) == 0 || v == "":
		return anthropicError(400, "invalid_request_error", "anthropic-version: header is required", requestID), false
	case !anthropicVersions[v]:
		return anthropicError(400, "invalid_request_error", fmt.Sprintf("anthropic-version: %q is not a valid version", v), requestID), false
	}
	return reply{}, true
}

func (anthropicDialect) parse(_ *provider, body []byte, r *http.Request, req *simRequest, requestID string) (reply, bool) {
	var in struct {
		Model       string          `json:"model"`
		Messages    []openAIMessage `json:"messages"`
		System      json.RawMessage `json:"system"`
		MaxTokens   *int            `json:"max_tokens"`
		Stream      bool            `json:"stream"`
		Temperature json.RawMessage `json:"temperature"`
		TopP        json.RawMessage `json:"top_p"`
		TopK        json.RawMessage `json:"top_k"`
	}
	bad := func(msg string) (reply, bool) {
		return anthropicError(400, "invalid_request_error", msg, requestID), false
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return bad("There was an issue with your request body: it is not valid JSON.")
	}
	switch {
	case in.MaxTokens == nil:
		return bad("max_tokens: Field required")
	case *in.MaxTokens < 1:
		return bad("max_tokens: Input should be greater than or equal to 1")
	case in.Model == "":
		return bad("model: Field required")
	case in.Messages == nil:
		return bad("messages: Field required")
	case len(in.Messages) == 0:
		return bad("messages: at least one message is required")
	}
	// Version 2026-10-21 removed the sampling parameters.
	if r.Header.Get("anthropic-version") == "2026-10-21" {
		for name, v := range map[string]json.RawMessage{"temperature": in.Temperature, "top_p": in.TopP, "top_k": in.TopK} {
			if len(v) > 0 {
				return bad(name + ": Extra inputs are not permitted (removed in anthropic-version 2026-10-21)")
			}
		}
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

// ---- answers --------------------------------------------------------------

// usage is Anthropic's usage object with its cache and tier fields.
func (a *answerPlan) anthropicUsage(out int) obj {
	return obj{"input_tokens", a.req.inputTokens, "cache_creation_input_tokens", 0, "cache_read_input_tokens", 0,
		"cache_creation", obj{"ephemeral_5m_input_tokens", 0, "ephemeral_1h_input_tokens", 0},
		"output_tokens", out, "service_tier", a.servedOr("standard"), "inference_geo", "not_available"}
}

func anthropicStop(finish string) string {
	if finish == "length" {
		return "max_tokens"
	}
	return "end_turn"
}

func (anthropicDialect) answer(a *answerPlan) (string, any) {
	return "application/json", obj{"id", a.id("msg_01", base58, 22), "type", "message", "role", "assistant", "model", a.req.model,
		"content", []any{obj{"type", "text", "text", a.text}}, "stop_reason", anthropicStop(a.finish), "stop_sequence", nil,
		"usage", a.anthropicUsage(a.out)}
}

func (anthropicDialect) stream(s *Server, ctx context.Context, o *sseOut, a *answerPlan) {
	msgID := a.id("msg_01", base58, 22)
	o.start("text/event-stream; charset=utf-8")
	o.event("message_start", obj{"type", "message_start", "message", obj{
		"model", a.req.model, "id", msgID, "type", "message", "role", "assistant", "content", []any{},
		"stop_reason", nil, "stop_sequence", nil, "usage", a.anthropicUsage(1)}})
	idx := 0 // the text block's index: 1 after a thinking block
	if len(a.thinking) > 0 {
		o.event("content_block_start", obj{"type", "content_block_start", "index", 0,
			"content_block", obj{"type", "thinking", "thinking", "", "signature", ""}})
		o.event("ping", obj{"type", "ping"})
		if !a.pace.sleep(ctx, s.closed, a.pace.firstToken) || !s.think(ctx, o, a, func(p string) {
			o.event("content_block_delta", obj{"type", "content_block_delta", "index", 0,
				"delta", obj{"type", "thinking_delta", "thinking", p}})
		}) {
			return
		}
		o.event("content_block_delta", obj{"type", "content_block_delta", "index", 0,
			"delta", obj{"type", "signature_delta", "signature", a.thinkingSignature()}})
		o.event("content_block_stop", obj{"type", "content_block_stop", "index", 0})
		idx = 1
		o.event("content_block_start", obj{"type", "content_block_start", "index", idx,
			"content_block", obj{"type", "text", "text", ""}})
	} else {
		o.event("content_block_start", obj{"type", "content_block_start", "index", 0,
			"content_block", obj{"type", "text", "text", ""}})
		o.event("ping", obj{"type", "ping"})
		if !a.pace.sleep(ctx, s.closed, a.pace.firstToken) {
			return
		}
	}
	pieces, _ := a.upToBreak(a.pieces)
	ok := s.paced(ctx, o, a, pieces, func(p string) {
		o.event("content_block_delta", obj{"type", "content_block_delta", "index", idx,
			"delta", obj{"type", "text_delta", "text", p}})
	})
	if !ok {
		return
	}
	if s.broke(ctx, o, a) {
		if a.d.kind == FaultMidStream {
			typ, msg := "overloaded_error", "Overloaded"
			if a.d.code == "api_error" {
				typ, msg = "api_error", "Internal server error"
			}
			o.event("error", obj{"type", "error", "error", obj{"type", typ, "message", msg}})
		}
		return
	}
	o.ending()
	o.event("content_block_stop", obj{"type", "content_block_stop", "index", idx})
	o.event("message_delta", obj{"type", "message_delta",
		"delta", obj{"stop_reason", anthropicStop(a.finish), "stop_sequence", nil},
		"usage", obj{"input_tokens", a.req.inputTokens, "cache_creation_input_tokens", 0, "cache_read_input_tokens", 0, "output_tokens", a.out + a.thinkTokens()}})
	o.event("message_stop", obj{"type", "message_stop"})
}

// ---- errors ---------------------------------------------------------------

func (anthropicDialect) errorReply(e errorInfo) reply {
	id := e.requestID
	switch e.kind {
	case FaultRateLimit:
		e = e.withDefaults()
		unit := e.metric
		if unit == "tokens" {
			unit = "input tokens"
		}
		msg := fmt.Sprintf("This request would exceed your organization's rate limit of %s %s per minute (org: 00000000-0000-4000-8000-000000000000, model: %s). For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later. You may also contact sales at https://www.anthropic.com/contact-sales to discuss your options for a rate limit increase.",
			thousands(e.limit), unit, e.model)
		return withRetryAfter(anthropicError(429, "rate_limit_error", msg, id), e.retryAfter)
	case FaultSlowDown:
		if e.retryAfter <= 0 {
			e.retryAfter = 5 * time.Second
		}
		msg := "Your organization's usage increased too quickly (acceleration limit). Please ramp up your traffic gradually and try again later. For details, refer to: https://docs.claude.com/en/api/rate-limits."
		return withRetryAfter(anthropicError(429, "rate_limit_error", msg, id), e.retryAfter)
	case FaultOverload, FaultFailoverDemo, FaultFlexCapacity:
		return anthropicError(529, "overloaded_error", "Overloaded", id)
	case FaultSpendCap, FaultDailyQuota:
		reset := e.resetAt
		switch e.code {
		case "usage_limit":
			return anthropicError(400, "invalid_request_error", "You have reached your specified API usage limits. "+regainText(reset), id)
		case "workspace_usage_limit":
			return anthropicError(400, "invalid_request_error", "You have reached your specified workspace API usage limits. "+regainText(reset), id)
		case "credit_balance":
			return anthropicError(400, "invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.", id)
		case "billing_error":
			return anthropicError(402, "billing_error", "There's an issue with your billing or payment information. Please check your billing settings in the Claude Console.", id)
		}
		msg := "You have reached your API usage limits: your organization has crossed its monthly API usage threshold, set based on your organization's API tier. " + regainText(reset)
		// The docs: no retry-after and no x-should-retry; the SDKs' retries fail.
		return jsonReply(429, anthropicBody("rate_limit_error", msg, id, obj{"error_code", "enforced_spend_limit_reached"}))
	case FaultContextLength:
		maxTok, got := e.contextNumbers()
		return anthropicError(400, "invalid_request_error", fmt.Sprintf("prompt is too long: %d tokens > %d maximum", got, maxTok), id)
	case FaultRequestTooLarge:
		return anthropicDialect{}.tooLarge(e)
	}
	if e.serverStatus() == 504 {
		return anthropicError(504, "timeout_error", "Request timed out", id)
	}
	return anthropicError(e.serverStatus(), "api_error", "Internal server error", id)
}

func (anthropicDialect) midStreamAsHTTP(e errorInfo) reply {
	if e.code == "api_error" {
		return anthropicError(500, "api_error", "Internal server error", e.requestID)
	}
	return anthropicError(529, "overloaded_error", "Overloaded", e.requestID)
}

func (anthropicDialect) tooLarge(e errorInfo) reply {
	return jsonReply(413, anthropicBody("request_too_large", "Request exceeds the maximum allowed number of bytes.", e.requestID, nil))
}

// anthropicPriorityHeaders names the Priority Tier's token windows
// (anthropic-priority-{input,output}-tokens-{limit,remaining,reset}),
// rounded to thousands like the regular token windows.
func anthropicPriorityHeaders(v limitView, h http.Header) {
	for _, w := range []struct {
		name string
		l    limiter
	}{{"input-tokens", v.st.pitpm}, {"output-tokens", v.st.potpm}} {
		if w.l == nil {
			continue
		}
		rem, reset := v.level(w.l, false)
		rem = int64(math.Round(float64(rem)/1000) * 1000)
		h.Set("anthropic-priority-"+w.name+"-limit", fmt.Sprint(w.l.Limit()))
		h.Set("anthropic-priority-"+w.name+"-remaining", fmt.Sprint(rem))
		h.Set("anthropic-priority-"+w.name+"-reset", rfc3339Reset(v.now, reset))
	}
}

func (anthropicDialect) limitHeaders(_ *provider, v limitView, h http.Header) {
	st := v.st
	set := func(name string, l limiter, round, hold bool) {
		if l == nil {
			return
		}
		rem, reset := v.level(l, hold)
		if round {
			rem = int64(math.Round(float64(rem)/1000) * 1000)
		}
		h.Set("anthropic-ratelimit-"+name+"-limit", fmt.Sprint(l.Limit()))
		h.Set("anthropic-ratelimit-"+name+"-remaining", fmt.Sprint(rem))
		h.Set("anthropic-ratelimit-"+name+"-reset", rfc3339Reset(v.now, reset))
	}
	set("requests", st.rpm, false, true)
	set("input-tokens", st.itpm, true, false)
	set("output-tokens", st.otpm, true, false)
	// tokens-* shows the most restrictive limit in effect.
	var tight limiter
	frac := 2.0
	for _, l := range []limiter{st.tpm, st.itpm, st.otpm} {
		if l == nil || l.Limit() == 0 {
			continue
		}
		if f := l.Remaining(v.now) / float64(l.Limit()); f < frac {
			tight, frac = l, f
		}
	}
	set("tokens", tight, true, false)
}
