// Package stream is limitscope's wire layer: one dialect per provider API.
//
// It builds each provider's request, authenticates it, decodes its SSE stream
// (with github.com/tmaxmax/go-sse), parses its error bodies and rate-limit
// headers, and turns all of it into provider-neutral values: text deltas, a
// Result, an *Error carrying a Class, and a Limits snapshot. It is the only
// package that knows a provider's formats.
package stream
