package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
)

// A thinking phase: with --answer think[:SIZE][+SHAPE] (Options.Answer),
// every answer starts with SIZE of reasoning (default 600 bytes, about 150
// tokens) streamed at the provider's pace before the answer's first text,
// in each provider's documented framing:
//
//   - Anthropic: a "thinking" content block (thinking_delta events, then a
//     signature_delta), the text block after it at index 1; the thinking
//     counts in output_tokens.
//   - OpenAI Responses: a reasoning output item with its summary streamed
//     as response.reasoning_summary_text.delta, the message at
//     output_index 1; usage.output_tokens_details.reasoning_tokens.
//   - Chat Completions: DeepSeek and xAI stream delta.reasoning_content,
//     Groq delta.reasoning; OpenAI and Mistral stream no reasoning (the
//     phase is silence of the same length), OpenAI reporting
//     completion_tokens_details.reasoning_tokens.
//   - Gemini: parts with "thought": true before the text parts;
//     usageMetadata.thoughtsTokenCount.

// defaultThinkSize is the thinking phase's size when think has no SIZE.
const defaultThinkSize = 600

// cutThink takes a leading think[:SIZE] off an answer spec ("think",
// "think:200t+paragraph:4KB"): the thinking size in bytes (0: none) and the
// rest of the spec.
func cutThink(spec string) (int, string, error) {
	head, rest, _ := strings.Cut(strings.TrimSpace(spec), "+")
	kind, size, hasSize := strings.Cut(head, ":")
	if kind != "think" {
		return 0, spec, nil
	}
	if !hasSize {
		return defaultThinkSize, rest, nil
	}
	n, err := parseSize(size)
	if err != nil {
		return 0, "", fmt.Errorf("answer %q: think: %w", spec, err)
	}
	return n, rest, nil
}

// thinkingPieces is the reasoning streamed before the answer to req (nil
// without a thinking phase): deterministic, like the answer.
func (s *Server) thinkingPieces(req *simRequest) []string {
	if s.answer.think <= 0 {
		return nil
	}
	r := rand.New(rand.NewPCG(uint64(s.Seed()), seedOf(req.model, req.prompt, "think")))
	text := "Let me think about this. " + wordsOf(r, s.answer.think)
	pieces, _ := splitPieces(text[:min(len(text), s.answer.think)], 0)
	return pieces
}

// thinkTokens is the thinking phase's size in tokens.
func (a *answerPlan) thinkTokens() int { return tokensOf(strings.Join(a.thinking, "")) }

// think streams the thinking phase through emit at the plan's pace (a nil
// emit: silence of the same length). False when the client went away.
func (s *Server) think(ctx context.Context, o *sseOut, a *answerPlan, emit func(string)) bool {
	if emit == nil {
		emit = func(string) {}
	}
	return s.paced(ctx, o, a, a.thinking, emit)
}

// thinkingSignature is the opaque signature closing a thinking block.
func (a *answerPlan) thinkingSignature() string { return "Eq" + a.id("", base58, 62) + "==" }
