package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/limitscope/limitscope/internal/sanitize"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/theme"
)

// textOut is the text output of the CLI's review commands (history,
// cooldowns, info): on a terminal, tables aligned by display width, in
// colour from theme unless NO_COLOR or TERM=dumb; piped, redirected to a
// file or to /dev/null, plain tab-separated text with no escape code.
type textOut struct {
	w     io.Writer
	tty   bool // aligned, human-readable form
	cols  int  // the terminal's width, tables fit it (0: unknown, no limit)
	color bool // colour and bold (only ever on a terminal)
	loc   *time.Location
	st    theme.Styles

	bold, dim, id, bad *lipgloss.Style
}

// newTextOut is the text output on a's stdout.
func newTextOut(a *app) *textOut {
	o := &textOut{w: a.stdout, tty: a.stdoutTTY, loc: time.Local, cols: termCols(a)}
	o.color = a.stdoutTTY && useColor(a.getenv)
	o.st = theme.New(true, !o.color)
	bold := lipgloss.NewStyle().Bold(true)
	o.bold, o.dim, o.id, o.bad = &bold, &o.st.Subtle, &o.st.Accent, &o.st.Error
	return o
}

// termCols is the width of the terminal on stdout: the terminal's own, or
// $COLUMNS, or 0 (unknown) when stdout is no terminal.
func termCols(a *app) int {
	if !a.stdoutTTY {
		return 0
	}
	if a.stdoutCols > 0 {
		return a.stdoutCols
	}
	if n, err := strconv.Atoi(a.getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return 0
}

// useColor reports whether the environment allows colour on a terminal:
// not with NO_COLOR (any value) or TERM=dumb.
func useColor(getenv func(string) string) bool {
	return getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
}

// outcome is the style of a call's outcome.
func (o *textOut) outcome(oc retry.Outcome) *lipgloss.Style {
	s := o.st.Outcome(string(oc))
	return &s
}

// class is the style of an attempt's class.
func (o *textOut) class(c stream.Class) *lipgloss.Style {
	s := o.st.Class(string(c))
	return &s
}

// paint renders s (made terminal-safe: stored messages came from servers)
// in style, when colour is on; nil is plain.
func (o *textOut) paint(style *lipgloss.Style, s string) string {
	s = sanitize.Text(s)
	if !o.color || style == nil || s == "" {
		return s
	}
	return style.Render(s)
}

// cell is one table cell and its style (nil: plain).
type cell struct {
	text  string
	style *lipgloss.Style
}

// colFit says how a column gives way on a narrow terminal: clipped down to
// min cells (0: never clipped), and dropped in the order of drop (1 first;
// 0: never dropped) when clipping is not enough.
type colFit struct{ min, drop int }

// fitWidths fits the columns of natural widths nat into cols cells (two
// between columns): the clippable ones are clipped first, and only when
// that is not enough are columns dropped, least useful first. It returns
// each column's width, -1 for a dropped one.
func fitWidths(nat []int, fit []colFit, cols int) []int {
	w := slices.Clone(nat)
	if cols <= 0 || len(fit) != len(nat) {
		return w
	}
	floor := func(i int) int {
		if fit[i].min > 0 {
			return min(nat[i], fit[i].min)
		}
		return nat[i]
	}
	total := func(width func(int) int) int {
		t, n := 0, 0
		for i := range w {
			if w[i] >= 0 {
				t += width(i)
				n++
			}
		}
		return t + 2*max(n-1, 0)
	}
	if total(func(i int) int { return nat[i] }) <= cols {
		return w
	}
	// Drop, least useful first, until the clipped columns fit.
	for total(floor) > cols {
		next := -1
		for i := range w {
			if w[i] >= 0 && fit[i].drop > 0 && (next < 0 || fit[i].drop < fit[next].drop) {
				next = i
			}
		}
		if next < 0 {
			break
		}
		w[next] = -1
	}
	// Clip: start from the floors and give the room left back to the
	// clipped columns, narrowest first, up to their natural width.
	for i := range w {
		if w[i] >= 0 {
			w[i] = floor(i)
		}
	}
	room := cols - total(func(i int) int { return w[i] })
	for room > 0 {
		grew := false
		for i := range w {
			if room > 0 && w[i] >= 0 && w[i] < nat[i] {
				w[i]++
				room--
				grew = true
			}
		}
		if !grew {
			break
		}
	}
	return w
}

// table prints rows under a header: columns padded to their display width
// on a terminal, tab-separated when piped. On a terminal narrower than the
// table, every column may be clipped to its header's width (at least 8).
func (o *textOut) table(header []string, rows [][]cell) {
	fit := make([]colFit, len(header))
	for i, h := range header {
		fit[i] = colFit{min: max(ansi.StringWidth(h), 8)}
	}
	o.fitTable(header, rows, fit)
}

// fitTable is table with each column's way to give room (fit, one per
// header) on a narrow terminal.
func (o *textOut) fitTable(header []string, rows [][]cell, fit []colFit) {
	clean := make([][]cell, len(rows))
	for i, r := range rows {
		clean[i] = make([]cell, len(r))
		for j, c := range r {
			clean[i][j] = cell{sanitize.Text(c.text), c.style}
		}
	}
	rows = clean
	if !o.tty {
		flat := strings.NewReplacer("\t", " ", "\n", " ")
		fmt.Fprintln(o.w, strings.Join(header, "\t"))
		for _, r := range rows {
			parts := make([]string, len(r))
			for i, c := range r {
				parts[i] = flat.Replace(c.text)
			}
			fmt.Fprintln(o.w, strings.Join(parts, "\t"))
		}
		return
	}
	width := make([]int, len(header))
	for i, h := range header {
		width[i] = ansi.StringWidth(h)
	}
	for _, r := range rows {
		for i, c := range r {
			if i < len(width) {
				width[i] = max(width[i], ansi.StringWidth(c.text))
			}
		}
	}
	width = fitWidths(width, fit, o.cols)
	line := func(cells []cell) {
		var b strings.Builder
		for i, c := range cells {
			if i < len(width) && width[i] < 0 {
				continue // dropped to fit the terminal
			}
			text := c.text
			if i < len(width) && ansi.StringWidth(text) > width[i] {
				text = ansi.Truncate(text, width[i], "…") // "…" within the width
			}
			b.WriteString(o.paint(c.style, text))
			b.WriteString(strings.Repeat(" ", max(0, width[min(i, len(width)-1)]-ansi.StringWidth(text))+2))
		}
		fmt.Fprintln(o.w, strings.TrimRight(b.String(), " "))
	}
	hc := make([]cell, len(header))
	for i, h := range header {
		hc[i] = cell{h, o.bold}
	}
	line(hc)
	for _, r := range rows {
		line(r)
	}
}

// when formats a time: local and short on a terminal, RFC 3339 UTC piped.
func (o *textOut) when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if !o.tty {
		return t.UTC().Format(time.RFC3339Nano)
	}
	return t.In(o.loc).Format("2006-01-02 15:04:05")
}

// dur formats a duration: rounded on a terminal, milliseconds piped.
func (o *textOut) dur(d time.Duration) string {
	if !o.tty {
		return strconv.FormatInt(d.Milliseconds(), 10)
	}
	if d == 0 {
		return "0"
	}
	return roundDur(d).String()
}

// writeJSON prints v as one indented JSON document on stdout.
func writeJSON(a *app, v any) int {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(a.stderr, "limitscope: writing JSON: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// roundDur rounds a duration for people: whole seconds from 10s, tenths
// from 1s, milliseconds below.
func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// describeError names an error: "429 rate_limit rate_limit_exceeded".
func describeError(c stream.Class, status int, code string) string {
	s := string(c)
	if status != 0 {
		s = fmt.Sprintf("%d %s", status, s)
	}
	if code != "" {
		s += " " + code
	}
	return s
}

// orDash is s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clip cuts s to n columns of display width, marking the cut with "…".
func clip(s string, n int) string {
	if ansi.StringWidth(s) <= n {
		return s
	}
	return ansi.Truncate(s, n+1, "…")
}

// paren is "(s)", or "" for an empty s.
func paren(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

// byteSize is n bytes for people: "1.5 MiB".
func byteSize(n int64) string {
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
