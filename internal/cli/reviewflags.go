package cli

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/limitscope/limitscope/calls"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

// The review commands' usage lines (history, cooldowns, info), by flag set
// name, shown by --help.
var reviewUsage = map[string]string{
	"history list":     "limitscope history [list] [--provider P] [--outcome O] [--class C] [--since 2h] [--mode real|simulated]\n                          [--limit N] [--before ID] [--route R] [--client C]",
	"history show":     "limitscope history show ID [--json]",
	"history stats":    "limitscope history stats [filters]",
	"history export":   "limitscope history export [--format jsonl|csv] [--no-text] [--mode real|simulated] [filters]",
	"history prune":    "limitscope history prune [--keep 90d] [--compact]",
	"history sessions": "limitscope history sessions [--limit N]",
	"history repair":   "limitscope history repair",
	"history report":   "limitscope history report [--session ID | --since 2h [--until 1h]] [--out FILE] [filters]",
	"cooldowns":        cooldownsUsage,
	"cooldowns clear":  cooldownsUsage,
	"info":             "limitscope info [--json]",
}

const cooldownsUsage = "limitscope cooldowns [--json] [--state URL]        the quota cooldowns recorded (with --state, the fleet's too)\n  limitscope cooldowns clear [SCOPE] [--state URL]   end one cooldown (its scope, from the list), or every one"

// newReviewFlagSet is the flag set of a review (sub)command.
func newReviewFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("limitscope "+name, flag.ContinueOnError)
	quiet(fs)
	return fs
}

// parseArgs parses a review command's flags, which may come before or
// after its positional arguments ("show 12 --json"), returning the
// positionals. ok is false when the command should return code (help was
// printed, or a bad flag was reported in one line).
func parseArgs(a *app, fs *flag.FlagSet, args []string) (pos []string, ok bool, code int) {
	name := strings.TrimPrefix(fs.Name(), "limitscope ")
	help := flagHelp(fs, "Usage:\n  "+reviewUsage[name]+"\n\nFlags:\n")
	pos, err := histParse(fs, args)
	ok, code = flagResult(a, fs.Name(), err, help)
	return pos, ok, code
}

// histParse parses flags that may come before or after positional
// arguments ("show 12 --json"), returning the positionals.
func histParse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// parseSince reads --since: an age (2h, 3d) or a date (2026-11-01, or RFC 3339).
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02", s, time.Local); err == nil {
		return t, nil
	}
	d, err := calls.ParseAge(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q: want an age (2h, 3d) or a date (2026-11-01)", s)
	}
	return now.Add(-d), nil
}

// historyFlags are the flags every history subcommand shares.
type historyFlags struct {
	db       string
	asJSON   bool
	provider string
	inChain  bool // --provider matches the chain, not the providers tried
	outcome  string
	class    string
	since    string
	limit    int
	before   uint
	route    string
	client   string
	mode     string // "", store.ModeReal or store.ModeSimulated (list)
}

func (hf *historyFlags) register(fs *flag.FlagSet, filters bool, limit int) {
	fs.StringVar(&hf.db, "db", "", "history database (default $LIMITSCOPE_DB, else $XDG_STATE_HOME/limitscope/history.db)")
	fs.BoolVar(&hf.asJSON, "json", false, "print one JSON document")
	if filters {
		fs.StringVar(&hf.provider, "provider", "", "only calls that sent a request to this provider ("+strings.Join(stream.ProviderNames(), ", ")+")")
		fs.BoolVar(&hf.inChain, "in-chain", false, "with --provider: the calls that have it anywhere in their chain, tried or not")
		fs.StringVar(&hf.outcome, "outcome", "", "only calls that ended so: ok, stopped, deferred, gave_up, failed, cancelled, running")
		fs.StringVar(&hf.class, "class", "", "only calls with an attempt of this class: ok, quota, caller, rate_limit, overload, server, connection, timeout, cancelled")
		fs.StringVar(&hf.since, "since", "", "only calls started since an age (2h, 3d) or a date (2026-11-01)")
		fs.StringVar(&hf.route, "route", "", "only proxied calls whose request named this model (an alias or provider/model)")
		fs.StringVar(&hf.client, "client", "", "only proxied calls whose client (User-Agent) contains this, case-insensitive")
		fs.IntVar(&hf.limit, "limit", limit, "at most this many calls, the newest (0: all)")
	}
}

// reviewSpec says which of the shared flags a review subcommand takes:
// --db and --json always; the history filters and --limit (its default
// limit) with filters; --mode with mode.
type reviewSpec struct {
	filters bool
	limit   int
	mode    bool
}

// flagSet is a review subcommand's flag set with the shared flags s names
// bound to hf.
func (hf *historyFlags) flagSet(name string, s reviewSpec) *flag.FlagSet {
	fs := newReviewFlagSet(name)
	hf.register(fs, s.filters, s.limit)
	if s.mode {
		hf.registerMode(fs)
	}
	return fs
}

// registerMode binds --mode.
func (hf *historyFlags) registerMode(fs *flag.FlagSet) {
	fs.StringVar(&hf.mode, "mode", "", "only calls recorded in this mode: real or simulated")
}

func (hf *historyFlags) path(a *app) (string, error) {
	if hf.db != "" {
		return hf.db, nil
	}
	return store.DefaultPath(a.getenv)
}

func (hf *historyFlags) filter(now time.Time) (store.Filter, error) {
	f := store.Filter{Limit: hf.limit, BeforeID: uint32(hf.before), Route: hf.route, Client: hf.client}
	if hf.limit < 0 {
		return f, errors.New("--limit must be 0 or more")
	}
	switch hf.mode {
	case "", store.ModeReal, store.ModeSimulated:
		f.Mode = hf.mode
	default:
		return f, fmt.Errorf("--mode %q: want real or simulated", hf.mode)
	}
	if hf.provider != "" {
		p := strings.ToLower(hf.provider)
		if _, ok := stream.Provider(p); !ok {
			return f, fmt.Errorf("--provider %q: unknown (known: %s)", hf.provider, strings.Join(stream.ProviderNames(), ", "))
		}
		f.Provider, f.InChain = p, hf.inChain
	} else if hf.inChain {
		return f, errors.New("--in-chain needs --provider")
	}
	if hf.outcome != "" {
		o := retry.Outcome(strings.ToLower(hf.outcome))
		switch o {
		case retry.OutcomeOK, retry.OutcomeStopped, retry.OutcomeDeferred, retry.OutcomeGaveUp,
			retry.OutcomeFailed, retry.OutcomeCancelled, store.OutcomeRunning, store.OutcomeInterrupted:
		default:
			return f, fmt.Errorf("--outcome %q: want ok, stopped, deferred, gave_up, failed, cancelled, running or interrupted", hf.outcome)
		}
		f.Outcome = o
	}
	if hf.class != "" {
		c := stream.Class(strings.ToLower(hf.class))
		switch c {
		case stream.ClassOK, stream.ClassQuota, stream.ClassCaller, stream.ClassRateLimit, stream.ClassOverload,
			stream.ClassFlexCapacity, stream.ClassServer, stream.ClassConnection, stream.ClassTimeout, stream.ClassCancelled:
		default:
			return f, fmt.Errorf("--class %q: want ok, quota, caller, rate_limit, overload, flex_capacity, server, connection, timeout or cancelled", hf.class)
		}
		f.Class = c
	}
	switch hf.mode {
	case "", store.ModeReal, store.ModeSimulated:
	case "sim":
		hf.mode = store.ModeSimulated
	default:
		return f, fmt.Errorf("--mode %q: want real or simulated", hf.mode)
	}
	if hf.since != "" {
		t, err := parseSince(hf.since, now)
		if err != nil {
			return f, err
		}
		f.Since = t
	}
	return f, nil
}

func usageErr(a *app, cmd string, err error) int {
	fmt.Fprintf(a.stderr, "limitscope %s: %v\n", cmd, err)
	return exitUsage
}

func histFail(a *app, err error) int {
	fmt.Fprintf(a.stderr, "limitscope: %v\n", err)
	return exitFailed
}

// parseNoArgs parses the flags of a review subcommand that takes no
// positional argument. ok is false when the command should return code.
func parseNoArgs(a *app, fs *flag.FlagSet, args []string) (ok bool, code int) {
	pos, ok, code := parseArgs(a, fs, args)
	if !ok {
		return false, code
	}
	if len(pos) > 0 {
		return false, usageErr(a, strings.TrimPrefix(fs.Name(), "limitscope "), fmt.Errorf("unexpected argument %q", pos[0]))
	}
	return true, 0
}

// scope is what review subcommand cmd reads: the calls its flags select
// and the history file. ok is false when the command should return code.
func (hf *historyFlags) scope(a *app, cmd string) (f store.Filter, path string, ok bool, code int) {
	f, err := hf.filter(a.now())
	if err != nil {
		return f, "", false, usageErr(a, cmd, err)
	}
	if path, err = hf.path(a); err != nil {
		return f, "", false, histFail(a, err)
	}
	return f, path, true, 0
}
