package probe

import (
	"strings"
	"testing"
)

// TestConcurrencyWordsMatchTheNumbers: a ramp that measured nothing never
// says "all answered"; one that did says at which level the stop came.
func TestConcurrencyWordsMatchTheNumbers(t *testing.T) {
	cases := []struct {
		cc         Concurrency
		want, nope string
	}{
		{Concurrency{Reached: 0, Tried: 0, StoppedBy: StopQuota}, "not measured: the first request met a quota stop", "all answered"},
		{Concurrency{Reached: 0, Tried: 0, StoppedBy: StopRateLimit}, "not measured: the first request met a rate limit", "all answered"},
		{Concurrency{Reached: 2, Tried: 4, StoppedBy: StopRateLimit}, "2 parallel requests all answered; at 4 parallel, one met a rate limit", "4 met"},
		{Concurrency{Reached: 8, Tried: 8, StoppedBy: StopBudget}, "8 parallel requests all answered; the budget stopped the ramp", "not measured"},
	}
	for _, tc := range cases {
		c := &Card{Concurrency: tc.cc, Limits: Limits{Source: SourceNone}}
		text := strings.Join(c.Lines(), "\n")
		if !strings.Contains(text, tc.want) || strings.Contains(text, tc.nope) {
			t.Errorf("%+v:\n%s\nwant %q, never %q", tc.cc, text, tc.want, tc.nope)
		}
	}
}
