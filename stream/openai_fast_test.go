package stream

import (
	"testing"
)

// openaiTokenCases are chunks where the token-by-token fast path could part
// from the map path: escaped names and values, nulls and wrong types in
// every field it reads, numbers out of range, duplicates inside values it
// skips, and a model that changes type once the stream has named one.
var openaiTokenCases = [][]string{
	{`{"choi\u0063es":[{"delta":{"cont\u0065nt":"a"}}],"mod\u0065l":"m\u00e9"}`},
	{`{"choices":[{"delta":{"content":"a\nb\u00e9\"c"}}]}`},
	{`{"choices":[{"delta":{"content":"\ud800"}}]}`},
	{`{"choices":[{"delta":{"content":"é"}}],"model":"m"}`, `{"model":5,"choices":[{"delta":{"content":"b"}}]}`},
	{`{"model":null,"choices":[]}`, `{"model":"later","choices":[]}`},
	{`{"model":"","choices":[]}`, `{"model":"x","choices":[]}`},
	{`{"usage":null,"choices":[{"index":null,"delta":{},"finish_reason":null}]}`},
	{`{"usage":{"prompt_tokens":null,"completion_tokens":4,"completion_tokens_details":null}}`},
	{`{"usage":{"prompt_tokens":null}}`, `{"usage":{"completion_tokens":null,"prompt_tokens":null}}`},
	{`{"usage":{"prompt_tokens":1,"completion_tokens":2,"completion_tokens_details":{"reasoning_tokens":"3"}}}`},
	{`{"usage":{"prompt_tokens":1,"completion_tokens":2,"completion_tokens_details":{"reasoning_tokens":3.7,"x":[1,{"a":1}]}}}`},
	{`{"usage":{"prompt_tokens":1e400}}`},
	{`{"usage":{"prompt_tokens":-0,"completion_tokens":1e15}}`},
	{`{"usage":"x"}`},
	{`{"usage":{"completion_tokens_details":[]}}`},
	{`{"choices":[{"finish_reason":5}]}`},
	{`{"choices":[{"finish_reason":"st\u006fp"}]}`},
	{`{"choices":[{"index":1e400,"delta":{"content":"a"}}]}`},
	{`{"choices":[{"index":2,"delta":{"content":"a"},"finish_reason":"stop"},{"index":0,"delta":{"content":"b"}}]}`},
	{`{"choices":[{"delta":{"content":"a"},"logprobs":{"content":[{"t":1,"t":2}]}}]}`},
	{`{"choices":[{"delta":{"content":"a","content":"b"}}]}`},
	{`{"id":"x","id":"y","choices":[]}`},
	{`{"choices":null}`},
	{`{"choices":"x"}`},
	{`{"choices":[[]]}`},
	{`{"choices":[{"delta":{"reasoning":null,"refusal":"no","tool_calls":[]}}]}`},
	{`{"choices":[{"delta":{"reasoning_content":" hm ","content":null}}]}`},
	{`{"choices":[{"delta":{"content":{"text":"x"}}}]}`},
	{`{"choices":[{"delta":{"content":[{"type":"text","text":"a\u0062"}]}}]}`},
	{`{"error":null,"choices":[{"delta":{"content":"a"}}]}`},
	{`{"error":"boom"}`},
	{`{"x_groq":null,"choices":[]}`},
	{`{"x_groq":{"id":"req_\u0031"},"usage":{"prompt_tokens":1,"completion_tokens":1}}`},
	{"{\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n{}"},
	{` { "choices" : [ { "delta" : { "content" : "a" } } ] } `},
	{`{"choices":[{"delta":{"content":"a"}}]`},
	{`{"choices":[{"delta":{"content":"a"}}]}}`},
	{"{\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}"},
	{"{\"ch\xffoices\":[]}"},
	{`{"":1,"choices":[]}`},
}

// The token-by-token fast path decodes each sequence of chunks as the map
// path does, step by step and in what the decoder learnt.
func TestOpenAITokenFastPath(t *testing.T) {
	for _, c := range openaiTokenCases {
		evs := make([]sseEvent, len(c))
		for i, data := range c {
			evs[i] = sseEvent{"", data}
		}
		sameDecoding(t, DialectOpenAI, evs)
	}
}

// A text delta without escapes comes out of the fast path without being
// copied (a substring of the event's data), and an ordinary chunk costs no
// allocation once the model is known.
func TestOpenAIFastPathAllocs(t *testing.T) {
	chunk := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}`
	d := &openaiDecoder{}
	if s := d.handle("", chunk); s.text != " token" || d.model != "m" {
		t.Fatalf("step %+v, model %q", s, d.model)
	}
	if raceEnabled {
		t.Skip("-race allocates on its own: the run without it counts the allocations")
	}
	if n := testing.AllocsPerRun(100, func() { d.handle("", chunk) }); n != 0 {
		t.Errorf("%v allocations per chunk, want 0", n)
	}
}

// FuzzOpenAIFastPath: any sequence of two chunks decodes the same through
// the fast path as through the map path (the second with the model already
// known, or not).
func FuzzOpenAIFastPath(f *testing.F) {
	for _, c := range openaiTokenCases {
		second := ""
		if len(c) > 1 {
			second = c[1]
		}
		f.Add(c[0], second)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		sameDecoding(t, DialectOpenAI, []sseEvent{{"", a}, {"", b}})
	})
}
