package stream

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The OpenAI dialect: Chat Completions, spoken by OpenAI and every
// OpenAI-compatible API (Groq, DeepSeek, Mistral, xAI). Per-provider
// differences (stream_options, the max-tokens field, Groq's per-day request
// window) are columns of the provider table.
var openaiDialect = &dialectSpec{
	name:       DialectOpenAI,
	request:    openaiRequest,
	newDecoder: func() decoder { return &openaiDecoder{} },
	// error.code, else error.type.
	codeOrder:       func(b ErrorBody) []string { return []string{b.Code, b.Type, b.Status} },
	endSignal:       "finish_reason",
	limits:          openaiLimits,
	requestIDHeader: "X-Request-Id",
}

// openaiRequest builds a Chat Completions body: POST {base}/chat/completions
// with a bearer token.
func openaiRequest(u *url.URL, p *ProviderInfo, req Request, maxTokens int, key string) (map[string]any, http.Header) {
	u.Path += "/chat/completions"
	body := map[string]any{
		"model":    req.Target.Model,
		"messages": openAIMessages(req),
		"stream":   true,
	}
	addSampling(body, "stop", req.Sampling)
	if !p.NoStreamOptions {
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	mt := p.MaxTokensField
	if mt == "" {
		mt = "max_tokens"
	}
	body[mt] = maxTokens
	h := http.Header{}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	return body, h
}

// openAIMessages renders the conversation as Chat Completions messages, the
// system prompt first.
func openAIMessages(req Request) []map[string]string {
	var msgs []map[string]string
	if req.System != "" {
		msgs = append(msgs, map[string]string{"role": "system", "content": req.System})
	}
	for _, m := range req.turns() {
		msgs = append(msgs, map[string]string{"role": m.Role, "content": m.Content})
	}
	return msgs
}

// openaiLimits reads x-ratelimit-{limit,remaining,reset}-{requests,tokens}
// (resets are durations; the table's RequestsPerDay marks a request window
// that is per day, as Groq's is).
func openaiLimits(p *ProviderInfo, h http.Header, now time.Time) *Limits {
	l := &Limits{At: now}
	l.Requests = xWindow(h, &openaiHeaders[0], now)
	l.Tokens = xWindow(h, &openaiHeaders[1], now)
	if l.Requests != nil && p.RequestsPerDay {
		l.Requests.PerDay = true
	}
	if l.Empty() {
		return nil
	}
	return l
}

// openaiHeaders are each window's limit, remaining and reset headers, in
// canonical form (reading them allocates nothing). Never written.
var openaiHeaders = [2][3]string{
	{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"},
	{"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"},
}

func xWindow(h http.Header, names *[3]string, now time.Time) *Window {
	lim, okL := parseCount(headerValue(h, names[0]))
	rem, okR := parseCount(headerValue(h, names[1]))
	reset, okT := parseReset(headerValue(h, names[2]), now)
	if !okL && !okR && !okT {
		return nil
	}
	return &Window{Limit: lim, Remaining: rem, HasLimit: okL, HasRemaining: okR, Reset: reset}
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
	h := chunkHead{err: m["error"], model: jsonString(m["model"])}
	u := obj(string(m["usage"]))
	xg := obj(string(m["x_groq"]))
	if u == nil && xg != nil {
		u = obj(string(xg["usage"])) // Groq's own envelope: on the last chunk, usage
	}
	if u != nil {
		h.in, h.out = rawNumber(u["prompt_tokens"]), rawNumber(u["completion_tokens"])
		if r, ok := jsonInt(field(u, "completion_tokens_details", "reasoning_tokens")); ok {
			d.reasoning = r
		}
	}
	s, stop := d.open(h, trimmed)
	if stop {
		return s
	}
	if id := jsonString(xg["id"]); id != "" && d.requestID == "" {
		d.requestID = id // and Groq's request id
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
			s.thinking = s.thinking || !isNull(delta["reasoning_content"]) || !isNull(delta["reasoning"])
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

func (d *openaiDecoder) handle(typ, data string) step {
	trimmed := strings.TrimSpace(data)
	if typ != "error" && !strings.HasPrefix(trimmed, "[DONE]") {
		if s, ok := d.fast(trimmed); ok {
			return s
		}
	}
	return d.handleMap(typ, data)
}

// openaiFast is the part of a Chat Completions chunk the decoder reads.
type openaiFast struct {
	Model *string `json:"model"`
	openaiFastBody
}

// openaiFastBody is the rest of a chunk: once the model is known, chunks
// decode into it alone, so the model's string is not made again per chunk.
type openaiFastBody struct {
	Error json.RawMessage `json:"error"`
	Usage *struct {
		PromptTokens            *float64 `json:"prompt_tokens"`
		CompletionTokens        *float64 `json:"completion_tokens"`
		CompletionTokensDetails *struct {
			ReasoningTokens *float64 `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
	XGroq   json.RawMessage `json:"x_groq"`
	Choices []*struct {
		Index        *float64         `json:"index"`
		Delta        *openaiFastDelta `json:"delta"`
		FinishReason *string          `json:"finish_reason"`
	} `json:"choices"`
}

type openaiFastDelta struct {
	Content          fastText        `json:"content"`
	ReasoningContent json.RawMessage `json:"reasoning_content"`
	Reasoning        json.RawMessage `json:"reasoning"`
	Refusal          json.RawMessage `json:"refusal"`
	ToolCalls        json.RawMessage `json:"tool_calls"`
}

// fast decodes trimmed (the data, already past [DONE] and error events);
// ok is false when the map path must decide.
func (d *openaiDecoder) fast(trimmed string) (step, bool) {
	var c openaiFast
	var into any = &c
	if d.model != "" {
		into = &c.openaiFastBody
	}
	if !fastChunk(trimmed, into) {
		return step{}, false
	}
	h := chunkHead{err: c.Error, model: fastString(c.Model)}
	if c.Usage != nil {
		h.in, h.out = c.Usage.PromptTokens, c.Usage.CompletionTokens
		if det := c.Usage.CompletionTokensDetails; det != nil {
			if r, ok := fastInt(det.ReasoningTokens); ok {
				d.reasoning = r
			}
		}
	}
	var xg map[string]json.RawMessage
	if c.XGroq != nil {
		if xg = obj(string(c.XGroq)); xg != nil && c.Usage == nil {
			if u := obj(string(xg["usage"])); u != nil {
				h.in, h.out = rawNumber(u["prompt_tokens"]), rawNumber(u["completion_tokens"])
			}
		}
	}
	s, stop := d.open(h, trimmed)
	if stop {
		return s, true
	}
	if id := jsonString(xg["id"]); id != "" && d.requestID == "" {
		d.requestID = id
	}
	for _, ch := range c.Choices {
		if ch == nil { // the map path skips what is not an object
			continue
		}
		if idx, ok := fastInt(ch.Index); ok && idx != 0 {
			continue
		}
		if dl := ch.Delta; dl != nil {
			if t := dl.Content.text(contentText); t != "" {
				s.text += t
				s.progress = true
			}
			if !isNull(dl.ReasoningContent) || !isNull(dl.Reasoning) || !isNull(dl.Refusal) || !isNull(dl.ToolCalls) {
				s.progress = true
			}
			s.thinking = s.thinking || !isNull(dl.ReasoningContent) || !isNull(dl.Reasoning)
		}
		if fr := fastString(ch.FinishReason); fr != "" {
			d.finish = fr
			s.finished = true
		}
	}
	return s, true
}
