// Package fleet keeps limitscope's shared state in Redis, so that several
// processes (laptops, CI jobs, proxies) calling the same accounts behave as
// one: quota stops recorded by any of them block all of them (Cooldowns),
// one request bucket and one server hold per target and account pace all of
// them (Pacing), and every process publishes its attempts to a bounded Redis
// stream the console reads (Doer, Reader).
//
// Redis is never in a call's way: every operation has a short timeout, and
// when Redis is unreachable (at start or mid-run) the state falls back to
// the process's own (the in-memory pacer, the local cooldowns) at once, a
// warning is given once, and a background probe reconnects when Redis is
// back, pushing the stops recorded meanwhile. Shared windows and expiries run
// on Redis's clock (TIME, PTTL, stream ids), never on the machines' clocks.
package fleet
