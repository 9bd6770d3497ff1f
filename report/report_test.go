package report_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/report"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

// TestHostileTextIsInert: text from a provider (a message, a code, a
// request id) can neither add markup to the page nor show a key.
func TestHostileTextIsInert(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	oa := stream.Target{Provider: "openai", Model: `gpt"><script>alert(1)</script>`}
	an := stream.Target{Provider: "anthropic", Model: "claude-haiku-4-5"}
	ra := 30 * time.Second
	key := "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX0123456789"
	c := store.Call{ID: 1, Session: 1, Started: t0, Ended: t0.Add(2 * time.Second), Outcome: retry.OutcomeOK,
		Chain: []stream.Target{oa, an}, ServedBy: &an, Attempts: 2,
		AttemptsList: []retry.Attempt{
			{N: 1, Target: oa, Status: 429, Class: stream.ClassRateLimit, Code: "<img src=x onerror=alert(2)>",
				Message: "Incorrect API key provided: " + key + "\x1b[31m", RetryAfter: &ra, StartedAt: t0, Duration: 100 * time.Millisecond,
				Decision: retry.DecideFailover, RequestID: "</td><td>"},
			{N: 2, Target: an, Status: 200, Class: stream.ClassOK, StartedAt: t0.Add(150 * time.Millisecond), Duration: time.Second, Decision: retry.DecideDone},
		}}
	var b bytes.Buffer
	if err := report.Write(&b, report.Input{Calls: []store.Call{c}, Generated: t0}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, bad := range []string{"<script>alert", "<img src", key, "\x1b"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;", "&lt;/td&gt;&lt;td&gt;", "[redacted]", `<b>1</b>failovers`, `<b>1</b>wasted requests`, "the server asked 30s"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// TestEmptyReport: no calls is a page that says so, not an error.
func TestEmptyReport(t *testing.T) {
	var b bytes.Buffer
	if err := report.Write(&b, report.Input{Scope: "session 3"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "<b>0</b>calls") || !strings.Contains(b.String(), "no failovers") {
		t.Errorf("empty report:\n%s", b.String())
	}
}

// TestCancelIsNotABrokenStream: a call cancelled after HTTP 200 is drawn X
// (cancelled) and counted as no broken stream.
func TestCancelIsNotABrokenStream(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	oa := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	c := store.Call{ID: 1, Session: 1, Started: t0, Ended: t0.Add(2 * time.Second), Outcome: retry.OutcomeCancelled,
		Chain: []stream.Target{oa}, Attempts: 1,
		AttemptsList: []retry.Attempt{{N: 1, Target: oa, Status: 200, Class: stream.ClassCancelled, MidStream: true,
			StartedAt: t0, Duration: time.Second, Decision: retry.DecideCancel}}}
	var b bytes.Buffer
	if err := report.Write(&b, report.Input{Calls: []store.Call{c}, Generated: t0}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if !strings.Contains(page, "<b>0</b>broken streams") {
		t.Error("a cancel is counted as a broken stream")
	}
	if strings.Contains(page, `<rect class="c-broken"`) || strings.Contains(page, `badge c-broken">B</span></td>`) || !strings.Contains(page, `<rect class="c-cancelled"`) {
		t.Error("a cancel is drawn as a broken stream")
	}
}
