package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/limitscope/limitscope/report"
	"github.com/limitscope/limitscope/store"
)

// maxReportCalls bounds the calls one report holds (the newest are kept
// out past it, and the report says so).
const maxReportCalls = 20000

// errReportFull stops reading the history when a report is full.
var errReportFull = errors.New("report full")

// historyReport is `limitscope history report`: one self-contained HTML
// file for a session (default: the newest) or a time range.
func historyReport(ctx context.Context, a *app, args []string) int {
	var hf historyFlags
	fs := hf.flagSet("history report", reviewSpec{filters: true, mode: true})
	session := fs.Uint("session", 0, "the session to report (limitscope history sessions lists them); default: the newest, unless --since or --until is given")
	until := fs.String("until", "", "only calls started before an age (30m) or a date (2026-11-01)")
	out := fs.String("out", "", "write the report to this file (default: standard output)")
	if ok, code := parseNoArgs(a, fs, args); !ok {
		return code
	}
	f, err := hf.filter(a.now())
	if err != nil {
		return usageErr(a, "history report", err)
	}
	var before time.Time // with --until: calls start before it
	if *until != "" {
		if before, err = parseSince(*until, a.now()); err != nil {
			return usageErr(a, "history report", fmt.Errorf("--until: %w", err))
		}
	}
	path, err := hf.path(a)
	if err != nil {
		return histFail(a, err)
	}
	rd := &store.Reader{Path: path}
	sel := reportSel{sid: uint32(*session), since: hf.since, until: *until, before: before, mode: hf.mode, limit: f.Limit}
	f.Limit = 0
	in := report.Input{Generated: a.now(), Version: a.buildVersion()}
	if in.Scope, err = sel.session(ctx, rd, &f); err != nil {
		return histFail(a, err)
	}
	if err := sel.collect(ctx, rd, f, &in); err != nil {
		return histFail(a, err)
	}
	if len(in.Calls) == 0 {
		fmt.Fprintf(a.stderr, "limitscope history report: no calls in %s match (%s)\n", path, in.Scope)
	}
	if *out == "" {
		bw := bufio.NewWriter(a.stdout)
		if err := report.Write(bw, in); err != nil {
			return histFail(a, err)
		}
		if err := bw.Flush(); err != nil {
			return histFail(a, fmt.Errorf("report: %w", err))
		}
		return exitOK
	}
	if err := writeReportFile(*out, in); err != nil {
		return histFail(a, err)
	}
	fmt.Fprintf(a.stderr, "limitscope: report of %d calls written to %s\n", len(in.Calls), *out)
	return exitOK
}

// reportSel is what a report covers: a session, or the calls of a time
// range, in one mode, at most limit of them (0: maxReportCalls).
type reportSel struct {
	sid          uint32 // 0: every session
	since, until string // the flags as given
	before       time.Time
	mode         string
	limit        int
}

// session settles the session the report covers (the newest when the
// flags name no session and no time) and narrows f to it; it returns the
// report's scope line.
func (sel *reportSel) session(ctx context.Context, rd *store.Reader, f *store.Filter) (string, error) {
	if sel.sid == 0 && sel.since == "" && sel.until == "" {
		list, err := rd.Sessions(ctx, 1)
		if err != nil {
			return "", err
		}
		if len(list) == 0 {
			return "", fmt.Errorf("no sessions in %s", rd.Path)
		}
		sel.sid = list[0].ID
	}
	if sel.sid != 0 {
		s, err := rd.Session(ctx, sel.sid)
		if err != nil {
			return "", err
		}
		if f.Since.IsZero() || f.Since.Before(s.Started) {
			f.Since = s.Started // the session's calls start after it did
		}
		return fmt.Sprintf("session %d (%s, %s)", s.ID, s.Command, s.Mode), nil
	}
	scope := "calls"
	if sel.since != "" {
		scope += " since " + sel.since
	}
	if sel.until != "" {
		scope += " until " + sel.until
	}
	return scope, nil
}

// collect reads the calls sel covers into in, oldest first, with their
// sessions; a report that reached its limit says so in its scope.
func (sel *reportSel) collect(ctx context.Context, rd *store.Reader, f store.Filter, in *report.Input) error {
	var modes map[uint32]string
	if sel.mode != "" {
		var err error
		if modes, err = sessionModes(ctx, rd); err != nil {
			return err
		}
	}
	sessions := map[uint32]bool{}
	full := false
	err := rd.Each(ctx, f, true, func(c *store.Call) error {
		if sel.sid != 0 && c.Session != sel.sid {
			return nil
		}
		if sel.until != "" && !c.Started.Before(sel.before) {
			return errReportFull // oldest first: nothing later is in range
		}
		if modes != nil && modeOf(modes, c.Session) != sel.mode {
			return nil
		}
		if len(in.Calls) >= maxReportCalls || (sel.limit > 0 && len(in.Calls) >= sel.limit) {
			full = true
			return errReportFull
		}
		sessions[c.Session] = true
		in.Calls = append(in.Calls, *c)
		return nil
	})
	if err != nil && !errors.Is(err, errReportFull) {
		return fmt.Errorf("report: %w", err)
	}
	if full {
		in.Scope += fmt.Sprintf(" (the first %d calls)", len(in.Calls))
	}
	ids := make([]uint32, 0, len(sessions))
	for id := range sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if s, err := rd.Session(ctx, id); err == nil {
			in.Sessions = append(in.Sessions, *s)
		}
	}
	return nil
}

// writeReportFile writes the report beside out and renames it into place,
// so a failed write leaves no half file (mode 0600: it names accounts'
// targets and request ids).
func writeReportFile(out string, in report.Input) error {
	tmp, err := os.CreateTemp(filepath.Dir(out), ".report-*.html")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing
	bw := bufio.NewWriter(tmp)
	err = report.Write(bw, in)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), out)
	}
	if err != nil {
		return fmt.Errorf("report: writing %s: %w", out, err)
	}
	return nil
}
