package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Any scenario text parses or fails with a line-numbered error; never panics.
func FuzzParseScenario(f *testing.F) {
	for _, p := range presets {
		f.Add(p.text)
	}
	f.Add("[openai]\nwindow = 1s-2s overload p=50% every=3s\nramp = 1 1 1s\n")
	f.Add("[*]\nfault = hang 1 code=stall retry_after=0\n")
	f.Add("mode = trace\n[openai]\nfirst_token_dist = p5=1ms p50=2ms\ntokens_per_second_dist = p50=9\nestimated = rpm\ntrace = 0s ok ttft=1ms tps=2\ntrace = 1s spend_cap reset=1h code=x\n")
	f.Fuzz(func(t *testing.T, text string) {
		_, err := parseScenario("f", strings.NewReader(text), "f.ini")
		if err != nil && !strings.HasPrefix(err.Error(), "f.ini") {
			t.Fatalf("error without the source: %v", err)
		}
	})
}

// Any request body on any provider path gets an answer; never a panic.
func FuzzServeHTTP(f *testing.F) {
	f.Add("openai", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"max_tokens":0}`)
	f.Add("anthropic", `{"model":"m","max_tokens":-1,"messages":[]}`)
	f.Add("gemini", `{"contents":[{"parts":[{}]}],"generationConfig":{"maxOutputTokens":99999999}}`)
	f.Add("groq", `{"model":"m","messages":[{"content":null}],"stream":true}`)
	f.Add("mistral", `[1,2,3]`)
	s, err := New(Options{TokensPerSecond: 1e12})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, provider, body string) {
		if !knownProvider(provider) {
			provider = "openai"
		}
		req := request(t, "http://sim.test", provider, true)
		req.Body = http.NoBody
		req, _ = http.NewRequest(http.MethodPost, req.URL.String(), bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+FakeKey)
		req.Header.Set("x-api-key", FakeKey)
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("x-goog-api-key", FakeKey)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code == 0 {
			t.Fatal("no status")
		}
	})
}

// Any answer spec parses or fails with a message; a parsed one makes text
// within its size, never a panic.
func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{"", "words", "paragraph:1MB", "paragraphs:3KB", "code:500t", "words:0", "code:-1", "paragraph:99999999MB", "x:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		a, err := parseAnswer(spec)
		if err != nil {
			return
		}
		if a.size < 0 || a.size > maxAnswerSize {
			t.Fatalf("%q: size %d", spec, a.size)
		}
		if a.size > 1<<16 {
			return // large sizes are covered by the tests; keep the fuzzer quick
		}
		s := &Server{answer: a, seed: 1}
		pieces, _ := s.answerText(&simRequest{provider: "openai", model: "m", prompt: spec, maxTokens: 50})
		if n := len(strings.Join(pieces, "")); n > 200 {
			t.Fatalf("%q: %d bytes beyond max_tokens 50", spec, n)
		}
	})
}

// obj's encoder writes exactly what encoding/json writes, pair by pair (the
// way it was written before it had its own): the same escaping of any
// string, numbers, nesting.
func FuzzObjJSON(f *testing.F) {
	f.Add("type", "text_delta", int64(3), true)
	f.Add("k<&>", "a\"b\\c\n\u2028\xff é", int64(-1), false)
	f.Fuzz(func(t *testing.T, k, v string, n int64, flag bool) {
		o := obj{k, v, "n", n, "i", int(n), "b", flag, "nil", nil, "f", float64(n) / 3,
			"nested", obj{k, obj{"x", []any{v, n, nil, obj{}}}}, "list", []any{}, "m", map[string]any{k: v}}
		got, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if want := refObjJSON(t, o); !bytes.Equal(got, want) {
			t.Fatalf("obj encodes\n%s\nwant\n%s", got, want)
		}
		if direct := mustJSON(o); !bytes.Equal(direct, got) {
			t.Fatalf("mustJSON writes\n%s\nMarshal writes\n%s", direct, got)
		}
	})
}

// refObjJSON is obj's encoding through encoding/json, one Marshal per key
// and value.
func refObjJSON(t *testing.T, o obj) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i+1 < len(o); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(o[i].(string))
		b.Write(k)
		b.WriteByte(':')
		var v []byte
		var err error
		switch x := o[i+1].(type) {
		case obj:
			v = refObjJSON(t, x)
		case []any:
			var lb bytes.Buffer
			lb.WriteByte('[')
			for j, e := range x {
				if j > 0 {
					lb.WriteByte(',')
				}
				if eo, ok := e.(obj); ok {
					lb.Write(refObjJSON(t, eo))
				} else {
					eb, _ := json.Marshal(e)
					lb.Write(eb)
				}
			}
			lb.WriteByte(']')
			v = lb.Bytes()
		default:
			v, err = json.Marshal(x)
		}
		if err != nil {
			t.Fatal(err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes()
}
