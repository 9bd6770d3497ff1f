// Package probe finds what an account allows, within a stated budget of
// requests: the limits its responses' headers document (with their reset
// semantics), an estimate from its answers and 429s where it sends no
// headers, the concurrency it takes before a 429 or an overload, and its
// latency (time to first token, output tokens per second). The result is a
// limits Card, printed, stored in the history and compared over time.
//
// The probe speaks to the wire directly (a Doer: stream.Router), never
// through the retry engine: a 429 is what it is looking for, not something
// to retry.
package probe
