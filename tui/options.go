package tui

import (
	"context"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// Runner runs one call to its end, sending every event to sink. *retry.Engine
// is the real one.
type Runner interface {
	Run(ctx context.Context, c retry.Call, sink func(retry.Event)) retry.Result
}

// FaultRequest is one live fault for the simulator. It has sim.Fault's
// fields in sim.Fault's order, so an adapter converts it with sim.Fault(f);
// tui does not import sim, so a simulator being rebuilt never breaks the
// console's build.
type FaultRequest struct {
	Provider   string        // "openai", ...; "" for every provider
	Kind       string        // a simulator fault kind: "rate_limit", "overload", "spend_cap", ...
	RetryAfter time.Duration // the delay the server names (or the failover-demo's length)
	Count      int           // how many requests it hits (0 = 1)
	Code       string        // an optional variant
	For        time.Duration // bounds it in time after its first hit (0: none), so a burst cannot leak into a later call
}

// ArmedFault is a fault still armed in the simulator.
type ArmedFault struct {
	Provider string    // "" for every provider
	Kind     string    // a simulator fault kind
	Left     int       // requests it still hits; 0 when it lasts by time or until cleared
	Until    time.Time // when it ends by itself; zero when by count or until cleared
}

// ArmedFaults is the simulator's control API as the demo menu uses it: what
// is still armed, and clearing it (every armed fault, and the simulated stops
// they caused, for provider; "" for every provider).
type ArmedFaults interface {
	Armed(ctx context.Context) ([]ArmedFault, error)
	ClearFaults(ctx context.Context, provider string) error
}

// Faults injects faults into the simulator a simulated session runs on. It is
// nil when the session is real.
type Faults interface {
	Inject(ctx context.Context, f FaultRequest) error
	SetScenario(ctx context.Context, name string) error
}

// HistoryFilter narrows the history list.
type HistoryFilter struct {
	Text  string // matched against the prompt head, target and outcome
	Limit int    // most recent first; 0: the store's default
}

// CallSummary is one call in the history list.
type CallSummary struct {
	ID         string
	Time       time.Time
	PromptHead string
	Outcome    retry.Outcome
	ServedBy   string // "provider/model", "" when nothing served
	// Target is the call's primary target ("provider/model"): a row names
	// it when nothing served the call (a stop, a cancel).
	Target   string
	Attempts int
	Duration time.Duration
	// Session names the recording session ("" when unknown): the history's
	// timeline (t) shows a call with the others of its session.
	Session string
}

// CallDetail is one call opened from the history.
type CallDetail struct {
	CallSummary
	Prompt   string
	Attempts []retry.Attempt
	Waits    []retry.Wait
	Text     string
}

// History is the attempt history, adapted from the store by the caller.
type History interface {
	List(ctx context.Context, f HistoryFilter) ([]CallSummary, error)
	Show(ctx context.Context, id string) (CallDetail, error)
}

// Recorder receives every event of every call, in order, on the goroutine
// that runs the call. It must not block for long (buffer writes).
type Recorder interface {
	Record(ev retry.Event)
}

// CallRecorder is an optional interface of a Recorder: RecordCall receives
// each call (its id, chain and prompt) before its first event, since events
// do not carry the prompt. A fail over now (ctrl+f) stays in the same call:
// the engine moves it on (retry.Call.Control).
type CallRecorder interface {
	RecordCall(c retry.Call)
}

// TargetInfo is one target the user can pick: Available is false when its
// key is missing, and Missing names the variable to set.
type TargetInfo struct {
	Target    stream.Target
	Available bool
	Missing   string
}

// Options configures the console.
type Options struct {
	Runner    Runner
	Chain     []stream.Target // the primary, then fallbacks, in order
	Targets   []TargetInfo    // every pickable target (the chain's included)
	Policy    retry.Policy
	MaxTokens int
	Simulated bool
	Scenario  string // the simulator's scenario, shown in the badge
	Faults    Faults // nil when the session is real
	History   History
	Recorder  Recorder
	Version   string
	Now       func() time.Time // nil: time.Now

	// Options beyond the console's first set:

	// NoColor drops every colour (set it from NO_COLOR); states stay words.
	NoColor bool
	// FaultKinds lists the demo faults offered in simulated mode, in the
	// menu's order (keys 1-9, then 0; the cursor reaches every one); nil:
	// DefaultFaultKinds.
	FaultKinds []FaultInfo
	// Curl renders an attempt as a curl command with the key redacted, for
	// the copy-as-curl key; nil disables that key.
	Curl func(a retry.Attempt, prompt string) string
	// Cooldowns are the quota stops active at start (from the engine's
	// Cooldowns store), shown as STOPPED until they end. A cooldown whose
	// Scope names its target ("...openai/gpt-5.4-mini") stops that target;
	// any other stops every target of its provider (an account stop).
	Cooldowns []retry.Cooldown
	// Mouse starts with mouse capture on (wheel scrolling); off by default so
	// the terminal's own selection works.
	Mouse bool
	// Inbox brings in the calls the console did not start: the proxy's
	// (limitscope --proxy). Its calls show beside typed ones, each in its
	// own turn marked as the proxy's. Nil: none.
	Inbox *Inbox
	// TargetState reads what the engine knows of a target now
	// (retry.Engine.TargetState: the active cooldown that blocks it, the
	// pacer's state). It may read the cooldown store, so the console calls
	// it from a command (at start and after each call), never in Update.
	// Nil: STOPPED and PAUSED come from the call's events only.
	TargetState func(t stream.Target) retry.TargetState
	// ClearCooldown clears the cooldown with the given scope (the cooldown
	// store's Clear): the x key on a STOPPED target, after a confirmation
	// for a real session's. Nil: the key says how to clear it by hand.
	ClearCooldown func(ctx context.Context, scope string) error
	// Armed lists and clears the simulator's faults still armed (the demo
	// menu shows them). Nil: the menu does not list them.
	Armed ArmedFaults

	// Probe runs limitscope probe on a target and returns its limits card
	// as lines (stored in the history by the caller); ProbePlan says what
	// a probe of it spends ("up to 12 requests, about 500 tokens"). The p
	// key in the targets pane (twice, for a real provider). Nil: no probe.
	Probe     func(ctx context.Context, t stream.Target) ([]string, error)
	ProbePlan func(t stream.Target) string

	// ProxyAddr is where the proxy served inside the console listens
	// ("127.0.0.1:4000"), shown in the header; "" when there is none. The
	// proxy's token is never shown (limitscope info shows it).
	ProxyAddr string

	// Fleet is the live stream of the fleet's attempts with --state: other
	// processes' attempts show in the attempt log, tagged with their host
	// and command, and the targets pane shows fleet-wide usage. Nil: none.
	Fleet FleetFeed
}
