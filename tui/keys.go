package tui

import "charm.land/bubbles/v2/key"

// KeyMap is every key the console answers to. Single-letter keys act only
// when the prompt input is not focused; chords work everywhere.
type KeyMap struct {
	Send       key.Binding
	Cancel     key.Binding
	FailOver   key.Binding
	Quit       key.Binding
	Interrupt  key.Binding // ctrl+c: cancels a call in flight, else quits
	NextFocus  key.Binding
	PrevFocus  key.Binding
	Input      key.Binding
	Help       key.Binding
	History    key.Binding
	Faults     key.Binding
	Attempts   key.Binding
	Mouse      key.Binding
	CopyAnswer key.Binding
	CopyCurl   key.Binding
	Up         key.Binding
	Down       key.Binding
	PageUp     key.Binding
	PageDown   key.Binding
	Newest     key.Binding // back to the newest (the log follows again)
	ClearStop  key.Binding // targets pane: what stopped a target, and clear it; demo menu: clear armed faults
	Probe      key.Binding // targets pane: probe the target's limits (a limits card)
	Toggle     key.Binding // targets pane: put a target in or out of the chain
	MoveUp     key.Binding // targets pane: move a target earlier in the chain
	MoveDown   key.Binding
	Filter     key.Binding // history: filter
	Open       key.Binding // history: open a call
	Back       key.Binding // history, help, faults: back
	Timeline   key.Binding // the timeline view (in the history: the session's)
	Left       key.Binding // timeline: the attempt before
	Right      key.Binding // timeline: the attempt after
	ZoomIn     key.Binding // timeline: fewer seconds a column
	ZoomOut    key.Binding // timeline: more seconds a column
}

// DefaultKeyMap returns the console's keys.
func DefaultKeyMap() KeyMap {
	b := func(keys []string, k, desc string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(k, desc))
	}
	return KeyMap{
		Send:       b([]string{"enter"}, "enter", "send"),
		Cancel:     b([]string{"esc"}, "esc", "cancel the call / leave input"),
		FailOver:   b([]string{"ctrl+f"}, "ctrl+f", "fail over now (to a fallback)"),
		Quit:       b([]string{"q"}, "q", "quit"),
		Interrupt:  b([]string{"ctrl+c"}, "ctrl+c", "cancel the call, or quit when idle"),
		NextFocus:  b([]string{"tab"}, "tab", "next pane"),
		PrevFocus:  b([]string{"shift+tab"}, "shift+tab", "previous pane"),
		Input:      b([]string{"i"}, "i", "type a prompt"),
		Help:       b([]string{"?"}, "?", "all keys"),
		History:    b([]string{"h"}, "h", "history"),
		Faults:     b([]string{"d"}, "d", "demo faults (simulated)"),
		Attempts:   b([]string{"a"}, "a", "show/hide the attempt log"),
		Mouse:      b([]string{"m"}, "m", "mouse wheel on/off"),
		CopyAnswer: b([]string{"y"}, "y", "copy the last answer"),
		CopyCurl:   b([]string{"c"}, "c", "copy the attempt as curl"),
		Up:         b([]string{"up", "k"}, "↑/k", "up"),
		Down:       b([]string{"down", "j"}, "↓/j", "down"),
		PageUp:     b([]string{"pgup", "ctrl+u"}, "pgup", "page up"),
		PageDown:   b([]string{"pgdown", "ctrl+d"}, "pgdn", "page down"),
		Newest:     b([]string{"G", "end"}, "G/end", "newest"),
		ClearStop:  b([]string{"x"}, "x", "clear a stop (STOPPED target)"),
		Probe:      b([]string{"p"}, "p", "probe the target's limits"),
		Toggle:     b([]string{"space"}, "space", "target in/out of chain"),
		MoveUp:     b([]string{"K", "shift+up"}, "K", "move target up"),
		MoveDown:   b([]string{"J", "shift+down"}, "J", "move target down"),
		Filter:     b([]string{"/"}, "/", "filter"),
		Open:       b([]string{"enter"}, "enter", "open"),
		Back:       b([]string{"esc"}, "esc", "back"),
		Timeline:   b([]string{"t"}, "t", "timeline (lanes, waits, failovers)"),
		Left:       b([]string{"left"}, "←", "attempt before"),
		Right:      b([]string{"right"}, "→", "attempt after"),
		ZoomIn:     b([]string{"+", "="}, "+", "zoom in"),
		ZoomOut:    b([]string{"-"}, "-", "zoom out"),
	}
}

// helpKeys adapts the KeyMap to bubbles/help with help that follows focus.
type helpKeys struct {
	k KeyMap
	m *Model
}

// ShortHelp implements help.KeyMap.
func (h helpKeys) ShortHelp() []key.Binding {
	k := h.k
	switch h.m.mode {
	case modeHistory:
		if h.m.hist.tl != nil {
			return timelineHelp(k)
		}
		return []key.Binding{k.Up, k.Down, k.Open, k.Filter, withHelp(k.Timeline, "t", "session timeline"), k.Back}
	case modeTimeline:
		return timelineHelp(k)
	case modeHelp:
		return []key.Binding{k.Back}
	case modeFaults:
		return []key.Binding{withHelp(k.ClearStop, "x", "clear armed faults"), k.Back}
	case modeConfirm:
		return []key.Binding{key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "clear the stop")), key.NewBinding(key.WithKeys("n"), key.WithHelp("n/esc", "keep it"))}
	}
	var out []key.Binding
	if h.m.focus == focusInput {
		out = append(out, k.Send)
		if h.m.inFlight() {
			out = append(out, withHelp(k.Cancel, "esc", "cancel"))
		} else {
			out = append(out, withHelp(k.Cancel, "esc", "leave input"))
		}
	} else {
		if h.m.inFlight() {
			out = append(out, withHelp(k.Cancel, "esc", "cancel"))
		}
		out = append(out, k.Input)
	}
	if h.m.canFailOver() { // only with a fallback left (the engine says)
		out = append(out, withHelp(k.FailOver, "ctrl+f", "fail over now"))
	}
	out = append(out, k.NextFocus)
	if h.m.focus != focusInput {
		if h.m.focus == focusTargets {
			out = append(out, k.Toggle, k.MoveUp, k.MoveDown)
			if h.m.opts.Probe != nil {
				out = append(out, k.Probe)
			}
			if h.m.targets.cursorStopped(h.m.now) {
				out = append(out, withHelp(k.ClearStop, "x", "clear the stop"))
			}
		}
		out = append(out, k.History, withHelp(k.Timeline, "t", "timeline"))
		if h.m.opts.Simulated && h.m.opts.Faults != nil {
			out = append(out, k.Faults)
		}
		out = append(out, k.Help, k.Quit)
	} else {
		out = append(out, withHelp(k.Help, "tab ?", "help"))
	}
	return out
}

// FullHelp implements help.KeyMap.
func (h helpKeys) FullHelp() [][]key.Binding {
	k := h.k
	targets := []key.Binding{k.Toggle, k.MoveUp, k.MoveDown, k.ClearStop, k.Attempts, k.Mouse}
	if h.m.opts.Probe != nil {
		targets = append(targets, k.Probe)
	}
	return [][]key.Binding{
		{k.Send, k.Cancel, k.FailOver, k.Interrupt, k.Quit, k.Timeline},
		{k.NextFocus, k.PrevFocus, k.Input, k.Up, k.Down, k.PageUp, k.PageDown, k.Newest},
		targets,
		{k.History, k.Faults, k.CopyAnswer, k.CopyCurl, k.Help},
	}
}

// timelineHelp is the timeline's keys.
func timelineHelp(k KeyMap) []key.Binding {
	return []key.Binding{withHelp(k.Left, "←/→", "attempt"), withHelp(k.Up, "↑/↓", "lane"),
		withHelp(k.PageUp, "pgup/pgdn", "scroll"), withHelp(k.ZoomIn, "+/-", "zoom"), k.Newest, k.Back}
}

func withHelp(b key.Binding, k, desc string) key.Binding {
	b.SetHelp(k, desc)
	return b
}
