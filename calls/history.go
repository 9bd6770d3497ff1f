package calls

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/telemetry"
)

// History records one command's calls in the history file and gives the
// engine its cooldowns. With --no-history (or when no path can be found) it
// records nothing.
//
// Cooldowns: a real session's live in the history file, so a quota stop
// outlives the process (it is the account's state). A simulated session's
// live in memory only and end with its embedded simulator: they are never
// written to, nor read from, the file's cooldowns.
type History struct {
	rec      *store.Recorder
	cool     retry.Cooldowns
	stderr   io.Writer
	warnOnce sync.Once
	tel      *telemetry.Telemetry // exports each call too (nil: not)
}

// OpenHistory starts the recorder for command ("send", "tui", "proxy"). It
// never fails: a history problem is a warning on env.Stderr and never
// changes an exit code.
func OpenHistory(env Env, hf HistoryFlags, simulated bool, command string) *History {
	h := &History{stderr: env.stderr()}
	if simulated {
		h.cool = retry.NewMemoryCooldowns()
	}
	if hf.NoHistory {
		if h.cool == nil {
			h.cool = retry.NewMemoryCooldowns()
		}
		return h
	}
	path := hf.DB
	if path == "" {
		var err error
		if path, err = store.DefaultPath(env.Getenv); err != nil {
			fmt.Fprintf(h.stderr, "limitscope: history off: %v\n", err)
			if h.cool == nil {
				h.cool = retry.NewMemoryCooldowns()
			}
			return h
		}
	}
	mode := store.ModeReal
	if simulated {
		mode = store.ModeSimulated
	}
	h.rec = store.NewRecorder(path, store.SessionInfo{Version: env.Version, Mode: mode, Command: command, NoContent: hf.NoContent},
		store.Options{Retention: hf.Retention(), OnWarn: h.warn})
	if h.cool == nil {
		h.cool = h.rec.Cooldowns()
	}
	return h
}

func (h *History) warn(err error) {
	h.warnOnce.Do(func() {
		fmt.Fprintf(h.stderr, "limitscope: history: %v (events kept in memory; retrying until limitscope exits)\n", err)
	})
}

// Cooldowns is what the engine consults before sending.
func (h *History) Cooldowns() retry.Cooldowns { return h.cool }

// Path is the history file being written; "" when nothing is recorded.
func (h *History) Path() string {
	if h.rec == nil {
		return ""
	}
	return h.rec.Path()
}

// Commit makes what the history holds of call callID durable before it
// returns (the proxy calls it before an answer ends, so a kill right after
// answering loses nothing). It commits everything queued, callID's events
// included; with nothing recorded it does nothing.
func (h *History) Commit(ctx context.Context, callID string) error {
	if h.rec == nil {
		return nil
	}
	if err := h.rec.Flush(ctx); err != nil {
		return fmt.Errorf("committing call %s: %w", callID, err)
	}
	return nil
}

// Sink wraps next so that call c's events are recorded too (and exported,
// when telemetry is on: typed, console and proxied calls all pass here).
func (h *History) Sink(c retry.Call, next func(retry.Event)) func(retry.Event) {
	return h.SinkContext(context.Background(), c, next)
}

// SinkContext is Sink for a call made while serving a request whose
// context is ctx (the proxy's): its telemetry continues the request's
// trace.
func (h *History) SinkContext(ctx context.Context, c retry.Call, next func(retry.Event)) func(retry.Event) {
	next = h.tel.SinkContext(ctx, c, next)
	if h.rec == nil {
		return next
	}
	return h.rec.Sink(c, next)
}

// DefaultCloseAllowance is how long a command's end waits for the history
// file by default (another process may hold its lock).
const DefaultCloseAllowance = 10 * time.Second

// Close commits what is queued, waiting up to allowance for another
// process's lock (the recorder keeps trying until then), even when ctx has
// already ended; what cannot be saved is reported on stderr.
func (h *History) Close(ctx context.Context, allowance time.Duration) {
	if h.rec == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), allowance)
	defer cancel()
	if err := h.rec.Close(ctx); err != nil {
		if n := h.rec.Pending(); n > 0 {
			// This process is ending: what is still queued is lost.
			fmt.Fprintf(h.stderr, "limitscope: history: %d events could not be saved before exit and are lost (%v)\n", n, err)
			return
		}
		fmt.Fprintf(h.stderr, "limitscope: %v\n", err)
	}
}
