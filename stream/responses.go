package stream

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// The Responses dialect: OpenAI's Responses API (POST {base}/responses,
// "stream": true), picked with the "openai:responses" row of the provider
// table (target "openai:responses/gpt-5.4-mini"). It shares the openai row's
// key, base URL and account (see ProviderInfo.Account), its x-ratelimit-*
// headers, x-request-id and error codes with Chat Completions; only the body
// and the events differ (wire-formats-2.md, section 2).
//
// Events: response.output_text.delta carries the text; response.completed
// ends a success and response.incomplete one cut short, with
// incomplete_details.reason as the finish reason (max_output_tokens,
// content_filter); both carry the usage on their response object, and
// reading stops there (some compatible servers keep the connection open
// after it). A stream that ends without one of them is cut (class
// connection), even on a clean EOF or a data: [DONE].
//
// Class rows (the shared table in classes.go, by the status an in-stream
// error implies): after HTTP 200 an error event, flat
// {"type":"error","code",...} as the spec has it or nested
// {"type":"error","error":{...}} as OpenAI was seen sending, and a
// response.failed (its response.error) are errors inside the stream,
// classified by their code: rate_limit_exceeded is a rate limit (or, naming
// requests or tokens per day, a per-day quota), insufficient_quota and the
// billing codes are a quota stop of the account, server_error is a server
// error, server_is_overloaded an overload, invalid_* and image codes the
// caller's; a code the table does not know (the enum is open) is a server
// error. Before the stream starts, errors are Chat Completions' HTTP errors.
var responsesDialect = &dialectSpec{
	name:            DialectResponses,
	request:         responsesRequest,
	newDecoder:      func() decoder { return &responsesDecoder{} },
	codeOrder:       func(b ErrorBody) []string { return []string{b.Code, b.Type, b.Status} },
	endSignal:       "response.completed",
	limits:          openaiLimits,
	requestIDHeader: "X-Request-Id",
}

// responsesMinOutputTokens is the smallest max_output_tokens the Responses
// API takes (a smaller one is a 400 "integer below minimum value").
const responsesMinOutputTokens = 16

// responsesRequest builds a Responses body: POST {base}/responses with a
// bearer token, the conversation as input messages, the system prompt as
// instructions. The API has no stop sequences: Sampling.Stop is not sent.
func responsesRequest(u *url.URL, _ *ProviderInfo, req Request, maxTokens int, key string) (map[string]any, http.Header) {
	u.Path += "/responses"
	var input []map[string]string
	for _, m := range req.turns() {
		input = append(input, map[string]string{"role": m.Role, "content": m.Content})
	}
	body := map[string]any{
		"model":             req.Target.Model,
		"input":             input,
		"stream":            true,
		"store":             false,
		"max_output_tokens": max(maxTokens, responsesMinOutputTokens),
	}
	if req.System != "" {
		body["instructions"] = req.System
	}
	if req.Sampling.Temperature != nil {
		body["temperature"] = *req.Sampling.Temperature
	}
	if req.Sampling.TopP != nil {
		body["top_p"] = *req.Sampling.TopP
	}
	h := http.Header{}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	return body, h
}

// responsesEvent is the part of a Responses stream event the decoder reads
// (one fastUnmarshal per event).
type responsesEvent struct {
	Type     *string          `json:"type"`
	Delta    fastText         `json:"delta"`
	Error    json.RawMessage  `json:"error"`
	Response *responsesObject `json:"response"`
}

// responsesObject is the response object of the lifecycle events.
type responsesObject struct {
	ID                *string         `json:"id"`
	Model             *string         `json:"model"`
	Status            *string         `json:"status"`
	Error             json.RawMessage `json:"error"`
	IncompleteDetails *struct {
		Reason *string `json:"reason"`
	} `json:"incomplete_details"`
	Usage *struct {
		InputTokens         *float64 `json:"input_tokens"`
		OutputTokens        *float64 `json:"output_tokens"`
		OutputTokensDetails *struct {
			ReasoningTokens *float64 `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
	} `json:"usage"`
}

// responsesDecoder reads Responses events: the lifecycle events
// (response.created, in_progress, completed, incomplete, failed), the text
// deltas, the other content events (progress only) and error.
type responsesDecoder struct{ decoded }

func (d *responsesDecoder) handle(typ, data string) step {
	trimmed := strings.TrimSpace(data)
	if strings.HasPrefix(trimmed, "[DONE]") {
		// The Open Responses terminal frame: after a terminal event it is
		// never read (reading stopped there); before one, the stream is cut.
		return step{done: true, finished: d.finish != "", recognize: true}
	}
	if typ == "error" {
		return errorStep(trimmed)
	}
	var ev responsesEvent
	if !fastChunk(trimmed, &ev) {
		// What the JSON v2 decoder refuses and encoding/json reads
		// (invalid UTF-8, a duplicate key) is read as encoding/json reads it.
		ev = responsesEvent{}
		if !strings.HasPrefix(trimmed, "{") || json.Unmarshal(bytesOf(trimmed), &ev) != nil {
			return step{}
		}
	}
	if typ == "" {
		typ = fastString(ev.Type)
	}
	if typ == "error" || !isNull(ev.Error) {
		// openai-node's rule: a frame named error, or any frame with a
		// top-level error, is an error.
		return errorStep(trimmed)
	}
	s := step{recognize: true}
	if r := ev.Response; r != nil {
		d.readResponse(r)
	}
	switch typ {
	case "response.output_text.delta":
		if t := ev.Delta.text(jsonString); t != "" {
			s.text, s.progress = t, true
		}
	case "response.completed", "response.incomplete":
		d.finish = "completed"
		if typ == "response.incomplete" {
			d.finish = "incomplete"
			if r := ev.Response; r != nil && r.IncompleteDetails != nil && fastString(r.IncompleteDetails.Reason) != "" {
				d.finish = fastString(r.IncompleteDetails.Reason)
			}
		}
		s.finished, s.done = true, true
	case "response.failed":
		return d.failed(ev.Response)
	default:
		// Refusals, reasoning, tool-call arguments: model output, not text.
		if strings.HasPrefix(typ, "response.") && strings.HasSuffix(typ, ".delta") {
			s.progress = true
			// response.reasoning_summary_text.delta, response.reasoning_text.delta
			s.thinking = strings.HasPrefix(typ, "response.reasoning")
		}
	}
	return s
}

// readResponse keeps the model and the usage a response object carries
// (usage is null until the terminal event).
func (d *responsesDecoder) readResponse(r *responsesObject) {
	if m := fastString(r.Model); m != "" && d.model == "" {
		d.model = m
	}
	if id := fastString(r.ID); id != "" && d.respID == "" {
		d.respID = strings.Clone(id)
	}
	if u := r.Usage; u != nil {
		d.noteUsage(u.InputTokens, u.OutputTokens)
		if det := u.OutputTokensDetails; det != nil {
			if r, ok := fastInt(det.ReasoningTokens); ok {
				d.reasoning = r
			}
		}
	}
}

// failed is the error a response.failed carries in response.error
// ({code, message}); without one it is a server error.
func (d *responsesDecoder) failed(r *responsesObject) step {
	var b ErrorBody
	if r != nil && !isNull(r.Error) {
		env, err := json.Marshal(map[string]json.RawMessage{"error": r.Error})
		if err == nil {
			b = ParseErrorBody(env)
		}
	}
	if !b.Found {
		b = ErrorBody{Found: true, Code: "server_error", Message: "the response failed (response.failed without an error)"}
	}
	return step{err: &b, recognize: true}
}
