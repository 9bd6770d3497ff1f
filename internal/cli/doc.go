// Package cli holds limitscope's commands: the console, send, sim, history,
// cooldowns, info, probe, bench and proxy, each run with an app that carries
// its streams and environment.
package cli
