package retry_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/stream"
)

func TestCallMessagesReachTheDoer(t *testing.T) {
	d := retrytest.NewDoer().Always("openai/m", retrytest.OK("hi"))
	temp := 0.2
	c := retry.Call{
		Chain:    []stream.Target{{Provider: "openai", Model: "m"}},
		Prompt:   "last",
		System:   "sys",
		Messages: []stream.Message{{Role: "user", Content: "first"}, {Role: "assistant", Content: "x"}, {Role: "user", Content: "last"}},
		Sampling: stream.Sampling{Temperature: &temp},
	}
	res := (&retry.Engine{Doer: d}).Run(context.Background(), c, nil)
	if res.Outcome != retry.OutcomeOK {
		t.Fatalf("outcome %s", res.Outcome)
	}
	reqs := d.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.System != "sys" || !reflect.DeepEqual(r.Messages, c.Messages) || r.Sampling.Temperature == nil || *r.Sampling.Temperature != temp {
		t.Errorf("request %+v", r)
	}
}
