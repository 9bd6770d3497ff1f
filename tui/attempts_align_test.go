package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/theme"
)

// The attempt log names the account and keeps its columns aligned whatever
// the provider's length: an API variant ("gemini:interactions") or an
// account ("openai@team") widens the provider column for every row.
func TestAttemptLogProviderColumn(t *testing.T) {
	st := theme.New(true, true)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	l := newAttemptLog()
	for i, tg := range []stream.Target{
		{Provider: "openai", Model: "m"},
		{Provider: "gemini:interactions", Model: "m"},
		{Provider: "openai", Account: "team", Model: "m"},
	} {
		l.add(&logRow{callID: "c", at: at.Add(time.Duration(i) * time.Second),
			attempt: retry.Attempt{Target: tg, Status: 429, Class: stream.ClassRateLimit, Code: "rate_limit_exceeded"}})
	}
	lines := l.view(120, 3, &st)
	col := -1
	for i, line := range lines {
		c := strings.Index(line, "429")
		if col == -1 {
			col = c
		}
		if c != col || c < 0 {
			t.Errorf("row %d: the status column at %d, want %d:\n%s", i, c, col, strings.Join(lines, "\n"))
		}
	}
	if !strings.Contains(lines[2], "openai@team ") {
		t.Errorf("the account is not named: %q", lines[2])
	}
}
