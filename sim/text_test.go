package sim

import (
	"strings"
	"testing"
)

func TestAnswerText(t *testing.T) {
	for i := 0; i < 200; i++ {
		prompt := strings.Repeat("x", i)
		pieces, truncated := answer(1, "m", prompt, 0)
		text := strings.Join(pieces, "")
		if truncated || !strings.HasSuffix(text, ".") || strings.HasSuffix(text, " .") {
			t.Fatalf("natural end %q", text)
		}
		last := strings.TrimSuffix(pieces[len(pieces)-1], ".")
		if w := strings.TrimSpace(last); !contains(words, strings.ToLower(w)) {
			t.Fatalf("last word %q is not whole (%q)", w, text)
		}
		pieces, truncated = answer(1, "m", prompt, 10)
		if text := strings.Join(pieces, ""); !truncated || tokensOf(text) != 10 {
			t.Fatalf("max 10 tokens: %q (%d tokens, truncated %v)", text, tokensOf(text), truncated)
		}
	}
	a, _ := answer(1, "m", "p", 0)
	b, _ := answer(2, "m", "p", 0)
	if strings.Join(a, "") == strings.Join(b, "") {
		t.Error("the seed does not change the text")
	}
}

func contains(list []string, w string) bool {
	for _, x := range list {
		if x == w {
			return true
		}
	}
	return false
}

// Every size of a paragraphs answer makes text within that size, with no
// separator left at its end: a paragraph that ends a byte short of the
// size once asked the next one for less than nothing (found by
// FuzzParseAnswer).
func TestParagraphsAnySize(t *testing.T) {
	for size := 1; size <= 3000; size++ {
		s := &Server{answer: answerShape{kind: "paragraphs", size: size}, seed: 1}
		for _, prompt := range []string{"", "p", "paragraphs"} {
			pieces, _ := s.answerText(&simRequest{provider: "openai", model: "m", prompt: prompt})
			text := strings.Join(pieces, "")
			if len(text) > size || text == "" || strings.HasSuffix(text, "\n") {
				t.Fatalf("size %d, prompt %q: %d bytes %q", size, prompt, len(text), text[max(0, len(text)-20):])
			}
		}
	}
}
