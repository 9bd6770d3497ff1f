package stream

import (
	"encoding/json"
	"strings"
)

// The dialects' fast paths: one json.Unmarshal of the common chunk into a
// small struct, instead of a map per nesting level (which scans the same
// bytes three or four times). Each gives the same step as the map path for
// the chunks it accepts; anything it does not (a field of an unexpected
// type, a chunk that is not an object) goes to the map path, which stays the
// reference. One known difference: encoding/json matches struct fields
// case-insensitively, so a chunk spelling a key "Model" or "TEXT" is read
// here where the map path would ignore it; no provider does.

func (d *openaiDecoder) handle(typ, data string) step {
	trimmed := strings.TrimSpace(data)
	if typ != "error" && !strings.HasPrefix(trimmed, "[DONE]") {
		if s, ok := d.fast(trimmed); ok {
			return s
		}
	}
	return d.handleMap(typ, data)
}

func (d *anthropicDecoder) handle(typ, data string) step {
	if s, ok := d.fast(typ, data); ok {
		return s
	}
	return d.handleMap(typ, data)
}

func (d *geminiDecoder) handle(typ, data string) step {
	if s, ok := d.fast(data, strings.TrimSpace(data)); ok {
		return s
	}
	return d.handleMap(typ, data)
}

// openaiFast is the part of a Chat Completions chunk the decoder reads.
type openaiFast struct {
	Model *string         `json:"model"`
	Error json.RawMessage `json:"error"`
	Usage *struct {
		PromptTokens     *float64 `json:"prompt_tokens"`
		CompletionTokens *float64 `json:"completion_tokens"`
	} `json:"usage"`
	XGroq   json.RawMessage `json:"x_groq"`
	Choices []*struct {
		Index        *float64         `json:"index"`
		Delta        *openaiFastDelta `json:"delta"`
		FinishReason *string          `json:"finish_reason"`
	} `json:"choices"`
}

// fastInt is jsonInt for a number already decoded (nil: absent or null).
func fastInt(f *float64) (int, bool) {
	if f == nil || *f < 0 || *f > 1e15 {
		return 0, false
	}
	return int(*f), true
}

func fastString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

type openaiFastDelta struct {
	Content          json.RawMessage `json:"content"`
	ReasoningContent json.RawMessage `json:"reasoning_content"`
	Reasoning        json.RawMessage `json:"reasoning"`
	Refusal          json.RawMessage `json:"refusal"`
	ToolCalls        json.RawMessage `json:"tool_calls"`
}

// fast decodes trimmed (the data, already past [DONE] and error events);
// ok is false when the map path must decide.
func (d *openaiDecoder) fast(trimmed string) (step, bool) {
	if !strings.HasPrefix(trimmed, "{") {
		return step{}, false
	}
	var c openaiFast
	if json.Unmarshal([]byte(trimmed), &c) != nil {
		return step{}, false
	}
	if c.Error != nil && !isNull(c.Error) {
		return errorStep(trimmed), true
	}
	s := step{recognize: true}
	if d.model == "" {
		d.model = fastString(c.Model)
	}
	if c.Usage != nil {
		in, okIn := fastInt(c.Usage.PromptTokens)
		out, okOut := fastInt(c.Usage.CompletionTokens)
		if okIn || okOut {
			d.usage = &Usage{InputTokens: in, OutputTokens: out}
		}
	}
	if c.XGroq != nil {
		if xg := obj(string(c.XGroq)); xg != nil {
			if u := obj(string(xg["usage"])); c.Usage == nil && u != nil {
				in, okIn := jsonInt(u["prompt_tokens"])
				out, okOut := jsonInt(u["completion_tokens"])
				if okIn || okOut {
					d.usage = &Usage{InputTokens: in, OutputTokens: out}
				}
			}
			if id := jsonString(xg["id"]); id != "" && d.requestID == "" {
				d.requestID = id
			}
		}
	}
	for _, ch := range c.Choices {
		if ch == nil { // the map path skips what is not an object
			continue
		}
		if idx, ok := fastInt(ch.Index); ok && idx != 0 {
			continue
		}
		if dl := ch.Delta; dl != nil {
			if t := contentText(dl.Content); t != "" {
				s.text += t
				s.progress = true
			}
			if !isNull(dl.ReasoningContent) || !isNull(dl.Reasoning) || !isNull(dl.Refusal) || !isNull(dl.ToolCalls) {
				s.progress = true
			}
		}
		if fr := fastString(ch.FinishReason); fr != "" {
			d.finish = fr
			s.finished = true
		}
	}
	return s, true
}

// anthropicFast is a content_block_delta event, the bulk of a stream.
type anthropicFast struct {
	Type  json.RawMessage `json:"type"`
	Delta *struct {
		Type json.RawMessage `json:"type"`
		Text json.RawMessage `json:"text"`
	} `json:"delta"`
}

// fast handles content_block_delta events; ok is false for any other.
func (d *anthropicDecoder) fast(typ, data string) (step, bool) {
	if typ != "" && typ != "content_block_delta" {
		return step{}, false
	}
	if !strings.HasPrefix(strings.TrimLeft(data, " \t\r\n"), "{") {
		return step{}, false
	}
	var e anthropicFast
	if json.Unmarshal([]byte(data), &e) != nil {
		return step{}, false
	}
	if typ == "" && jsonString(e.Type) != "content_block_delta" {
		return step{}, false
	}
	s := step{recognize: true}
	if e.Delta == nil {
		return s, true
	}
	switch jsonString(e.Delta.Type) {
	case "text_delta", "":
		if t := jsonString(e.Delta.Text); t != "" {
			s.text, s.progress = t, true
		}
	default:
		s.progress = true
	}
	return s, true
}

// geminiFast is a streamGenerateContent chunk.
type geminiFast struct {
	Error         json.RawMessage `json:"error"`
	ModelVersion  *string         `json:"modelVersion"`
	UsageMetadata *struct {
		PromptTokenCount     *float64 `json:"promptTokenCount"`
		CandidatesTokenCount *float64 `json:"candidatesTokenCount"`
	} `json:"usageMetadata"`
	PromptFeedback json.RawMessage `json:"promptFeedback"`
	Candidates     []*struct {
		Index   *float64 `json:"index"`
		Content *struct {
			Parts []map[string]json.RawMessage `json:"parts"`
		} `json:"content"`
		FinishReason *string `json:"finishReason"`
	} `json:"candidates"`
}

// fast decodes a trimmed chunk; ok is false when the map path must decide.
func (d *geminiDecoder) fast(data, trimmed string) (step, bool) {
	if !strings.HasPrefix(trimmed, "{") {
		return step{}, false
	}
	var c geminiFast
	if json.Unmarshal([]byte(trimmed), &c) != nil {
		return step{}, false
	}
	if c.Error != nil && !isNull(c.Error) {
		return errorStep(data), true
	}
	s := step{recognize: true}
	if v := fastString(c.ModelVersion); v != "" && d.model == "" {
		d.model = v
	}
	if u := c.UsageMetadata; u != nil {
		in, okIn := fastInt(u.PromptTokenCount)
		out, okOut := fastInt(u.CandidatesTokenCount)
		if okIn || okOut {
			d.usage = &Usage{InputTokens: in, OutputTokens: out}
		}
	}
	i := 0 // counts objects only, as the map path's jsonArray does
	for _, cd := range c.Candidates {
		if cd == nil {
			continue
		}
		if idx, ok := fastInt(cd.Index); (ok && idx != 0) || (!ok && i > 0) {
			i++
			continue
		}
		i++
		if cd.Content != nil {
			for _, p := range cd.Content.Parts {
				if p == nil {
					continue
				}
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
		}
		if fr := fastString(cd.FinishReason); fr != "" {
			d.finish = fr
			s.finished = true
		}
	}
	if i == 0 {
		if br := jsonString(field(obj(string(c.PromptFeedback)), "blockReason")); br != "" {
			d.finish = br
			s.finished = true
		}
	}
	return s, true
}
