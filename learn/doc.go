// Package learn turns recorded calls into a scenario file the simulator
// replays: per provider, the limits the headers reported (or an estimate
// where none did), the failures as background rates and episodes, the
// delays asked for, quota stops and their resets, and the latency as
// distributions. It reads each call once, oldest first, and holds a fixed
// amount of state per provider, so a history of any length is learnt in
// bounded memory. Nothing of a prompt, an answer, a key, a request id, an
// account name or a provider's message reaches its output.
package learn
