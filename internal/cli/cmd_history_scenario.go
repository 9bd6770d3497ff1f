package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/limitscope/limitscope/learn"
	"github.com/limitscope/limitscope/store"
)

// errRangeDone stops reading the history past --until.
var errRangeDone = errors.New("past the range")

// scenarioOptions are `history scenario`'s flags.
type scenarioOptions struct {
	hf      historyFlags
	session uint
	until   string
	out     string
	name    string
	force   bool
	trace   bool
}

// historyScenario is `limitscope history scenario`: learn a scenario file
// the simulator replays from a session (default: the newest) or a range,
// reading the history once, oldest first, in bounded memory.
func historyScenario(ctx context.Context, a *app, args []string) int {
	defer boundMemory()()
	var o scenarioOptions
	fs := o.hf.flagSet("history scenario", reviewSpec{filters: true, mode: true})
	fs.UintVar(&o.session, "session", 0, "learn from this session (limitscope history sessions lists them); default: the newest, unless --since or --until is given")
	fs.StringVar(&o.until, "until", "", "only calls started before an age (30m) or a date (2026-11-01)")
	fs.StringVar(&o.out, "out", "", "write the scenario to this `file` (default: standard output); an existing file is kept unless --force")
	fs.StringVar(&o.name, "name", "learnt", "the scenario's `name` (sim --scenario NAME)")
	fs.BoolVar(&o.force, "force", false, "replace an existing --out file")
	fs.BoolVar(&o.trace, "trace", false, "trace mode: each provider replays its recorded outcomes in order (at most 100,000 each), then the statistical rules")
	if ok, code := parseNoArgs(a, fs, args); !ok {
		return code
	}
	if o.name == "" || strings.ContainsAny(o.name, "\n\r") {
		return usageErr(a, "history scenario", errors.New("--name must be one non-empty line"))
	}
	if o.out != "" && !o.force {
		if _, err := os.Lstat(o.out); err == nil {
			return usageErr(a, "history scenario", fmt.Errorf("%s exists: give another --out, or --force to replace it", o.out))
		}
	}
	return runHistoryScenario(ctx, a, &o)
}

func runHistoryScenario(ctx context.Context, a *app, o *scenarioOptions) int {
	f, err := o.hf.filter(a.now())
	if err != nil {
		return usageErr(a, "history scenario", err)
	}
	var before time.Time
	if o.until != "" {
		if before, err = parseSince(o.until, a.now()); err != nil {
			return usageErr(a, "history scenario", fmt.Errorf("--until: %w", err))
		}
	}
	path, err := o.hf.path(a)
	if err != nil {
		return histFail(a, err)
	}
	if _, err := os.Stat(path); err != nil {
		return histFail(a, fmt.Errorf("no history at %s: %w", path, err))
	}
	rd := &store.Reader{Path: path}
	limit := f.Limit
	f.Limit = 0
	sid, scope, err := o.scope(ctx, rd, &f, before)
	if err != nil {
		return histFail(a, err)
	}
	l := learn.New(learn.Source{Scope: scope, Version: a.buildVersion()})
	if o.trace {
		l.Trace()
	}
	n := 0
	err = rd.EachReused(ctx, f, true, func(c *store.Call) error {
		if sid != 0 && c.Session != sid {
			return nil
		}
		if o.until != "" && !c.Started.Before(before) {
			return errRangeDone // oldest first: nothing later is in range
		}
		if limit > 0 && n >= limit {
			return errRangeDone
		}
		n++
		l.Add(c)
		return nil
	})
	if err != nil && !errors.Is(err, errRangeDone) {
		return histFail(a, fmt.Errorf("history scenario: %w", err))
	}
	err = o.write(a, l)
	if errors.Is(err, learn.ErrNoAttempts) {
		if n == 0 {
			return histFail(a, fmt.Errorf("nothing to learn: no calls in %s match (%s)", path, scope))
		}
		return histFail(a, fmt.Errorf("nothing to learn: %d calls in %s match (%s), with no attempt on a provider the simulator has", n, path, scope))
	}
	if err != nil {
		return histFail(a, fmt.Errorf("history scenario: %w", err))
	}
	if o.out != "" {
		fmt.Fprintf(a.stderr, "limitscope: a scenario learnt from %d calls written to %s (limitscope sim --scenario-file %s)\n", n, o.out, o.out)
	}
	return exitOK
}

// scope settles the session the scenario is learnt from (the newest when
// the flags name no session and no time) and narrows f to it; it returns
// the session (0: every one) and the scenario's scope line.
func (o *scenarioOptions) scope(ctx context.Context, rd *store.Reader, f *store.Filter, before time.Time) (uint32, string, error) {
	sid := uint32(o.session)
	if sid == 0 && o.hf.since == "" && o.until == "" {
		list, err := rd.Sessions(ctx, 1)
		if err != nil {
			return 0, "", err
		}
		if len(list) == 0 {
			return 0, "", fmt.Errorf("no sessions in %s", rd.Path)
		}
		sid = list[0].ID
	}
	if sid != 0 {
		s, err := rd.Session(ctx, sid)
		if errors.Is(err, store.ErrNotFound) {
			return 0, "", fmt.Errorf("no session %d in %s (limitscope history sessions lists them)", sid, rd.Path)
		}
		if err != nil {
			return 0, "", err
		}
		if f.Since.IsZero() || f.Since.Before(s.Started) {
			f.Since = s.Started // the session's calls start after it did
		}
		return sid, fmt.Sprintf("session %d (%s, %s)", s.ID, s.Command, s.Mode), nil
	}
	scope := "calls"
	if o.hf.since != "" {
		scope += " since " + f.Since.UTC().Format(time.RFC3339)
	}
	if o.until != "" {
		scope += " until " + before.UTC().Format(time.RFC3339)
	}
	return sid, scope, nil
}

// write writes the learnt scenario to --out (a new file, unless --force)
// or to stdout.
func (o *scenarioOptions) write(a *app, l *learn.Learner) error {
	write := func(w io.Writer) error { return l.Write(w, o.name) }
	if o.out == "" {
		bw := bufio.NewWriter(a.stdout)
		err := write(bw)
		if err == nil {
			err = bw.Flush()
		}
		return err
	}
	return writeNewFile(o.out, o.force, write)
}

// writeNewFile writes out through a temporary file beside it. Without
// force an existing out is never replaced, even one made meanwhile: the
// file is linked into place, which fails when the name is taken.
func writeNewFile(out string, force bool, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(out), ".scenario-*.ini")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	bw := bufio.NewWriter(tmp)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if force {
		err = os.Rename(tmp.Name(), out)
	} else {
		err = os.Link(tmp.Name(), out)
		if errors.Is(err, os.ErrExist) {
			err = fmt.Errorf("%s exists: give another --out, or --force to replace it", out)
		}
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return nil
}
