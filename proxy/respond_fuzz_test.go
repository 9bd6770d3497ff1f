package proxy

import (
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// appendJSONString writes what encoding/json writes, as JSON: any string
// decodes back to what encoding/json's own encoding decodes to (invalid
// UTF-8 as U+FFFD).
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "hello", "a\"b\\c", "\n\r\t\x00\x1f\x7f", "<&>", "\u2028\u2029", "\xff\xfe", "é\xc3", "日本語"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := appendJSONString([]byte("x"), s)
		if got[0] != 'x' {
			t.Fatal("the prefix was overwritten")
		}
		var dec string
		if err := json.Unmarshal(got[1:], &dec); err != nil {
			t.Fatalf("%q: not a JSON string: %v (%s)", s, err, got[1:])
		}
		ref, _ := json.Marshal(s)
		var want string
		if err := json.Unmarshal(ref, &want); err != nil {
			t.Fatal(err)
		}
		if dec != want {
			t.Fatalf("%q decodes to %q, encoding/json's to %q", s, dec, want)
		}
	})
}

// Any body to any of the three request parsers: no panic; a refusal is a
// 400; an accepted request has a model and user or assistant turns only.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","input":"hi"}`,
		`{"model":"m","input":[{"role":"developer","content":"x"},{"role":"user","content":[{"type":"input_text","text":"a"}]}],"max_output_tokens":20,"stream":true}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}]}`,
		`{"model":"m","input":[{"type":"function_call"}]}`, `[]`, `null`, `{"input":{}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, parse := range []func([]byte) (*inbound, *apiError){parseResponses, parseOpenAI, parseAnthropic} {
			in, e := parse([]byte(body))
			if e != nil {
				if e.status != 400 || in != nil {
					t.Fatalf("refusal %d %+v", e.status, in)
				}
				continue
			}
			if in.model == "" || len(in.messages) == 0 {
				t.Fatalf("accepted %+v", in)
			}
			for _, m := range in.messages {
				if m.Role != "user" && m.Role != "assistant" {
					t.Fatalf("role %q", m.Role)
				}
			}
		}
	})
}

// Whatever the model name and text, every event each writer streams is
// one JSON object, and the text decodes back whole.
func FuzzStreamWriters(f *testing.F) {
	f.Add("gpt-5.4-mini", "hello", "world")
	f.Add("m\"\\\n", "\x00\xff<&>", "\u2028")
	f.Fuzz(func(t *testing.T, model, a, b string) {
		now := time.Unix(1700000000, 0)
		for _, w := range []writer{newOpenAIWriter("id", now, true), newAnthropicWriter("id"), newResponsesWriter("id", now)} {
			out := w.start(nil, model)
			out = w.text(out, a)
			out = w.text(out, b)
			out = w.end(out, retry.Result{Usage: &stream.Usage{InputTokens: 3, OutputTokens: 2}}, model)
			var text string
			for _, ev := range parseSSE(t, out) {
				if ev.data == "[DONE]" {
					continue
				}
				var m map[string]any
				if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
					t.Fatalf("%T: %v: %s", w, err, ev.data)
				}
				for _, p := range [][]any{{"choices", 0, "delta", "content"}, {"delta", "text"}} {
					if s, ok := dig(m, p...).(string); ok {
						text += s
					}
				}
				if m["type"] == "response.output_text.delta" {
					text += m["delta"].(string)
				}
			}
			var want string
			ref, _ := json.Marshal(a + b)
			_ = json.Unmarshal(ref, &want)
			// (a and b encoded apart and a+b differ only for an invalid
			// rune split across them.)
			if text != want && utf8.ValidString(a) && utf8.ValidString(b) {
				t.Fatalf("%T: text %q, want %q", w, text, want)
			}
		}
	})
}
