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
