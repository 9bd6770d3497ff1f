// Command limitscope is a terminal console for LLM API rate limits, retries
// and failover. See README.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/limitscope/limitscope/retry"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// app is what every command runs with: its streams and environment, so tests
// can run commands in-process without touching the real ones.
type app struct {
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
	getenv    func(string) string
	stdoutTTY bool // stdout is a terminal
	stdinTTY  bool // stdin is a terminal
	now       func() time.Time
	clock     retry.Clock // the engine's clock; nil: the wall clock (tests use a fake)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	a := &app{
		stdin:     os.Stdin,
		stdout:    os.Stdout,
		stderr:    os.Stderr,
		getenv:    os.Getenv,
		stdoutTTY: isTerminal(os.Stdout),
		stdinTTY:  isTerminal(os.Stdin),
		now:       time.Now,
	}
	code := run(ctx, a, os.Args[1:])
	stop()
	os.Exit(code)
}

// Exit codes shared by every command.
const (
	exitOK        = 0
	exitFailed    = 1 // gave_up or failed
	exitUsage     = 2 // usage or configuration
	exitStopped   = 3 // quota, billing, or a cooldown
	exitDeferred  = 4
	exitCancelled = 130
)

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// run dispatches a command line and returns the exit code.
func run(ctx context.Context, a *app, args []string) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && !isHelp(args[0]) && args[0] != "--version" {
		return runTUI(ctx, a, args)
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(a.stdout)
		return exitOK
	case "send":
		return runSend(ctx, a, args[1:])
	case "sim":
		return runSim(ctx, a, args[1:])
	case "history":
		return runHistory(ctx, a, args[1:])
	case "cooldowns":
		return runCooldowns(ctx, a, args[1:])
	case "info":
		return runInfo(ctx, a, args[1:])
	case "bench":
		return runBench(ctx, a, args[1:])
	case "proxy":
		return runProxy(ctx, a, args[1:])
	case "version", "--version":
		fmt.Fprintln(a.stdout, "limitscope", version)
		return exitOK
	}
	fmt.Fprintf(a.stderr, "limitscope: unknown command %q\n\n", args[0])
	usage(a.stderr)
	return exitUsage
}

func isHelp(s string) bool { return s == "-h" || s == "--help" || s == "-help" }

func usage(w io.Writer) {
	fmt.Fprint(w, `limitscope: a console for LLM API rate limits, retries and failover

Usage:
  limitscope                      the interactive console (on the simulator when no key is set)
  limitscope send [flags] PROMPT  send one prompt through the retry core
  limitscope sim [flags]          run the simulated providers on loopback
  limitscope history ...          review the attempt history
  limitscope cooldowns [clear]    list or end quota cooldowns
  limitscope bench [flags]        compare retry policies under a rate limit
  limitscope proxy [flags]        a local OpenAI/Anthropic-compatible endpoint on the retry core
  limitscope info                 the paths in use and the proxy's token
  limitscope version

Run "limitscope COMMAND -h" for a command's flags. See README.md.
`)
}
