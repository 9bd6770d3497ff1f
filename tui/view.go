package tui

import (
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// View renders the screen. It is the hot path: panes cache their styled
// lines and only visible lines are rendered.
func (m *Model) View() tea.View {
	content, cursor := m.render()
	v := tea.NewView(content)
	v.AltScreen = true
	v.WindowTitle = "limitscope"
	if m.mouse {
		v.MouseMode = tea.MouseModeCellMotion
	}
	v.Cursor = cursor
	return v
}

// logVisible reports whether the attempt log shows: by default at 24 rows
// and more; the attempts key flips it.
func (m *Model) logVisible() bool {
	return (m.height >= 24) == m.showLog
}

func (m *Model) wide() bool { return m.width >= 100 }

// layout heights: header 1, input 3, footer 1.
func (m *Model) bodyHeight() int { return m.height - 5 }

func (m *Model) logHeight() int {
	if !m.logVisible() {
		return 0
	}
	return min(9, max(4, m.bodyHeight()/4))
}

// targetsCollapsedHeight fits the collapsed targets' lines (a status wraps
// onto more than one), at most a third of the body.
func (m *Model) targetsCollapsedHeight() int {
	m.targets.wrapLong = m.height >= 20
	n := len(m.targets.view(m.width-2, true, m.now, &m.st))
	return min(max(1, n), max(1, m.bodyHeight()/3)) + 2
}

// convHeight is the conversation's inner height.
func (m *Model) convHeight() int {
	h := m.bodyHeight() - m.logHeight()
	if !m.wide() {
		h -= m.targetsCollapsedHeight()
	}
	return max(1, h-2)
}

func (m *Model) render() (string, *tea.Cursor) {
	w, h := m.width, m.height
	if w == 0 || h == 0 {
		return "", nil
	}
	if w < minWidth || h < minHeight {
		msg := fmt.Sprintf("limitscope needs a terminal of at least %dx%d; this one is %dx%d. Enlarge it, or press ctrl+c to quit.", minWidth, minHeight, w, h)
		return strings.Join(padLines(wrap(msg, w), w, h), "\n"), nil
	}
	lines := make([]string, 0, h)
	lines = append(lines, m.header(w))
	if m.mode == modeHelp { // the help takes the input's rows too
		lines = append(lines, m.helpView(w)...)
		return strings.Join(append(lines, m.footer(w)), "\n"), nil
	}
	lines = append(lines, m.body(w)...)
	inputRow := len(lines)
	lines = append(lines, m.inputBox(w)...)
	lines = append(lines, m.footer(w))
	return strings.Join(lines, "\n"), m.inputCursor(inputRow)
}

// body is the screen between the header and the input: the panes, or an
// overlay.
func (m *Model) body(w int) []string {
	st, body := &m.st, m.bodyHeight()
	switch m.mode {
	case modeHistory:
		inner := m.hist.view(w-2, body-2, st)
		title := "history"
		if m.hist.tl != nil {
			title = "history · a past session's timeline (esc back)"
		}
		return m.box(title, inner, w, body, true, false)
	case modeTimeline:
		inner := m.tview.view(m.tl, w-2, body-2, m.now, st)
		return m.box("timeline (esc back)", inner, w, body, true, false)
	case modeFaults:
		return m.box("demo faults", m.faultsView(w-2, body-2), w, body, false, false)
	case modeConfirm:
		return m.box("clear a quota stop?", m.confirmLines(w-4), w, body, false, true)
	}
	return m.panes(w, body)
}

// isF reports whether pane f has the focus on the main screen.
func (m *Model) isF(f focus) bool { return m.focus == f && m.mode == modeMain }

// panes are the main screen's: targets and conversation side by side (or
// stacked below 100 columns), the attempt log under them.
func (m *Model) panes(w, body int) []string {
	lh := m.logHeight()
	top := body - lh
	var lines []string
	if m.wide() {
		lines = m.sideBySide(w, top)
	} else {
		lines = m.stacked(w, top)
	}
	if lh > 0 {
		title := "attempts"
		if n := m.log.newer(lh - 2); n > 0 {
			title = fmt.Sprintf("attempts (%d newer below · G)", n)
		}
		lines = append(lines, m.box(title, m.log.view(w-2, lh-2, &m.st), w, lh, true, m.isF(focusAttempts))...)
	}
	return lines
}

// sideBySide is the targets pane beside the conversation, top rows high.
func (m *Model) sideBySide(w, top int) []string {
	st := &m.st
	tw := min(44, max(34, w*32/100))
	cw := w - tw
	m.targets.rows = top - 2
	tl := m.targets.view(tw-2, false, m.now, st)
	tb := m.box("targets", tl, tw, top, true, m.isF(focusTargets))
	cl := m.conv.view(cw-2, top-2, st, m.liveWait(), m.welcome) // before the title: it may move the offset
	cb := m.box(m.convTitle(), cl, cw, top, true, m.isF(focusConversation))
	out := make([]string, 0, len(tb))
	for i := range tb {
		out = append(out, tb[i]+cb[i])
	}
	return out
}

// stacked is the collapsed targets above the conversation, top rows high.
func (m *Model) stacked(w, top int) []string {
	st := &m.st
	th := m.targetsCollapsedHeight()
	tl := m.targets.view(w-2, true, m.now, st)
	if m.targets.focused && len(tl) > th-2 {
		start := min(max(0, m.targets.cursor-(th-3)), len(tl)-(th-2))
		tl = tl[start:]
	}
	out := m.box("targets", tl, w, th, true, m.isF(focusTargets))
	ch := top - th
	cl := m.conv.view(w-2, ch-2, st, m.liveWait(), m.welcome)
	return append(out, m.box(m.convTitle(), cl, w, ch, true, m.isF(focusConversation))...)
}

// inputBox is the prompt input's box.
func (m *Model) inputBox(w int) []string {
	ik := fmt.Sprintf("%d/%v/%d/%d", m.input.Position(), m.input.Focused(), m.input.Width(), m.inputGen)
	if ik != m.inputKey {
		m.inputKey, m.inputLine = ik, fit(m.input.View(), w-2)
	}
	return m.box("", []string{m.inputLine}, w, 3, true, m.isF(focusInput))
}

// inputCursor is the terminal cursor in the prompt input (its box's first
// row at row), nil when the input has no focus.
func (m *Model) inputCursor(row int) *tea.Cursor {
	if m.focus != focusInput || m.mode != modeMain {
		return nil
	}
	c := m.input.Cursor()
	if c != nil {
		c.X++
		c.Y += row + 1
	}
	return c
}

func (m *Model) convTitle() string {
	if m.conv.offset > 0 {
		return fmt.Sprintf("conversation (scrolled up %d)", m.conv.offset)
	}
	return "conversation"
}

// welcome is what the empty conversation says.
func (m *Model) welcome() []string {
	st := &m.st
	out := []string{""}
	if m.opts.Simulated {
		out = append(out, st.Warn.Render("  This session runs on the built-in simulator: no key, no cost, no network."))
		if m.opts.Faults != nil {
			out = append(out, st.Subtle.Render("  Tab out of the input and press d to inject a fault (a 429, an overload,"),
				st.Subtle.Render("  a spend cap, a mid-stream error) and watch the retries and the failover."))
		}
	} else {
		out = append(out, "  Type a prompt below and press enter. It goes to the first target;")
		out = append(out, "  the others take over when it fails.")
	}
	if a := m.opts.ProxyAddr; a != "" {
		out = append(out, "",
			"  The proxy listens on http://"+a+". Point an app's SDK at it:",
			st.Subtle.Render("    OPENAI_BASE_URL=http://"+a+"/v1"),
			st.Subtle.Render("    ANTHROPIC_BASE_URL=http://"+a),
			st.Subtle.Render("    API key: the proxy's token (limitscope info shows it)"),
			"  Its calls show here as they happen, beside your prompts.")
	}
	out = append(out, "", st.Subtle.Render("  ? lists every key (tab out of the input first)."))
	for _, t := range m.targets.list {
		if !t.info.Available {
			out = append(out, "", st.Subtle.Render("  Targets marked NO KEY need their variable set (e.g. "+t.info.Missing+")."))
			break
		}
	}
	return out
}

func (m *Model) header(w int) string {
	key := fmt.Sprintf("%d/%d/%v/%v/%d", w, m.stats.calls, m.inFlight(), m.st.Dark, len(m.ext))
	if key != m.headerKey {
		m.headerKey, m.headerLine = key, m.renderHeader(w)
	}
	return m.headerLine
}

func (m *Model) renderHeader(w int) string {
	st := &m.st
	left := " " + st.Title.Render("limitscope") + " "
	if m.opts.Simulated {
		b := " SIMULATED "
		if m.opts.Scenario != "" {
			b = " SIMULATED (scenario: " + m.opts.Scenario + ") "
		}
		left += " " + st.Simulated.Render(b)
	} else {
		left += " " + st.Live.Render("LIVE")
	}
	// The proxy's badge, longest first: what fits of it stays.
	proxy := []string{""}
	if m.opts.ProxyAddr != "" {
		a := m.opts.ProxyAddr
		proxy = []string{
			"  " + st.Accent.Render("PROXY http://"+a) + st.Subtle.Render(" · token: limitscope info"),
			"  " + st.Accent.Render("PROXY "+a) + st.Subtle.Render(" · token: limitscope info"),
			"  " + st.Accent.Render("PROXY "+a),
		}
	}
	inflight := ""
	switch n := len(m.ext); {
	case m.inFlight() && n > 0:
		inflight = st.Accent.Render(fmt.Sprintf("● in flight (+%d proxied)", n)) + "  "
	case m.inFlight():
		inflight = st.Accent.Render("● in flight") + "  "
	case n > 0:
		inflight = st.Accent.Render(fmt.Sprintf("● %d proxied", n)) + "  "
	}
	for _, px := range proxy {
		l := left + px
		lw := ansi.StringWidth(l)
		nums := []string{m.stats.format(true), m.stats.format(false)}
		if m.opts.ProxyAddr != "" {
			nums = append(nums, m.stats.tiny())
		}
		for _, n := range nums {
			right := inflight + st.Subtle.Render(n+" ")
			gap := w - lw - ansi.StringWidth(right)
			if gap >= 1 {
				return l + strings.Repeat(" ", gap) + right
			}
		}
	}
	return fit(left+proxy[len(proxy)-1], w)
}

func (m *Model) footer(w int) string {
	key := fmt.Sprintf("%d/%d/%q/%v/%v/%v/%v/%v/%v/%v", w, m.statusGen, m.status, m.focus, m.mode, m.inFlight(), m.waiting(), m.canFailOver(), m.st.Dark, m.hist.tl != nil)
	if key != m.footerKey {
		m.footerKey, m.footerLine = key, m.renderFooter(w)
	}
	return m.footerLine
}

func (m *Model) renderFooter(w int) string {
	if m.status != "" {
		if m.statusErr {
			return fit(" "+m.st.StatusError.Render(m.status), w)
		}
		return fit(" "+m.st.Status.Render(m.status), w)
	}
	return fit(" "+m.help.ShortHelpView(helpKeys{m.keys, m}.ShortHelp()), w)
}
