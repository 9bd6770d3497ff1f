package retry_test

import (
	"context"
	"slices"
	"testing"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/stream"
)

// The usage a stream reports before its text reaches the sink as an
// EventUsage of its attempt, between attempt_start and the first text;
// usage reported after text is the result's, not an event.
func TestUsageBeforeTextIsAnEvent(t *testing.T) {
	clearEnv(t)
	early := func(ctx context.Context, req stream.Request, onText func(string)) stream.Result {
		req.OnUsage(stream.Usage{InputTokens: 42})
		onText("Hello")
		req.OnUsage(stream.Usage{InputTokens: 99}) // after text: not an event
		return retrytest.OK("Hello")
	}
	d := retrytest.NewDoer().ScriptFunc(A.String(), early)
	e, _ := newEngine(t, d)
	res, evs := runCall(e, call(A))
	if res.Outcome != retry.OutcomeOK {
		t.Fatalf("outcome %s", res.Outcome)
	}
	var kinds []retry.EventKind
	var got []stream.Usage
	for _, ev := range evs {
		switch ev.Kind {
		case retry.EventAttemptStart, retry.EventText:
			kinds = append(kinds, ev.Kind)
		case retry.EventUsage:
			kinds = append(kinds, ev.Kind)
			if ev.Usage != nil {
				got = append(got, *ev.Usage)
			}
		}
	}
	want := []retry.EventKind{retry.EventAttemptStart, retry.EventUsage, retry.EventText}
	if !slices.Equal(kinds, want) {
		t.Errorf("events %v, want %v", kinds, want)
	}
	if len(got) != 1 || got[0].InputTokens != 42 {
		t.Errorf("usage events %+v, want one with 42 input tokens", got)
	}
}
