package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/limitscope/limitscope/internal/sanitize"
	"github.com/limitscope/limitscope/proxy"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

// histOut prints for the history commands: an aligned table with colour on
// a terminal, plain tab-separated text when piped, and never colour when
// NO_COLOR is set.
type histOut struct {
	w     io.Writer
	tty   bool
	color bool
	loc   *time.Location
}

func newHistOut(a *app) *histOut {
	o := &histOut{w: a.stdout, tty: a.stdoutTTY, loc: time.Local}
	o.color = a.stdoutTTY && a.getenv("NO_COLOR") == "" && a.getenv("TERM") != "dumb"
	return o
}

const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
)

func (o *histOut) paint(code, s string) string {
	s = sanitize.Text(s) // stored messages came from servers: no escape sequence reaches the terminal
	if !o.color || code == "" || s == "" {
		return s
	}
	return code + s + ansiReset
}

func outcomeColor(oc retry.Outcome) string {
	switch oc {
	case retry.OutcomeOK:
		return ansiGreen
	case retry.OutcomeDeferred, store.OutcomeRunning, retry.OutcomeCancelled:
		return ansiYellow
	}
	return ansiRed
}

func classColor(c stream.Class) string {
	switch c {
	case stream.ClassOK:
		return ansiGreen
	case stream.ClassRateLimit, stream.ClassOverload, stream.ClassServer, stream.ClassConnection, stream.ClassTimeout:
		return ansiYellow
	}
	return ansiRed
}

// histCell is one table cell and its colour.
type histCell struct {
	text  string
	color string
}

// table prints rows under a header: padded columns on a terminal, tabs
// when piped.
func (o *histOut) table(header []string, rows [][]histCell) {
	clean := make([][]histCell, len(rows))
	for i, r := range rows {
		clean[i] = make([]histCell, len(r))
		for j, c := range r {
			clean[i][j] = histCell{sanitize.Text(c.text), c.color}
		}
	}
	rows = clean
	if !o.tty {
		fmt.Fprintln(o.w, strings.Join(header, "\t"))
		for _, r := range rows {
			parts := make([]string, len(r))
			for i, c := range r {
				parts[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(c.text)
			}
			fmt.Fprintln(o.w, strings.Join(parts, "\t"))
		}
		return
	}
	width := make([]int, len(header))
	for i, h := range header {
		width[i] = utf8.RuneCountInString(h)
	}
	for _, r := range rows {
		for i, c := range r {
			if i < len(width) {
				width[i] = max(width[i], utf8.RuneCountInString(c.text))
			}
		}
	}
	line := func(cells []histCell) {
		var b strings.Builder
		for i, c := range cells {
			text := c.text
			if i < len(cells)-1 {
				text += strings.Repeat(" ", width[i]-utf8.RuneCountInString(c.text)+2)
			}
			b.WriteString(o.paint(c.color, text))
		}
		fmt.Fprintln(o.w, strings.TrimRight(b.String(), " "))
	}
	hc := make([]histCell, len(header))
	for i, h := range header {
		hc[i] = histCell{h, ansiBold}
	}
	line(hc)
	for _, r := range rows {
		line(r)
	}
}

// when formats a time: local and short on a terminal, RFC 3339 UTC piped.
func (o *histOut) when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if !o.tty {
		return t.UTC().Format(time.RFC3339Nano)
	}
	return t.In(o.loc).Format("2006-01-02 15:04:05")
}

// dur formats a duration: rounded on a terminal, milliseconds piped.
func (o *histOut) dur(d time.Duration) string {
	if !o.tty {
		return strconv.FormatInt(d.Milliseconds(), 10)
	}
	if d == 0 {
		return "0"
	}
	return roundDur(d).String()
}

func histWriteJSON(a *app, v any) int {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(a.stderr, "limitscope: %v\n", err)
		return exitFailed
	}
	return exitOK
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

// parseAge reads an age: Go durations plus d (days) and w (weeks).
func parseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			v, err := strconv.ParseFloat(n, 64)
			if err != nil || v < 0 {
				return 0, fmt.Errorf("bad age %q: want e.g. 2h, 3d, 1w", s)
			}
			return time.Duration(v * float64(unit)), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad age %q: want e.g. 2h, 3d, 1w", s)
	}
	return d, nil
}

// parseSince reads --since: an age (2h, 3d) or a date (2026-11-01, or RFC 3339).
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02", s, time.Local); err == nil {
		return t, nil
	}
	d, err := parseAge(s)
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
	outcome  string
	class    string
	since    string
	limit    int
	before   uint
	route    string
	client   string
}

func (hf *historyFlags) register(fs *flag.FlagSet, filters bool, limit int) {
	fs.StringVar(&hf.db, "db", "", "history database (default $LIMITSCOPE_DB, else $XDG_STATE_HOME/limitscope/history.db)")
	fs.BoolVar(&hf.asJSON, "json", false, "print one JSON document")
	if filters {
		fs.StringVar(&hf.provider, "provider", "", "only calls with this provider in their chain ("+strings.Join(stream.ProviderNames(), ", ")+")")
		fs.StringVar(&hf.outcome, "outcome", "", "only calls that ended so: ok, stopped, deferred, gave_up, failed, cancelled, running")
		fs.StringVar(&hf.class, "class", "", "only calls with an attempt of this class: ok, quota, caller, rate_limit, overload, server, connection, timeout, cancelled")
		fs.StringVar(&hf.since, "since", "", "only calls started since an age (2h, 3d) or a date (2026-11-01)")
		fs.StringVar(&hf.route, "route", "", "only proxied calls whose request named this model (an alias or provider/model)")
		fs.StringVar(&hf.client, "client", "", "only proxied calls whose client (User-Agent) contains this, case-insensitive")
		fs.IntVar(&hf.limit, "limit", limit, "at most this many calls (0: all)")
	}
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
	if hf.provider != "" {
		p := strings.ToLower(hf.provider)
		if _, ok := stream.Provider(p); !ok {
			return f, fmt.Errorf("--provider %q: unknown (known: %s)", hf.provider, strings.Join(stream.ProviderNames(), ", "))
		}
		f.Provider = p
	}
	if hf.outcome != "" {
		o := retry.Outcome(strings.ToLower(hf.outcome))
		switch o {
		case retry.OutcomeOK, retry.OutcomeStopped, retry.OutcomeDeferred, retry.OutcomeGaveUp,
			retry.OutcomeFailed, retry.OutcomeCancelled, store.OutcomeRunning:
		default:
			return f, fmt.Errorf("--outcome %q: want ok, stopped, deferred, gave_up, failed, cancelled or running", hf.outcome)
		}
		f.Outcome = o
	}
	if hf.class != "" {
		c := stream.Class(strings.ToLower(hf.class))
		switch c {
		case stream.ClassOK, stream.ClassQuota, stream.ClassCaller, stream.ClassRateLimit, stream.ClassOverload,
			stream.ClassServer, stream.ClassConnection, stream.ClassTimeout, stream.ClassCancelled:
		default:
			return f, fmt.Errorf("--class %q: want ok, quota, caller, rate_limit, overload, server, connection, timeout or cancelled", hf.class)
		}
		f.Class = c
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

func historyUsage(w io.Writer) {
	fmt.Fprint(w, `Usage:
  limitscope history [list] [--provider P] [--outcome O] [--class C] [--since 2h] [--limit N] [--before ID]
                          [--route R] [--client C]   proxied calls by the model they asked for, their User-Agent
  limitscope history show ID                 one call with each attempt, its waits and its text
  limitscope history stats [filters]         per provider: retries, latency, give-ups, quota stops
  limitscope history export [--format jsonl|csv] [--no-text] [filters]
  limitscope history prune [--keep 90d] [--compact]
  limitscope history sessions [--limit N]    the processes that recorded: start, end, version, mode
  limitscope history repair                  copy what is readable of a damaged file into a fresh one
Every subcommand takes --json and --db PATH (default $LIMITSCOPE_DB, else
$XDG_STATE_HOME/limitscope/history.db, else ~/.local/state/limitscope/history.db).
`)
}

// runHistory is `limitscope history`.
func runHistory(ctx context.Context, a *app, args []string) int {
	sub := "list"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	} else if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		historyUsage(a.stdout)
		return exitOK
	}
	switch sub {
	case "list", "ls":
		return historyList(ctx, a, args)
	case "show":
		return historyShow(ctx, a, args)
	case "stats":
		return historyStats(ctx, a, args)
	case "export":
		return historyExport(ctx, a, args)
	case "prune":
		return historyPrune(ctx, a, args)
	case "repair":
		return historyRepair(ctx, a, args)
	case "sessions":
		return historySessions(ctx, a, args)
	case "help":
		historyUsage(a.stdout)
		return exitOK
	}
	fmt.Fprintf(a.stderr, "limitscope history: unknown subcommand %q\n\n", sub)
	historyUsage(a.stderr)
	return exitUsage
}

func newHistFlagSet(a *app, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("limitscope "+name, flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	return fs
}

// flagExit maps a flag parse error to an exit code (-h is not an error).
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

func usageErr(a *app, cmd string, err error) int {
	fmt.Fprintf(a.stderr, "limitscope %s: %v\n", cmd, err)
	return exitUsage
}

func histFail(a *app, err error) int {
	fmt.Fprintf(a.stderr, "limitscope: %v\n", err)
	return exitFailed
}

func historyList(ctx context.Context, a *app, args []string) int {
	var hf historyFlags
	fs := newHistFlagSet(a, "history list")
	hf.register(fs, true, 50)
	fs.UintVar(&hf.before, "before", 0, "paging: only calls older than this id")
	pos, err := histParse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 {
		return usageErr(a, "history list", fmt.Errorf("unexpected argument %q", pos[0]))
	}
	f, err := hf.filter(a.now())
	if err != nil {
		return usageErr(a, "history list", err)
	}
	path, err := hf.path(a)
	if err != nil {
		return histFail(a, err)
	}
	f.Origin = true // proxied calls show their route and client
	calls, err := (&store.Reader{Path: path}).List(ctx, f)
	if err != nil {
		return histFail(a, err)
	}
	if hf.asJSON {
		doc := struct {
			DB    string           `json:"db"`
			Calls []store.CallJSON `json:"calls"`
		}{DB: path, Calls: []store.CallJSON{}}
		for i := range calls {
			doc.Calls = append(doc.Calls, calls[i].ToJSON(false))
		}
		return histWriteJSON(a, doc)
	}
	o := newHistOut(a)
	if len(calls) == 0 && o.tty {
		fmt.Fprintf(a.stderr, "no calls in %s match\n", path)
		return exitOK
	}
	header := []string{"ID", "STARTED", "TARGET", "SERVED BY", "OUTCOME", "TRIES", "WAITED", "LATENCY", "CLASSES"}
	if !o.tty {
		header[6], header[7] = "WAITED_MS", "LATENCY_MS"
	}
	// Route and client columns only when a listed call came through the proxy.
	origin := slices.ContainsFunc(calls, func(c store.Call) bool { return c.Route != "" || c.Client != "" })
	if origin {
		header = append(header, "ROUTE", "CLIENT")
	}
	var rows [][]histCell
	for _, c := range calls {
		target := c.Primary().String()
		if len(c.Chain) > 1 {
			target += fmt.Sprintf(" +%d", len(c.Chain)-1)
		}
		served := "-"
		if c.ServedBy != nil {
			served = c.ServedBy.String()
		}
		latency := "-"
		if !c.Ended.IsZero() {
			latency = o.dur(c.Latency())
		}
		var classes []string
		for _, cl := range c.Classes {
			classes = append(classes, string(cl))
		}
		rows = append(rows, []histCell{
			{strconv.FormatUint(uint64(c.ID), 10), ansiCyan}, {o.when(c.Started), ansiDim}, {target, ""}, {served, ""},
			{string(c.Outcome), outcomeColor(c.Outcome)}, {strconv.Itoa(c.Attempts), ""}, {o.dur(c.Waited), ""},
			{latency, ""}, {strings.Join(classes, ","), ""},
		})
		if origin {
			route, client := orDash(c.Route), orDash(c.Client)
			if o.tty {
				client = histClip(client, 32)
			}
			rows[len(rows)-1] = append(rows[len(rows)-1], histCell{route, ""}, histCell{client, ansiDim})
		}
	}
	o.table(header, rows)
	if o.tty && f.Limit > 0 && len(calls) == f.Limit {
		fmt.Fprintln(a.stderr, o.paint(ansiDim, fmt.Sprintf("more: limitscope history list --before %d", calls[len(calls)-1].ID)))
	}
	return exitOK
}

func historyShow(ctx context.Context, a *app, args []string) int {
	var hf historyFlags
	fs := newHistFlagSet(a, "history show")
	hf.register(fs, false, 0)
	pos, err := histParse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 1 {
		return usageErr(a, "history show", errors.New("want one call id (from limitscope history list)"))
	}
	path, err := hf.path(a)
	if err != nil {
		return histFail(a, err)
	}
	c, err := (&store.Reader{Path: path}).Show(ctx, pos[0])
	if errors.Is(err, store.ErrNotFound) {
		fmt.Fprintf(a.stderr, "limitscope: no call %q in %s (ids are in limitscope history list)\n", pos[0], path)
		return exitFailed
	}
	if err != nil {
		return histFail(a, err)
	}
	sess, _ := (&store.Reader{Path: path}).Session(ctx, c.Session) // nil when pruned
	if hf.asJSON {
		return histWriteJSON(a, struct {
			store.CallJSON
			SessionInfo *store.Session `json:"session_info"`
		}{c.ToJSON(true), sess})
	}
	o := newHistOut(a)
	o.tty = true // show is always the readable form; colour still needs a terminal
	printCall(o, c, sess)
	return exitOK
}

func printCall(o *histOut, c *store.Call, sess *store.Session) {
	w := o.w
	label := func(s string) string { return o.paint(ansiBold, fmt.Sprintf("%-10s", s)) }
	fmt.Fprintf(w, "%s %s", label("call"), o.paint(ansiCyan, strconv.FormatUint(uint64(c.ID), 10)))
	if c.CallID != "" {
		fmt.Fprintf(w, "  (engine id %s)", c.CallID)
	}
	fmt.Fprintf(w, "  session %d", c.Session)
	if sess != nil {
		var parts []string
		for _, p := range []string{sess.Command, sess.Mode, sess.Version} {
			if p != "" {
				parts = append(parts, p)
			}
		}
		if sess.NoContent {
			parts = append(parts, "no content")
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, " (%s)", strings.Join(parts, ", "))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%s %s\n", label("outcome"), o.paint(outcomeColor(c.Outcome), string(c.Outcome)))
	var chain []string
	for _, t := range c.Chain {
		chain = append(chain, t.String())
	}
	fmt.Fprintf(w, "%s %s\n", label("chain"), strings.Join(chain, " -> "))
	if c.ServedBy != nil {
		fmt.Fprintf(w, "%s %s\n", label("served by"), c.ServedBy)
	}
	if c.Route != "" {
		fmt.Fprintf(w, "%s %s\n", label("route"), sanitize.Text(c.Route))
	}
	if c.Client != "" {
		fmt.Fprintf(w, "%s %s\n", label("client"), sanitize.Text(c.Client))
	}
	fmt.Fprintf(w, "%s %s", label("started"), c.Started.In(o.loc).Format("2006-01-02 15:04:05.000 MST"))
	if !c.Ended.IsZero() {
		fmt.Fprintf(w, "  latency %s (waits %s)", roundDur(c.Latency()), roundDur(c.Waited))
	}
	fmt.Fprintln(w)
	if c.Usage != nil || c.FinishReason != "" {
		fmt.Fprintf(w, "%s", label("finish"))
		if c.FinishReason != "" {
			fmt.Fprintf(w, " %s", sanitize.Text(c.FinishReason))
		}
		if c.Usage != nil {
			fmt.Fprintf(w, "  tokens %d in, %d out", c.Usage.InputTokens, c.Usage.OutputTokens)
		}
		if c.TTFT > 0 {
			fmt.Fprintf(w, "  first token %s", roundDur(c.TTFT))
		}
		fmt.Fprintln(w)
	}
	if c.Err != nil {
		fmt.Fprintf(w, "%s %s", label("error"), o.paint(ansiRed, describeError(c.Err.Class, c.Err.Status, c.Err.Code)))
		if c.Err.Provider != "" {
			fmt.Fprintf(w, " from %s", c.Err.Provider)
		}
		fmt.Fprintln(w)
		if c.Err.Message != "" {
			fmt.Fprintf(w, "%s %s\n", label(""), o.paint(ansiDim, c.Err.Message))
		}
	}
	if !c.RetryAt.IsZero() {
		fmt.Fprintf(w, "%s %s\n", label("retry at"), c.RetryAt.In(o.loc).Format("2006-01-02 15:04:05 MST"))
	}
	if c.CooldownHit {
		until := "until cleared"
		if !c.CooldownUntil.IsZero() {
			until = "until " + c.CooldownUntil.In(o.loc).Format("2006-01-02 15:04:05 MST")
		}
		fmt.Fprintf(w, "%s not sent: a quota cooldown blocks it %s\n", label("cooldown"), until)
	}
	p := c.Policy
	if p != (retry.Policy{}) {
		fmt.Fprintf(w, "%s max-attempts %d, tries-per-target %d, failover-wait %s, max-wait %s, deadline %s\n", label("policy"),
			p.MaxAttempts, p.TriesPerTarget, p.FailoverWait, p.MaxWait, p.Deadline)
	}
	if len(c.AttemptsList) > 0 {
		fmt.Fprintf(w, "\n%s\n", o.paint(ansiBold, "attempts"))
	}
	for _, at := range c.AttemptsList {
		status := "no response"
		if at.Status != 0 {
			status = strconv.Itoa(at.Status)
		}
		fmt.Fprintf(w, "  %s %s  %s %s", o.paint(ansiCyan, "#"+strconv.Itoa(at.N)), at.Target, status, o.paint(classColor(at.Class), string(at.Class)))
		if at.Code != "" {
			fmt.Fprintf(w, " %s", sanitize.Text(at.Code))
		}
		if at.MidStream {
			fmt.Fprint(w, " (mid-stream)")
		}
		fmt.Fprintf(w, "  %s", roundDur(at.Duration))
		if at.TTFT > 0 {
			fmt.Fprintf(w, " (first token %s)", roundDur(at.TTFT))
		}
		if at.Decision != "" {
			fmt.Fprintf(w, "  -> %s", at.Decision)
		}
		fmt.Fprintln(w)
		if !at.StartedAt.IsZero() {
			fmt.Fprintf(w, "     at %s", at.StartedAt.In(o.loc).Format("15:04:05.000"))
			if at.RequestID != "" {
				fmt.Fprintf(w, "  request %s", sanitize.Text(at.RequestID))
			}
			if at.QuotaID != "" {
				fmt.Fprintf(w, "  quota %s", sanitize.Text(at.QuotaID))
			}
			fmt.Fprintln(w)
		}
		if at.Message != "" {
			fmt.Fprintf(w, "     %s\n", o.paint(ansiDim, at.Message))
		}
		if at.Paced > 0 {
			fmt.Fprintf(w, "     paced %s before it\n", roundDur(at.Paced))
		}
		if at.RetryAfter != nil || at.Waited > 0 {
			fmt.Fprint(w, "     ")
			if at.RetryAfter != nil {
				fmt.Fprintf(w, "server asked %s; ", roundDur(*at.RetryAfter))
			}
			fmt.Fprintf(w, "waited %s", roundDur(at.Waited))
			if at.DelaySource != "" {
				fmt.Fprintf(w, " (%s)", at.DelaySource)
			}
			if at.NoRetry {
				fmt.Fprint(w, "; x-should-retry: false")
			}
			fmt.Fprintln(w)
		} else if at.NoRetry {
			fmt.Fprintln(w, "     x-should-retry: false")
		}
		if l := at.Limits; !l.Empty() {
			var parts []string
			for _, win := range []struct {
				name string
				w    *stream.Window
			}{{"requests", l.Requests}, {"tokens", l.Tokens}, {"input tokens", l.InputTokens}, {"output tokens", l.OutputTokens}} {
				if win.w == nil {
					continue
				}
				s := win.name + " "
				if win.w.HasRemaining {
					s += strconv.FormatInt(win.w.Remaining, 10)
				} else {
					s += "?"
				}
				if win.w.HasLimit {
					s += "/" + strconv.FormatInt(win.w.Limit, 10)
				}
				if !win.w.Reset.IsZero() && !l.At.IsZero() {
					s += " reset in " + roundDur(win.w.Reset.Sub(l.At)).String()
				}
				parts = append(parts, s)
			}
			fmt.Fprintf(w, "     limits: %s\n", strings.Join(parts, ", "))
		}
		if at.PartialText != "" {
			fmt.Fprintf(w, "     partial text: %q\n", histClip(at.PartialText, 200))
		}
	}
	if c.Prompt != "" {
		fmt.Fprintf(w, "\n%s\n%s\n", o.paint(ansiBold, "prompt"), sanitize.Text(c.Prompt))
	}
	if c.Text != "" {
		fmt.Fprintf(w, "\n%s\n%s\n", o.paint(ansiBold, "answer"), sanitize.Text(c.Text))
	}
	if !c.HasPrompt && !c.HasText && c.Prompt == "" && c.Text == "" {
		fmt.Fprintf(w, "\n%s\n", o.paint(ansiDim, "(no text stored for this call)"))
	}
}

// orDash is s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func histClip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

func historyStats(ctx context.Context, a *app, args []string) int {
	var hf historyFlags
	fs := newHistFlagSet(a, "history stats")
	hf.register(fs, true, 0)
	pos, err := histParse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 {
		return usageErr(a, "history stats", fmt.Errorf("unexpected argument %q", pos[0]))
	}
	f, err := hf.filter(a.now())
	if err != nil {
		return usageErr(a, "history stats", err)
	}
	path, err := hf.path(a)
	if err != nil {
		return histFail(a, err)
	}
	st, err := (&store.Reader{Path: path}).Stats(ctx, f)
	if err != nil {
		return histFail(a, err)
	}
	if hf.asJSON {
		doc := struct {
			DB        string                `json:"db"`
			Providers []store.ProviderStats `json:"providers"`
			Total     store.ProviderStats   `json:"total"`
		}{DB: path, Providers: st[:len(st)-1], Total: st[len(st)-1]}
		if doc.Providers == nil {
			doc.Providers = []store.ProviderStats{}
		}
		return histWriteJSON(a, doc)
	}
	o := newHistOut(a)
	pct := func(v float64) string {
		if o.tty {
			return strconv.FormatFloat(v*100, 'f', 1, 64) + "%"
		}
		return strconv.FormatFloat(v, 'f', 4, 64)
	}
	header := []string{"PROVIDER", "CALLS", "RETRIED", "RETRIES/CALL", "P50", "P95", "GAVE UP", "QUOTA STOPS"}
	if !o.tty {
		header = []string{"PROVIDER", "CALLS", "RETRIED_SHARE", "RETRIES_PER_CALL", "P50_MS", "P95_MS", "GIVE_UP_RATE", "QUOTA_STOPS"}
	}
	var rows [][]histCell
	for _, s := range st {
		name, color := s.Provider, ""
		if name == "" {
			name, color = "all", ansiBold
		}
		rows = append(rows, []histCell{
			{name, color}, {strconv.Itoa(s.Calls), ""}, {pct(s.RetriedShare), ""},
			{strconv.FormatFloat(s.RetriesPerCall, 'f', 2, 64), ""}, {o.dur(s.P50), ""}, {o.dur(s.P95), ""},
			{pct(s.GiveUpRate), ""}, {strconv.Itoa(s.QuotaStops), ""},
		})
	}
	o.table(header, rows)
	if o.tty && st[len(st)-1].Calls == 0 {
		fmt.Fprintf(a.stderr, "no calls in %s match\n", path)
	}
	return exitOK
}

func historyExport(ctx context.Context, a *app, args []string) int {
	var hf historyFlags
	fs := newHistFlagSet(a, "history export")
	hf.register(fs, true, 0)
	format := fs.String("format", "jsonl", "jsonl (one call per line, with its attempts) or csv (one attempt per row)")
	noText := fs.Bool("no-text", false, "leave out prompts, answers and partial text")
	pos, err := histParse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 {
		return usageErr(a, "history export", fmt.Errorf("unexpected argument %q", pos[0]))
	}
	if hf.asJSON {
		*format = "jsonl"
	}
	if *format != "jsonl" && *format != "csv" {
		return usageErr(a, "history export", fmt.Errorf("--format %q: want jsonl or csv", *format))
	}
	f, err := hf.filter(a.now())
	if err != nil {
		return usageErr(a, "history export", err)
	}
	path, err := hf.path(a)
	if err != nil {
		return histFail(a, err)
	}
	rd := &store.Reader{Path: path}
	if *format == "jsonl" {
		enc := json.NewEncoder(a.stdout)
		err = rd.Each(ctx, f, *noText, func(c *store.Call) error { return enc.Encode(c.ToJSON(!*noText)) })
	} else {
		cw := csv.NewWriter(a.stdout)
		_ = cw.Write([]string{"id", "call_id", "session", "call_started_at", "outcome", "chain", "served_by", "attempt",
			"provider", "model", "status", "class", "code", "quota_id", "message", "retry_after_ms", "delay_source",
			"paced_ms", "waited_ms", "request_id", "mid_stream", "ttft_ms", "started_at", "duration_ms", "decision"})
		err = rd.Each(ctx, f, true, func(c *store.Call) error {
			var chain []string
			for _, t := range c.Chain {
				chain = append(chain, t.String())
			}
			served := ""
			if c.ServedBy != nil {
				served = c.ServedBy.String()
			}
			head := []string{strconv.FormatUint(uint64(c.ID), 10), c.CallID, strconv.FormatUint(uint64(c.Session), 10),
				c.Started.UTC().Format(time.RFC3339Nano), string(c.Outcome), strings.Join(chain, " "), served}
			if len(c.AttemptsList) == 0 {
				return cw.Write(append(head, make([]string, 18)...))
			}
			for i := range c.AttemptsList {
				j := store.AttemptToJSON(&c.AttemptsList[i])
				ra, src := "", ""
				if j.RetryAfterMs != nil {
					ra = strconv.FormatFloat(*j.RetryAfterMs, 'f', -1, 64)
				}
				if j.DelaySource != nil {
					src = string(*j.DelaySource)
				}
				num := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
				row := append(append([]string(nil), head...), strconv.Itoa(j.N), j.Provider, j.Model, strconv.Itoa(j.Status),
					string(j.Class), csvText(j.Code), csvText(j.QuotaID), csvText(j.Message), ra, src, num(j.PacedMs), num(j.WaitedMs), csvText(j.RequestID),
					strconv.FormatBool(j.MidStream), num(j.TTFTMs), j.StartedAt, num(j.DurationMs), string(j.Decision))
				if err := cw.Write(row); err != nil {
					return err
				}
			}
			return nil
		})
		cw.Flush()
		if err == nil {
			err = cw.Error()
		}
	}
	if err != nil {
		return histFail(a, fmt.Errorf("export: %w", err))
	}
	return exitOK
}

// csvText keeps a provider-written cell from being read as a formula by a
// spreadsheet (CSV injection): a leading =, +, -, @, tab or CR gets a quote.
func csvText(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

func historyPrune(ctx context.Context, a *app, args []string) int {
	var hf historyFlags
	fs := newHistFlagSet(a, "history prune")
	hf.register(fs, false, 0)
	keepS := fs.String("keep", "90d", "keep calls younger than this (e.g. 30d, 12h); 0 keeps everything")
	compact := fs.Bool("compact", false, "then rewrite the file without its free pages, giving space back to the disk")
	pos, err := histParse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 {
		return usageErr(a, "history prune", fmt.Errorf("unexpected argument %q", pos[0]))
	}
	keep, err := parseAge(*keepS)
	if err != nil {
		return usageErr(a, "history prune", fmt.Errorf("--keep: %w", err))
	}
	path, err := hf.path(a)
	if err != nil {
		return histFail(a, err)
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if hf.asJSON {
			return histWriteJSON(a, map[string]any{"db": path, "deleted": 0})
		}
		fmt.Fprintf(a.stdout, "no history at %s\n", path)
		return exitOK
	}
	n, err := store.Prune(ctx, path, keep, a.now(), store.DefaultLockTimeout)
	if err != nil {
		return histFail(a, err)
	}
	doc := struct {
		DB        string               `json:"db"`
		Deleted   int                  `json:"deleted"`
		KeepHours float64              `json:"keep_hours"`
		Compacted *store.CompactResult `json:"compacted,omitempty"`
	}{DB: path, Deleted: n, KeepHours: keep.Hours()}
	if *compact {
		res, err := store.Compact(ctx, path, store.DefaultLockTimeout)
		if err != nil {
			return histFail(a, err)
		}
		doc.Compacted = &res
	}
	if hf.asJSON {
		return histWriteJSON(a, doc)
	}
	if keep > 0 {
		fmt.Fprintf(a.stdout, "deleted %d calls older than %s from %s\n", n, *keepS, path)
	} else {
		fmt.Fprintf(a.stdout, "kept every call in %s (--keep 0)\n", path)
	}
	if c := doc.Compacted; c != nil {
		fmt.Fprintf(a.stdout, "compacted: %s -> %s\n", histBytes(c.Before), histBytes(c.After))
	}
	return exitOK
}

func histBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func historyRepair(ctx context.Context, a *app, args []string) int {
	var hf historyFlags
	fs := newHistFlagSet(a, "history repair")
	hf.register(fs, false, 0)
	pos, err := histParse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 {
		return usageErr(a, "history repair", fmt.Errorf("unexpected argument %q", pos[0]))
	}
	path, err := hf.path(a)
	if err != nil {
		return histFail(a, err)
	}
	res, err := store.Repair(ctx, path, a.now(), store.DefaultLockTimeout)
	if err != nil {
		return histFail(a, err)
	}
	if hf.asJSON {
		return histWriteJSON(a, struct {
			DB string `json:"db"`
			store.RepairResult
		}{path, res})
	}
	fmt.Fprintf(a.stdout, "repaired %s: copied %d calls, %d attempts, %d sessions, %d texts, %d cooldowns\n", path,
		res.Copied["calls"], res.Copied["attempts"], res.Copied["sessions"], res.Copied["text"], res.Copied["cooldowns"])
	for _, p := range res.Problems {
		fmt.Fprintf(a.stdout, "  %s\n", p)
	}
	fmt.Fprintf(a.stdout, "the old file is kept as %s\n", res.Kept)
	return exitOK
}

// runCooldowns is `limitscope cooldowns [--json]` and
// `limitscope cooldowns clear [SCOPE|--all]`.
func runCooldowns(ctx context.Context, a *app, args []string) int {
	clearing := len(args) > 0 && args[0] == "clear"
	if clearing {
		args = args[1:]
	}
	name := "cooldowns"
	if clearing {
		name = "cooldowns clear"
	}
	var hf historyFlags
	fs := newHistFlagSet(a, name)
	hf.register(fs, false, 0)
	pos, err := histParse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 1 || (!clearing && len(pos) > 0) {
		return usageErr(a, name, fmt.Errorf("unexpected argument %q (usage: limitscope cooldowns [clear [SCOPE]])", pos[len(pos)-1]))
	}
	path, err := hf.path(a)
	if err != nil {
		return histFail(a, err)
	}
	cd := store.NewCooldowns(path, store.Options{})
	list, err := cd.List()
	if err != nil {
		return histFail(a, err)
	}
	now := a.now()
	if clearing {
		var cleared []string
		if len(pos) == 0 {
			if len(list) > 0 {
				if _, err := cd.ClearAll(); err != nil {
					return histFail(a, err)
				}
			}
			for _, c := range list {
				cleared = append(cleared, c.Scope)
			}
		} else {
			found := false
			for _, c := range list {
				found = found || c.Scope == pos[0]
			}
			if !found {
				fmt.Fprintf(a.stderr, "limitscope: no cooldown %q (see limitscope cooldowns)\n", pos[0])
				return exitFailed
			}
			if err := cd.Clear(pos[0]); err != nil {
				return histFail(a, err)
			}
			cleared = []string{pos[0]}
		}
		if hf.asJSON {
			if cleared == nil {
				cleared = []string{}
			}
			return histWriteJSON(a, map[string]any{"db": path, "cleared": cleared})
		}
		if len(cleared) == 0 {
			fmt.Fprintln(a.stdout, "no cooldowns to clear")
		}
		for _, s := range cleared {
			fmt.Fprintf(a.stdout, "cleared %s\n", s)
		}
		return exitOK
	}
	if hf.asJSON {
		type cdJSON struct {
			Scope   string  `json:"scope"`
			Active  bool    `json:"active"`
			Until   *string `json:"until"` // null: until cleared
			Since   string  `json:"since"`
			Target  string  `json:"target"`
			Code    string  `json:"code"`
			Message string  `json:"message"`
		}
		doc := struct {
			DB        string   `json:"db"`
			Cooldowns []cdJSON `json:"cooldowns"`
		}{DB: path, Cooldowns: []cdJSON{}}
		for _, c := range list {
			j := cdJSON{Scope: c.Scope, Active: c.Active(now), Since: c.Since.UTC().Format(time.RFC3339Nano), Target: c.Target, Code: c.Code, Message: c.Message}
			if !c.Until.IsZero() {
				u := c.Until.UTC().Format(time.RFC3339Nano)
				j.Until = &u
			}
			doc.Cooldowns = append(doc.Cooldowns, j)
		}
		return histWriteJSON(a, doc)
	}
	o := newHistOut(a)
	if len(list) == 0 {
		if o.tty {
			fmt.Fprintln(a.stdout, "no cooldowns")
		}
		return exitOK
	}
	var rows [][]histCell
	for _, c := range list {
		state, color := "active", ansiRed
		if !c.Active(now) {
			state, color = "ended", ansiDim
		}
		until := "until cleared"
		if !c.Until.IsZero() {
			until = o.when(c.Until)
			if o.tty && c.Active(now) {
				until += " (in " + roundDur(c.Until.Sub(now)).String() + ")"
			}
		}
		rows = append(rows, []histCell{{c.Scope, ansiCyan}, {state, color}, {until, ""}, {c.Target, ""}, {c.Code, ""}, {o.when(c.Since), ansiDim}, {c.Message, ansiDim}})
	}
	o.table([]string{"SCOPE", "STATE", "UNTIL", "TARGET", "CODE", "SINCE", "MESSAGE"}, rows)
	return exitOK
}

// runInfo is `limitscope info`: the paths in use, like `k9s info`.
func runInfo(ctx context.Context, a *app, args []string) int {
	var hf historyFlags
	fs := newHistFlagSet(a, "info")
	hf.register(fs, false, 0)
	pos, err := histParse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 {
		return usageErr(a, "info", fmt.Errorf("unexpected argument %q", pos[0]))
	}
	p, perr := store.ResolvePaths(a.getenv)
	if hf.db != "" {
		p.DB, p.DBSource, perr = hf.db, "--db", nil
	}
	if perr != nil {
		return histFail(a, perr)
	}
	doc := struct {
		Version string `json:"version"`
		store.Paths
		DBExists       bool   `json:"db_exists"`
		DBBytes        int64  `json:"db_bytes"`
		Schema         int    `json:"schema"`
		ProxyTokenFile string `json:"proxy_token_file,omitempty"`
		ProxyToken     string `json:"proxy_token,omitempty"`
	}{Version: version, Paths: p, Schema: store.SchemaVersion}
	// The proxy's token is made on first use; this is where a user reads it
	// to give their application (it is never logged).
	if p.ConfigDir != "" {
		doc.ProxyTokenFile = proxy.TokenPath(p.ConfigDir)
		tok, err := proxy.LoadOrCreateToken(doc.ProxyTokenFile)
		if err != nil {
			fmt.Fprintf(a.stderr, "limitscope info: proxy token: %v\n", err)
		}
		doc.ProxyToken = tok
	}
	if fi, err := os.Stat(p.DB); err == nil {
		doc.DBExists, doc.DBBytes = true, fi.Size()
	}
	if hf.asJSON {
		return histWriteJSON(a, doc)
	}
	o := newHistOut(a)
	dbNote := histParen(p.DBSource)
	if doc.DBExists {
		dbNote += ", " + histBytes(doc.DBBytes)
	} else {
		dbNote += ", not created yet"
	}
	rows := [][]histCell{
		{{"version", ansiBold}, {version, ""}, {"", ""}},
		{{"history", ansiBold}, {p.DB, ansiCyan}, {dbNote, ansiDim}},
		{{"state dir", ansiBold}, {p.StateDir, ""}, {"", ""}},
		{{"config dir", ansiBold}, {p.ConfigDir, ""}, {histParen(p.ConfigSource), ansiDim}},
	}
	if doc.ProxyToken != "" {
		rows = append(rows, []histCell{{"proxy token", ansiBold}, {doc.ProxyToken, ""}, {"(" + doc.ProxyTokenFile + ", 0600)", ansiDim}})
	}
	if o.tty {
		for _, r := range rows {
			line := fmt.Sprintf("%s %s  %s", o.paint(r[0].color, fmt.Sprintf("%-11s", r[0].text)), o.paint(r[1].color, r[1].text), o.paint(r[2].color, r[2].text))
			fmt.Fprintln(a.stdout, strings.TrimRight(line, " "))
		}
		return exitOK
	}
	for _, r := range rows {
		fmt.Fprintf(a.stdout, "%s\t%s\n", r[0].text, r[1].text)
	}
	return exitOK
}

func histParen(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

func historySessions(ctx context.Context, a *app, args []string) int {
	var hf historyFlags
	fs := newHistFlagSet(a, "history sessions")
	hf.register(fs, false, 0)
	limit := fs.Int("limit", 50, "at most this many sessions (0: all)")
	pos, err := histParse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 || *limit < 0 {
		return usageErr(a, "history sessions", errors.New("usage: limitscope history sessions [--limit N] [--json]"))
	}
	path, err := hf.path(a)
	if err != nil {
		return histFail(a, err)
	}
	list, err := (&store.Reader{Path: path}).Sessions(ctx, *limit)
	if err != nil {
		return histFail(a, err)
	}
	if hf.asJSON {
		if list == nil {
			list = []store.Session{}
		}
		return histWriteJSON(a, map[string]any{"db": path, "sessions": list})
	}
	o := newHistOut(a)
	if len(list) == 0 && o.tty {
		fmt.Fprintf(a.stderr, "no sessions in %s\n", path)
		return exitOK
	}
	var rows [][]histCell
	for _, s := range list {
		content := "yes"
		if s.NoContent {
			content = "no"
		}
		rows = append(rows, []histCell{{strconv.FormatUint(uint64(s.ID), 10), ansiCyan}, {o.when(s.Started), ansiDim}, {o.when(s.Ended), ansiDim},
			{s.Command, ""}, {s.Mode, ""}, {s.Version, ""}, {strconv.Itoa(s.PID), ""}, {content, ""}})
	}
	o.table([]string{"ID", "STARTED", "ENDED", "COMMAND", "MODE", "VERSION", "PID", "CONTENT"}, rows)
	return exitOK
}
