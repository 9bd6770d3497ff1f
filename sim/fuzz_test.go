package sim

import (
	"bytes"
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
