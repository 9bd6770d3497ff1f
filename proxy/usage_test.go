package proxy

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// callUsage is the usage the last call's result reports: what the
// simulator counted for the serving attempt.
func (e *env) callUsage() (in int, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.events) - 1; i >= 0; i-- {
		if ev := e.events[i]; ev.Kind == retry.EventCallEnd && ev.Result != nil && ev.Result.Usage != nil {
			return ev.Result.Usage.InputTokens, true
		}
	}
	return 0, false
}

// A live Anthropic-dialect stream carries the real input token count in
// message_start when the upstream reports it before the text (Anthropic's
// own message_start, Gemini's usageMetadata); an upstream that reports
// usage only at its end (Chat Completions) leaves 0 there, and
// message_delta carries the count. Read by the official SDK.
func TestMessageStartCarriesInputTokens(t *testing.T) {
	for _, tc := range []struct {
		model string
		early bool // the upstream reports input usage before its text
	}{
		{"anthropic/claude-haiku-5-5", true},
		{"gemini/gemini-2.5-flash", true},
		{"openai/gpt-5.4-mini", false},
	} {
		t.Run(tc.model, func(t *testing.T) {
			e := newEnv(t, nil, nil)
			s := e.anthropic(testToken).Messages.NewStreaming(context.Background(), anthropicParams(tc.model))
			defer s.Close() // an unclosed stream would hold its connection (and goroutines) for good
			var start, deltaIn int64
			starts := 0
			acc := anthropic.Message{}
			for s.Next() {
				ev := s.Current()
				switch ev.Type {
				case "message_start":
					starts++
					start = ev.AsMessageStart().Message.Usage.InputTokens
				case "message_delta":
					deltaIn = ev.AsMessageDelta().Usage.InputTokens
				}
				if err := acc.Accumulate(ev); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			want, ok := e.callUsage()
			if !ok || want == 0 || starts != 1 || len(acc.Content) != 1 || acc.Content[0].Text == "" {
				t.Fatalf("simulator's usage %d (%v), %d message_start, content %+v", want, ok, starts, acc.Content)
			}
			if deltaIn != int64(want) {
				t.Errorf("message_delta input_tokens %d, the simulator reported %d", deltaIn, want)
			}
			switch {
			case tc.early && start != int64(want):
				t.Errorf("message_start input_tokens %d, the simulator reported %d", start, want)
			case !tc.early && start != 0:
				t.Errorf("message_start input_tokens %d before the upstream reported any", start)
			}
		})
	}
}

// The early usage is the serving attempt's: one reported by an attempt that
// failed before its text does not reach the next attempt's message_start.
func TestMessageStartUsageIsTheServingAttempts(t *testing.T) {
	for _, c := range []struct {
		name string
		evs  []retry.Event
		want string
	}{
		{"reported", []retry.Event{
			{Kind: retry.EventAttemptStart, Attempt: &retry.Attempt{N: 1, Target: claudeHaiku}},
			{Kind: retry.EventUsage, Usage: &stream.Usage{InputTokens: 42}},
		}, `"usage":{"input_tokens":42,"output_tokens":0}`},
		{"reported by a failed attempt", []retry.Event{
			{Kind: retry.EventAttemptStart, Attempt: &retry.Attempt{N: 1, Target: claudeHaiku}},
			{Kind: retry.EventUsage, Usage: &stream.Usage{InputTokens: 42}},
			{Kind: retry.EventAttemptStart, Attempt: &retry.Attempt{N: 2, Target: openaiMini}},
		}, `"usage":{"input_tokens":0,"output_tokens":0}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			cs := &callState{w: rec, out: newAnthropicWriter("id"), stream: true, flow: &flow{perCall: DefaultStreamBuffer, total: DefaultMaxQueued, timeout: time.Second}, gone: func(error) {}}
			for _, ev := range append(c.evs, retry.Event{Kind: retry.EventText, Text: "Hello"}) {
				cs.event(ev)
			}
			if cs.sse != nil {
				cs.sse.close()
			}
			evs := parseSSE(t, rec.Body.Bytes())
			if len(evs) == 0 || evs[0].event != "message_start" || !strings.Contains(evs[0].data, c.want) {
				t.Errorf("events %v, want message_start with %s", evs, c.want)
			}
		})
	}
}
