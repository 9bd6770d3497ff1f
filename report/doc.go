// Package report writes a session (or a time range) of limitscope's history
// as one self-contained HTML file: the timeline of every attempt per
// target, the limits over time, the waits with their sources, the failovers
// with their reasons, retries and wasted requests, a per-provider table and
// each call with its attempts one click away.
//
// The file needs nothing at view time: styles and drawings (SVG) are
// inlined, there is no script, and its Content-Security-Policy forbids
// every fetch. Prompts and answers are never written; every text that came
// from a provider passes sanitize.Printable (control bytes and anything
// shaped like a key are removed).
package report
