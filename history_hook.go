package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
)

// historyHook records one command's calls in the history file and gives the
// engine the file's cooldowns. With --no-history (or when no path can be
// found) it records nothing and keeps cooldowns in memory.
type historyHook struct {
	rec      *store.Recorder
	cool     retry.Cooldowns
	warnOnce sync.Once
}

// openHistory starts the recorder for command, from its call flags (--db,
// --no-history, --no-content, --keep). It never fails: a history problem is
// a warning on stderr and never changes an exit code.
func (a *app) openHistory(cf callFlags, simulated bool, command string) *historyHook {
	h := &historyHook{}
	db := cf.db
	if cf.noHistory {
		h.cool = retry.NewMemoryCooldowns()
		return h
	}
	path := db
	if path == "" {
		var err error
		if path, err = store.DefaultPath(a.getenv); err != nil {
			fmt.Fprintf(a.stderr, "limitscope: history off: %v\n", err)
			h.cool = retry.NewMemoryCooldowns()
			return h
		}
	}
	mode := store.ModeReal
	if simulated {
		mode = store.ModeSimulated
	}
	h.rec = store.NewRecorder(path, store.SessionInfo{Version: version, Mode: mode, Command: command, NoContent: cf.noContent},
		store.Options{Retention: cf.retention(), OnWarn: func(err error) { h.warn(a, err) }})
	h.cool = h.rec.Cooldowns()
	return h
}

func (h *historyHook) warn(a *app, err error) {
	h.warnOnce.Do(func() {
		fmt.Fprintf(a.stderr, "limitscope: history: %v (events kept in memory; retrying until limitscope exits)\n", err)
	})
}

// cooldowns is what the engine consults before sending.
func (h *historyHook) cooldowns() retry.Cooldowns { return h.cool }

// sink wraps next so that the call's events are recorded too.
func (h *historyHook) sink(c retry.Call, next func(retry.Event)) func(retry.Event) {
	if h.rec == nil {
		return next
	}
	return h.rec.Sink(c, next)
}

// close commits what is queued, waiting a few seconds for another process's
// lock; what cannot be saved is reported on stderr.
func (h *historyHook) close(ctx context.Context, a *app) {
	if h.rec == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := h.rec.Close(ctx); err != nil {
		if n := h.rec.Pending(); n > 0 {
			// This process is ending: what is still queued is lost.
			fmt.Fprintf(a.stderr, "limitscope: history: %d events could not be saved before exit and are lost (%v)\n", n, err)
			return
		}
		fmt.Fprintf(a.stderr, "limitscope: %v\n", err)
	}
}
