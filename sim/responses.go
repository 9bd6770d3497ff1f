package sim

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// responsesDialect is OpenAI's Responses API (POST /openai/v1/responses),
// served by the openai provider beside Chat Completions: one account, so
// the same limits, faults and holds, and before the stream the same HTTP
// errors, rate-limit headers and request ids (the embedded openAIDialect's).
// Only the body and the stream differ (wire-formats-2.md, section 2):
// response.created, response.in_progress, output_item.added and
// content_part.added before the first output_text.delta, the .done events,
// then response.completed (response.incomplete, reason max_output_tokens,
// when max_output_tokens cut the answer) with the usage; no data: [DONE].
//
// Breaks after HTTP 200 (fault mid_stream; code picks the shape):
//   - "" (default): the nested error event OpenAI was seen sending
//     ({"type":"error","error":{...server_is_overloaded}}), then
//     response.failed with the same code;
//   - "server_error": response.failed alone (code server_error, the spec's
//     example);
//   - "rate_limit": the spec's flat error event (code rate_limit_exceeded,
//     "Please try again in 1s."), then response.failed;
//   - "insufficient_quota": the recorded nested insufficient_quota error,
//     then response.failed.
//
// A cut ends the stream without a terminal event, as for Chat Completions.
type responsesDialect struct{ openAIDialect }

func (responsesDialect) route(p *provider, r *http.Request, _ string, _ *simRequest) (reply, bool) {
	if r.Method != http.MethodPost {
		return p.compat.notFoundReply(r.Method, strings.TrimPrefix(r.URL.Path, "/"+p.name)), false
	}
	return reply{}, true
}

// responsesInputText reads input: a string, or a list of messages whose
// content is a string or a list of parts with text.
func responsesInputText(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var items []struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &items) != nil {
		return "", false
	}
	var b strings.Builder
	for _, it := range items {
		b.WriteString(contentText(it.Content))
		b.WriteByte('\n')
	}
	return b.String(), true
}

func (d responsesDialect) parse(p *provider, body []byte, _ *http.Request, req *simRequest, _ string) (reply, bool) {
	var in struct {
		Model           string          `json:"model"`
		Input           json.RawMessage `json:"input"`
		Instructions    *string         `json:"instructions"`
		Stream          *bool           `json:"stream"`
		MaxOutputTokens *int            `json:"max_output_tokens"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return d.invalid(p, "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The API expects a JSON payload, but what was sent was not valid JSON.)", ""), false
	}
	if in.Model == "" {
		return d.invalid(p, "Missing required parameter: 'model'.", "model"), false
	}
	text, ok := responsesInputText(in.Input)
	if len(in.Input) == 0 || !ok {
		return d.invalid(p, "Missing required parameter: 'input'.", "input"), false
	}
	if mt := in.MaxOutputTokens; mt != nil {
		if *mt < 16 {
			return d.invalid(p, "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got "+strconv.Itoa(*mt)+" instead.", "max_output_tokens"), false
		}
		req.maxTokens = *mt
	}
	req.model = in.Model
	req.stream = in.Stream != nil && *in.Stream
	if in.Instructions != nil {
		text = *in.Instructions + "\n" + text
	}
	req.prompt = text
	req.inputTokens = tokensOf(text) + 4
	return reply{}, true
}

// respIDs are one answer's ids.
type respIDs struct{ resp, msg string }

func (a *answerPlan) respIDs() respIDs {
	return respIDs{resp: a.id("resp_", hexDigits, 48), msg: a.id("msg_", hexDigits, 48)}
}

func (a *answerPlan) respUsage() obj {
	out := a.out + a.thinkTokens() // output tokens include the reasoning
	return obj{"input_tokens", a.req.inputTokens, "input_tokens_details", obj{"cached_tokens", 0},
		"output_tokens", out, "output_tokens_details", obj{"reasoning_tokens", a.thinkTokens()},
		"total_tokens", a.req.inputTokens + out}
}

// respReasoningID is the reasoning item's id in a thinking phase.
func (a *answerPlan) respReasoningID() string { return a.id("rs_", hexDigits, 48) }

// respObject is the response object in a given status; output and usage
// only when the answer is over.
func (a *answerPlan) respObject(ids respIDs, status string, errv, incomplete, output, usage any) obj {
	var mot any
	if a.req.maxTokens > 0 {
		mot = a.req.maxTokens
	}
	if output == nil {
		output = []any{}
	}
	o := obj{"id", ids.resp, "object", "response", "created_at", a.created.Unix(), "status", status,
		"error", errv, "incomplete_details", incomplete, "max_output_tokens", mot, "model", a.req.model,
		"output", output, "store", false, "text", obj{"format", obj{"type", "text"}}, "usage", usage}
	if a.req.tier != "" {
		// The response object names the tier that serves it.
		o = append(o, "service_tier", a.servedOr("default"))
	}
	return o
}

func (a *answerPlan) respMessage(ids respIDs, status, text string) obj {
	content := []any{}
	if status != "in_progress" {
		content = []any{obj{"type", "output_text", "text", text, "annotations", []any{}}}
	}
	return obj{"id", ids.msg, "type", "message", "status", status, "role", "assistant", "content", content}
}

func (responsesDialect) answer(a *answerPlan) (string, any) {
	ids := a.respIDs()
	status, incomplete, item := "completed", any(nil), "completed"
	if a.finish == "length" {
		status, incomplete, item = "incomplete", obj{"reason", "max_output_tokens"}, "incomplete"
	}
	return "application/json", a.respObject(ids, status, nil, incomplete, []any{a.respMessage(ids, item, a.text)}, a.respUsage())
}

// respOut writes Responses events with their sequence numbers.
type respOut struct {
	o   *sseOut
	seq int
}

func (r *respOut) event(typ string, fields ...any) {
	r.o.event(typ, append(obj{"type", typ, "sequence_number", r.seq}, fields...))
	r.seq++
}

func (responsesDialect) stream(s *Server, ctx context.Context, o *sseOut, a *answerPlan) {
	ids := a.respIDs()
	w := &respOut{o: o}
	o.start("text/event-stream; charset=utf-8")
	if !s.queue(ctx, o, a.pace) {
		return
	}
	w.event("response.created", "response", a.respObject(ids, "in_progress", nil, nil, nil, nil))
	w.event("response.in_progress", "response", a.respObject(ids, "in_progress", nil, nil, nil, nil))
	mi := 0 // the message's output_index: 1 after a reasoning item
	var output []any
	if len(a.thinking) > 0 {
		rs := a.respReasoningID()
		w.event("response.output_item.added", "output_index", 0, "item", obj{"id", rs, "type", "reasoning", "summary", []any{}})
		w.event("response.reasoning_summary_part.added", "item_id", rs, "output_index", 0, "summary_index", 0,
			"part", obj{"type", "summary_text", "text", ""})
		if !a.pace.sleep(ctx, s.closed, a.pace.firstToken) || !s.think(ctx, o, a, func(p string) {
			w.event("response.reasoning_summary_text.delta", "item_id", rs, "output_index", 0, "summary_index", 0, "delta", p)
		}) {
			return
		}
		summary := strings.Join(a.thinking, "")
		w.event("response.reasoning_summary_text.done", "item_id", rs, "output_index", 0, "summary_index", 0, "text", summary)
		w.event("response.reasoning_summary_part.done", "item_id", rs, "output_index", 0, "summary_index", 0,
			"part", obj{"type", "summary_text", "text", summary})
		item := obj{"id", rs, "type", "reasoning", "summary", []any{obj{"type", "summary_text", "text", summary}}}
		w.event("response.output_item.done", "output_index", 0, "item", item)
		output, mi = append(output, item), 1
	}
	w.event("response.output_item.added", "output_index", mi, "item", a.respMessage(ids, "in_progress", ""))
	w.event("response.content_part.added", "item_id", ids.msg, "output_index", mi, "content_index", 0,
		"part", obj{"type", "output_text", "text", "", "annotations", []any{}})
	if len(a.thinking) == 0 && !a.pace.sleep(ctx, s.closed, a.pace.firstToken) {
		return
	}
	pieces, _ := a.upToBreak(a.pieces)
	if !s.paced(ctx, o, a, pieces, func(p string) {
		w.event("response.output_text.delta", "item_id", ids.msg, "output_index", mi, "content_index", 0,
			"delta", p, "logprobs", []any{})
	}) {
		return
	}
	if s.broke(ctx, o, a) {
		if a.d.kind == FaultMidStream {
			responsesMidStream(w, a, ids)
		}
		return
	}
	w.o.ending()
	status, incomplete, typ := "completed", any(nil), "response.completed"
	if a.finish == "length" {
		status, incomplete, typ = "incomplete", obj{"reason", "max_output_tokens"}, "response.incomplete"
	}
	w.event("response.output_text.done", "item_id", ids.msg, "output_index", mi, "content_index", 0, "text", a.text, "logprobs", []any{})
	w.event("response.content_part.done", "item_id", ids.msg, "output_index", mi, "content_index", 0,
		"part", obj{"type", "output_text", "text", a.text, "annotations", []any{}})
	msg := a.respMessage(ids, status, a.text)
	w.event("response.output_item.done", "output_index", mi, "item", msg)
	w.event(typ, "response", a.respObject(ids, status, nil, incomplete, append(output, msg), a.respUsage()))
}

// responsesMidStream writes the error a mid_stream fault breaks the
// stream with, in the shape its code picks (see responsesDialect).
func responsesMidStream(w *respOut, a *answerPlan, ids respIDs) {
	failed := func(code, msg string) {
		w.event("response.failed", "response", a.respObject(ids, "failed", obj{"code", code, "message", msg}, nil, nil, nil))
	}
	switch a.d.code {
	case "server_error":
		failed("server_error", "The model failed to generate a response.")
	case "rate_limit":
		msg := "Rate limit reached for " + a.req.model + " in organization org-simulated on tokens per min (TPM): Limit 200000, Used 200000, Requested 60. Please try again in 1s. Visit https://platform.openai.com/account/rate-limits to learn more."
		w.event("error", "code", "rate_limit_exceeded", "message", msg, "param", nil)
		failed("rate_limit_exceeded", msg)
	case "insufficient_quota":
		msg := openAIBilling["insufficient_quota"]
		w.event("error", "error", obj{"type", "insufficient_quota", "code", "insufficient_quota", "message", msg, "param", nil})
		failed("insufficient_quota", msg)
	default:
		msg := "Our servers are currently overloaded. Please try again later."
		w.event("error", "error", obj{"type", "service_unavailable_error", "code", "server_is_overloaded", "message", msg, "param", nil})
		failed("server_is_overloaded", msg)
	}
}

func (responsesDialect) midStreamAsHTTP(e errorInfo) reply {
	switch e.code {
	case "rate_limit":
		e.kind = FaultRateLimit
		e.retryAfter = 0
		return openAIDialect{}.errorReply(e)
	case "insufficient_quota":
		e.kind, e.code = FaultSpendCap, ""
		return openAIDialect{}.errorReply(e)
	}
	return openAIDialect{}.midStreamAsHTTP(e)
}
