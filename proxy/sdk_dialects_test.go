package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// crossConfig is one attempt per call, so each case is one upstream
// request (the SDKs' own retries are what is counted).
func crossConfig() *Config { return &Config{Policy: retry.Policy{MaxAttempts: 1, TriesPerTarget: 1}} }

// wrongKey makes the simulator refuse the proxy's key for provider: an
// upstream 401.
func wrongKey(provider string) func(*Options) {
	return func(o *Options) {
		r := o.Engine.Doer.(stream.Router)
		eps := map[string]stream.Endpoint{}
		for k, v := range r.Endpoints {
			eps[k] = v
		}
		ep := eps[provider]
		ep.Key = "sk-wrong-0123456789abcdef"
		eps[provider] = ep
		r.Endpoints = eps
		o.Engine.Doer = r
	}
}

// Through the proxy, each SDK gets its own API's vocabulary whichever
// provider failed: openai-go in front of Anthropic, anthropic-sdk-go in
// front of OpenAI, for an overload, a quota stop, a break mid-stream and
// the provider refusing the proxy's key: status, error.type, code, and one
// request from the SDK (the proxy's errors are final, x-should-retry:
// false).
func TestSDKErrorsInTheCallersVocabulary(t *testing.T) {
	ctx := context.Background()
	oaCases := []struct {
		name, fault   string
		tweak         func(*Options)
		status        int
		typ, code     string
		stream        bool
		notAuthWrong  bool
		upstreamCalls int64
	}{
		{"overload", sim.FaultOverload, nil, 503, "service_unavailable_error", "server_is_overloaded", false, false, 1},
		{"quota", sim.FaultSpendCap, nil, 429, "insufficient_quota", "insufficient_quota", false, false, 1},
		{"mid-stream break", sim.FaultMidStream, nil, 200, "service_unavailable_error", "server_is_overloaded", true, false, 1},
		// The simulator counts authenticated requests only: the refused one is not.
		{"upstream 401", "", wrongKey("anthropic"), 502, "server_error", "upstream_authentication_failed", false, true, 0},
	}
	for _, c := range oaCases {
		t.Run("openai-go to anthropic/"+c.name, func(t *testing.T) {
			e := newEnv(t, crossConfig(), c.tweak)
			if c.fault != "" {
				e.inject(sim.Fault{Provider: "anthropic", Kind: c.fault, Count: 10})
			}
			p := openAIParams("anthropic/claude-haiku-5-5")
			if c.stream {
				p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a long story")}
				p.MaxCompletionTokens = openai.Int(300)
				s := e.openAI(testToken).Chat.Completions.NewStreaming(ctx, p)
				defer s.Close()
				for s.Next() {
				}
				err := s.Err()
				if err == nil || !strings.Contains(err.Error(), `"type":"`+c.typ+`"`) || !strings.Contains(err.Error(), `"code":"`+c.code+`"`) ||
					strings.Contains(err.Error(), "overloaded_error") {
					t.Errorf("stream error %v: want type %s, code %s", err, c.typ, c.code)
				}
			} else {
				_, err := e.openAI(testToken).Chat.Completions.New(ctx, p)
				var oe *openai.Error
				if !errors.As(err, &oe) || oe.StatusCode != c.status || oe.Type != c.typ || oe.Code != c.code {
					t.Fatalf("error %v: want %d %s %s", err, c.status, c.typ, c.code)
				}
				if c.notAuthWrong && (oe.StatusCode == 401 || !strings.Contains(oe.Message, "your proxy token is fine")) {
					t.Errorf("an upstream 401 reads as the caller's token: %v", oe.Message)
				}
			}
			if n, h := e.requests("anthropic"), e.hits.Load(); n != c.upstreamCalls || h != 1 {
				t.Errorf("anthropic saw %d requests and the proxy %d, want %d and 1", n, h, c.upstreamCalls)
			}
		})
	}
	anCases := []struct {
		name, fault  string
		tweak        func(*Options)
		status       int
		typ          string
		stream       bool
		notAuthWrong bool
	}{
		{"overload", sim.FaultOverload, nil, 529, "overloaded_error", false, false},
		{"quota", sim.FaultSpendCap, nil, 402, "billing_error", false, false},
		{"mid-stream break", sim.FaultMidStream, nil, 200, "overloaded_error", true, false},
		{"upstream 401", "", wrongKey("openai"), 502, "api_error", false, true},
	}
	for _, c := range anCases {
		t.Run("anthropic-sdk-go to openai/"+c.name, func(t *testing.T) {
			e := newEnv(t, crossConfig(), c.tweak)
			if c.fault != "" {
				e.inject(sim.Fault{Provider: "openai", Kind: c.fault, Count: 10})
			}
			p := anthropicParams("openai/gpt-5.4-mini")
			var err error
			if c.stream {
				p.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Tell me a long story"))}
				p.MaxTokens = 300
				s := e.anthropic(testToken).Messages.NewStreaming(ctx, p)
				defer s.Close()
				for s.Next() {
				}
				err = s.Err()
			} else {
				_, err = e.anthropic(testToken).Messages.New(ctx, p)
			}
			var ae *anthropic.Error
			if !errors.As(err, &ae) || ae.StatusCode != c.status || ae.Type() != anthropic.ErrorType(c.typ) ||
				strings.Contains(ae.RawJSON(), "insufficient_quota") || strings.Contains(ae.RawJSON(), "server_is_overloaded") {
				t.Fatalf("error %v: want %d %s in Anthropic's words", err, c.status, c.typ)
			}
			if c.notAuthWrong && !strings.Contains(ae.RawJSON(), "your proxy token is fine") {
				t.Errorf("an upstream 401 reads as the caller's token: %s", ae.RawJSON())
			}
			want := int64(1)
			if c.notAuthWrong {
				want = 0 // the simulator counts authenticated requests only
			}
			if n, h := e.requests("openai"), e.hits.Load(); n != want || h != 1 {
				t.Errorf("openai saw %d requests and the proxy %d, want %d and 1", n, h, want)
			}
		})
	}
}
