package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// The official SDKs, with their default retries left on, pointed at the
// proxy in front of the simulator.

func sdkConfig() *Config {
	one := retry.Policy{TriesPerTarget: 1}
	return &Config{Aliases: map[string]Alias{
		"fast":  {Name: "fast", Policy: &one, Chain: []stream.Target{{Provider: "openai", Model: "gpt-5.4-mini"}, {Provider: "anthropic", Model: "claude-haiku-5-5"}}},
		"smart": {Name: "smart", Policy: &one, Chain: []stream.Target{{Provider: "anthropic", Model: "claude-sonnet-4-5"}, {Provider: "openai", Model: "gpt-5.4"}}},
	}}
}

func (e *env) openAI(key string) *openai.Client {
	c := openai.NewClient(ooption.WithAPIKey(key), ooption.WithBaseURL(e.srv.URL+"/v1"), ooption.WithHTTPClient(e.client()))
	return &c
}

func (e *env) anthropic(key string) *anthropic.Client {
	c := anthropic.NewClient(aoption.WithAPIKey(key), aoption.WithBaseURL(e.srv.URL), aoption.WithHTTPClient(e.client()))
	return &c
}

func openAIParams(model string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("Say hello")},
	}
}

func anthropicParams(model string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: 64,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello"))},
	}
}

func TestSDKOpenAI(t *testing.T) {
	ctx := context.Background()
	t.Run("plain and streaming", func(t *testing.T) {
		e := newEnv(t, sdkConfig(), nil)
		c := e.openAI(testToken)
		res, err := c.Chat.Completions.New(ctx, openAIParams("openai/gpt-5.4-mini"))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Choices) != 1 || res.Choices[0].Message.Content == "" || res.Model != "gpt-5.4-mini" || res.Usage.CompletionTokens == 0 {
			t.Errorf("completion %+v", res)
		}
		p := openAIParams("openai/gpt-5.4-mini")
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := c.Chat.Completions.NewStreaming(ctx, p)
		defer s.Close() // an unclosed stream would hold its connection (and goroutines) for good
		acc := openai.ChatCompletionAccumulator{}
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if got := acc.Choices[0].Message.Content; got != res.Choices[0].Message.Content {
			t.Errorf("streamed %q, plain %q", got, res.Choices[0].Message.Content)
		}
		if acc.Usage.CompletionTokens != res.Usage.CompletionTokens || acc.Usage.PromptTokens != res.Usage.PromptTokens {
			t.Errorf("usage %+v vs %+v", acc.Usage, res.Usage)
		}
		if n := e.requests("openai"); n != 2 {
			t.Errorf("openai saw %d requests, want 2", n)
		}
	})
	t.Run("quota stop", func(t *testing.T) {
		e := newEnv(t, sdkConfig(), nil)
		e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultSpendCap, Code: "credit_balance_exhausted", Count: 10})
		_, err := e.openAI(testToken).Chat.Completions.New(ctx, openAIParams("fast"))
		var ae *openai.Error
		if !errors.As(err, &ae) || ae.StatusCode != 429 || ae.Code != "credit_balance_exhausted" {
			t.Fatalf("error %v", err)
		}
		if n, h := e.requests("openai"), e.hits.Load(); n != 1 || h != 1 {
			t.Errorf("openai saw %d requests and the proxy %d, want 1 and 1", n, h)
		}
		if n := e.requests("anthropic"); n != 0 {
			t.Errorf("anthropic saw %d requests after a quota stop", n)
		}
	})
	t.Run("failover to anthropic", func(t *testing.T) {
		e := newEnv(t, sdkConfig(), nil)
		e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultOverload, Count: 10})
		s := e.openAI(testToken).Chat.Completions.NewStreaming(ctx, openAIParams("fast"))
		defer s.Close() // an unclosed stream would hold its connection (and goroutines) for good
		acc := openai.ChatCompletionAccumulator{}
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if acc.Model != "claude-haiku-5-5" || acc.Choices[0].Message.Content == "" {
			t.Errorf("model %q content %q", acc.Model, acc.Choices[0].Message.Content)
		}
		if a, b := e.requests("openai"), e.requests("anthropic"); a != 1 || b != 1 {
			t.Errorf("openai %d anthropic %d requests, want 1 and 1", a, b)
		}
	})
	t.Run("mid-stream error", func(t *testing.T) {
		e := newEnv(t, sdkConfig(), nil)
		e.inject(sim.Fault{Provider: "openai", Kind: sim.FaultMidStream})
		p := openAIParams("openai/gpt-5.4-mini")
		p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a long story")}
		p.MaxCompletionTokens = openai.Int(300)
		s := e.openAI(testToken).Chat.Completions.NewStreaming(ctx, p)
		defer s.Close() // an unclosed stream would hold its connection (and goroutines) for good
		text := ""
		for s.Next() {
			if ch := s.Current(); len(ch.Choices) > 0 {
				text += ch.Choices[0].Delta.Content
			}
		}
		if s.Err() == nil || !strings.Contains(s.Err().Error(), "server_is_overloaded") || text == "" {
			t.Errorf("err %v after %q", s.Err(), text)
		}
		if n, h := e.requests("openai"), e.hits.Load(); n != 1 || h != 1 {
			t.Errorf("openai saw %d requests and the proxy %d, want 1 and 1", n, h)
		}
	})
	t.Run("wrong token", func(t *testing.T) {
		e := newEnv(t, sdkConfig(), nil)
		_, err := e.openAI("sk-not-the-token").Chat.Completions.New(ctx, openAIParams("openai/gpt-5.4-mini"))
		var ae *openai.Error
		if !errors.As(err, &ae) || ae.StatusCode != 401 {
			t.Fatalf("error %v", err)
		}
		if n, h := e.requests("openai"), e.hits.Load(); n != 0 || h != 1 {
			t.Errorf("openai saw %d requests and the proxy %d, want 0 and 1", n, h)
		}
	})
}

func TestSDKAnthropic(t *testing.T) {
	ctx := context.Background()
	t.Run("plain and streaming", func(t *testing.T) {
		e := newEnv(t, sdkConfig(), nil)
		c := e.anthropic(testToken)
		msg, err := c.Messages.New(ctx, anthropicParams("claude-haiku-5-5"))
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 1 || msg.Content[0].Text == "" || msg.Model != "claude-haiku-5-5" || msg.Usage.OutputTokens == 0 {
			t.Errorf("message %+v", msg)
		}
		s := c.Messages.NewStreaming(ctx, anthropicParams("claude-haiku-5-5"))
		defer s.Close() // an unclosed stream would hold its connection (and goroutines) for good
		acc := anthropic.Message{}
		for s.Next() {
			if err := acc.Accumulate(s.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Content) != 1 || acc.Content[0].Text != msg.Content[0].Text || acc.StopReason != msg.StopReason {
			t.Errorf("streamed %+v, plain %+v", acc.Content, msg.Content)
		}
		if acc.Usage.OutputTokens != msg.Usage.OutputTokens || acc.Usage.InputTokens != msg.Usage.InputTokens {
			t.Errorf("usage %+v vs %+v", acc.Usage, msg.Usage)
		}
		if n := e.requests("anthropic"); n != 2 {
			t.Errorf("anthropic saw %d requests, want 2", n)
		}
	})
	t.Run("quota stop", func(t *testing.T) {
		e := newEnv(t, sdkConfig(), nil)
		e.inject(sim.Fault{Provider: "anthropic", Kind: sim.FaultSpendCap, Count: 10})
		_, err := e.anthropic(testToken).Messages.New(ctx, anthropicParams("smart"))
		var ae *anthropic.Error
		if !errors.As(err, &ae) || ae.StatusCode != 429 || ae.Type() != "rate_limit_error" {
			t.Fatalf("error %v", err)
		}
		if !strings.Contains(ae.RawJSON(), "enforced_spend_limit_reached") {
			t.Errorf("body %s", ae.RawJSON())
		}
		if n, h := e.requests("anthropic"), e.hits.Load(); n != 1 || h != 1 {
			t.Errorf("anthropic saw %d requests and the proxy %d, want 1 and 1", n, h)
		}
	})
	t.Run("failover to openai", func(t *testing.T) {
		e := newEnv(t, sdkConfig(), nil)
		e.inject(sim.Fault{Provider: "anthropic", Kind: sim.FaultOverload, Count: 10})
		s := e.anthropic(testToken).Messages.NewStreaming(ctx, anthropicParams("smart"))
		defer s.Close() // an unclosed stream would hold its connection (and goroutines) for good
		acc := anthropic.Message{}
		for s.Next() {
			if err := acc.Accumulate(s.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if acc.Model != "gpt-5.4" || len(acc.Content) != 1 || acc.Content[0].Text == "" || acc.Usage.OutputTokens == 0 {
			t.Errorf("message %+v", acc)
		}
		if a, b := e.requests("anthropic"), e.requests("openai"); a != 1 || b != 1 {
			t.Errorf("anthropic %d openai %d requests, want 1 and 1", a, b)
		}
	})
	t.Run("mid-stream error", func(t *testing.T) {
		e := newEnv(t, sdkConfig(), nil)
		e.inject(sim.Fault{Provider: "anthropic", Kind: sim.FaultMidStream})
		p := anthropicParams("claude-haiku-5-5")
		p.MaxTokens = 300
		p.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Tell me a long story"))}
		s := e.anthropic(testToken).Messages.NewStreaming(ctx, p)
		defer s.Close() // an unclosed stream would hold its connection (and goroutines) for good
		for s.Next() {
		}
		var ae *anthropic.Error
		if !errors.As(s.Err(), &ae) || ae.Type() != "overloaded_error" {
			t.Errorf("err %v", s.Err())
		}
		if n, h := e.requests("anthropic"), e.hits.Load(); n != 1 || h != 1 {
			t.Errorf("anthropic saw %d requests and the proxy %d, want 1 and 1", n, h)
		}
	})
	t.Run("wrong token", func(t *testing.T) {
		e := newEnv(t, sdkConfig(), nil)
		_, err := e.anthropic("sk-ant-wrong").Messages.New(ctx, anthropicParams("claude-haiku-5-5"))
		var ae *anthropic.Error
		if !errors.As(err, &ae) || ae.StatusCode != 401 || ae.Type() != "authentication_error" {
			t.Fatalf("error %v", err)
		}
		if n := e.requests("anthropic"); n != 0 {
			t.Errorf("anthropic saw %d requests", n)
		}
	})
}
