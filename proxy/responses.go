package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// The Responses API's request fields: what is read, what cannot be
// translated (a 400), and the rest, accepted and reported as ignored.
var (
	responsesRead = map[string]bool{"model": true, "input": true, "instructions": true, "stream": true,
		"max_output_tokens": true, "temperature": true, "top_p": true, "text": true, "tool_choice": true,
		"background": true, "parallel_tool_calls": true, "service_tier": true}
	responsesRefused = map[string]string{
		"tools": "tools", "previous_response_id": "a stored previous response", "conversation": "a stored conversation",
		"prompt": "a stored prompt template", "top_logprobs": "log probabilities", "max_tool_calls": "tool calls",
	}
)

// responsesItem is one item of a Responses input list.
type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// parseResponses reads a Responses API request (POST /v1/responses): text
// in, text out. input is a string (one user turn) or a list of messages
// whose content is a string or input_text/output_text parts; instructions
// and system/developer messages become the system prompt.
func parseResponses(body []byte) (*inbound, *apiError) {
	m, e := decodeObject(body)
	if e != nil {
		return nil, e
	}
	in := &inbound{dialect: stream.DialectResponses}
	if in.ignored, e = checkFields(m, responsesRead, responsesRefused); e != nil {
		return nil, e
	}
	if _, e = field(m, "model", &in.model); e != nil {
		return nil, e
	}
	if in.model == "" {
		return nil, invalid("model", "Missing required parameter: 'model'.")
	}
	if e = readTier(m, in); e != nil {
		return nil, e
	}
	if _, e = field(m, "stream", &in.stream); e != nil {
		return nil, e
	}
	var bg bool
	if _, e = field(m, "background", &bg); e != nil {
		return nil, e
	}
	if bg {
		return nil, refuse("background", "background responses are stored by OpenAI and cannot be translated between providers")
	}
	ok, e := field(m, "max_output_tokens", &in.maxTokens)
	if e != nil {
		return nil, e
	}
	if ok && in.maxTokens < 1 {
		return nil, invalid("max_output_tokens", "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got %d instead.", in.maxTokens)
	}
	if e = readSampling(m, in, ""); e != nil { // the Responses API has no stop field
		return nil, e
	}
	var tf struct {
		Format struct {
			Type string `json:"type"`
		} `json:"format"`
	}
	if _, e = field(m, "text", &tf); e != nil {
		return nil, e
	}
	if t := tf.Format.Type; t != "" && t != "text" {
		return nil, refuse("text.format", "text.format %q (structured output) cannot be translated between providers", t)
	}
	var tc string
	if raw, has := m["tool_choice"]; has && !isNullJSON(raw) {
		if json.Unmarshal(raw, &tc) != nil || (tc != "none" && tc != "auto") {
			return nil, refuse("tool_choice", "tool_choice: tools cannot be translated between providers")
		}
	}
	var sys []string
	var instr string
	if _, e = field(m, "instructions", &instr); e != nil {
		return nil, e
	}
	if instr != "" {
		sys = append(sys, instr)
	}
	raw, has := m["input"]
	if !has || isNullJSON(raw) {
		return nil, invalid("input", "Missing required parameter: 'input'.")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		in.messages = []stream.Message{{Role: "user", Content: s}}
	} else {
		var items []responsesItem
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, invalid("input", "input: want a string or a list of input items")
		}
		for i, it := range items {
			p := fmt.Sprintf("input[%d]", i)
			if it.Type != "" && it.Type != "message" {
				return nil, refuse(p+".type", "input items of type %q cannot be translated between providers; only messages with text", it.Type)
			}
			text, e := textContent(it.Content, p+".content", "input_text", "output_text")
			if e != nil {
				return nil, e
			}
			switch it.Role {
			case "system", "developer":
				sys = append(sys, text)
			case "user", "assistant":
				in.messages = append(in.messages, stream.Message{Role: it.Role, Content: text})
			default:
				return nil, invalid(p+".role", "%s.role: %q is not one of system, developer, user, assistant", p, it.Role)
			}
		}
	}
	if len(in.messages) == 0 {
		return nil, invalid("input", "input: at least one user or assistant message is required")
	}
	in.system = strings.Join(sys, "\n\n")
	return in, nil
}

// responsesWriter speaks the Responses API: one message item with one
// output_text part.
type responsesWriter struct {
	id, msgID string
	created   int64
	model     string
	seq       int
	full      []byte // the text sent, for the .done events
	deltaHead []byte // a delta event up to its sequence number
	deltaMid  []byte // from after the sequence number to the delta
}

func newResponsesWriter(id string, now time.Time) *responsesWriter {
	return &responsesWriter{id: "resp_" + id, msgID: "msg_" + id, created: now.Unix()}
}

// status is the response's status and incomplete_details for a finish
// reason.
func responsesStatus(finish string) (string, any) {
	if openAIFinish(finish) == "length" {
		return "incomplete", map[string]any{"reason": "max_output_tokens"}
	}
	if openAIFinish(finish) == "content_filter" {
		return "incomplete", map[string]any{"reason": "content_filter"}
	}
	return "completed", nil
}

func responsesUsage(u *stream.Usage) map[string]any {
	uz := usageOrZero(u)
	return map[string]any{"input_tokens": uz.InputTokens, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": uz.OutputTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": uz.InputTokens + uz.OutputTokens}
}

func (r *responsesWriter) item(status, text string) map[string]any {
	content := []any{}
	if status != "in_progress" {
		content = []any{r.part(text)}
	}
	return map[string]any{"id": r.msgID, "type": "message", "status": status, "role": "assistant", "content": content}
}

func (r *responsesWriter) part(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
}

// object is the response object; output and usage nil until it is over.
func (r *responsesWriter) object(model, status string, errv, incomplete any, output []any, usage any) map[string]any {
	if output == nil {
		output = []any{}
	}
	return map[string]any{"id": r.id, "object": "response", "created_at": r.created, "status": status,
		"error": errv, "incomplete_details": incomplete, "model": model, "output": output,
		"parallel_tool_calls": false, "tool_choice": "none", "tools": []any{}, "store": false,
		"text": map[string]any{"format": map[string]any{"type": "text"}}, "usage": usage}
}

func (r *responsesWriter) message(w http.ResponseWriter, res retry.Result, model string) {
	status, incomplete := responsesStatus(res.FinishReason)
	writeJSON(w, http.StatusOK, withServedTier(r.object(model, status, nil, incomplete,
		[]any{r.item(status, res.Text)}, responsesUsage(res.Usage)), res))
}

// event appends one event with its type and the next sequence number.
func (r *responsesWriter) event(b []byte, typ string, fields map[string]any) []byte {
	fields["type"] = typ
	fields["sequence_number"] = r.seq
	r.seq++
	return appendEvent(b, typ, fields)
}

func (r *responsesWriter) start(b []byte, model string) []byte {
	r.model = model
	b = r.event(b, "response.created", map[string]any{"response": r.object(model, "in_progress", nil, nil, nil, nil)})
	b = r.event(b, "response.in_progress", map[string]any{"response": r.object(model, "in_progress", nil, nil, nil, nil)})
	b = r.event(b, "response.output_item.added", map[string]any{"output_index": 0, "item": r.item("in_progress", "")})
	b = r.event(b, "response.content_part.added", map[string]any{"item_id": r.msgID, "output_index": 0,
		"content_index": 0, "part": r.part("")})
	r.deltaHead = []byte(`event: response.output_text.delta` + "\n" + `data: {"type":"response.output_text.delta","sequence_number":`)
	r.deltaMid = []byte(`,"item_id":"` + r.msgID + `","output_index":0,"content_index":0,"delta":`)
	return b
}

func (r *responsesWriter) text(b []byte, s string) []byte {
	r.full = append(r.full, s...)
	b = append(b, r.deltaHead...)
	b = strconv.AppendInt(b, int64(r.seq), 10)
	r.seq++
	b = append(b, r.deltaMid...)
	b = appendJSONString(b, s)
	return append(b, `,"logprobs":[]}`+"\n\n"...)
}

func (r *responsesWriter) end(b []byte, res retry.Result, model string) []byte {
	status, incomplete := responsesStatus(res.FinishReason)
	text := string(r.full)
	b = r.event(b, "response.output_text.done", map[string]any{"item_id": r.msgID, "output_index": 0,
		"content_index": 0, "text": text, "logprobs": []any{}})
	b = r.event(b, "response.content_part.done", map[string]any{"item_id": r.msgID, "output_index": 0,
		"content_index": 0, "part": r.part(text)})
	item := r.item(status, text)
	b = r.event(b, "response.output_item.done", map[string]any{"output_index": 0, "item": item})
	typ := "response.completed"
	if status == "incomplete" {
		typ = "response.incomplete"
	}
	obj := withServedTier(r.object(model, status, nil, incomplete, []any{item}, responsesUsage(res.Usage)), res)
	return r.event(b, typ, map[string]any{"response": obj})
}

// fail ends the stream with an error event (its fields at the top level,
// as the API reference has it, and nested under "error", as OpenAI sends
// it and as the SDKs look for it), then response.failed.
func (r *responsesWriter) fail(b []byte, e *apiError) []byte {
	var code any
	if e.code != "" {
		code = e.code
	}
	b = r.event(b, "error", map[string]any{"code": code, "message": e.message, "param": nil,
		"error": map[string]any{"type": openAIType(e), "code": code, "message": e.message, "param": nil}})
	model := r.model
	return r.event(b, "response.failed", map[string]any{"response": r.object(model, "failed",
		map[string]any{"code": code, "message": e.message}, nil, nil, nil)})
}
