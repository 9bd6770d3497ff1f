package retry

import (
	"context"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// Policy holds the knobs of the loop; zero fields take DefaultPolicy's.
type Policy struct {
	MaxAttempts    int           // HTTP requests for the whole call (default 5)
	TriesPerTarget int           // requests per target except the last (default 2)
	FailoverWait   time.Duration // a longer server delay moves to the next target now (default 10s)
	MaxWait        time.Duration // a longer server delay with no fallback left defers (default 2m)
	Deadline       time.Duration // checked before every wait (default 3m)
	BackoffBase    time.Duration // full-jitter exponential backoff base (default 500ms)
	BackoffCap     time.Duration // and cap (default 20s)
	Jitter         time.Duration // added to a server's delay: 0..Jitter (default 250ms)
	IgnoreCooldown bool
}

// DefaultPolicy returns the documented defaults.
func DefaultPolicy() Policy {
	return Policy{
		MaxAttempts:    5,
		TriesPerTarget: 2,
		FailoverWait:   10 * time.Second,
		MaxWait:        2 * time.Minute,
		Deadline:       3 * time.Minute,
		BackoffBase:    500 * time.Millisecond,
		BackoffCap:     20 * time.Second,
		Jitter:         250 * time.Millisecond,
	}
}

// Call is one prompt through a chain of targets.
type Call struct {
	ID        string          // set by the caller, or generated
	Chain     []stream.Target // primary first, then fallbacks in order
	Prompt    string
	MaxTokens int
	Policy    Policy
}

// Engine runs calls. It is safe for concurrent use.
type Engine struct {
	Doer      Doer
	Clock     Clock          // nil: the wall clock
	Cooldowns Cooldowns      // nil: in memory, for this engine's life
	Pacer     *Pacer         // nil: no pacing
	Rand      func() float64 // in [0,1); nil: math/rand/v2
}

// Run runs the call to its end, sending every event to sink (which may be
// nil) in order, from the calling goroutine. ctx cancels a wait or a stream
// at once.
func (e *Engine) Run(ctx context.Context, c Call, sink func(Event)) Result {
	panic("not implemented")
}
