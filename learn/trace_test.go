package learn

import (
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

// In trace mode each provider answers with its recorded outcomes in order,
// shifted to the replay's time, whatever its pace; past the trace the
// statistical rules answer.
func TestTraceReplaysOutcomesInOrder(t *testing.T) {
	tgt := stream.Target{Provider: "openai", Model: "m"}
	classes := []stream.Class{stream.ClassOK, stream.ClassOverload, stream.ClassOverload, stream.ClassOK, stream.ClassRateLimit,
		stream.ClassOK, stream.ClassServer, stream.ClassQuota, stream.ClassQuota, stream.ClassOK}
	var calls []store.Call
	ra := 3 * time.Second
	for i, cl := range classes {
		at := t0.Add(time.Duration(i) * 7 * time.Second)
		a := retry.Attempt{N: 1, Target: tgt, Class: cl, StartedAt: at, Duration: time.Second, TTFT: 300 * time.Millisecond}
		c := store.Call{Started: at, Chain: []stream.Target{tgt}}
		switch cl {
		case stream.ClassOK:
			a.Status = 200
			c.Usage = &stream.Usage{OutputTokens: 70}
		case stream.ClassRateLimit:
			a.Status, a.RetryAfter, a.DelaySource = 429, &ra, stream.SourceRetryAfter
		case stream.ClassQuota:
			a.Status, a.Code = 429, "insufficient_quota"
			c.CooldownUntil = at.Add(time.Hour)
		case stream.ClassOverload:
			a.Status = 503
		case stream.ClassServer:
			a.Status = 500
		}
		c.AttemptsList = []retry.Attempt{a}
		calls = append(calls, c)
	}
	l := New(Source{Scope: "trace test"})
	l.Trace()
	for i := range calls {
		l.Add(&calls[i])
	}
	var b strings.Builder
	if err := l.Write(&b, "t"); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	sec := section(text, "openai")
	if got := sec["models"]; len(got) != 1 || got[0] != "m" {
		t.Errorf("models lines %q, want the one model the history used, which the catalogue lacks (else the replay answers it not found)", got)
	}
	if len(sec["trace"]) != len(classes) || !strings.Contains(text, "mode = trace") {
		t.Fatalf("%d trace lines, want %d, and mode = trace:\n%s", len(sec["trace"]), len(classes), text)
	}
	if !strings.Contains(sec["trace"][4], "rate_limit retry_after=3s") || !strings.Contains(sec["trace"][7], "spend_cap reset=1h0m0s code=insufficient_quota") {
		t.Errorf("a step lost its delay, reset or code:\n%s", strings.Join(sec["trace"], "\n"))
	}
	// Replayed at another pace (one in four seconds, recorded one in
	// seven; a client that waits the 3 s asked for): the same outcomes in
	// the same order.
	replay := simHistory(t, text, "openai", len(classes)+5, 4*time.Second)
	for i, cl := range classes {
		if got := replay[i].AttemptsList[0].Class; got != cl {
			t.Errorf("request %d: %s, recorded %s", i+1, got, cl)
		}
	}
	// Past the trace the statistical rules answer: the stop learnt at
	// 49s-1h0m49s refuses the requests at 52 s and 56 s.
	if w := windowsOf(t, sec, "spend_cap"); len(w) != 1 || w[0][0] != 49*time.Second {
		t.Fatalf("stop windows %v, want one from 49s", w)
	}
	for _, i := range []int{13, 14} {
		if got := replay[i].AttemptsList[0].Class; got != stream.ClassQuota {
			t.Errorf("request %d past the trace: %s, want the learnt stop's quota", i+1, got)
		}
	}
}

// The queue gives attempts back by time, and in arrival order at equal
// times.
func TestAttemptQueueOrder(t *testing.T) {
	var q attemptQueue
	offs := []int{5, 1, 3, 3, 9, 0, 3, 7, 1}
	for i, o := range offs {
		q.push(obs{t: t0.Add(time.Duration(o) * time.Second), seq: uint64(i)})
	}
	var last obs
	for i := range offs {
		o := q.pop()
		if i > 0 && (o.t.Before(last.t) || (o.t.Equal(last.t) && o.seq < last.seq)) {
			t.Fatalf("pop %d: %v #%d after %v #%d", i, o.t, o.seq, last.t, last.seq)
		}
		last = o
	}
	if q.Len() != 0 {
		t.Errorf("%d left", q.Len())
	}
}
