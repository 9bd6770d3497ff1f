package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// TestSendPipedBrokenStreamPrintsOneAnswer: piped, a stream that breaks and
// is retried leaves exactly the served answer on stdout, once, with no
// fragment of the broken attempt; stderr says what broke.
func TestSendPipedBrokenStreamPrintsOneAnswer(t *testing.T) {
	clearEnv(t)
	r, env := simEnv(t)
	if err := r.Server.Inject(sim.Fault{Provider: "anthropic", Kind: sim.FaultMidStream, Count: 2}); err != nil {
		t.Fatal(err)
	}
	ta := newTestApp(env)
	code := run(context.Background(), ta.app, []string{"send", "--no-history", "--model", "anthropic/claude-haiku-5-5", "hello"})
	if code != 0 {
		t.Fatalf("exit %d, want 0: %s", code, ta.errOut)
	}
	// The same prompt again with --json: the simulator's text is
	// deterministic, so this is the answer the pipe must hold.
	tj := newTestApp(env)
	if c := run(context.Background(), tj.app, []string{"send", "--json", "--no-history", "--model", "anthropic/claude-haiku-5-5", "hello"}); c != 0 {
		t.Fatalf("--json exit %d: %s", c, tj.errOut)
	}
	want := decodeSend(t, tj.out.Bytes()).Text + "\n"
	if got := ta.out.String(); got != want {
		t.Errorf("stdout holds more or less than the one answer:\n got %q\nwant %q", got, want)
	}
	if strings.Contains(ta.out.String(), abandonedMark) {
		t.Error("the abandoned marker is on a pipe")
	}
	if n := strings.Count(ta.errOut.String(), "broke after"); n != 2 {
		t.Errorf("stderr names %d broken streams, want 2:\n%s", n, ta.errOut)
	}
}

// TestSendPipedGaveUpPrintsNothing: piped, a call that gives up after broken
// streams prints nothing on stdout, a clear failure on stderr and exits
// non-zero.
func TestSendPipedGaveUpPrintsNothing(t *testing.T) {
	clearEnv(t)
	r, env := simEnv(t)
	if err := r.Server.Inject(sim.Fault{Provider: "anthropic", Kind: sim.FaultMidStream, Count: 5}); err != nil {
		t.Fatal(err)
	}
	ta := newTestApp(env)
	code := run(context.Background(), ta.app, []string{"send", "--no-history", "--max-attempts", "3", "--model", "anthropic/claude-haiku-5-5", "hello"})
	if code == 0 {
		t.Fatalf("exit 0 after giving up: %s", ta.errOut)
	}
	if ta.out.Len() != 0 {
		t.Errorf("stdout holds %q, want nothing", ta.out)
	}
	if !strings.Contains(ta.errOut.String(), "gave_up after 3 attempts") {
		t.Errorf("stderr does not say the call gave up:\n%s", ta.errOut)
	}
}

// TestSendTerminalMarksAbandonedPartials: on a terminal the partials stream,
// and each abandoned one is marked before the retry's answer.
func TestSendTerminalMarksAbandonedPartials(t *testing.T) {
	clearEnv(t)
	r, env := simEnv(t)
	if err := r.Server.Inject(sim.Fault{Provider: "anthropic", Kind: sim.FaultMidStream, Count: 2}); err != nil {
		t.Fatal(err)
	}
	ta := newTestApp(env)
	ta.stdoutTTY = true
	code := run(context.Background(), ta.app, []string{"send", "--no-history", "--model", "anthropic/claude-haiku-5-5", "hello"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, ta.errOut)
	}
	lines := strings.Split(strings.TrimSuffix(ta.out.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want two marked partials and the answer, got %q", ta.out)
	}
	for _, l := range lines[:2] {
		if !strings.HasSuffix(l, abandonedMark) {
			t.Errorf("partial %q is not marked %q", l, abandonedMark)
		}
	}
	if strings.Contains(lines[2], abandonedMark) {
		t.Errorf("the answer is marked abandoned: %q", lines[2])
	}
}

// TestSendSaysItFailedOver: send says on stderr that it failed over, from
// whom to whom and why; --json carries the call id that history show opens
// and each attempt's request id.
func TestSendSaysItFailedOver(t *testing.T) {
	clearEnv(t)
	r, env := simEnv(t)
	if err := r.Server.Inject(sim.Fault{Provider: "openai", Kind: sim.FaultContextLength}); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "h.db")
	ta := newTestApp(env)
	code := run(context.Background(), ta.app, []string{"send", "--db", db, "--model", "openai/gpt-5.4-mini", "--fallback", "anthropic/claude-haiku-5-5", "hi"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, ta.errOut)
	}
	if !strings.Contains(ta.errOut.String(), "failing over from openai/gpt-5.4-mini to anthropic/claude-haiku-5-5") ||
		!strings.Contains(ta.errOut.String(), "context_length") {
		t.Errorf("stderr does not say that and why it failed over:\n%s", ta.errOut)
	}

	if err := r.Server.Inject(sim.Fault{Provider: "openai", Kind: sim.FaultContextLength}); err != nil {
		t.Fatal(err)
	}
	tj := newTestApp(env)
	if c := run(context.Background(), tj.app, []string{"send", "--db", db, "--json", "--model", "openai/gpt-5.4-mini", "--fallback", "anthropic/claude-haiku-5-5", "hi"}); c != 0 {
		t.Fatalf("exit %d: %s", c, tj.errOut)
	}
	d := decodeSend(t, tj.out.Bytes())
	if d.CallID == "" {
		t.Fatal("no call_id in send --json")
	}
	if len(d.Attempts) != 2 || d.Attempts[0].RequestID == "" || d.Attempts[1].RequestID == "" {
		t.Errorf("want two attempts each with its request id: %+v", d.Attempts)
	}
	ts := newTestApp(env)
	if c := run(context.Background(), ts.app, []string{"history", "show", "--db", db, "--json", d.CallID}); c != 0 {
		t.Fatalf("history show %s: exit %d: %s", d.CallID, c, ts.errOut)
	}
	if !strings.Contains(ts.out.String(), d.CallID) || !strings.Contains(ts.out.String(), d.Attempts[1].RequestID) {
		t.Errorf("history show %s opened another call:\n%s", d.CallID, ts.out)
	}
}

// TestSendCancelIsNotABrokenStream: ctrl+c during a stream is told as a
// cancel on stderr, and the partial is marked abandoned on a terminal.
func TestSendCancelIsNotABrokenStream(t *testing.T) {
	ta := newTestApp(nil)
	p := &sendPrinter{a: ta.app, stream: true}
	tg := stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	p.event(retry.Event{Kind: retry.EventCallStart, Chain: []stream.Target{tg}})
	p.event(retry.Event{Kind: retry.EventText, Text: "Half an ans"})
	p.event(retry.Event{Kind: retry.EventAttemptEnd, Attempt: &retry.Attempt{N: 1, Target: tg, Status: 200,
		Class: stream.ClassCancelled, MidStream: true, PartialText: "Half an ans", Decision: retry.DecideCancel}})
	if s := ta.errOut.String(); strings.Contains(s, "broke") || !strings.Contains(s, "cancelled after 11 characters") {
		t.Errorf("stderr %q, want a cancel, not a break", s)
	}
	if got := ta.out.String(); got != "Half an ans"+abandonedMark+"\n" {
		t.Errorf("stdout %q, want the partial marked abandoned", got)
	}
}

// TestPipedSaysWhatTheTerminalSays: piped, cooldowns with none says so, and
// info keeps the terminal's notes (where the history path came from).
func TestPipedSaysWhatTheTerminalSays(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"LIMITSCOPE_DB": filepath.Join(dir, "h.db"), "XDG_STATE_HOME": dir, "XDG_CONFIG_HOME": dir, "LIMITSCOPE_REDIS_URL": ""}
	for _, tty := range []bool{true, false} {
		if code, out, errOut := histRun(t, env, tty, runCooldowns); code != 0 || strings.TrimSpace(out) != "no cooldowns" {
			t.Errorf("cooldowns (terminal %v): exit %d, %q %q; want \"no cooldowns\"", tty, code, out, errOut)
		}
	}
	_, out, _ := histRun(t, env, false, runInfo)
	if !strings.Contains(out, "(LIMITSCOPE_DB), not created yet") || !strings.Contains(out, "state\tlocal\t(this process's own") {
		t.Errorf("info piped drops the terminal's notes:\n%s", out)
	}
}
