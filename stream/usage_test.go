package stream

import (
	"bytes"
	"context"
	"testing"
)

// OnUsage hears the usage a stream reports before its text, once and
// before the first delta; a stream whose usage comes only with its end
// never calls it.
func TestOnUsageBeforeText(t *testing.T) {
	for _, tc := range []struct {
		provider, fx string
		want         *Usage
		edit         func([]byte) []byte // changes the fixture
	}{
		{"anthropic", "anthropic/messages-stream-recorded.sse", &Usage{InputTokens: 135, OutputTokens: 1}, nil}, // message_start
		{"anthropic", "anthropic/messages-stream-doc-basic.sse", &Usage{InputTokens: 25, OutputTokens: 1}, nil},
		{"gemini", "gemini/stream-recorded-text.sse", &Usage{InputTokens: 7}, nil}, // the first chunk's usageMetadata
		{"openai", "openai/chat-stream-wire-constructed.sse", nil, nil},            // usage only at the end
		{"openai:responses", "openai/responses-stream-doc-example.sse", nil, nil},  // response.created has usage null
		// A response.created that carries usage (OpenAI sends null there).
		{"openai:responses", "openai/responses-stream-minimal-constructed.sse", &Usage{InputTokens: 12}, func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"output":[],"usage":null}}`), []byte(`"output":[],"usage":{"input_tokens":12,"output_tokens":0}}}`), 1)
		}},
	} {
		t.Run(tc.fx, func(t *testing.T) {
			body := fixture(t, tc.fx)
			if tc.edit != nil {
				body = tc.edit(body)
			}
			c, ep := serve(t, tc.provider, sseHandler(body))
			var (
				got    []Usage
				deltas int
				before = -1 // deltas seen when OnUsage was called
			)
			req := Request{Target: Target{Provider: ep.Provider, Model: "m"}, Prompt: "hi", MaxTokens: 64,
				OnUsage: func(u Usage) { got = append(got, u); before = deltas }}
			res := c.Do(context.Background(), ep, req, func(string) { deltas++ })
			if res.Err != nil || deltas == 0 {
				t.Fatalf("err %v, %d deltas", res.Err, deltas)
			}
			switch {
			case tc.want == nil && len(got) != 0:
				t.Errorf("OnUsage called with %+v; the stream reports usage only at its end", got)
			case tc.want != nil && (len(got) != 1 || got[0] != *tc.want || before != 0):
				t.Errorf("OnUsage %+v after %d deltas, want once with %+v before any", got, before, *tc.want)
			}
		})
	}
}
