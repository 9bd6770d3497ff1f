package proxy

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// openAIFinish maps any provider's finish reason to Chat Completions'.
func openAIFinish(fr string) string {
	switch fr {
	case "length", "max_tokens", "MAX_TOKENS":
		return "length"
	case "content_filter", "refusal", "SAFETY", "RECITATION", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY":
		return "content_filter"
	case "tool_calls", "tool_use", "function_call":
		return "tool_calls"
	}
	return "stop"
}

// anthropicStop maps any provider's finish reason to a Messages stop_reason.
func anthropicStop(fr string) string {
	switch fr {
	case "length", "max_tokens", "MAX_TOKENS":
		return "max_tokens"
	case "stop_sequence":
		return "stop_sequence"
	case "content_filter", "refusal", "SAFETY", "RECITATION", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY":
		return "refusal"
	case "tool_calls", "tool_use", "function_call":
		return "tool_use"
	case "pause_turn":
		return "pause_turn"
	}
	return "end_turn"
}

func usageOrZero(u *stream.Usage) stream.Usage {
	if u == nil {
		return stream.Usage{}
	}
	return *u
}

func openAIUsage(u *stream.Usage) map[string]any {
	uz := usageOrZero(u)
	return map[string]any{"prompt_tokens": uz.InputTokens, "completion_tokens": uz.OutputTokens,
		"total_tokens": uz.InputTokens + uz.OutputTokens}
}

// writer answers one call in the caller's dialect.
type writer interface {
	// message writes a complete, non-streamed answer (headers already set).
	message(w http.ResponseWriter, res retry.Result, model string)
	// start begins a stream; text adds a delta; end completes it; fail ends
	// it with the dialect's error event.
	start(w http.ResponseWriter, model string)
	text(w http.ResponseWriter, s string)
	end(w http.ResponseWriter, res retry.Result, model string)
	fail(w http.ResponseWriter, e *apiError)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// sseWrite writes one event and flushes it.
func sseWrite(w http.ResponseWriter, event string, v any) {
	sseBuffer(w, event, v)
	_ = http.NewResponseController(w).Flush()
}

// sseBuffer writes one event without flushing: the opening events of a
// stream go out with its first text, in one write to the socket.
func sseBuffer(w http.ResponseWriter, event string, v any) {
	var b []byte
	if s, ok := v.(string); ok {
		b = []byte(s)
	} else {
		b, _ = json.Marshal(v)
	}
	buf := make([]byte, 0, len(b)+len(event)+16)
	if event != "" {
		buf = append(buf, "event: "...)
		buf = append(buf, event...)
		buf = append(buf, '\n')
	}
	buf = append(buf, "data: "...)
	buf = append(buf, b...)
	buf = append(buf, "\n\n"...)
	_, _ = w.Write(buf)
}

// openAIWriter speaks Chat Completions.
type openAIWriter struct {
	id           string
	created      int64
	includeUsage bool
	textHead     []byte // a text chunk up to its content
}

func newOpenAIWriter(id string, now time.Time, includeUsage bool) *openAIWriter {
	return &openAIWriter{id: "chatcmpl-" + id, created: now.Unix(), includeUsage: includeUsage}
}

func (o *openAIWriter) message(w http.ResponseWriter, res retry.Result, model string) {
	v := map[string]any{
		"id": o.id, "object": "chat.completion", "created": o.created, "model": model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": res.Text, "refusal": nil},
			"logprobs":      nil,
			"finish_reason": openAIFinish(res.FinishReason),
		}},
	}
	if res.Usage != nil {
		v["usage"] = openAIUsage(res.Usage)
	}
	writeJSON(w, http.StatusOK, v)
}

func (o *openAIWriter) chunk(model string, delta map[string]any, finish any) map[string]any {
	return map[string]any{
		"id": o.id, "object": "chat.completion.chunk", "created": o.created, "model": model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
	}
}

func (o *openAIWriter) start(w http.ResponseWriter, model string) {
	startSSE(w)
	sseBuffer(w, "", o.chunk(model, map[string]any{"role": "assistant", "content": ""}, nil))
	// Text chunks differ only in their content: encode the rest once.
	head, _ := json.Marshal(map[string]any{"id": o.id, "object": "chat.completion.chunk", "created": o.created, "model": model})
	o.textHead = append(append([]byte("data: "), head[:len(head)-1]...), `,"choices":[{"index":0,"delta":{"content":`...)
}

func (o *openAIWriter) text(w http.ResponseWriter, s string) {
	writeText(w, o.textHead, s, `},"logprobs":null,"finish_reason":null}]}`)
}

// writeText writes head, s as a JSON string, tail and an event's end, and
// flushes: the hot path of a stream, without building maps.
func writeText(w http.ResponseWriter, head []byte, s, tail string) {
	q, _ := json.Marshal(s)
	buf := make([]byte, 0, len(head)+len(q)+len(tail)+2)
	buf = append(append(append(append(buf, head...), q...), tail...), "\n\n"...)
	_, _ = w.Write(buf)
	_ = http.NewResponseController(w).Flush()
}

func (o *openAIWriter) end(w http.ResponseWriter, res retry.Result, model string) {
	sseWrite(w, "", o.chunk(model, map[string]any{}, openAIFinish(res.FinishReason)))
	if o.includeUsage {
		sseWrite(w, "", map[string]any{
			"id": o.id, "object": "chat.completion.chunk", "created": o.created, "model": model,
			"choices": []any{}, "usage": openAIUsage(res.Usage),
		})
	}
	sseWrite(w, "", "[DONE]")
}

func (o *openAIWriter) fail(w http.ResponseWriter, e *apiError) {
	sseWrite(w, "", errorJSON(e, stream.DialectOpenAI, ""))
}

// errorJSON is the error body as a raw JSON value.
func errorJSON(e *apiError, d stream.Dialect, requestID string) json.RawMessage {
	return json.RawMessage(errorBody(e, d, requestID))
}

func startSSE(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}

// anthropicWriter speaks Messages.
type anthropicWriter struct {
	id        string
	requestID string
	started   bool
}

func newAnthropicWriter(id string) *anthropicWriter {
	return &anthropicWriter{id: "msg_" + id, requestID: id}
}

func (a *anthropicWriter) message(w http.ResponseWriter, res retry.Result, model string) {
	u := usageOrZero(res.Usage)
	content := []any{}
	if res.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": res.Text})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": a.id, "type": "message", "role": "assistant", "model": model, "content": content,
		"stop_reason": anthropicStop(res.FinishReason), "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens},
	})
}

func (a *anthropicWriter) start(w http.ResponseWriter, model string) {
	startSSE(w)
	sseBuffer(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": a.id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 0, "output_tokens": 0},
	}})
	sseBuffer(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
		"content_block": map[string]any{"type": "text", "text": ""}})
	a.started = true
}

var anthropicTextHead = []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":")

func (a *anthropicWriter) text(w http.ResponseWriter, s string) {
	writeText(w, anthropicTextHead, s, "}}")
}

func (a *anthropicWriter) end(w http.ResponseWriter, res retry.Result, _ string) {
	u := usageOrZero(res.Usage)
	sseWrite(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	sseWrite(w, "message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": anthropicStop(res.FinishReason), "stop_sequence": nil},
		"usage": map[string]any{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens}})
	sseWrite(w, "message_stop", map[string]any{"type": "message_stop"})
}

func (a *anthropicWriter) fail(w http.ResponseWriter, e *apiError) {
	sseWrite(w, "error", errorJSON(e, stream.DialectAnthropic, a.requestID))
}
