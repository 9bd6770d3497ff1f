package stream

import "testing"

// Reasoning deltas are thinking steps and progress (the no-progress bound
// counts them), never text, on both decoder paths of every dialect.
func TestReasoningDeltasAreProgress(t *testing.T) {
	for _, tc := range []struct {
		d         Dialect
		typ, data string
	}{
		{DialectAnthropic, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`},
		{DialectAnthropic, "", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"Eq=="}}`},
		{DialectResponses, "response.reasoning_summary_text.delta", `{"type":"response.reasoning_summary_text.delta","item_id":"rs_1","output_index":0,"summary_index":0,"delta":"hmm"}`},
		{DialectResponses, "response.reasoning_text.delta", `{"type":"response.reasoning_text.delta","item_id":"rs_1","output_index":0,"content_index":0,"delta":"hmm"}`},
		{DialectOpenAI, "", `{"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}`},
		{DialectOpenAI, "", `{"id":"x","choices":[{"index":0,"delta":{"reasoning":"hmm"}}]}`},
		{DialectGemini, "", `{"candidates":[{"content":{"parts":[{"text":"hmm","thought":true}],"role":"model"},"index":0}]}`},
	} {
		for _, path := range []string{"fast", "map"} {
			dec := newDecoder(tc.d)
			var s step
			switch d := dec.(type) {
			case *anthropicDecoder:
				if path == "map" {
					s = d.handleMap(tc.typ, tc.data)
				} else {
					s = d.handle(tc.typ, tc.data)
				}
			case *geminiDecoder:
				if path == "map" {
					s = d.handleMap(tc.typ, tc.data)
				} else {
					s = d.handle(tc.typ, tc.data)
				}
			case *openaiDecoder:
				if path == "map" {
					s = d.handleMap(tc.typ, tc.data)
				} else {
					s = d.handle(tc.typ, tc.data)
				}
			default:
				s = dec.handle(tc.typ, tc.data)
			}
			if !s.thinking || !s.progress || s.text != "" {
				t.Errorf("%s %s %s: %+v, want thinking progress and no text", tc.d, path, tc.data, s)
			}
		}
	}
	// Text is not thinking.
	if s := newDecoder(DialectAnthropic).handle("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"hi"}}`); s.thinking || s.text != "hi" {
		t.Errorf("text delta: %+v", s)
	}
}
