// Package bench drives a workload through several retry policies, one after
// the other, each against a fresh provider (a new simulator, or a real account
// whose limits have recovered), and measures what each did on the wire:
// requests, rejections, waste, requests sent after a quota error, goodput
// against the limit the headers named, and latency including waits.
//
// The limitscope policy is the real core (retry.Engine with a retry.Pacer);
// the others copy what common clients do, as small loops over the same Doer,
// so every policy speaks the same wire. HTTP requests are counted at the Doer
// (Counter), never from a policy's own report.
package bench
