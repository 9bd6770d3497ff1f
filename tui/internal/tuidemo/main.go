package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/retry/retrytest"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/tui"
)

var (
	openai    = stream.Target{Provider: "openai", Model: "gpt-5.4-mini"}
	anthropic = stream.Target{Provider: "anthropic", Model: "claude-haiku-5-5"}
	gemini    = stream.Target{Provider: "gemini", Model: "gemini-3.8-flash"}
)

const answer = "The primary database failed over at 14:02; writes paused for 40 s while replicas caught up. No data was lost, and the on-call engineer confirmed every replica was consistent before writes resumed."

func streamed(text string, limits *stream.Limits, model string) func(ctx context.Context, req stream.Request, onText func(string)) stream.Result {
	return func(ctx context.Context, req stream.Request, onText func(string)) stream.Result {
		for _, w := range strings.SplitAfter(text, " ") {
			select {
			case <-ctx.Done():
				return stream.Result{Status: 200, Err: &stream.Error{Class: stream.ClassCancelled, Err: ctx.Err()}}
			case <-time.After(40 * time.Millisecond):
			}
			onText(w)
		}
		if limits != nil {
			limits.At = time.Now()
		}
		return stream.Result{Status: 200, RequestID: "req_" + req.Target.Provider[:3] + "011", Text: text, Model: model, FinishReason: "stop", Limits: limits, TTFT: 310 * time.Millisecond}
	}
}

func midStream(text string) func(ctx context.Context, req stream.Request, onText func(string)) stream.Result {
	return func(ctx context.Context, req stream.Request, onText func(string)) stream.Result {
		part := text[:len(text)/2]
		for _, w := range strings.SplitAfter(part, " ") {
			time.Sleep(40 * time.Millisecond)
			onText(w)
		}
		return stream.Result{Status: 200, Text: part, Err: &stream.Error{Class: stream.ClassOverload, Status: 200, MidStream: true, Code: "overloaded_error", Message: "Overloaded"}}
	}
}

// memHistory records every event and serves them back as the history: the
// shape of the adapter the lead writes over the store.
type memHistory struct {
	mu      sync.Mutex
	prompts map[string]string
	calls   []tui.CallDetail
}

func (h *memHistory) RecordCall(c retry.Call) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.prompts == nil {
		h.prompts = map[string]string{}
	}
	h.prompts[c.ID] = c.Prompt
}

func (h *memHistory) Record(ev retry.Event) {
	if ev.Kind != retry.EventCallEnd || ev.Result == nil {
		return
	}
	r := ev.Result
	h.mu.Lock()
	defer h.mu.Unlock()
	d := tui.CallDetail{CallSummary: tui.CallSummary{ID: ev.CallID, Time: r.Started, Outcome: r.Outcome,
		Attempts: len(r.Attempts), Duration: r.Ended.Sub(r.Started)}, Attempts: r.Attempts, Text: r.Text}
	if r.ServedBy != nil {
		d.ServedBy = r.ServedBy.String()
	}
	d.Prompt = h.prompts[ev.CallID]
	d.PromptHead = d.Prompt
	h.calls = append([]tui.CallDetail{d}, h.calls...)
}

func (h *memHistory) List(ctx context.Context, f tui.HistoryFilter) ([]tui.CallSummary, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []tui.CallSummary
	for _, c := range h.calls {
		if f.Text == "" || strings.Contains(string(c.Outcome)+" "+c.ServedBy, f.Text) {
			out = append(out, c.CallSummary)
		}
	}
	return out, nil
}

func (h *memHistory) Show(ctx context.Context, id string) (tui.CallDetail, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.calls {
		if c.ID == id {
			return c, nil
		}
	}
	return tui.CallDetail{}, fmt.Errorf("no call %s", id)
}

type faults struct{}

func (faults) Inject(ctx context.Context, f tui.FaultRequest) error { return nil }
func (faults) SetScenario(ctx context.Context, name string) error   { return nil }

func main() {
	d := demoDoer(time.Now())
	if rate := os.Getenv("DEMO_RATE"); rate != "" { // a long stream at N tokens/s, for CPU figures
		var n int
		fmt.Sscan(rate, &n)
		d = rateDoer(n)
	}
	eng := &retry.Engine{Doer: d, Cooldowns: retry.NewMemoryCooldowns(), Pacer: retry.NewPacer()}
	opts := demoOptions(eng, &memHistory{})
	if f := os.Getenv("DEMO_PROF"); f != "" {
		pf, err := os.Create(f)
		if err == nil {
			_ = pprof.StartCPUProfile(pf)
			defer pprof.StopCPUProfile()
		}
	}
	if err := tui.Run(context.Background(), opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// demoDoer scripts four calls: a short retry-after, a failover, a
// mid-stream error, a quota stop.
func demoDoer(now time.Time) *retrytest.Doer {
	lim := func(reqRem, reqLim int64, tokRem, tokLim int64) *stream.Limits {
		return &stream.Limits{
			Requests: &stream.Window{Limit: reqLim, Remaining: reqRem, HasLimit: true, HasRemaining: true, Reset: now.Add(41 * time.Second)},
			Tokens:   &stream.Window{Limit: tokLim, Remaining: tokRem, HasLimit: true, HasRemaining: true, Reset: now.Add(6 * time.Minute)},
		}
	}
	aLim := &stream.Limits{
		Requests:     &stream.Window{Limit: 50, Remaining: 49, HasLimit: true, HasRemaining: true, Reset: now.Add(2 * time.Second)},
		InputTokens:  &stream.Window{Limit: 2000000, Remaining: 2000000, HasLimit: true, HasRemaining: true, Rounded: true},
		OutputTokens: &stream.Window{Limit: 400000, Remaining: 396000, HasLimit: true, HasRemaining: true, Rounded: true},
	}
	d := retrytest.NewDoer()
	ra := func(s time.Duration) stream.Result {
		r := retrytest.RateLimited(s)
		r.Err.Code = "rate_limit_exceeded"
		r.Err.Message = "Rate limit reached for gpt-5.4-mini on requests per min (RPM): Limit 60, Used 60."
		r.RequestID = "req_8f2"
		r.Limits = lim(0, 60, 148000, 150000)
		return r
	}
	// Call 1: a short retry-after, then openai answers.
	d.Script(openai.String(), ra(4*time.Second))
	d.ScriptFunc(openai.String(), streamed(answer, lim(58, 60, 147000, 150000), "gpt-5.4-mini-2026-03-01"))
	// Call 2: a long retry-after: the engine fails over to anthropic.
	d.Script(openai.String(), ra(20*time.Second))
	d.ScriptFunc(anthropic.String(), streamed(answer, aLim, "claude-haiku-5-5-20260101"))
	// Call 3: a mid-stream error, then a retry.
	d.ScriptFunc(openai.String(), midStream(answer))
	d.ScriptFunc(openai.String(), streamed(answer, lim(57, 60, 146000, 150000), "gpt-5.4-mini-2026-03-01"))
	// Call 4: quota.
	q := retrytest.Quota("insufficient_quota", stream.ScopeAccount, time.Time{})
	q.Err.Message = "You exceeded your current quota, please check your plan and billing details."
	d.Script(openai.String(), q)
	d.ScriptFunc(anthropic.String(), streamed(answer, aLim, "claude-haiku-5-5-20260101"))
	d.ScriptFunc(anthropic.String(), streamed(answer, aLim, "claude-haiku-5-5-20260101"))
	return d
}

// rateDoer streams one endless answer at n tokens a second.
func rateDoer(n int) *retrytest.Doer {
	d := retrytest.NewDoer()
	d.ScriptFunc(openai.String(), func(ctx context.Context, req stream.Request, onText func(string)) stream.Result {
		t := time.NewTicker(time.Second / time.Duration(n))
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return stream.Result{Status: 200, Err: &stream.Error{Class: stream.ClassCancelled, Err: ctx.Err()}}
			case <-t.C:
			}
			if i%40 == 39 {
				onText("\n\n")
			} else {
				onText("token ")
			}
		}
	})
	return d
}

// demoOptions wires the console to the engine and an in-memory history.
func demoOptions(eng *retry.Engine, hist *memHistory) tui.Options {
	return tui.Options{
		Runner:        eng,
		TargetState:   eng.TargetState,
		ClearCooldown: func(_ context.Context, scope string) error { return eng.Cooldowns.Clear(scope) },
		Chain:         []stream.Target{openai, anthropic},
		Targets: []tui.TargetInfo{
			{Target: openai, Available: true},
			{Target: anthropic, Available: true},
			{Target: gemini, Available: false, Missing: "GEMINI_API_KEY"},
		},
		Policy:    retry.DefaultPolicy(),
		MaxTokens: 256,
		Simulated: os.Getenv("DEMO_REAL") == "",
		Scenario:  "demo",
		Faults:    faults{},
		History:   hist,
		Recorder:  hist,
		Version:   "demo",
		NoColor:   os.Getenv("NO_COLOR") != "",
	}
}
