package sim

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"google.golang.org/genai"

	"github.com/limitscope/limitscope/stream"
)

func thinkingSim(t *testing.T) string {
	t.Helper()
	s, err := New(Options{TokensPerSecond: 1e9, Seed: 3, Answer: "think:100t"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return ts.URL
}

func TestAnswerSpecThink(t *testing.T) {
	for spec, want := range map[string]answerShape{
		"think":                   {think: defaultThinkSize},
		"think:50t":               {think: 200},
		"think:1KB+paragraph:4KB": {kind: "paragraph", size: 4 << 10, think: 1 << 10},
		"think+code":              {kind: "code", think: defaultThinkSize},
		"paragraph:1KB":           {kind: "paragraph", size: 1 << 10},
	} {
		got, err := parseAnswer(spec)
		if err != nil || got != want {
			t.Errorf("%q: %+v %v, want %+v", spec, got, err, want)
		}
	}
	for _, bad := range []string{"think:0", "think+think", "think+sonnet", "think:x"} {
		if _, err := parseAnswer(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// With a thinking phase, limitscope's decoders see reasoning (Thinking,
// progress) before the first text on every provider that streams it, and
// the reasoning tokens where the provider reports them; the text is the
// answer's alone.
func TestThinkingPhaseDecoded(t *testing.T) {
	url := thinkingSim(t)
	for _, tc := range []struct {
		provider  string
		streamed  bool // the provider streams its reasoning
		reasoning bool // and reports reasoning tokens
	}{
		{"anthropic", true, false}, {"openai:responses", true, true}, {"gemini", true, true},
		{"deepseek", true, false}, {"groq", true, false}, {"xai", true, true},
		{"openai", false, true}, {"mistral", false, false},
	} {
		model := modelFor(accountName(tc.provider))
		ep := stream.Endpoint{Provider: tc.provider, BaseURL: BaseURL(url, tc.provider), Key: stream.Secret(FakeKey)}
		thoughts := 0
		var textAt int // thoughts seen when the first text came
		var text strings.Builder
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		res := (&stream.Client{}).Do(ctx, ep, stream.Request{Target: stream.Target{Provider: tc.provider, Model: model}, Prompt: "why", MaxTokens: 400,
			OnThinking: func() { thoughts++ }}, func(s string) {
			if text.Len() == 0 {
				textAt = thoughts
			}
			text.WriteString(s)
		})
		cancel()
		if res.Err != nil {
			t.Errorf("%s: %v", tc.provider, res.Err)
			continue
		}
		if res.Thinking != tc.streamed || (thoughts > 0) != tc.streamed || (tc.streamed && textAt != thoughts) {
			t.Errorf("%s: thinking %v, %d thoughts (%d before the text); want streamed %v, all before the text", tc.provider, res.Thinking, thoughts, textAt, tc.streamed)
		}
		if strings.Contains(res.Text, "Let me think") || res.TTFText == 0 || res.TTFText < res.TTFT {
			t.Errorf("%s: text %.40q, ttft %v, first text %v", tc.provider, res.Text, res.TTFT, res.TTFText)
		}
		if (res.ReasoningTokens > 0) != tc.reasoning || (tc.reasoning && (res.ReasoningTokens < 90 || res.ReasoningTokens > 100)) {
			t.Errorf("%s: %d reasoning tokens, want about 100 reported: %v", tc.provider, res.ReasoningTokens, tc.reasoning)
		}
	}
}

// The official SDKs read the thinking phases as their providers' own.
func TestThinkingPhaseSDKOracles(t *testing.T) {
	url := thinkingSim(t)
	ctx := sdkCtx(t)

	// Anthropic: a thinking block (with its signature) before the text.
	ac := anthropic.NewClient(aoption.WithBaseURL(url+"/anthropic"), aoption.WithAPIKey(FakeKey))
	st := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 400,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("why"))}})
	var msg anthropic.Message
	for st.Next() {
		if err := msg.Accumulate(st.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 2 || msg.Content[0].Type != "thinking" || !strings.HasPrefix(msg.Content[0].Thinking, "Let me think") ||
		msg.Content[0].Signature == "" || msg.Content[1].Type != "text" || msg.Content[1].Text == "" {
		t.Errorf("anthropic: %+v", msg.Content)
	}

	// Responses: a reasoning item with its summary, then the message.
	oc := openai.NewClient(ooption.WithBaseURL(url+"/openai/v1"), ooption.WithAPIKey(FakeKey))
	rs := oc.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "gpt-5.4-mini",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("why")}})
	var summary, text string
	var final responses.Response
	for rs.Next() {
		ev := rs.Current()
		switch ev.Type {
		case "response.reasoning_summary_text.delta":
			if text != "" {
				t.Error("responses: reasoning after the text")
			}
			summary += ev.Delta
		case "response.output_text.delta":
			text += ev.Delta
		case "response.completed":
			final = ev.Response
		}
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(summary, "Let me think") || text == "" || len(final.Output) != 2 || final.Output[0].Type != "reasoning" ||
		final.Output[0].Summary[0].Text != summary || final.OutputText() != text || final.Usage.OutputTokensDetails.ReasoningTokens == 0 {
		t.Errorf("responses: summary %.30q text %.30q output %+v usage %+v", summary, text, final.Output, final.Usage)
	}

	// Chat Completions: OpenAI reports the reasoning tokens, streams none.
	cs := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt-5.4-mini",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("why")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	var acc openai.ChatCompletionAccumulator
	for cs.Next() {
		acc.AddChunk(cs.Current())
	}
	if err := cs.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Usage.CompletionTokensDetails.ReasoningTokens == 0 || acc.Choices[0].Message.Content == "" {
		t.Errorf("chat: usage %+v", acc.Usage)
	}

	// Gemini: thought parts, then the text; thoughtsTokenCount.
	gc, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: FakeKey, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: url + "/gemini/"}})
	if err != nil {
		t.Fatal(err)
	}
	var thought, answer string
	var thoughts int32
	for res, e := range gc.Models.GenerateContentStream(ctx, "gemini-2.5-flash", genai.Text("why"), nil) {
		if e != nil {
			t.Fatal(e)
		}
		for _, p := range res.Candidates[0].Content.Parts {
			if p.Thought {
				if answer != "" {
					t.Error("gemini: a thought after the text")
				}
				thought += p.Text
			} else {
				answer += p.Text
			}
		}
		if res.UsageMetadata != nil && res.UsageMetadata.ThoughtsTokenCount > 0 {
			thoughts = res.UsageMetadata.ThoughtsTokenCount
		}
	}
	if !strings.HasPrefix(thought, "Let me think") || answer == "" || thoughts == 0 {
		t.Errorf("gemini: thought %.30q answer %.30q thoughts %d", thought, answer, thoughts)
	}
}
