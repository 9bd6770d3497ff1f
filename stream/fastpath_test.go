package stream

import (
	"bufio"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var fastDialects = []Dialect{DialectOpenAI, DialectAnthropic, DialectGemini}

// mapPath is the reference decoding of dec's dialect.
func mapPath(dec decoder) func(typ, data string) step {
	switch d := dec.(type) {
	case *openaiDecoder:
		return d.handleMap
	case *anthropicDecoder:
		return d.handleMap
	case *geminiDecoder:
		return d.handleMap
	}
	panic("unknown decoder")
}

type sseEvent struct{ typ, data string }

// sameDecoding feeds events to a decoder with its fast path and to one with
// the map path only, and fails on any difference in a step or in what they
// learnt.
func sameDecoding(t *testing.T, d Dialect, events []sseEvent) {
	t.Helper()
	fast, ref := newDecoder(d), newDecoder(d)
	slow := mapPath(ref)
	for i, ev := range events {
		a, b := fast.handle(ev.typ, ev.data), slow(ev.typ, ev.data)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s event %d (%q %q):\nfast %+v\n map %+v", d, i, ev.typ, ev.data, a, b)
		}
	}
	if a, b := fast.state(), ref.state(); !reflect.DeepEqual(a, b) {
		t.Fatalf("%s: state\nfast %+v\n map %+v", d, a, b)
	}
}

// fixtureEvents reads the event/data pairs of an SSE fixture.
func fixtureEvents(t testing.TB, path string) []sseEvent {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []sseEvent
	typ := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event:"):
			typ = strings.TrimSpace(line[6:])
		case strings.HasPrefix(line, "data:"):
			out = append(out, sseEvent{typ, strings.TrimPrefix(line[5:], " ")})
			typ = ""
		}
	}
	return out
}

// fastEdgeCases are chunks where a typed decoding could go wrong: nulls,
// fields of other types, non-object elements, odd indexes, thoughts,
// Mistral's content parts, Groq's envelope, prompt feedback.
var fastEdgeCases = []string{
	`null`, `[]`, `[{"choices":[]}]`, `"x"`, `{}`, `{"error":null}`, `{"error":{}}`, `{"error":{"message":"boom","type":"server_error"}}`,
	`{"model":5,"choices":[{"delta":{"content":"a"}}]}`,
	`{"choices":[null,{"delta":{"content":"a"}},3]}`,
	`{"choices":[null,{"index":1,"delta":{"content":"b"}},{"index":0,"delta":{"content":"c"},"finish_reason":"stop"}]}`,
	`{"choices":[{"index":"0","delta":{"content":"a"}}]}`,
	`{"choices":[{"index":0.0,"delta":null,"finish_reason":null}],"usage":{"prompt_tokens":3,"completion_tokens":-1}}`,
	`{"choices":[{"delta":{"content":[{"type":"text","text":"x"},{"type":"image_url"},{"text":"y"}]}}]}`,
	`{"choices":[{"delta":{"content":null,"tool_calls":[{"id":"t"}]}}]}`,
	`{"choices":[{"delta":{"reasoning_content":""}}]}`,
	`{"choices":[{"delta":"text"}]}`,
	`{"choices":{"0":{}}}`,
	`{"x_groq":{"id":"req_1","usage":{"prompt_tokens":1,"completion_tokens":2}},"choices":[]}`,
	`{"x_groq":"id","usage":[1]}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`,
	`{"type":"content_block_delta","delta":{"type":"thinking_delta","thinking":"hm"}}`,
	`{"type":"content_block_delta","delta":{"text":5}}`,
	`{"type":"content_block_delta","delta":null}`,
	`{"type":"content_block_delta","delta":[1]}`,
	`{"type":"content_block_delta"}`,
	`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}`,
	`{"type":7}`,
	`{"candidates":[{"content":{"parts":[{"text":"a"},{"thought":true,"text":"t"},{"functionCall":{}},{},null]},"finishReason":"STOP"}]}`,
	`{"candidates":[null,{"content":{"parts":[{"text":"a"}]}}]}`,
	`{"candidates":[{"index":1,"content":{"parts":[{"text":"b"}]}},{"content":{"parts":[{"text":"c"}]}}]}`,
	`{"candidates":[{"content":null},{"content":"x"}]}`,
	`{"candidates":[],"promptFeedback":{"blockReason":"SAFETY"}}`,
	`{"candidates":[null],"promptFeedback":{"blockReason":"OTHER"}}`,
	`{"promptFeedback":"x","usageMetadata":{"promptTokenCount":1.5}}`,
	`{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"modelVersion":"gemini-2.5-flash","usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":2}}`,
	`  {"candidates":[{"content":{"parts":[{"text":" padded"}]}}]}  `,
}

// The fast paths decode the fixtures, the benchmark's long streams and the
// edge cases exactly as the map path does.
func TestFastPathMatchesMapPath(t *testing.T) {
	for _, d := range fastDialects {
		body, _ := longStream(d)
		sameDecoding(t, d, fixtureEvents(t, writeTemp(t, body)))
		for _, typ := range []string{"", "content_block_delta", "message_delta", "error", "ping"} {
			for _, c := range fastEdgeCases {
				sameDecoding(t, d, []sseEvent{{typ, c}})
			}
		}
	}
	files, _ := filepath.Glob("testdata/fixtures/*/*.sse")
	for _, f := range files {
		for _, d := range fastDialects {
			sameDecoding(t, d, fixtureEvents(t, f))
		}
	}
}

func writeTemp(t *testing.T, b []byte) string {
	p := filepath.Join(t.TempDir(), "s.sse")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// FuzzFastPathMatchesMapPath: any event, in any dialect, decodes the same
// through the fast path as through the map path.
func FuzzFastPathMatchesMapPath(f *testing.F) {
	for _, c := range fastEdgeCases {
		for i := range fastDialects {
			f.Add(uint8(i), "", c)
		}
	}
	files, _ := filepath.Glob("testdata/fixtures/*/*.sse")
	for _, p := range files {
		for _, ev := range fixtureEvents(f, p) {
			for i := range fastDialects {
				f.Add(uint8(i), ev.typ, ev.data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, di uint8, typ, data string) {
		sameDecoding(t, fastDialects[int(di)%len(fastDialects)], []sseEvent{{typ, data}})
	})
}

// A key spelt in another case than the provider's is not the field (the
// map path reads keys exactly): encoding/json, which the fast paths used
// before, matched "Text" and "CHOICES" to text and choices.
func TestFastPathKeysExact(t *testing.T) {
	for d, data := range map[Dialect]string{
		DialectOpenAI:    `{"CHOICES":[{"delta":{"content":"a"}}],"choices":[{"delta":{"Content":"b"}}]}`,
		DialectAnthropic: `{"type":"content_block_delta","delta":{"type":"text_delta","Text":"a"}}`,
		DialectGemini:    `{"candidates":[{"content":{"parts":[{"Text":"a"}]}}]}`,
	} {
		if s := newDecoder(d).handle("", data); s.text != "" {
			t.Errorf("%s: text %q from a key in another case", d, s.text)
		}
		sameDecoding(t, d, []sseEvent{{"", data}})
	}
}

// The Responses decoder (no map path) reads what the JSON v2 decoder
// refuses as encoding/json reads it: invalid UTF-8 replaced, the last of a
// duplicate key.
func TestResponsesStrictFallsBack(t *testing.T) {
	for data, want := range map[string]string{
		"{\"type\":\"response.output_text.delta\",\"delta\":\"a\xffb\"}":           "a\uFFFDb",
		`{"type":"response.output_text.delta","delta":"x","delta":"y"}`:            "y",
		`{"type":"response.output_text.delta","delta":"x","type":"response.done"}`: "",
	} {
		if s := newDecoder(DialectResponses).handle("", data); s.text != want || !s.recognize {
			t.Errorf("%q: %+v, want text %q", data, s, want)
		}
	}
}
