package tui

import (
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// view is what has the keys: a pane of the main screen, the prompt input,
// or an overlay. Each view has its key map (keys.go), its help and its
// handler.
type view int

const (
	viewInput view = iota
	viewConversation
	viewAttempts
	viewTargets
	viewFaults
	viewTimeline
	viewHistory
	viewHelp
	viewConfirm
	viewCount
)

// view is the view that has the keys now.
func (m *Model) view() view {
	switch m.mode {
	case modeHelp:
		return viewHelp
	case modeFaults:
		return viewFaults
	case modeConfirm:
		return viewConfirm
	case modeHistory:
		return viewHistory
	case modeTimeline:
		return viewTimeline
	}
	switch m.focus {
	case focusConversation:
		return viewConversation
	case focusAttempts:
		return viewAttempts
	case focusTargets:
		return viewTargets
	}
	return viewInput
}

// keyHandlers is each view's key handler.
var keyHandlers = [viewCount]func(*Model, tea.KeyPressMsg) tea.Cmd{
	viewInput:        (*Model).promptKey,
	viewConversation: (*Model).conversationKey,
	viewAttempts:     (*Model).attemptsKey,
	viewTargets:      (*Model).targetsKey,
	viewFaults:       (*Model).faultKey,
	viewTimeline:     (*Model).timelineKey,
	viewHistory:      (*Model).historyKey,
	viewHelp:         (*Model).helpKey,
	viewConfirm:      (*Model).confirmKey,
}

// key handles one key press: the chords that act everywhere, then the
// handler of the view that has the keys.
func (m *Model) key(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys.Global
	switch {
	case key.Matches(msg, k.Interrupt):
		if m.inFlight() {
			return m.cancelCall()
		}
		return m.quit()
	case key.Matches(msg, k.FailOver):
		return m.failOverNow()
	}
	return keyHandlers[m.view()](m, msg)
}

// promptKey: the prompt input has the focus; a key that is not the
// input's types.
func (m *Model) promptKey(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys.Input
	switch {
	case key.Matches(msg, k.Send):
		return m.send()
	case key.Matches(msg, k.Leave):
		// esc leaves the input, and cancels the call in flight too: the
		// keys typed after a cancel are keys, never a prompt.
		m.setFocus(focusConversation)
		if m.inFlight() {
			return m.cancelCall()
		}
		return nil
	case key.Matches(msg, m.keys.Main.NextFocus):
		m.setFocus(focusConversation)
		return nil
	case key.Matches(msg, m.keys.Main.PrevFocus):
		m.setFocus(focusTargets)
		return nil
	case key.Matches(msg, k.PageUp):
		m.scroll(-m.convHeight())
		return nil
	case key.Matches(msg, k.PageDown):
		m.scroll(m.convHeight())
		return nil
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	return cmd
}

// mainKey handles the keys of every pane; it reports whether msg was one.
func (m *Model) mainKey(msg tea.KeyPressMsg) (tea.Cmd, bool) {
	k := m.keys.Main
	switch {
	case key.Matches(msg, k.Cancel):
		if m.inFlight() {
			return m.cancelCall(), true
		}
		return nil, true
	case key.Matches(msg, k.Quit):
		return m.quit(), true
	case key.Matches(msg, k.NextFocus):
		m.setFocus((m.focus + 1) % focusCount)
	case key.Matches(msg, k.PrevFocus):
		m.setFocus((m.focus + focusCount - 1) % focusCount)
	case key.Matches(msg, k.Input):
		m.setFocus(focusInput)
	case key.Matches(msg, k.Help):
		m.openHelp()
	case key.Matches(msg, k.History):
		return m.openHistory(), true
	case key.Matches(msg, k.Timeline):
		m.mode = modeTimeline
	case key.Matches(msg, k.Faults):
		return m.openFaults(), true
	case key.Matches(msg, k.Attempts):
		m.showLog = !m.showLog
	case key.Matches(msg, k.Mouse):
		return m.toggleMouse(), true
	case key.Matches(msg, k.CopyAnswer):
		return m.copyAnswer(), true
	case key.Matches(msg, k.CopyCurl):
		return m.copyCurl(), true
	default:
		return nil, false
	}
	return nil, true
}

// conversationKey scrolls the conversation.
func (m *Model) conversationKey(msg tea.KeyPressMsg) tea.Cmd {
	if cmd, ok := m.mainKey(msg); ok {
		return cmd
	}
	k := m.keys.Conversation
	switch {
	case key.Matches(msg, k.Up):
		m.scroll(-1)
	case key.Matches(msg, k.Down):
		m.scroll(1)
	case key.Matches(msg, k.PageUp):
		m.scroll(-m.convHeight())
	case key.Matches(msg, k.PageDown):
		m.scroll(m.convHeight())
	case key.Matches(msg, k.Newest):
		m.conv.bottom()
	case key.Matches(msg, k.Type):
		m.setFocus(focusInput)
	default:
		return m.elsewhere(msg)
	}
	return nil
}

// attemptsKey moves the attempt log's selection.
func (m *Model) attemptsKey(msg tea.KeyPressMsg) tea.Cmd {
	if cmd, ok := m.mainKey(msg); ok {
		return cmd
	}
	k := m.keys.Attempts
	switch {
	case key.Matches(msg, k.Up):
		m.log.move(-1)
	case key.Matches(msg, k.Down):
		m.log.move(1)
	case key.Matches(msg, k.PageUp):
		m.log.move(-5)
	case key.Matches(msg, k.PageDown):
		m.log.move(5)
	case key.Matches(msg, k.Newest):
		m.log.sel = -1 // follow the newest again
	default:
		return m.elsewhere(msg)
	}
	return nil
}

// targetsKey picks, orders and acts on the targets.
func (m *Model) targetsKey(msg tea.KeyPressMsg) tea.Cmd {
	if cmd, ok := m.mainKey(msg); ok {
		return cmd
	}
	k := m.keys.Targets
	switch {
	case key.Matches(msg, k.Up):
		m.targets.moveCursor(-1)
	case key.Matches(msg, k.Down):
		m.targets.moveCursor(1)
	case key.Matches(msg, k.Toggle):
		return m.setChain(m.targets.toggle())
	case key.Matches(msg, k.MoveUp):
		return m.setChain(m.targets.reorder(-1))
	case key.Matches(msg, k.MoveDown):
		return m.setChain(m.targets.reorder(1))
	case key.Matches(msg, k.ClearStop):
		return m.stopKey()
	case key.Matches(msg, k.Probe):
		return m.probeKey()
	default:
		return m.elsewhere(msg)
	}
	return nil
}

// paneAction is a pane's keys that act there only: pressed in another
// pane, such a key says where it acts instead of doing nothing.
type paneAction struct {
	v     view
	where string
	keys  []key.Binding
}

func (m *Model) paneActions() []paneAction {
	t := m.keys.Targets
	return []paneAction{
		{viewTargets, "the targets pane", []key.Binding{t.Toggle, t.MoveUp, t.MoveDown, t.ClearStop, t.Probe}},
	}
}

// elsewhere answers a key the focused pane does not bind: when another
// pane acts on it, the status line says which.
func (m *Model) elsewhere(msg tea.KeyPressMsg) tea.Cmd {
	v := m.view()
	for _, p := range m.paneActions() {
		if p.v == v {
			continue
		}
		for _, b := range p.keys {
			if key.Matches(msg, b) {
				h := b.Help()
				return m.setStatus(h.Key+" acts in "+p.where+": "+h.Desc+"; tab to it first.", false)
			}
		}
	}
	return nil
}

// toggleMouse turns the mouse capture on or off.
func (m *Model) toggleMouse() tea.Cmd {
	m.mouse = !m.mouse
	if m.mouse {
		return m.setStatus("Mouse on: the wheel scrolls; the terminal's own selection needs shift.", false)
	}
	return m.setStatus("Mouse off: the terminal's own text selection works.", false)
}

// copyAnswer copies the last answer (OSC 52).
func (m *Model) copyAnswer() tea.Cmd {
	if m.lastAnswer == "" {
		return m.setStatus("No answer to copy yet.", true)
	}
	return tea.Batch(tea.SetClipboard(m.lastAnswer), m.setStatus("Copied the last answer (OSC 52).", false))
}

// timelineKey: the session's timeline.
func (m *Model) timelineKey(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys.Timeline
	switch {
	case key.Matches(msg, k.Back):
		m.mode = modeMain
	case key.Matches(msg, k.Quit):
		return m.quit()
	case key.Matches(msg, k.Help):
		m.openHelp()
	default:
		m.tview.keyTimeline(msg, k, m.tl, m.now)
	}
	return nil
}
