package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// interactionsDialect is the Gemini API's Interactions API (POST
// /gemini/v1beta/interactions, and /gemini/v1/interactions as the 3.x SDKs
// send it), served by the gemini provider beside generateContent: one
// account, so the same limits (a request counts against gemini's per-minute
// and per-day limits), faults, holds and quota stops. Its wire code is its
// own (wire-formats-2.md, section 1):
//
//   - the key in x-goog-api-key or ?key=; none or another: 401
//     authentication **[unsourced]** (the code table's row);
//   - HTTP errors {"error":{"code":"<string>","message"}} with the
//     documented codes (rate_limit_exceeded with Retry-After, quota_exceeded
//     for the daily quota, payment_required, service_unavailable, api_error,
//     deadline_exceeded, invalid_request); a fault with code=rpc answers in
//     the generateContent shape ({"error":{"code":429,"status",details}}),
//     which the wire notes say a client should read too;
//   - the stream in the current ("steps") schema, or the legacy one when
//     asked with Api-Revision: 2026-05-07: interaction.created (legacy
//     interaction.start), interaction.status_update, step.start
//     (content.start), step.delta (content.delta) per piece, step.stop
//     (content.stop), interaction.completed (interaction.complete) with the
//     usage, then data: [DONE]; an answer cut by max_output_tokens ends
//     with status incomplete **[unsourced]**.
//
// Breaks after HTTP 200 (fault mid_stream; code picks the form): "" an error
// event service_unavailable; "rate_limit" rate_limit_exceeded; "quota"
// quota_exceeded; "gateway_timeout" the streaming example's error event;
// "failed" an interaction.status_update with status failed. No completed
// event and no [DONE] follow. A cut ends the stream without them.
type interactionsDialect struct{}

// interactionsLegacyRevision is the Api-Revision that keeps the legacy
// event names.
const interactionsLegacyRevision = "2026-05-07"

func ixReply(status int, code, message string) reply {
	return geminiReply(status, mustJSON(obj{"error", obj{"code", code, "message", message}}))
}

func (interactionsDialect) route(_ *provider, r *http.Request, _ string, _ *simRequest) (reply, bool) {
	if r.Method != http.MethodPost {
		return ixReply(404, "not_found", "Requested entity was not found."), false
	}
	return reply{}, true
}

func (interactionsDialect) auth(_ *provider, r *http.Request, _ string) (reply, bool) {
	k := r.Header.Get("x-goog-api-key")
	if k == "" {
		k = r.URL.Query().Get("key")
	}
	switch {
	case k == FakeKey:
		return reply{}, true
	case k == "":
		return ixReply(401, "authentication", "API key is missing. Please pass an API key in the x-goog-api-key header."), false
	}
	return ixReply(401, "authentication", "API key not valid. Please pass a valid API key."), false
}

// ixInputText reads input: a string, a content object, or a list of
// contents or steps (whose content is a list of contents).
func ixInputText(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	type item struct {
		Text    string `json:"text"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	var items []item
	if json.Unmarshal(raw, &items) != nil {
		var one item
		if json.Unmarshal(raw, &one) != nil {
			return "", false
		}
		items = []item{one}
	}
	var b strings.Builder
	for _, it := range items {
		b.WriteString(it.Text)
		for _, c := range it.Content {
			b.WriteString(c.Text)
		}
		b.WriteByte('\n')
	}
	return b.String(), true
}

func (interactionsDialect) parse(_ *provider, body []byte, r *http.Request, req *simRequest, _ string) (reply, bool) {
	var in struct {
		Model             string          `json:"model"`
		Input             json.RawMessage `json:"input"`
		Stream            *bool           `json:"stream"`
		SystemInstruction *string         `json:"system_instruction"`
		GenerationConfig  *struct {
			MaxOutputTokens *int `json:"max_output_tokens"`
		} `json:"generation_config"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return ixReply(400, "invalid_request", "Invalid JSON payload received."), false
	}
	if in.Model == "" {
		return ixReply(400, "invalid_request", "model is required."), false
	}
	text, ok := ixInputText(in.Input)
	if len(in.Input) == 0 || !ok {
		return ixReply(400, "invalid_request", "input is required."), false
	}
	if g := in.GenerationConfig; g != nil && g.MaxOutputTokens != nil && *g.MaxOutputTokens > 0 {
		req.maxTokens = *g.MaxOutputTokens
	}
	if in.SystemInstruction != nil {
		text = *in.SystemInstruction + "\n" + text
	}
	req.model = strings.TrimPrefix(in.Model, "models/")
	req.stream = in.Stream != nil && *in.Stream
	req.ixLegacy = strings.TrimSpace(r.Header.Get("Api-Revision")) == interactionsLegacyRevision
	req.prompt = text
	req.inputTokens = max(1, tokensOf(text))
	return reply{}, true
}

// ixNames are one schema's event names.
type ixNames struct{ created, start, delta, stop, completed, part string }

func (a *answerPlan) ixNames() ixNames {
	if a.req.ixLegacy {
		return ixNames{"interaction.start", "content.start", "content.delta", "content.stop", "interaction.complete", "content"}
	}
	return ixNames{"interaction.created", "step.start", "step.delta", "step.stop", "interaction.completed", "step"}
}

func (a *answerPlan) ixID() string { return a.id("v1_", alnum, 64) }

func (a *answerPlan) ixUsage() obj {
	return obj{"total_tokens", a.req.inputTokens + a.out, "total_input_tokens", a.req.inputTokens,
		"input_tokens_by_modality", []any{obj{"modality", "text", "tokens", a.req.inputTokens}},
		"total_cached_tokens", 0, "total_output_tokens", a.out, "total_tool_use_tokens", 0, "total_thought_tokens", 0}
}

func (a *answerPlan) ixStatus() string {
	if a.finish == "length" {
		return "incomplete"
	}
	return "completed"
}

// ixInteraction is the final interaction object (fields in the recorded
// order).
func (a *answerPlan) ixInteraction(id string, extra ...any) obj {
	ts := a.created.UTC().Format(time.RFC3339)
	o := obj{"id", id, "status", a.ixStatus(), "usage", a.ixUsage()}
	o = append(o, extra...)
	return append(o, "created", ts, "updated", ts, "service_tier", a.servedOr("standard"), "object", "interaction", "model", a.req.model)
}

func (interactionsDialect) answer(a *answerPlan) (string, any) {
	id := a.ixID()
	text := obj{"type", "text", "text", a.text}
	if a.req.ixLegacy {
		return "application/json; charset=UTF-8", a.ixInteraction(id, "outputs", []any{text}, "role", "model")
	}
	return "application/json; charset=UTF-8", a.ixInteraction(id, "steps", []any{obj{"type", "model_output", "content", []any{text}}})
}

// ixEvent writes one named event whose data repeats its name in
// event_type (last, as recorded).
func ixEvent(o *sseOut, typ string, fields ...any) {
	o.event(typ, append(obj(fields), "event_type", typ))
}

func (interactionsDialect) stream(s *Server, ctx context.Context, o *sseOut, a *answerPlan) {
	n := a.ixNames()
	id := a.ixID()
	o.start("text/event-stream")
	ixEvent(o, n.created, "interaction", obj{"id", id, "status", "in_progress", "object", "interaction", "model", a.req.model})
	ixEvent(o, "interaction.status_update", "interaction_id", id, "status", "in_progress")
	if !a.pace.sleep(ctx, s.closed, a.pace.firstToken) {
		return
	}
	partType := "model_output"
	if a.req.ixLegacy {
		partType = "text"
	}
	ixEvent(o, n.start, "index", 0, n.part, obj{"type", partType})
	pieces, _ := a.upToBreak(a.pieces)
	if !s.paced(ctx, o, a, pieces, func(p string) {
		ixEvent(o, n.delta, "index", 0, "delta", obj{"text", p, "type", "text"})
	}) {
		return
	}
	if s.broke(ctx, o, a) {
		if a.d.kind == FaultMidStream {
			ixMidStream(o, a, id)
		}
		return
	}
	o.ending()
	ixEvent(o, n.stop, "index", 0)
	if a.req.ixLegacy {
		ixEvent(o, n.completed, "interaction", a.ixInteraction(id, "role", "model"))
	} else {
		ixEvent(o, n.completed, "interaction", a.ixInteraction(id))
	}
	o.raw("data: [DONE]\n\n")
}

// ixMidStream writes the failure a mid_stream fault breaks the stream with,
// in the form its code picks (see interactionsDialect).
func ixMidStream(o *sseOut, a *answerPlan, id string) {
	errEvent := func(code, msg string) {
		ixEvent(o, "error", "error", obj{"code", code, "message", msg})
	}
	switch a.d.code {
	case "rate_limit":
		errEvent("rate_limit_exceeded", "Rate limit exceeded for model "+a.req.model+". Please retry later.")
	case "quota":
		errEvent("quota_exceeded", ixDailyMessage(a.req.model))
	case "gateway_timeout":
		// The streaming example (wire notes: a third-party copy of it).
		o.raw(`event: error` + "\n" + `data: {"event_type": "error", "error": {"code": "gateway_timeout", "message": "Deadline expired."}}` + "\n\n")
	case "failed":
		ixEvent(o, "interaction.status_update", "interaction_id", id, "status", "failed")
	default:
		errEvent("service_unavailable", "The model is overloaded. Please try again later.")
	}
}

func ixDailyMessage(model string) string {
	return "You exceeded your daily quota of requests for model " + model + ". The quota resets at midnight Pacific time. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
}

func (interactionsDialect) errorReply(e errorInfo) reply {
	rpc := e.code == "rpc"
	switch e.kind {
	case FaultRateLimit, FaultSlowDown:
		if rpc {
			return geminiQuotaReply(e, false)
		}
		e = e.withDefaults()
		code := "rate_limit_exceeded"
		if e.kind == FaultSlowDown || e.code == "too_many_requests" {
			code = "too_many_requests"
		}
		msg := fmt.Sprintf("Rate limit exceeded: %d %s per minute for model %s. Please retry in %s.", e.limit, e.unit(), e.model, protoDuration(e.retryAfter))
		return withRetryAfter(ixReply(429, code, msg), e.retryAfter)
	case FaultDailyQuota:
		if rpc {
			if e.retryAfter <= 0 || e.retryAfter > 22*time.Second {
				e.retryAfter = 22 * time.Second
			}
			return geminiQuotaReply(e, true)
		}
		return ixReply(429, "quota_exceeded", ixDailyMessage(e.model))
	case FaultSpendCap:
		if e.code == "billing" {
			return ixReply(400, "failed_precondition", "Billing is not enabled for this project. Enable billing in AI Studio at https://ai.studio/projects to use this model.")
		}
		return ixReply(402, "payment_required", "Your prepayment credits are depleted. Please go to AI Studio at    https://ai.studio/projects to manage your project and billing. Learn more at https://ai.google.dev/gemini-api/docs/billing#prepay.")
	case FaultOverload, FaultFailoverDemo, FaultFlexCapacity:
		return ixReply(503, "service_unavailable", "The model is overloaded. Please try again later.")
	case FaultContextLength:
		maxTok, got := e.contextNumbers()
		return ixReply(400, "invalid_request", fmt.Sprintf("The input token count (%d) exceeds the maximum number of tokens allowed (%d).", got, maxTok))
	case FaultRequestTooLarge:
		return interactionsDialect{}.tooLarge(e)
	}
	switch st := e.serverStatus(); st {
	case 504:
		return ixReply(504, "deadline_exceeded", "Deadline expired before operation could complete.")
	default:
		return ixReply(st, "api_error", "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting")
	}
}

func (d interactionsDialect) midStreamAsHTTP(e errorInfo) reply {
	switch e.code {
	case "rate_limit":
		e.kind, e.code, e.retryAfter = FaultRateLimit, "", time.Second
		return d.errorReply(e)
	case "quota":
		e.kind, e.code = FaultDailyQuota, ""
		return d.errorReply(e)
	case "gateway_timeout":
		return ixReply(504, "gateway_timeout", "Deadline expired.")
	case "failed":
		return ixReply(500, "api_error", "An internal error has occurred.")
	}
	return ixReply(503, "service_unavailable", "The model is overloaded. Please try again later.")
}

func (interactionsDialect) tooLarge(errorInfo) reply {
	return ixReply(400, "invalid_request", "Request payload size exceeds the limit: 20971520 bytes.")
}

// limitHeaders: the Interactions API documents no rate-limit headers.
func (interactionsDialect) limitHeaders(*provider, limitView, http.Header) {}
