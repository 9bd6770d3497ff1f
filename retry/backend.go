package retry

import (
	"context"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// The engine's two pieces of shared state sit behind interfaces, so that the
// same engine runs on the in-memory ones (Pacer, MemoryCooldowns), on the
// history file (store.Cooldowns) and on a store shared by several processes
// (a Redis backend for a fleet) without knowing which:
//
//   - Pacing gates requests per target (concurrency slots, the request
//     bucket, holds) and tells its state for display;
//   - Cooldowns keeps quota stops that outlive a call.
//
// Display reads go through the same interfaces (Engine.TargetState), so
// what the console shows is what the engine acts on.

// Pacing is the pacer the engine takes: per target, a concurrency slot and
// a pacing wait before each request, fed with every answer. *Pacer is the
// in-memory one (one process). A shared backend implements Acquire with a
// slot counted across processes and returns NewPermit(itsSlot). Its methods
// must be safe for concurrent use.
type Pacing interface {
	// Acquire waits for a concurrency slot at t's gate, or until ctx ends
	// (then it returns a nil Permit and an error wrapping ctx.Err()).
	// Waiters should be served first come, first served.
	Acquire(ctx context.Context, t stream.Target) (*Permit, error)
	// State returns t's pacing state for display (holds, concurrency, rate).
	// It must not block on a request in flight.
	State(t stream.Target) PaceState
}

// Slot is one request's place at a Pacing backend's gate, wrapped in a
// Permit by NewPermit. The engine calls Reserve at most once, then exactly
// one of Cancel (not sent) or Done (answered); a second Cancel or Done must
// do nothing.
type Slot interface {
	// Reserve takes the request's place in the bucket at now and returns
	// how long it must wait before sending.
	Reserve(now time.Time) Pace
	// Cancel gives back the slot and the bucket place of a request not sent.
	Cancel(now time.Time)
	// Done gives back the slot and feeds the gate with the answer r.
	Done(r *stream.Result, now time.Time)
}

// Progresser is a Slot that learns when its request's answer began (its
// response's headers, with the limits they tell, or its first byte), before
// it ends: Permit.Progress calls it. lim may be nil.
type Progresser interface {
	Progress(now time.Time, lim *stream.Limits)
}

// ContextCooldowns is a Cooldowns whose reads take a context (a backend over
// the network, or a file that must not be waited on). The engine uses
// GetContext, when a Cooldowns has it, with the call's context, before each
// attempt.
//
// Whatever the backend, a read must not wait on a writer: a store whose file
// is locked by another process answers from what it last read, or returns an
// error at once. The engine takes a read error as "no cooldown known" (it
// sends, and a quota error then sets the cooldown again), and a Set error
// never fails a call.
type ContextCooldowns interface {
	Cooldowns
	GetContext(ctx context.Context, scope string) (Cooldown, bool, error)
}

// getCooldown reads scope from cds, through GetContext when cds has it.
func getCooldown(ctx context.Context, cds Cooldowns, scope string) (Cooldown, bool, error) {
	if cc, ok := cds.(ContextCooldowns); ok {
		return cc.GetContext(ctx, scope)
	}
	return cds.Get(scope)
}
