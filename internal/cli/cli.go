package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/charmbracelet/x/term"

	"github.com/limitscope/limitscope/calls"
	"github.com/limitscope/limitscope/retry"
)

// app is what every command runs with: its streams and environment, so tests
// can run commands in-process without touching the real ones.
type app struct {
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
	getenv    func(string) string
	stdoutTTY bool // stdout is a terminal
	// stdoutCols is the terminal's width in columns (0: unknown or not a
	// terminal; $COLUMNS is read then).
	stdoutCols int
	stdinTTY   bool // stdin is a terminal
	now        func() time.Time
	clock      retry.Clock // the engine's clock; nil: the wall clock (tests use a fake)
	version    string      // the build's version ("": "dev")
}

// Main runs limitscope with the process's arguments, streams and
// environment, and exits with the command's code. v is the build's version.
func Main(version string) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	a := &app{
		stdin:     os.Stdin,
		stdout:    os.Stdout,
		stderr:    os.Stderr,
		getenv:    os.Getenv,
		stdoutTTY: isTerminal(os.Stdout),
		stdinTTY:  isTerminal(os.Stdin),
		now:       time.Now,
		version:   version,
	}
	if a.stdoutTTY {
		if w, _, err := term.GetSize(os.Stdout.Fd()); err == nil {
			a.stdoutCols = w
		}
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

// buildVersion is the build's version: "dev" when none was given.
func (a *app) buildVersion() string {
	if a.version == "" {
		return "dev"
	}
	return a.version
}

// env is the app as call wiring takes it: plain values.
func (a *app) env() calls.Env {
	return calls.Env{Getenv: a.getenv, Stderr: a.stderr, Now: a.now, Clock: a.clock, Version: a.buildVersion()}
}

// sessionFlags is what a command that starts its own simulator says about
// it (bench).
type sessionFlags struct{ sim bool }

// simRequested reports whether --sim or LIMITSCOPE_SIM puts a command on
// the simulator.
func (a *app) simRequested(sf sessionFlags) bool { return calls.SimRequested(a.getenv, sf.sim) }

// isTerminal reports whether f is a terminal. /dev/null is a character
// device but not a terminal: output redirected there carries no colour.
func isTerminal(f *os.File) bool { return term.IsTerminal(f.Fd()) }

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
	case "probe":
		return runProbe(ctx, a, args[1:])
	case "bench":
		return runBench(ctx, a, args[1:])
	case "proxy":
		return runProxy(ctx, a, args[1:])
	case "version", "--version":
		fmt.Fprintln(a.stdout, "limitscope", a.buildVersion())
		return exitOK
	}
	fmt.Fprintf(a.stderr, "limitscope: unknown command %q (see limitscope --help)\n", args[0])
	return exitUsage
}

func isHelp(s string) bool { return s == "-h" || s == "--help" || s == "-help" }

// commands lists every subcommand with its arguments, for --help.
const commands = `Usage:
  limitscope [console flags]                        the interactive console (on the simulator when no key is set)
  limitscope send --model P/M [--fallback P/M]... [flags] PROMPT|-
                                                    send one prompt through the retry core
  limitscope sim [--listen ADDR] [--scenario NAME] [--scenario-file F] [--seed N] [--list] [--json]
                                                    run the simulated providers on loopback
  limitscope history [list] [filters]               the calls recorded, newest first
  limitscope history show ID                        one call with each attempt, its waits and its text
  limitscope history stats [filters]                per provider: retries, latency, give-ups, quota stops
  limitscope history export [--format jsonl|csv] [--no-text] [filters]
  limitscope history prune [--keep 90d] [--compact]
  limitscope history sessions [--limit N]
  limitscope history repair                         copy what is readable of a damaged file into a fresh one
  limitscope history cards [TARGET]                 the limits cards probe stored, compared over time
  limitscope probe [--budget N] [--yes] [--json] P[@ACCOUNT]/M
                                                    find an account's limits within a small budget: a limits card
  limitscope history report [--session ID | --since 2h] [--out FILE]
                                                    one self-contained HTML file: timeline, limits, waits, failovers
  limitscope history scenario [--session ID | --since 2h] [--out FILE]
                                                    a scenario file learnt from the calls, for sim --scenario-file
  limitscope cooldowns [--json] [--state URL]       the quota cooldowns recorded (with --state, the fleet's too)
  limitscope cooldowns clear [SCOPE] [--state URL]  end one cooldown, or every one (in Redis too with --state)
  limitscope bench --model P/M [--fallback P/M]... [--sim] [--requests N] [--concurrency C]
                                                    compare retry policies under a rate limit
  limitscope proxy [--listen ADDR] [--config FILE] [--sim] [flags]
                                                    a local OpenAI/Anthropic-compatible endpoint on the retry core
  limitscope info [--json]                          the paths in use and the proxy's token
  limitscope version

Run "limitscope COMMAND --help" for a command's flags. See README.md and docs/commands.md.
`

// usage prints the commands and the console's flags.
func usage(w io.Writer) {
	fmt.Fprint(w, "limitscope: a console for LLM API rate limits, retries and failover\n\n"+commands)
	fs := flag.NewFlagSet("limitscope", flag.ContinueOnError)
	newConsoleOpts(fs)
	fmt.Fprintln(w, "\nConsole flags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// parseFlags parses a command's flags. -h/--help prints help on stdout (exit
// 0); a bad flag is one line on stderr that points to --help (exit 2).
// ok is false when the command should return code.
func parseFlags(a *app, fs *flag.FlagSet, cmd string, args []string, help func(io.Writer)) (ok bool, code int) {
	quiet(fs)
	return flagResult(a, cmd, fs.Parse(args), help)
}

// quiet silences fs's own error and usage output: the caller reports.
func quiet(fs *flag.FlagSet) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
}

// flagResult turns a parse error into help on stdout or one line on stderr.
func flagResult(a *app, cmd string, err error, help func(io.Writer)) (ok bool, code int) {
	if err == nil {
		return true, exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		help(a.stdout)
		return false, exitOK
	}
	fmt.Fprintf(a.stderr, "%s: %v (see %s --help)\n", cmd, err, cmd)
	return false, exitUsage
}

// flagHelp is a help printer: text, then fs's flags.
func flagHelp(fs *flag.FlagSet, text string) func(io.Writer) {
	return func(w io.Writer) {
		fmt.Fprint(w, text)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}
