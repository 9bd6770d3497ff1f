package stream

import "context"

// readHookKey is the context key of WithReadHook's hook.
type readHookKey struct{}

// WithReadHook returns a copy of ctx carrying f, which a Client's attempt
// made with that context (or one derived from it) calls before each read
// of the answer's body from the upstream, from the goroutine that calls
// onText: every delta onText got since the hook's last call came from one
// read of the upstream, so a proxy can pass them on as one write. The hook
// must not block. As net/http/httptrace does, a hook for one call rides in
// the call's context, through any layers between the caller and the
// Client.
func WithReadHook(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, readHookKey{}, f)
}

// readHook is ctx's hook (WithReadHook), or nil.
func readHook(ctx context.Context) func() {
	f, _ := ctx.Value(readHookKey{}).(func())
	return f
}
