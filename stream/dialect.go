package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	_ "time/tzdata" // Gemini's daily quota resets at midnight Pacific, on any machine
)

// DefaultMaxTokens is the token cap sent when Request.MaxTokens is not set
// (Anthropic requires one).
const DefaultMaxTokens = 1024

// userAgent names limitscope to the providers.
const userAgent = "limitscope/0"

// BuildRequest builds the provider's streaming HTTP request for req: the URL,
// the auth header and the JSON body of ep's dialect. It is exported so the
// simulator's tests can check what goes on the wire.
func BuildRequest(ctx context.Context, ep Endpoint, req Request) (*http.Request, error) {
	provider := ep.Provider
	if provider == "" {
		provider = req.Target.Provider
	}
	info, ok := lookupProvider(provider)
	if !ok {
		return nil, fmt.Errorf("unknown provider %q", provider)
	}
	base := ep.BaseURL
	if base == "" {
		base = info.DefaultBaseURL
	}
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil {
		return nil, fmt.Errorf("%s base URL: %w", info.Name, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%s base URL %q: want http(s)://host[/path]", info.Name, RedactURL(base))
	}
	model := req.Target.Model
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	path := strings.TrimRight(u.Path, "/")
	body := map[string]any{}
	h := http.Header{}
	switch info.Dialect {
	case DialectOpenAI:
		path += "/chat/completions"
		body["model"] = model
		body["messages"] = openAIMessages(req)
		body["stream"] = true
		addSampling(body, info.Dialect, req.Sampling)
		// Mistral rejects stream_options with a 422 (extra_forbidden) and
		// sends usage on its last chunk anyway.
		if info.Name != "mistral" {
			body["stream_options"] = map[string]any{"include_usage": true}
		}
		if info.Name == "openai" {
			body["max_completion_tokens"] = maxTokens
		} else {
			body["max_tokens"] = maxTokens
		}
		if k := ep.Key.Reveal(); k != "" {
			h.Set("Authorization", "Bearer "+k)
		}
	case DialectAnthropic:
		path += "/v1/messages"
		body["model"] = model
		body["messages"] = anthropicMessages(req)
		body["max_tokens"] = maxTokens
		body["stream"] = true
		if req.System != "" {
			body["system"] = req.System
		}
		addSampling(body, info.Dialect, req.Sampling)
		h.Set("Anthropic-Version", "2023-06-01")
		if k := ep.Key.Reveal(); k != "" {
			h.Set("X-Api-Key", k)
		}
	case DialectGemini:
		m := strings.TrimPrefix(model, "models/")
		path += "/v1beta/models/" + m + ":streamGenerateContent" // u.String() escapes it
		q := u.Query()
		q.Set("alt", "sse")
		u.RawQuery = q.Encode()
		geminiBody(body, req, maxTokens)
		if k := ep.Key.Reveal(); k != "" {
			h.Set("X-Goog-Api-Key", k)
		}
	}
	u.Path = path
	u.RawPath = ""
	buf, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encoding %s request: %w", info.Name, err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(buf))
	if err != nil {
		return nil, fmt.Errorf("%s request: %w", info.Name, err)
	}
	for k, v := range h {
		hr.Header[k] = v
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "text/event-stream")
	// Ask for no compression: the transport then never decodes on its own,
	// so a body that claims gzip is decoded (and judged) here.
	hr.Header.Set("Accept-Encoding", "identity")
	hr.Header.Set("User-Agent", userAgent)
	return hr, nil
}

// step is what one SSE event meant.
type step struct {
	text      string     // a text delta
	progress  bool       // content arrived (text, reasoning or tool input)
	err       *ErrorBody // an error inside the stream
	finished  bool       // the end was signalled (finish_reason, finishReason, message_stop)
	done      bool       // nothing more is expected: stop reading now
	recognize bool       // the event was in the dialect's format
}

// decoder turns one dialect's SSE events into steps, keeping what it learnt.
type decoder interface {
	handle(typ, data string) step
	state() *decoded
}

// decoded is what a stream told about itself.
type decoded struct {
	finish    string
	usage     *Usage
	model     string
	requestID string // from the body, when the headers had none
}

func (d *decoded) state() *decoded { return d }

func newDecoder(d Dialect) decoder {
	switch d {
	case DialectAnthropic:
		return &anthropicDecoder{}
	case DialectGemini:
		return &geminiDecoder{}
	}
	return &openaiDecoder{}
}

// obj decodes data as a JSON object, or returns nil.
func obj(data string) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(data), &m) != nil {
		return nil
	}
	return m
}

func field(m map[string]json.RawMessage, path ...string) json.RawMessage {
	var raw json.RawMessage
	for i, k := range path {
		raw = m[k]
		if i == len(path)-1 || raw == nil {
			break
		}
		if m = obj(string(raw)); m == nil {
			return nil
		}
	}
	return raw
}

func jsonInt(raw json.RawMessage) (int, bool) {
	var f float64
	if len(raw) == 0 || json.Unmarshal(raw, &f) != nil || f < 0 || f > 1e15 {
		return 0, false
	}
	return int(f), true
}

func jsonArray(raw json.RawMessage) []map[string]json.RawMessage {
	var a []json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &a) != nil {
		return nil
	}
	out := make([]map[string]json.RawMessage, 0, len(a))
	for _, r := range a {
		if m := obj(string(r)); m != nil {
			out = append(out, m)
		}
	}
	return out
}

func errorStep(data string) step {
	b := ParseErrorBody([]byte(data))
	if !b.Found {
		b.Found = true
		b.Message = sanitize(strings.TrimSpace(data), maxMessage)
	}
	return step{err: &b, recognize: true}
}

// openaiDecoder reads Chat Completions chunks (OpenAI and every compatible
// API): text in choices[].delta.content, finish_reason, a usage chunk with
// empty choices after it, and data: [DONE].
type openaiDecoder struct{ decoded }

func (d *openaiDecoder) handleMap(typ, data string) step {
	trimmed := strings.TrimSpace(data)
	if strings.HasPrefix(trimmed, "[DONE]") {
		return step{done: true, finished: d.finish != "", recognize: true}
	}
	if typ == "error" {
		return errorStep(data)
	}
	m := obj(trimmed)
	if m == nil {
		return step{}
	}
	if raw, ok := m["error"]; ok && !isNull(raw) {
		return errorStep(trimmed)
	}
	var s step
	s.recognize = true
	if d.model == "" {
		d.model = jsonString(m["model"])
	}
	u := obj(string(m["usage"]))
	if xg := obj(string(m["x_groq"])); xg != nil {
		// Groq's own envelope: an id and, on the last chunk, usage.
		if u == nil {
			u = obj(string(xg["usage"]))
		}
		if id := jsonString(xg["id"]); id != "" && d.requestID == "" {
			d.requestID = id
		}
	}
	if u != nil {
		in, okIn := jsonInt(u["prompt_tokens"])
		out, okOut := jsonInt(u["completion_tokens"])
		if okIn || okOut {
			d.usage = &Usage{InputTokens: in, OutputTokens: out}
		}
	}
	for _, c := range jsonArray(m["choices"]) {
		if idx, ok := jsonInt(c["index"]); ok && idx != 0 {
			continue
		}
		delta := obj(string(c["delta"]))
		if delta != nil {
			if t := contentText(delta["content"]); t != "" {
				s.text += t
				s.progress = true
			}
			for _, k := range []string{"reasoning_content", "reasoning", "refusal", "tool_calls"} {
				if !isNull(delta[k]) {
					s.progress = true
				}
			}
		}
		if fr := jsonString(c["finish_reason"]); fr != "" {
			d.finish = fr
			s.finished = true
		}
	}
	return s
}

// contentText reads a delta's content: a string, or (Mistral) a list of
// typed parts whose text parts are joined.
func contentText(raw json.RawMessage) string {
	if isNull(raw) {
		return ""
	}
	if s := jsonString(raw); s != "" {
		return s
	}
	var b strings.Builder
	for _, p := range jsonArray(raw) {
		if t := jsonString(p["type"]); t == "" || t == "text" {
			b.WriteString(jsonString(p["text"]))
		}
	}
	return b.String()
}

// anthropicDecoder reads Messages events: message_start, content_block_*,
// message_delta, message_stop, ping and error.
type anthropicDecoder struct{ decoded }

func (d *anthropicDecoder) handleMap(typ, data string) step {
	m := obj(data)
	if typ == "" && m != nil {
		typ = jsonString(m["type"])
	}
	switch typ {
	case "error":
		return errorStep(data)
	case "message_stop":
		return step{finished: true, done: true, recognize: true}
	case "ping", "content_block_start", "content_block_stop":
		return step{recognize: true}
	}
	if m == nil {
		return step{}
	}
	s := step{recognize: true}
	switch typ {
	case "message_start":
		msg := obj(string(m["message"]))
		if msg == nil {
			break
		}
		if d.model == "" {
			d.model = jsonString(msg["model"])
		}
		if u := obj(string(msg["usage"])); u != nil {
			in, _ := jsonInt(u["input_tokens"])
			out, _ := jsonInt(u["output_tokens"])
			d.usage = &Usage{InputTokens: in, OutputTokens: out}
		}
	case "content_block_delta":
		delta := obj(string(m["delta"]))
		if delta == nil {
			break
		}
		switch jsonString(delta["type"]) {
		case "text_delta", "":
			if t := jsonString(delta["text"]); t != "" {
				s.text, s.progress = t, true
			}
		default: // thinking, signatures, tool input: content, not text
			s.progress = true
		}
	case "message_delta":
		if delta := obj(string(m["delta"])); delta != nil {
			if sr := jsonString(delta["stop_reason"]); sr != "" {
				d.finish = sr
			}
		}
		if u := obj(string(m["usage"])); u != nil {
			if d.usage == nil {
				d.usage = &Usage{}
			}
			if out, ok := jsonInt(u["output_tokens"]); ok {
				d.usage.OutputTokens = out
			}
			if in, ok := jsonInt(u["input_tokens"]); ok && in > 0 {
				d.usage.InputTokens = in
			}
		}
	}
	return s
}

// geminiDecoder reads streamGenerateContent chunks: candidates[0].content.
// parts[].text, finishReason, usageMetadata and modelVersion, and an error
// object on a data: line or (see geminiBareReader) on its own.
type geminiDecoder struct{ decoded }

func (d *geminiDecoder) handleMap(_, data string) step {
	m := obj(strings.TrimSpace(data))
	if m == nil {
		return step{}
	}
	if raw, ok := m["error"]; ok && !isNull(raw) {
		return errorStep(data)
	}
	s := step{recognize: true}
	if v := jsonString(m["modelVersion"]); v != "" && d.model == "" {
		d.model = v
	}
	if u := obj(string(m["usageMetadata"])); u != nil {
		in, okIn := jsonInt(u["promptTokenCount"])
		out, okOut := jsonInt(u["candidatesTokenCount"])
		if okIn || okOut {
			d.usage = &Usage{InputTokens: in, OutputTokens: out}
		}
	}
	cands := jsonArray(m["candidates"])
	for i, c := range cands {
		if idx, ok := jsonInt(c["index"]); (ok && idx != 0) || (!ok && i > 0) {
			continue
		}
		for _, p := range jsonArray(field(c, "content", "parts")) {
			if string(p["thought"]) == "true" {
				s.progress = true
				continue
			}
			if t := jsonString(p["text"]); t != "" {
				s.text += t
				s.progress = true
			} else if len(p) > 0 {
				s.progress = true
			}
		}
		if fr := jsonString(c["finishReason"]); fr != "" {
			d.finish = fr
			s.finished = true
		}
	}
	if len(cands) == 0 {
		if br := jsonString(field(m, "promptFeedback", "blockReason")); br != "" {
			d.finish = br
			s.finished = true
		}
	}
	return s
}
