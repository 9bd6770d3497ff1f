package stream

import (
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The Anthropic dialect: the Messages API.
var anthropicDialect = &dialectSpec{
	name:       DialectAnthropic,
	request:    anthropicRequest,
	newDecoder: func() decoder { return &anthropicDecoder{} },
	// error.details.error_code, else error.type.
	codeOrder:       func(b ErrorBody) []string { return []string{b.DetailCode, b.Type, b.Code} },
	endSignal:       "message_stop",
	limits:          anthropicLimits,
	requestIDHeader: "Request-Id",
}

// anthropicRequest builds a Messages body: POST {base}/v1/messages with
// x-api-key and anthropic-version.
func anthropicRequest(u *url.URL, _ *ProviderInfo, req Request, maxTokens int, key string) (map[string]any, http.Header) {
	u.Path += "/v1/messages"
	body := map[string]any{
		"model":      req.Target.Model,
		"messages":   anthropicMessages(req),
		"max_tokens": maxTokens,
		"stream":     true,
	}
	if req.System != "" {
		body["system"] = req.System
	}
	addSampling(body, "stop_sequences", req.Sampling)
	h := http.Header{}
	h.Set("Anthropic-Version", "2023-06-01")
	if key != "" {
		h.Set("X-Api-Key", key)
	}
	return body, h
}

// anthropicMessages renders the conversation as Messages API turns.
func anthropicMessages(req Request) []map[string]string {
	var msgs []map[string]string
	for _, m := range req.turns() {
		msgs = append(msgs, map[string]string{"role": m.Role, "content": m.Content})
	}
	return msgs
}

// anthropicLimits reads anthropic-ratelimit-{requests,tokens,input-tokens,
// output-tokens}-{limit,remaining,reset} (RFC 3339 resets; token counts
// rounded to thousands).
func anthropicLimits(_ *ProviderInfo, h http.Header, now time.Time) *Limits {
	l := &Limits{At: now}
	l.Requests = anthropicWindow(h, &anthropicHeaders[0], now, false)
	l.Tokens = anthropicWindow(h, &anthropicHeaders[1], now, true)
	l.InputTokens = anthropicWindow(h, &anthropicHeaders[2], now, true)
	l.OutputTokens = anthropicWindow(h, &anthropicHeaders[3], now, true)
	if l.Empty() {
		return nil
	}
	return l
}

// anthropicHeaders are each window's limit, remaining and reset headers,
// in canonical form so that reading them allocates nothing (every
// response without OpenAI's headers is tried for them). Never written.
var anthropicHeaders = [4][3]string{
	{"Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset"},
	{"Anthropic-Ratelimit-Tokens-Limit", "Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset"},
	{"Anthropic-Ratelimit-Input-Tokens-Limit", "Anthropic-Ratelimit-Input-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Reset"},
	{"Anthropic-Ratelimit-Output-Tokens-Limit", "Anthropic-Ratelimit-Output-Tokens-Remaining", "Anthropic-Ratelimit-Output-Tokens-Reset"},
}

// headerValue is h's first value for the canonical key k.
func headerValue(h http.Header, k string) string {
	if v := h[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func anthropicWindow(h http.Header, names *[3]string, now time.Time, rounded bool) *Window {
	lim, okL := parseCount(headerValue(h, names[0]))
	rem, okR := parseCount(headerValue(h, names[1]))
	reset, okT := parseReset(headerValue(h, names[2]), now)
	if !okL && !okR && !okT {
		return nil
	}
	return &Window{Limit: lim, Remaining: rem, HasLimit: okL, HasRemaining: okR, Reset: reset, Rounded: rounded}
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
		if d.respID == "" {
			d.respID = jsonString(msg["id"])
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
			s.thinking = isThinkingDelta(jsonString(delta["type"]))
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

func (d *anthropicDecoder) handle(typ, data string) step {
	if s, ok := d.fast(typ, data); ok {
		return s
	}
	return d.handleMap(typ, data)
}

// anthropicFast is a content_block_delta event, the bulk of a stream.
type anthropicFast struct {
	Type  fastText `json:"type"` // plain strings in one pass, not a RawMessage decoded again
	Delta *struct {
		Type fastText `json:"type"`
		Text fastText `json:"text"`
	} `json:"delta"`
}

// fast handles content_block_delta events; ok is false for any other.
func (d *anthropicDecoder) fast(typ, data string) (step, bool) {
	if typ != "" && typ != "content_block_delta" {
		return step{}, false
	}
	var e anthropicFast
	if !fastChunk(strings.TrimLeft(data, " \t\r\n"), &e) {
		return step{}, false
	}
	if typ == "" && e.Type.text(jsonString) != "content_block_delta" {
		return step{}, false
	}
	s := step{recognize: true}
	if e.Delta == nil {
		return s, true
	}
	switch e.Delta.Type.text(jsonString) {
	case "text_delta", "":
		if t := e.Delta.Text.text(jsonString); t != "" {
			s.text, s.progress = t, true
		}
	default:
		s.progress = true
		s.thinking = isThinkingDelta(e.Delta.Type.text(jsonString))
	}
	return s, true
}

// isThinkingDelta reports whether a content_block_delta's type is part of
// a thinking block (extended thinking: thinking_delta, and the
// signature_delta that closes the block).
func isThinkingDelta(typ string) bool { return typ == "thinking_delta" || typ == "signature_delta" }
