package stream

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// The Interactions dialect: the Gemini API's Interactions API (POST
// {base}/v1beta/interactions, "stream": true), picked with the
// "gemini:interactions" row of the provider table (target
// "gemini:interactions/gemini-3.8-flash"). It shares the gemini row's key,
// base URL and account (ProviderInfo.Account); its events and its error
// codes are its own (wire-formats-2.md, section 1).
//
// Events (named SSE events whose data repeats the name in event_type), in
// both schemas:
//
//	current ("steps", Api-Revision 2026-05-20, the default since 2026-05-26):
//	  interaction.created, interaction.status_update, step.start,
//	  step.delta, step.stop, interaction.completed
//	legacy (Api-Revision 2026-05-07, before May 2026):
//	  interaction.start, interaction.status_update, content.start,
//	  content.delta, content.stop, interaction.complete
//
// A delta of type text carries the text; any other delta (thought
// signatures, thoughts, tool calls) is model output without text. The
// interaction's id (first event) is the attempt's request id: the API sends
// no request-id header.
//
// Completion rule: interaction.completed (legacy interaction.complete) ends
// the stream; its interaction.status is the finish reason (completed, or
// incomplete or budget_exceeded for an answer cut short) and its usage
// (total_input_tokens, total_output_tokens) the usage. A terminal status of
// failed or cancelled, on that event or on an interaction.status_update, is
// an error inside the stream (its interaction.errors[0] when given). A
// stream that ends without the completed event is cut (class connection),
// even on a clean EOF or a data: [DONE] (which the SDKs take as the end).
//
// Errors: HTTP errors and in-stream error events carry
// {"error":{"code":"<string>","message"}} (the generateContent shape,
// {"error":{"code":<number>,"status",...}}, is read too). The codes
// (ai.google.dev/gemini-api/docs/api-errors, "Interactions API error
// codes") and their classes, by this dialect's rows (interactionsRows),
// then the shared table with the status each code stands for:
//
//	rate_limit_exceeded, too_many_requests      429  rate limit (per-day words: a per-day quota)
//	quota_exceeded                              429  per-day quota of the target, until midnight Pacific
//	payment_required                            402  quota (billing) of the account
//	failed_precondition naming billing          400  quota (billing) of the account; otherwise caller
//	model_not_found                             404  caller, model-specific (another model may take it)
//	invalid_request, parameter_unknown          400  caller
//	out_of_range 416, authentication 401, permission_denied 403, not_found 404,
//	already_exists 409, cancelled 499           caller
//	aborted 409, api_error 500, unimplemented 501, deadline_exceeded 504,
//	gateway_timeout 504                         server (retried)
//	service_unavailable                         503  overload
//
// An in-stream code the table does not know is a server error. The API
// documents no rate-limit headers; Retry-After and retry-after-ms are read
// when sent (the SDKs read them).
var interactionsDialect = &dialectSpec{
	name:       DialectInteractions,
	request:    interactionsRequest,
	newDecoder: func() decoder { return &interactionsDecoder{} },
	codeOrder:  func(b ErrorBody) []string { return []string{b.Code, b.Status, b.Type} },
	endSignal:  "interaction.completed",
	classRows:  interactionsRows,
	dailyReset: NextPacificMidnight,
}

// InteractionsRevision is the Api-Revision sent: the current ("steps")
// event schema.
const InteractionsRevision = "2026-05-20"

// interactionsRequest builds an Interactions body: POST
// {base}/v1beta/interactions with x-goog-api-key; one user turn is a plain
// string input, a conversation a list of user_input and model_output steps.
func interactionsRequest(u *url.URL, _ *ProviderInfo, req Request, maxTokens int, key string) (map[string]any, http.Header) {
	u.Path += "/v1beta/interactions"
	turns := req.turns()
	var input any
	if len(turns) == 1 && turns[0].Role == "user" {
		input = turns[0].Content
	} else {
		steps := make([]map[string]any, 0, len(turns))
		for _, m := range turns {
			typ := "user_input"
			if m.Role == "assistant" {
				typ = "model_output"
			}
			steps = append(steps, map[string]any{"type": typ, "content": []map[string]string{{"type": "text", "text": m.Content}}})
		}
		input = steps
	}
	gc := map[string]any{"max_output_tokens": maxTokens}
	if s := req.Sampling; s.Temperature != nil {
		gc["temperature"] = *s.Temperature
	}
	if s := req.Sampling; s.TopP != nil {
		gc["top_p"] = *s.TopP
	}
	if len(req.Sampling.Stop) > 0 {
		gc["stop_sequences"] = req.Sampling.Stop
	}
	body := map[string]any{
		"model":             strings.TrimPrefix(req.Target.Model, "models/"),
		"input":             input,
		"stream":            true,
		"store":             false,
		"generation_config": gc,
	}
	if req.System != "" {
		body["system_instruction"] = req.System
	}
	h := http.Header{}
	if key != "" {
		h.Set("X-Goog-Api-Key", key)
	}
	h.Set("Api-Revision", InteractionsRevision)
	return body, h
}

// interactionsStatus is the HTTP status each documented code stands for
// (the api-errors page's table; gateway_timeout from the streaming example).
var interactionsStatus = map[string]int{
	"invalid_request":     400,
	"failed_precondition": 400,
	"parameter_unknown":   400,
	"out_of_range":        416,
	"authentication":      401,
	"payment_required":    402,
	"permission_denied":   403,
	"not_found":           404,
	"model_not_found":     404,
	"already_exists":      409,
	"aborted":             409,
	"rate_limit_exceeded": 429,
	"quota_exceeded":      429,
	"too_many_requests":   429,
	"cancelled":           499,
	"api_error":           500,
	"unimplemented":       501,
	"service_unavailable": 503,
	"deadline_exceeded":   504,
	"gateway_timeout":     504,
}

// interactionsRows are the Interactions API's own class rows, checked before
// the shared table; for a code it knows with no status to go by (an error
// inside a stream) it classifies by the code's status through the table.
func interactionsRows(d *dialectSpec, status int, b ErrorBody) (verdict, bool) {
	code := strings.ToLower(b.Code)
	switch {
	case code == "quota_exceeded":
		// The daily quota (the page: "wait for reset"), not a rate limit.
		return verdict{class: ClassQuota, scope: ScopeTarget, perDay: true}, true
	case code == "payment_required":
		return verdict{class: ClassQuota, scope: ScopeAccount}, true
	case code == "failed_precondition" && strings.Contains(strings.ToLower(b.Message), "billing"):
		return verdict{class: ClassQuota, scope: ScopeAccount}, true
	case code == "model_not_found":
		return verdict{class: ClassCaller, modelSpecific: true}, true
	case code == "already_exists", code == "cancelled":
		return verdict{class: ClassCaller}, true
	}
	if st, ok := interactionsStatus[code]; ok && (status < 400 || status > 599) {
		return classify(d, st, b), true
	}
	return verdict{}, false
}

// interactionsEvent is the part of an Interactions event the decoder reads
// (one json.Unmarshal per event).
type interactionsEvent struct {
	EventType   *string             `json:"event_type"`
	Interaction *interactionsObject `json:"interaction"`
	Status      *string             `json:"status"` // interaction.status_update
	Delta       *struct {
		Type *string  `json:"type"`
		Text fastText `json:"text"`
	} `json:"delta"`
	Error json.RawMessage `json:"error"`
}

// interactionsObject is the interaction of the lifecycle events.
type interactionsObject struct {
	ID     *string         `json:"id"`
	Status *string         `json:"status"`
	Model  *string         `json:"model"`
	Errors json.RawMessage `json:"errors"`
	Usage  *struct {
		TotalInputTokens   *float64 `json:"total_input_tokens"`
		TotalOutputTokens  *float64 `json:"total_output_tokens"`
		TotalThoughtTokens *float64 `json:"total_thought_tokens"`
	} `json:"usage"`
}

// interactionsDecoder reads Interactions events of either schema.
type interactionsDecoder struct{ decoded }

func (d *interactionsDecoder) handle(typ, data string) step {
	trimmed := strings.TrimSpace(data)
	if strings.HasPrefix(trimmed, "[DONE]") {
		// The SDKs' end sentinel: after the completed event it is never
		// read (reading stopped there); before it, the stream is cut.
		return step{done: true, finished: d.finish != "", recognize: true}
	}
	if typ == "error" {
		return errorStep(trimmed)
	}
	if !strings.HasPrefix(trimmed, "{") {
		return step{}
	}
	var ev interactionsEvent
	if json.Unmarshal(bytesOf(trimmed), &ev) != nil {
		return step{}
	}
	if typ == "" || typ == "message" {
		typ = fastString(ev.EventType)
	}
	if typ == "error" || !isNull(ev.Error) {
		return errorStep(trimmed)
	}
	if ev.Interaction != nil {
		d.readInteraction(ev.Interaction)
	}
	s := step{recognize: true}
	switch typ {
	case "step.delta", "content.delta":
		if ev.Delta == nil {
			break
		}
		typ := fastString(ev.Delta.Type)
		if t := ev.Delta.Text.text(jsonString); t != "" && typ == "text" {
			s.text = t
		}
		// A thought step's deltas (its summary, its signature): the
		// model is thinking.
		s.progress, s.thinking = true, strings.HasPrefix(typ, "thought")
	case "interaction.status_update":
		if st := fastString(ev.Status); st == "failed" || st == "cancelled" {
			return interactionFailed(st, nil)
		}
	case "interaction.completed", "interaction.complete":
		st := "completed"
		if ev.Interaction != nil && fastString(ev.Interaction.Status) != "" {
			st = fastString(ev.Interaction.Status)
		}
		if st == "failed" || st == "cancelled" {
			return interactionFailed(st, ev.Interaction)
		}
		d.finish = st
		s.finished, s.done = true, true
	case "interaction.created", "interaction.start", "step.start", "step.stop", "content.start", "content.stop":
	default:
		s.recognize = ev.EventType != nil
	}
	return s
}

// readInteraction keeps the id (as the request id), the model and the
// usage an interaction object carries.
func (d *interactionsDecoder) readInteraction(o *interactionsObject) {
	if id := fastString(o.ID); id != "" && d.requestID == "" {
		d.requestID = id
	}
	if m := fastString(o.Model); m != "" && d.model == "" {
		d.model = m
	}
	if u := o.Usage; u != nil {
		in, okIn := fastInt(u.TotalInputTokens)
		out, okOut := fastInt(u.TotalOutputTokens)
		if okIn || okOut {
			d.usage = &Usage{InputTokens: in, OutputTokens: out}
		}
		if r, ok := fastInt(u.TotalThoughtTokens); ok {
			d.reasoning = r
		}
	}
}

// interactionFailed is the error of an interaction that ended failed or
// cancelled: its first errors entry ({code, message}) when it has one, else
// a server error naming the status.
func interactionFailed(status string, o *interactionsObject) step {
	var b ErrorBody
	if o != nil && !isNull(o.Errors) {
		var list []json.RawMessage
		if json.Unmarshal(o.Errors, &list) == nil && len(list) > 0 {
			if env, err := json.Marshal(map[string]json.RawMessage{"error": list[0]}); err == nil {
				b = ParseErrorBody(env)
			}
		}
	}
	if !b.Found {
		b = ErrorBody{Found: true, Code: "api_error", Message: "the interaction ended with status " + status}
	}
	return step{err: &b, recognize: true}
}
