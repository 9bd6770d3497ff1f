package proxy

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A non-streamed or buffered answer of 2 MiB (past the 1 MiB of text a
// result keeps) reaches the caller whole; past a configured cap the caller
// gets an error in its dialect naming the cap, never a 200 with part of
// the text.
func TestTwoMiBAnswersWholeAndPastTheCapAnError(t *testing.T) {
	const size = 2 << 20
	call := func(t *testing.T, h *Handler, path, body string, buffered bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+testToken)
		r.Host = "127.0.0.1"
		if buffered {
			r.Header.Set(HeaderBuffered, "true")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	const openAI = `{"model":"openai/gpt-5.4-mini","messages":[{"role":"user","content":"long"}]}`
	const openAIStream = `{"model":"openai/gpt-5.4-mini","stream":true,"messages":[{"role":"user","content":"long"}]}`
	const anthropic = `{"model":"openai/gpt-5.4-mini","max_tokens":64000,"messages":[{"role":"user","content":"long"}]}`

	t.Run("whole", func(t *testing.T) {
		h, _ := backpressureProxy(t, &sseUpstream{size: size, chunk: 32 << 10}, Options{})
		w := call(t, h, "/v1/chat/completions", openAI, false)
		var m struct {
			Choices []struct {
				Message      struct{ Content string }
				FinishReason string `json:"finish_reason"`
			}
		}
		if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || w.Code != 200 || len(m.Choices) != 1 ||
			len(m.Choices[0].Message.Content) != size || m.Choices[0].FinishReason != "stop" {
			t.Fatalf("non-streamed: status %d, %v, %d bytes of text: want all %d", w.Code, err, len(m.Choices[0].Message.Content), size)
		}
		w = call(t, h, "/v1/chat/completions", openAIStream, true)
		text := 0
		for _, line := range strings.Split(w.Body.String(), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
				var c struct {
					Choices []struct{ Delta struct{ Content string } }
				}
				if json.Unmarshal([]byte(d), &c) == nil && len(c.Choices) == 1 {
					text += len(c.Choices[0].Delta.Content)
				}
			}
		}
		if w.Code != 200 || text != size || w.Header().Get(HeaderBuffered) != "true" {
			t.Fatalf("buffered: status %d, %d bytes of text, want all %d", w.Code, text, size)
		}
	})
	t.Run("past the cap", func(t *testing.T) {
		h, _ := backpressureProxy(t, &sseUpstream{size: size, chunk: 32 << 10}, Options{MaxAnswer: 1 << 20})
		for _, c := range []struct {
			path, body, typ string
			buffered        bool
		}{
			{"/v1/chat/completions", openAI, "server_error", false},
			{"/v1/chat/completions", openAIStream, "server_error", true},
			{"/v1/messages", anthropic, "api_error", false},
		} {
			w := call(t, h, c.path, c.body, c.buffered)
			var m struct {
				Type  string
				Error struct{ Type, Code, Message string }
			}
			if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || w.Code != http.StatusBadGateway || m.Error.Type != c.typ ||
				!strings.Contains(m.Error.Message, "max_answer") || !strings.Contains(m.Error.Message, "1048576 bytes") {
				t.Errorf("%s (buffered %v): status %d %v %s: want a 502 %s naming max_answer", c.path, c.buffered, w.Code, err, w.Body.Bytes(), c.typ)
			}
		}
	})
}
