package tui

import (
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// The help screen (?) shows the keys of the view it was opened from, its
// own first, each key map a titled section laid out in columns; it scrolls
// when the terminal is too short for it. Everything it shows comes from
// the live bindings (keys.go).

// helpState is the help screen's: the view it shows and the mode it goes
// back to.
type helpState struct {
	of     view
	back   mode
	scroll int
}

// openHelp shows the help of the view that has the keys now.
func (m *Model) openHelp() {
	m.helpOf = helpState{of: m.view(), back: m.mode}
	m.mode = modeHelp
}

// helpKey scrolls the help and closes it.
func (m *Model) helpKey(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys.Help
	page := max(1, m.helpHeight()-1)
	switch {
	case key.Matches(msg, k.Back):
		m.mode = m.helpOf.back
	case key.Matches(msg, k.Up):
		m.helpOf.scroll--
	case key.Matches(msg, k.Down):
		m.helpOf.scroll++
	case key.Matches(msg, k.PageUp):
		m.helpOf.scroll -= page
	case key.Matches(msg, k.PageDown):
		m.helpOf.scroll += page
	}
	m.helpOf.scroll = min(max(0, m.helpOf.scroll), max(0, len(m.helpLines(m.width-2))-m.helpHeight()))
	return nil
}

// helpHeight is the help's inner height: it takes the prompt input's rows
// too (nothing is typed while it shows).
func (m *Model) helpHeight() int { return m.bodyHeight() + 3 - 2 }

// helpTitle names the view whose keys show.
func (m *Model) helpTitle(lines int) string {
	title := "keys · " + m.keys.sections(m.helpOf.of)[0].title
	if more := lines - m.helpOf.scroll - m.helpHeight(); more > 0 {
		title += " (↓ more)"
	}
	return title
}

// helpView is the help screen's box.
func (m *Model) helpView(w int) []string {
	all := m.helpLines(w - 2)
	h := m.helpHeight()
	s := min(m.helpOf.scroll, max(0, len(all)-h))
	return m.box(m.helpTitle(len(all)), all[s:], w, h+2, false, false)
}

// helpLines are the help's lines at inner width w: a line on the letters
// (in the panes), then each section of the view's keys, a blank line
// between sections when the screen has room for them.
func (m *Model) helpLines(w int) []string {
	st := &m.st
	var intro []string
	if m.helpOf.of <= viewTargets {
		for _, l := range wrap("Letters act outside the prompt input (tab/esc leave it); chords everywhere.", w) {
			intro = append(intro, st.Subtle.Render(l))
		}
	}
	groups := m.keys.sections(m.helpOf.of)
	cols := helpCols(groups, w)
	var sections [][]string
	n := len(intro)
	for _, g := range groups {
		grid, _ := helpGrid(g.keys.FullHelp(), w, cols, st.Help.FullKey.Render, st.Help.FullDesc.Render)
		sec := append([]string{st.PaneTitle.Render(g.title)}, grid...)
		sections = append(sections, sec)
		n += len(sec)
	}
	spaced := n+len(sections) <= m.helpHeight()
	out := intro
	for i, sec := range sections {
		if spaced || (i == 0 && len(intro) > 0) {
			out = append(out, "")
		}
		out = append(out, sec...)
	}
	if len(out) > 0 && out[0] == "" {
		out = out[1:]
	}
	return out
}

// helpCols is how many columns every section fits in without cutting a
// word (at most 3), else one.
func helpCols(groups []keyGroup, w int) int {
	plain := func(s ...string) string { return strings.Join(s, " ") }
	for cols := 3; cols > 1; cols-- {
		fits := true
		for _, g := range groups {
			_, ok := helpGrid(g.keys.FullHelp(), w, cols, plain, plain)
			fits = fits && ok
		}
		if fits {
			return cols
		}
	}
	return 1
}

// helpGrid lays bindings out in cols columns of w/cols cells (down, then
// across), each column's keys aligned; it reports whether every entry fits
// whole.
func helpGrid(bs []key.Binding, w, cols int, keyStyle, descStyle func(...string) string) ([]string, bool) {
	rows := (len(bs) + cols - 1) / cols
	cw := w / cols
	out := make([]string, rows)
	ok := true
	for c := 0; c < cols; c++ {
		col := bs[min(c*rows, len(bs)):min((c+1)*rows, len(bs))]
		kw := 0
		for _, b := range col {
			kw = max(kw, ansi.StringWidth(b.Help().Key))
		}
		for r, b := range col {
			h := b.Help()
			cell := keyStyle(h.Key) + spaces(kw-ansi.StringWidth(h.Key)+1) + descStyle(h.Desc)
			room := cw
			if c < cols-1 {
				room--
			}
			ok = ok && ansi.StringWidth(cell) <= room
			if c < cols-1 {
				cell = fit(cell, cw-1) + " "
			}
			out[r] += cell
		}
	}
	return out, ok
}

func spaces(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat(" ", n)
}

// helpKeys adapts the KeyMap to bubbles/help with help that follows focus:
// the footer's short help.
type helpKeys struct {
	k KeyMap
	m *Model
}

// ShortHelp implements help.KeyMap.
func (h helpKeys) ShortHelp() []key.Binding {
	k, m := h.k, h.m
	switch m.mode {
	case modeHistory:
		if m.hist.tl != nil {
			return timelineHelp(k.Timeline)
		}
		hk := k.History
		return []key.Binding{hk.Up, hk.Down, hk.Open, hk.Filter, withHelp(hk.Timeline, "t", "session timeline"), hk.Back, hk.Help}
	case modeTimeline:
		return timelineHelp(k.Timeline)
	case modeHelp:
		return k.Help.FullHelp()
	case modeFaults:
		f := k.Faults
		return []key.Binding{withHelp(f.Pick, f.Pick.Help().Key, "arm"), withHelp(f.Arm, "↑/↓ enter", "pick"),
			withHelp(f.Clear, "x", "clear armed faults"), withHelp(f.Back, "esc", "back"), f.Help}
	case modeConfirm:
		return k.Confirm.FullHelp()
	}
	return h.mainHelp()
}

// mainHelp is the footer of the main screen: what the focused pane can do
// now.
func (h helpKeys) mainHelp() []key.Binding {
	k, m := h.k, h.m
	var out []key.Binding
	if m.focus == focusInput {
		out = append(out, k.Input.Send)
		if m.inFlight() {
			out = append(out, withHelp(k.Input.Leave, "esc", "cancel"))
		} else {
			out = append(out, withHelp(k.Input.Leave, "esc", "leave input"))
		}
	} else {
		if m.inFlight() {
			out = append(out, withHelp(k.Main.Cancel, "esc", "cancel"))
		}
		out = append(out, k.Main.Input)
	}
	if m.canFailOver() { // only with a fallback left (the engine says)
		out = append(out, withHelp(k.Global.FailOver, "ctrl+f", "fail over now"))
	}
	out = append(out, k.Main.NextFocus)
	if m.focus == focusInput {
		return append(out, withHelp(k.Main.Help, "tab ?", "help"))
	}
	if m.focus == focusTargets {
		t := k.Targets
		out = append(out, withHelp(t.Toggle, "space", "target in/out of chain"), withHelp(t.MoveUp, "K", "move target up"),
			withHelp(t.MoveDown, "J", "move target down"))
		if m.opts.Probe != nil {
			out = append(out, t.Probe)
		}
		if m.targets.cursorStopped(m.now) {
			out = append(out, withHelp(t.ClearStop, "x", "clear the stop"))
		}
	}
	out = append(out, k.Main.History, withHelp(k.Main.Timeline, "t", "timeline"))
	if m.opts.Simulated && m.opts.Faults != nil {
		out = append(out, k.Main.Faults)
	}
	return append(out, k.Main.Help, k.Main.Quit)
}

// FullHelp implements help.KeyMap: the sections of the view that has the
// keys.
func (h helpKeys) FullHelp() [][]key.Binding {
	var out [][]key.Binding
	for _, g := range h.k.sections(h.m.view()) {
		out = append(out, g.keys.FullHelp())
	}
	return out
}

// timelineHelp is the timeline's footer.
func timelineHelp(k TimelineKeys) []key.Binding {
	return []key.Binding{withHelp(k.Left, "←/→", "attempt"), withHelp(k.Up, "↑/↓", "lane"),
		withHelp(k.PageUp, "pgup/pgdn", "scroll"), withHelp(k.ZoomIn, "+/-", "zoom"), withHelp(k.Newest, "G/end", "newest"),
		withHelp(k.Back, "esc", "back"), k.Help}
}
