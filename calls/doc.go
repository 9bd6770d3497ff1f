// Package calls wires a command's calls together: the flags every calling
// command shares (registered once), the providers (real or an embedded
// simulator), the history recorder and its cooldowns, the retry engine, the
// proxy's token and listener, and the console's adapters.
//
// `limitscope send`, the console and `limitscope proxy` build their calls
// here, the same way. The package takes plain values (an Env: getenv,
// stderr, clocks, the version), never package main's app; package main
// keeps the flag sets, the dispatch and the printing.
package calls

import (
	"io"
	"time"

	"github.com/limitscope/limitscope/retry"
)

// Env is what call wiring runs with: the process's environment and streams
// as plain values, so tests give their own.
type Env struct {
	Getenv  func(string) string // the environment (os.Getenv)
	Stderr  io.Writer           // warnings: a history problem, a non-loopback proxy
	Now     func() time.Time    // nil: time.Now
	Clock   retry.Clock         // the engine's clock; nil: the wall clock
	Version string              // limitscope's version, recorded with each session
}

func (e Env) stderr() io.Writer {
	if e.Stderr != nil {
		return e.Stderr
	}
	return io.Discard
}
