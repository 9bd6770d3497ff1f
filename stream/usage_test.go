package stream

import (
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
	}{
		{"anthropic", "anthropic/messages-stream-recorded.sse", &Usage{InputTokens: 135, OutputTokens: 1}}, // message_start
		{"anthropic", "anthropic/messages-stream-doc-basic.sse", &Usage{InputTokens: 25, OutputTokens: 1}},
		{"gemini", "gemini/stream-recorded-text.sse", &Usage{InputTokens: 7}}, // the first chunk's usageMetadata
		{"openai", "openai/chat-stream-wire-constructed.sse", nil},            // usage only at the end
		{"openai:responses", "openai/responses-stream-doc-example.sse", nil},  // response.created has usage null
	} {
		t.Run(tc.fx, func(t *testing.T) {
			c, ep := serve(t, tc.provider, sseHandler(fixture(t, tc.fx)))
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
