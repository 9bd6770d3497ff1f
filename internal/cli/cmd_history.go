package cli

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"time"

	"charm.land/lipgloss/v2"
	"github.com/limitscope/limitscope/calls"
	"github.com/limitscope/limitscope/internal/pagetrim"
	"github.com/limitscope/limitscope/internal/sanitize"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/store"
	"github.com/limitscope/limitscope/stream"
)

func historyUsage(w io.Writer) {
	fmt.Fprint(w, `Usage:
  limitscope history [list] [--provider P] [--outcome O] [--class C] [--since 2h] [--limit N] [--before ID]
                          [--route R] [--client C]   proxied calls by the model they asked for, their User-Agent
                          [--mode real|simulated]    calls on real providers, or on the simulator
  limitscope history show ID                 one call with each attempt, its waits and its text
  limitscope history stats [filters]         per provider: retries, latency, give-ups, quota stops
  limitscope history export [--format jsonl|csv] [--no-text] [filters]
  limitscope history prune [--keep 90d] [--compact]
  limitscope history sessions [--limit N]    the processes that recorded: start, end, version, mode
  limitscope history report [--session ID | --since 2h --until 1h] [--out FILE]
                                             one self-contained HTML file: timeline, limits, waits, failovers
  limitscope history scenario [--session ID | --since 2h --until 1h] [filters] [--out FILE [--force]]
                                             a scenario file learnt from the calls, for sim --scenario-file
  limitscope history repair                  copy what is readable of a damaged file into a fresh one
  limitscope history cards [TARGET]          the limits cards limitscope probe stored, compared over time
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
	case "cards":
		return historyCards(ctx, a, args)
	case "report":
		return historyReport(ctx, a, args)
	case "scenario":
		return historyScenario(ctx, a, args)
	case "help":
		historyUsage(a.stdout)
		return exitOK
	}
	fmt.Fprintf(a.stderr, "limitscope history: unknown subcommand %q (see limitscope history --help)\n", sub)
	return exitUsage
}

func historyList(ctx context.Context, a *app, args []string) int {
	var hf historyFlags
	fs := hf.flagSet("history list", reviewSpec{filters: true, limit: 50, mode: true})
	fs.UintVar(&hf.before, "before", 0, "paging: only calls older than this id")
	if ok, code := parseNoArgs(a, fs, args); !ok {
		return code
	}
	f, path, ok, code := hf.scope(a, "history list")
	if !ok {
		return code
	}
	f.Origin = true   // proxied calls show their route and client
	f.Attempts = true // the classes in the order they happened
	rd := &store.Reader{Path: path}
	modes, err := sessionModes(ctx, rd)
	if err != nil {
		return histFail(a, err)
	}
	calls, err := listByMode(ctx, rd, f, hf.mode, modes)
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
		return writeJSON(a, doc)
	}
	o := newTextOut(a)
	if len(calls) == 0 && o.tty {
		fmt.Fprintf(a.stderr, "no calls in %s match\n", path)
		return exitOK
	}
	listTable(o, calls, modes)
	if o.tty && f.Limit > 0 && len(calls) == f.Limit {
		// Plain: stderr may be redirected while stdout is a terminal.
		fmt.Fprintf(a.stderr, "more: limitscope history list --before %d\n", calls[len(calls)-1].ID)
	}
	return exitOK
}

// listTable prints the listed calls as a table, with route and client
// columns when a call came through the proxy and, on a terminal, a mode
// column when one was simulated.
func listTable(o *textOut, calls []store.Call, modes map[uint32]string) {
	header := []string{"ID", "STARTED", "TARGET", "SERVED BY", "OUTCOME", "TRIES", "WAITED", "LATENCY", "CLASSES"}
	if !o.tty {
		header[6], header[7] = "WAITED_MS", "LATENCY_MS"
	}
	// Route and client columns only when a listed call came through the proxy.
	origin := slices.ContainsFunc(calls, func(c store.Call) bool { return c.Route != "" || c.Client != "" })
	if origin {
		header = append(header, "ROUTE", "CLIENT")
	}
	// On a terminal a simulated call is marked (piped, --mode selects).
	anySim := o.tty && slices.ContainsFunc(calls, func(c store.Call) bool { return modes[c.Session] == store.ModeSimulated })
	if anySim {
		header = append(header, "MODE")
	}
	var rows [][]cell
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
		classes := classesInOrder(&c)
		rows = append(rows, []cell{
			{strconv.FormatUint(uint64(c.ID), 10), o.id}, {o.when(c.Started), o.dim}, {target, nil}, {served, nil},
			{string(c.Outcome), o.outcome(c.Outcome)}, {strconv.Itoa(c.Attempts), nil}, {o.dur(c.Waited), nil},
			{latency, nil}, {strings.Join(classes, ","), nil},
		})
		if origin {
			route, client := orDash(c.Route), orDash(c.Client)
			if o.tty {
				client = clip(client, 32)
			}
			rows[len(rows)-1] = append(rows[len(rows)-1], cell{route, nil}, cell{client, o.dim})
		}
		if anySim {
			mode := "real"
			if modes[c.Session] == store.ModeSimulated {
				mode = "sim"
			}
			rows[len(rows)-1] = append(rows[len(rows)-1], cell{mode, o.dim})
		}
	}
	// On a narrow terminal: targets and classes are clipped, then the
	// wait, the mode, the client, the route and the start give way.
	fit := []colFit{{}, {drop: 5}, {min: 16}, {min: 16}, {}, {}, {drop: 1}, {}, {min: 10}}
	if origin {
		fit = append(fit, colFit{min: 8, drop: 4}, colFit{min: 8, drop: 2})
	}
	if anySim {
		fit = append(fit, colFit{drop: 3})
	}
	o.fitTable(header, rows, fit)
}

// classesInOrder is a call's attempts' classes in the order they happened,
// a run of one class said once with its count ("overload×2"); from the
// summary's set when the attempts are not at hand (an old record).
func classesInOrder(c *store.Call) []string {
	var out []string
	if len(c.AttemptsList) == 0 {
		for _, cl := range c.Classes {
			out = append(out, string(cl))
		}
		return out
	}
	for i := 0; i < len(c.AttemptsList); {
		j := i
		for j < len(c.AttemptsList) && c.AttemptsList[j].Class == c.AttemptsList[i].Class {
			j++
		}
		s := string(c.AttemptsList[i].Class)
		if j-i > 1 {
			s += "×" + strconv.Itoa(j-i)
		}
		out = append(out, s)
		i = j
	}
	return out
}

// listByMode lists the calls f selects that were recorded in mode ("":
// any), paging through the file so that f.Limit counts matching calls.
func listByMode(ctx context.Context, rd *store.Reader, f store.Filter, mode string, modes map[uint32]string) ([]store.Call, error) {
	if mode == "" {
		return rd.List(ctx, f)
	}
	var out []store.Call
	for {
		page, err := rd.List(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, c := range page {
			if modeOf(modes, c.Session) == mode {
				out = append(out, c)
				if f.Limit > 0 && len(out) == f.Limit {
					return out, nil
				}
			}
		}
		if f.Limit == 0 || len(page) < f.Limit {
			return out, nil
		}
		f.BeforeID = page[len(page)-1].ID
	}
}

func historyShow(ctx context.Context, a *app, args []string) int {
	var hf historyFlags
	fs := hf.flagSet("history show", reviewSpec{})
	pos, ok, code := parseArgs(a, fs, args)
	if !ok {
		return code
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
		return writeJSON(a, struct {
			store.CallJSON
			SessionInfo *store.Session `json:"session_info"`
		}{c.ToJSON(true), sess})
	}
	o := newTextOut(a)
	o.tty = true // show is always the readable form; colour still needs a terminal
	printCall(o, c, sess)
	return exitOK
}

// printCall prints call c (of session sess, nil when unknown) for a person:
// its facts, each attempt, its prompt and answer.
func printCall(o *textOut, c *store.Call, sess *store.Session) {
	printCallHead(o, c, sess)
	printCallFacts(o, c)
	if len(c.AttemptsList) > 0 {
		fmt.Fprintf(o.w, "\n%s\n", o.paint(o.bold, "attempts"))
	}
	for _, at := range c.AttemptsList {
		printAttempt(o, at)
	}
	printCallTexts(o, c)
}

// label is a field name, bold, padded to the field column.
func (o *textOut) label(s string) string { return o.paint(o.bold, fmt.Sprintf("%-10s", s)) }

// printCallHead prints the call line (its ids and session) and what the
// call was: outcome, chain, route, client.
func printCallHead(o *textOut, c *store.Call, sess *store.Session) {
	w, label := o.w, o.label
	fmt.Fprintf(w, "%s %s", label("call"), o.paint(o.id, strconv.FormatUint(uint64(c.ID), 10)))
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
	fmt.Fprintf(w, "%s %s\n", label("outcome"), o.paint(o.outcome(c.Outcome), string(c.Outcome)))
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
}

// printCallFacts prints when the call ran and how it ended: timing,
// finish, error, retry time, cooldown and policy.
func printCallFacts(o *textOut, c *store.Call) {
	w, label := o.w, o.label
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
			if n := len(c.AttemptsList); n > 0 && c.AttemptsList[n-1].Class == stream.ClassOK {
				fmt.Fprint(w, firstText(c.AttemptsList[n-1]))
			}
		}
		fmt.Fprintln(w)
	}
	if c.Err != nil {
		fmt.Fprintf(w, "%s %s", label("error"), o.paint(o.bad, describeError(c.Err.Class, c.Err.Status, c.Err.Code)))
		if c.Err.Provider != "" {
			fmt.Fprintf(w, " from %s", c.Err.Provider)
		}
		fmt.Fprintln(w)
		if c.Err.Message != "" {
			fmt.Fprintf(w, "%s %s\n", label(""), o.paint(o.dim, c.Err.Message))
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
}

// printAttempt prints one attempt of a call, indented under it.
func printAttempt(o *textOut, at retry.Attempt) {
	w := o.w
	status := "no response"
	if at.Status != 0 {
		status = strconv.Itoa(at.Status)
	}
	fmt.Fprintf(w, "  %s %s  %s %s", o.paint(o.id, "#"+strconv.Itoa(at.N)), at.Target, status, o.paint(o.class(at.Class), string(at.Class)))
	if at.Code != "" {
		fmt.Fprintf(w, " %s", sanitize.Text(at.Code))
	}
	if at.MidStream {
		fmt.Fprint(w, " (mid-stream)")
	}
	fmt.Fprintf(w, "  %s", roundDur(at.Duration))
	if at.TTFT > 0 {
		fmt.Fprintf(w, " (first token %s%s)", roundDur(at.TTFT), firstText(at))
	}
	fmt.Fprint(w, sanitize.Text(servedTierWords(at)))
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
		fmt.Fprintf(w, "     %s\n", o.paint(o.dim, at.Message))
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
	if note := at.FailoverNote(); note != "" {
		fmt.Fprintf(w, "     %s\n", note)
	}
	if l := at.Limits; !l.Empty() {
		fmt.Fprintf(w, "     limits: %s\n", limitsLine(l))
	}
	if at.PartialText != "" {
		fmt.Fprintf(w, "     partial text: %q\n", clip(at.PartialText, 200))
	}
}

// limitsLine is a limits snapshot in one line: each window's
// remaining/limit and reset.
func limitsLine(l *stream.Limits) string {
	var parts []string
	for _, win := range []struct {
		name string
		w    *stream.Window
	}{{"requests", l.Requests}, {"tokens", l.Tokens}, {"input tokens", l.InputTokens}, {"output tokens", l.OutputTokens},
		{"priority input tokens", l.PriorityInputTokens}, {"priority output tokens", l.PriorityOutputTokens}} {
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
	return strings.Join(parts, ", ")
}

// printCallTexts prints the call's prompt and answer, or says none is stored.
func printCallTexts(o *textOut, c *store.Call) {
	w := o.w
	if c.Prompt != "" {
		fmt.Fprintf(w, "\n%s\n%s\n", o.paint(o.bold, "prompt"), sanitize.Text(c.Prompt))
	}
	if c.Text != "" {
		fmt.Fprintf(w, "\n%s\n%s\n", o.paint(o.bold, "answer"), sanitize.Text(c.Text))
		if c.TextCut {
			fmt.Fprintf(w, "%s\n", o.paint(o.dim, fmt.Sprintf("(the history keeps the first %d bytes of this answer; the caller received all of it)", len(c.Text))))
		}
	}
	if !c.HasPrompt && !c.HasText && c.Prompt == "" && c.Text == "" {
		fmt.Fprintf(w, "\n%s\n", o.paint(o.dim, "(no text stored for this call)"))
	}
}

func historyStats(ctx context.Context, a *app, args []string) int {
	defer boundMemory()()
	var hf historyFlags
	fs := hf.flagSet("history stats", reviewSpec{filters: true, mode: true})
	if ok, code := parseNoArgs(a, fs, args); !ok {
		return code
	}
	f, path, ok, code := hf.scope(a, "history stats")
	if !ok {
		return code
	}
	rd := &store.Reader{Path: path}
	// Real and simulated calls are never mixed in one row: each mode is its
	// own set of rows (--mode keeps one), counted by the store in bounded
	// memory.
	modes := []string{store.ModeReal, store.ModeSimulated}
	if hf.mode != "" {
		modes = []string{hf.mode}
	}
	var byMode []modeStats
	for _, m := range modes {
		mf := f
		mf.Mode = m
		st, err := rd.Stats(ctx, mf)
		if err != nil {
			return histFail(a, err)
		}
		ms := modeStats{Mode: m, Providers: st[:len(st)-1], Total: st[len(st)-1]}
		if ms.Providers == nil {
			ms.Providers = []store.ProviderStats{}
		}
		byMode = append(byMode, ms)
	}
	if hf.asJSON {
		return statsJSON(ctx, a, rd, f, byMode)
	}
	statsTable(a, byMode, hf.mode, path)
	return exitOK
}

// modeStats is history stats' figures for the calls of one mode.
type modeStats struct {
	Mode      string                `json:"mode"`
	Providers []store.ProviderStats `json:"providers"`
	Total     store.ProviderStats   `json:"total"`
}

// statsJSON writes the stats as one JSON document.
func statsJSON(ctx context.Context, a *app, rd *store.Reader, f store.Filter, byMode []modeStats) int {
	// providers and total keep their meaning (every call the filter
	// selects); modes splits them, real and simulated.
	all, err := rd.Stats(ctx, f)
	if err != nil {
		return histFail(a, err)
	}
	doc := struct {
		DB             string                `json:"db"`
		Providers      []store.ProviderStats `json:"providers"`
		Total          store.ProviderStats   `json:"total"`
		SimulatedCalls int                   `json:"simulated_calls"`
		Modes          []modeStats           `json:"modes"`
	}{DB: rd.Path, Providers: all[:len(all)-1], Total: all[len(all)-1], Modes: byMode}
	if doc.Providers == nil {
		doc.Providers = []store.ProviderStats{}
	}
	for _, ms := range byMode {
		if ms.Mode == store.ModeSimulated {
			doc.SimulatedCalls = ms.Total.Calls
		}
	}
	return writeJSON(a, doc)
}

// statsTable prints the stats as a table, one row per mode and provider
// (a mode with no calls left out unless mode asks for it).
func statsTable(a *app, byMode []modeStats, mode, path string) {
	o := newTextOut(a)
	pct := func(v float64) string {
		if o.tty {
			return strconv.FormatFloat(v*100, 'f', 1, 64) + "%"
		}
		return strconv.FormatFloat(v, 'f', 4, 64)
	}
	// A provider counts three ways, each named: the calls whose chain
	// began with it (the figures to the right are theirs), the calls that
	// sent it a request, and the calls it served.
	header := []string{"MODE", "PROVIDER", "PRIMARY", "TRIED", "SERVED", "RETRIED", "RETRY/CALL", "P50", "P95", "GAVE UP", "QUOTA STOPS", "INTERRUPTED"}
	if !o.tty {
		header = []string{"MODE", "PROVIDER", "PRIMARY_CALLS", "TRIED_CALLS", "SERVED_CALLS", "RETRIED_SHARE", "RETRIES_PER_CALL", "P50_MS", "P95_MS", "GIVE_UP_RATE", "QUOTA_STOPS", "INTERRUPTED"}
	}
	var rows [][]cell
	total := 0
	for _, ms := range byMode {
		if ms.Total.Calls == 0 && mode == "" {
			continue // a mode with no calls is left out unless asked for
		}
		total += ms.Total.Calls
		modeLabel := ms.Mode
		if o.tty && modeLabel == store.ModeSimulated {
			modeLabel = "sim" // as history list says it
		}
		for _, s := range append(ms.Providers, ms.Total) {
			name, color := s.Provider, (*lipgloss.Style)(nil)
			if name == "" {
				name, color = "all", o.bold
			}
			rows = append(rows, []cell{
				{modeLabel, o.dim}, {name, color}, {strconv.Itoa(s.Calls), nil}, {strconv.Itoa(s.Tried), nil}, {strconv.Itoa(s.Served), nil}, {pct(s.RetriedShare), nil},
				{strconv.FormatFloat(s.RetriesPerCall, 'f', 2, 64), nil}, {o.dur(s.P50), nil}, {o.dur(s.P95), nil},
				{pct(s.GiveUpRate), nil}, {strconv.Itoa(s.QuotaStops), nil}, {strconv.Itoa(s.Interrupted), nil},
			})
		}
	}
	// On a narrow terminal the interrupted calls, then the quota stops,
	// give way (history list and show still have them).
	o.fitTable(header, rows, []colFit{{}, {min: 9}, {}, {drop: 4}, {}, {}, {drop: 2}, {}, {}, {}, {drop: 3}, {drop: 1}})
	if o.tty && total > 0 {
		fmt.Fprintln(a.stdout, o.paint(o.dim, "PRIMARY: calls whose chain began with it (the figures to the right are theirs)"))
		fmt.Fprintln(a.stdout, o.paint(o.dim, "TRIED: calls that sent it a request (an unused or skipped fallback is not tried)"))
		fmt.Fprintln(a.stdout, o.paint(o.dim, "SERVED: calls it answered, as primary or as a fallback"))
	}
	if o.tty && total == 0 {
		fmt.Fprintf(a.stderr, "no calls in %s match\n", path)
	}
}

// reviewMemoryLimit is the Go runtime's soft memory limit while history
// stats and export run in the binary. Both stream the history (a call at a
// time), so their live heap stays at a few MiB whatever its size; without a
// limit the collector, starved on a loaded machine, let the garbage of a
// 1 M-attempt export run the process up to 30-75 MiB, with it under 21 MiB.
const reviewMemoryLimit = 12 << 20

// boundMemory sets the review commands' soft memory limit (reviewLimit of
// the live heap) unless a limit is set already (GOMEMLIMIT), and returns
// what puts the previous limit back. It first releases the executable's
// pages that start-up touched (pagetrim.ReleaseExecutable: about 18 MiB of
// the binary's 48 MB, most of them never run again), so a long review's
// resident set holds the code it runs; failing to is no error.
func boundMemory() (restore func()) {
	_, _ = pagetrim.ReleaseExecutable()
	prev := debug.SetMemoryLimit(-1)
	if prev != math.MaxInt64 {
		return func() {}
	}
	debug.SetMemoryLimit(reviewLimit(liveHeap()))
	return func() { debug.SetMemoryLimit(prev) }
}

// reviewLimit is the memory limit for a process whose heap held live bytes
// at its last collection: reviewMemoryLimit, or, when more, twice the live
// heap (where the collector's own pacing, GOGC=100, puts the next
// collection) and half of reviewMemoryLimit for the command's own heap. In
// the binary, whose live heap is a MiB or two when the command starts, that
// is reviewMemoryLimit; a process holding more (a test or benchmark, a
// program running the commands in-process) keeps the collector's pacing,
// where a fixed 12 MiB under its live heap made it collect without end
// (history export of 100 k attempts: 86 s in a benchmark, 0.8 s in the
// binary).
func reviewLimit(live uint64) int64 {
	return max(reviewMemoryLimit, 2*int64(min(live, math.MaxInt64/4))+reviewMemoryLimit/2)
}

// liveHeap is the heap the last collection found live (0 before the first).
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

func historyExport(ctx context.Context, a *app, args []string) int {
	defer boundMemory()()
	var hf historyFlags
	fs := hf.flagSet("history export", reviewSpec{filters: true, mode: true})
	format := fs.String("format", "jsonl", "jsonl (one call per line, with its attempts) or csv (one attempt per row)")
	noText := fs.Bool("no-text", false, "leave out prompts, answers and partial text")
	if ok, code := parseNoArgs(a, fs, args); !ok {
		return code
	}
	if hf.asJSON {
		*format = "jsonl"
	}
	if *format != "jsonl" && *format != "csv" {
		return usageErr(a, "history export", fmt.Errorf("--format %q: want jsonl or csv", *format))
	}
	f, path, ok, code := hf.scope(a, "history export")
	if !ok {
		return code
	}
	each, err := exportEach(ctx, &store.Reader{Path: path}, &f, hf.mode)
	if err != nil {
		return histFail(a, err)
	}
	if *format == "jsonl" {
		err = exportJSONL(ctx, a.stdout, each, f, *noText)
	} else {
		err = exportCSV(ctx, a.stdout, each, f)
	}
	if err != nil {
		return histFail(a, fmt.Errorf("export: %w", err))
	}
	return exitOK
}

// eachCall walks the calls a filter selects (store.Reader.EachReused).
type eachCall = func(ctx context.Context, f store.Filter, noText bool, fn func(*store.Call) error) error

// exportEach walks the calls export writes, reusing one call value: those
// of f (in mode, when given), and with f.Limit the newest f.Limit, oldest
// first (f is changed to select them).
func exportEach(ctx context.Context, rd *store.Reader, f *store.Filter, mode string) (eachCall, error) {
	each := rd.EachReused // export writes each call out and keeps none
	if mode != "" {
		modes, err := sessionModes(ctx, rd)
		if err != nil {
			return nil, err
		}
		each = func(ctx context.Context, f store.Filter, noText bool, fn func(*store.Call) error) error {
			return rd.EachReused(ctx, f, noText, func(c *store.Call) error {
				if modeOf(modes, c.Session) != mode {
					return nil
				}
				return fn(c)
			})
		}
	}
	if f.Limit > 0 {
		// --limit N takes the newest N, as list does, written oldest first.
		modes, err := sessionModes(ctx, rd)
		if err != nil {
			return nil, err
		}
		newest, err := listByMode(ctx, rd, *f, mode, modes)
		if err != nil {
			return nil, err
		}
		keep := make(map[uint32]bool, len(newest))
		for _, c := range newest {
			keep[c.ID] = true
		}
		if len(newest) > 0 {
			f.Since = newest[len(newest)-1].Started
		}
		f.Limit, f.BeforeID = 0, 0
		inner := each
		each = func(ctx context.Context, f store.Filter, noText bool, fn func(*store.Call) error) error {
			if len(keep) == 0 {
				return nil
			}
			return inner(ctx, f, noText, func(c *store.Call) error {
				if !keep[c.ID] {
					return nil
				}
				return fn(c)
			})
		}
	}
	return each, nil
}

// exportJSONL writes one JSON call a line, with its attempts.
func exportJSONL(ctx context.Context, w io.Writer, each eachCall, f store.Filter, noText bool) error {
	bw := bufio.NewWriterSize(w, 64<<10) // one write per 64 KiB, not per call
	enc := json.NewEncoder(bw)
	var j store.CallJSON // one for every call: encoding a value would box a copy per call
	err := each(ctx, f, noText, func(c *store.Call) error {
		c.FillJSON(&j, !noText)
		return enc.Encode(&j)
	})
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return err
}

// exportCSV writes one attempt a row (a call without any, one row).
func exportCSV(ctx context.Context, w io.Writer, each eachCall, f store.Filter) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"id", "call_id", "session", "call_started_at", "outcome", "chain", "served_by", "attempt",
		"provider", "model", "status", "class", "code", "quota_id", "message", "retry_after_ms", "delay_source",
		"paced_ms", "waited_ms", "request_id", "mid_stream", "ttft_ms", "started_at", "duration_ms", "decision"})
	// One chain and one row buffer for every call (the writer keeps
	// neither): an export of a million attempts makes less garbage.
	var chain, row []string
	noAttempt := make([]string, 18)
	err := each(ctx, f, true, func(c *store.Call) error {
		chain = chain[:0]
		for _, t := range c.Chain {
			chain = append(chain, t.String())
		}
		served := ""
		if c.ServedBy != nil {
			served = c.ServedBy.String()
		}
		row = append(row[:0], strconv.FormatUint(uint64(c.ID), 10), c.CallID, strconv.FormatUint(uint64(c.Session), 10),
			c.Started.UTC().Format(time.RFC3339Nano), string(c.Outcome), strings.Join(chain, " "), served)
		head := len(row)
		if len(c.AttemptsList) == 0 {
			return cw.Write(append(row, noAttempt...))
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
			row = append(row[:head], strconv.Itoa(j.N), j.Provider, j.Model, strconv.Itoa(j.Status),
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
	return err
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
	fs := hf.flagSet("history prune", reviewSpec{})
	keepS := fs.String("keep", "90d", "keep calls younger than this (e.g. 30d, 12h); 0 keeps everything")
	compact := fs.Bool("compact", false, "then rewrite the file without its free pages, giving space back to the disk")
	if ok, code := parseNoArgs(a, fs, args); !ok {
		return code
	}
	keep, err := calls.ParseAge(*keepS)
	if err != nil {
		return usageErr(a, "history prune", fmt.Errorf("--keep: %w", err))
	}
	path, err := hf.path(a)
	if err != nil {
		return histFail(a, err)
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if hf.asJSON {
			return writeJSON(a, map[string]any{"db": path, "deleted": 0})
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
		return writeJSON(a, doc)
	}
	if keep > 0 {
		fmt.Fprintf(a.stdout, "deleted %d calls older than %s from %s\n", n, *keepS, path)
	} else {
		fmt.Fprintf(a.stdout, "kept every call in %s (--keep 0)\n", path)
	}
	if c := doc.Compacted; c != nil {
		fmt.Fprintf(a.stdout, "compacted: %s -> %s\n", byteSize(c.Before), byteSize(c.After))
	}
	return exitOK
}

func historyRepair(ctx context.Context, a *app, args []string) int {
	var hf historyFlags
	fs := hf.flagSet("history repair", reviewSpec{})
	if ok, code := parseNoArgs(a, fs, args); !ok {
		return code
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
		return writeJSON(a, struct {
			DB string `json:"db"`
			store.RepairResult
		}{path, res})
	}
	// The summary says what was copied and, by count and kind, everything
	// skipped or known lost: never "copied" alone when a record is gone.
	fmt.Fprintf(a.stdout, "repaired %s: %s\n", path, res.Summary())
	for _, p := range res.Problems {
		fmt.Fprintf(a.stdout, "  %s\n", p)
	}
	fmt.Fprintf(a.stdout, "the old file is kept as %s\n", res.Kept)
	return exitOK
}

func historySessions(ctx context.Context, a *app, args []string) int {
	var hf historyFlags
	fs := hf.flagSet("history sessions", reviewSpec{})
	limit := fs.Int("limit", 50, "at most this many sessions (0: all)")
	pos, ok, code := parseArgs(a, fs, args)
	if !ok {
		return code
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
		return writeJSON(a, map[string]any{"db": path, "sessions": list})
	}
	o := newTextOut(a)
	if len(list) == 0 && o.tty {
		fmt.Fprintf(a.stderr, "no sessions in %s\n", path)
		return exitOK
	}
	var rows [][]cell
	for _, s := range list {
		content := "yes"
		if s.NoContent {
			content = "no"
		}
		rows = append(rows, []cell{{strconv.FormatUint(uint64(s.ID), 10), o.id}, {o.when(s.Started), o.dim}, {o.when(s.Ended), o.dim},
			{s.Command, nil}, {s.Mode, nil}, {s.Version, nil}, {strconv.Itoa(s.PID), nil}, {content, nil}})
	}
	o.table([]string{"ID", "STARTED", "ENDED", "COMMAND", "MODE", "VERSION", "PID", "CONTENT"}, rows)
	return exitOK
}

// firstText is what follows an attempt's first-token time: the time to its
// first visible text, when thinking came first or the two differ, and the
// reasoning tokens the provider reported.
func firstText(at retry.Attempt) string {
	var b strings.Builder
	if at.TTFText > 0 && (at.Thinking || roundDur(at.TTFText) != roundDur(at.TTFT)) {
		fmt.Fprintf(&b, ", first text %s", roundDur(at.TTFText))
	}
	if at.Thinking && at.TTFText > at.TTFT {
		fmt.Fprintf(&b, ", thought %s", roundDur(at.TTFText-at.TTFT))
	} else if at.Thinking {
		b.WriteString(", thought")
	}
	if at.ReasoningTokens > 0 {
		fmt.Fprintf(&b, ", %d reasoning tokens", at.ReasoningTokens)
	}
	return b.String()
}
