package tui

import (
	"strings"

	"charm.land/bubbles/v2/key"
)

// The console's keys, a key map per view (gh-dash's internal/tui/keys
// shape): each view's bindings and its FullHelp, which the help screen
// shows (help.go) and its handler reads (handlers.go). Single-letter keys
// act only when the prompt input is not focused; chords work everywhere.
// The help is derived from these bindings: help_honesty_test.go fails when
// one is missing from the help shown, and the key table of docs/commands.md is checked
// against them (readme_keys_test.go).

// KeyMap is every key the console answers to, a key map per view.
type KeyMap struct {
	Global       GlobalKeys
	Main         MainKeys
	Input        InputKeys
	Conversation ConversationKeys
	Attempts     AttemptsKeys
	Targets      TargetsKeys
	Faults       FaultsKeys
	Timeline     TimelineKeys
	History      HistoryKeys
	Help         HelpKeys
	Confirm      ConfirmKeys
}

func bind(help, desc string, keys ...string) key.Binding {
	return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
}

// DefaultKeyMap returns the console's keys.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Global:       defaultGlobalKeys(),
		Main:         defaultMainKeys(),
		Input:        defaultInputKeys(),
		Conversation: defaultConversationKeys(),
		Attempts:     defaultAttemptsKeys(),
		Targets:      defaultTargetsKeys(),
		Faults:       defaultFaultsKeys(),
		Timeline:     defaultTimelineKeys(),
		History:      defaultHistoryKeys(),
		Help:         defaultHelpKeys(),
		Confirm:      defaultConfirmKeys(),
	}
}

// GlobalKeys are the chords that act in every view, the prompt input too.
type GlobalKeys struct {
	Interrupt key.Binding // ctrl+c: cancels a call in flight, else quits
	FailOver  key.Binding
}

// defaultGlobalKeys are the chords.
func defaultGlobalKeys() GlobalKeys {
	return GlobalKeys{
		Interrupt: bind("ctrl+c", "cancel the call, or quit", "ctrl+c"),
		FailOver:  bind("ctrl+f", "fail over now (to a fallback)", "ctrl+f"),
	}
}

// FullHelp lists the chords.
func (k GlobalKeys) FullHelp() []key.Binding { return []key.Binding{k.Interrupt, k.FailOver} }

// MainKeys act in every pane of the main screen (not in the input, where
// letters type).
type MainKeys struct {
	Cancel     key.Binding
	Quit       key.Binding
	Input      key.Binding
	NextFocus  key.Binding // also from the prompt input
	PrevFocus  key.Binding // also from the prompt input
	Help       key.Binding
	History    key.Binding
	Timeline   key.Binding
	Faults     key.Binding
	Attempts   key.Binding
	Mouse      key.Binding
	CopyAnswer key.Binding
	CopyCurl   key.Binding
}

// defaultMainKeys are the keys of every pane.
func defaultMainKeys() MainKeys {
	return MainKeys{
		Cancel:     bind("esc", "cancel the call in flight", "esc"),
		Quit:       bind("q", "quit", "q"),
		Input:      bind("i", "type a prompt", "i"),
		NextFocus:  bind("tab", "next pane", "tab"),
		PrevFocus:  bind("shift+tab", "previous pane", "shift+tab"),
		Help:       bind("?", "all keys", "?"),
		History:    bind("h", "history", "h"),
		Timeline:   bind("t", "timeline (lanes, waits, failovers)", "t"),
		Faults:     bind("d", "demo faults (simulated)", "d"),
		Attempts:   bind("a", "show/hide the attempt log", "a"),
		Mouse:      bind("m", "mouse wheel on/off", "m"),
		CopyAnswer: bind("y", "copy the last answer", "y"),
		CopyCurl:   bind("c", "copy the attempt as curl", "c"),
	}
}

// FullHelp lists the keys of every pane.
func (k MainKeys) FullHelp() []key.Binding {
	return []key.Binding{k.Cancel, k.Quit, k.Input, k.Help, k.NextFocus, k.PrevFocus, k.History, k.Timeline,
		k.Faults, k.Attempts, k.Mouse, k.CopyAnswer, k.CopyCurl}
}

// InputKeys act while the prompt input has the focus (tab and shift+tab
// are MainKeys'); every other key types.
type InputKeys struct {
	Send     key.Binding
	Leave    key.Binding // esc: leaves the input, and cancels the call in flight
	PageUp   key.Binding // scroll the conversation
	PageDown key.Binding
}

// defaultInputKeys are the prompt input's keys.
func defaultInputKeys() InputKeys {
	return InputKeys{
		Send:     bind("enter", "send", "enter"),
		Leave:    bind("esc", "leave the input (and cancel)", "esc"),
		PageUp:   bind("pgup/ctrl+u", "scroll the conversation up", "pgup", "ctrl+u"),
		PageDown: bind("pgdn/ctrl+d", "scroll it down", "pgdown", "ctrl+d"),
	}
}

// FullHelp lists the prompt input's keys.
func (k InputKeys) FullHelp() []key.Binding {
	return []key.Binding{k.Send, k.Leave, k.PageUp, k.PageDown}
}

// ConversationKeys scroll the conversation.
type ConversationKeys struct {
	Up       key.Binding
	Down     key.Binding
	PageUp   key.Binding
	PageDown key.Binding
	Newest   key.Binding // back to the newest
	Type     key.Binding // enter: back to the prompt input
}

// defaultConversationKeys are the conversation's keys.
func defaultConversationKeys() ConversationKeys {
	return ConversationKeys{
		Up:       bind("↑/k", "scroll up", "up", "k"),
		Down:     bind("↓/j", "scroll down", "down", "j"),
		PageUp:   bind("pgup/ctrl+u", "page up", "pgup", "ctrl+u"),
		PageDown: bind("pgdn/ctrl+d", "page down", "pgdown", "ctrl+d"),
		Newest:   bind("G/end", "back to the newest", "G", "end"),
		Type:     bind("enter", "type a prompt", "enter"),
	}
}

// FullHelp lists the conversation's keys.
func (k ConversationKeys) FullHelp() []key.Binding {
	return []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Newest, k.Type}
}

// AttemptsKeys move the attempt log's selection.
type AttemptsKeys struct {
	Up       key.Binding
	Down     key.Binding
	PageUp   key.Binding
	PageDown key.Binding
	Newest   key.Binding // the log follows the newest again
}

// defaultAttemptsKeys are the attempt log's keys.
func defaultAttemptsKeys() AttemptsKeys {
	return AttemptsKeys{
		Up:       bind("↑/k", "select the one above", "up", "k"),
		Down:     bind("↓/j", "select the one below", "down", "j"),
		PageUp:   bind("pgup/ctrl+u", "5 up", "pgup", "ctrl+u"),
		PageDown: bind("pgdn/ctrl+d", "5 down", "pgdown", "ctrl+d"),
		Newest:   bind("G/end", "follow the newest", "G", "end"),
	}
}

// FullHelp lists the attempt log's keys.
func (k AttemptsKeys) FullHelp() []key.Binding {
	return []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Newest}
}

// TargetsKeys pick, order and act on targets.
type TargetsKeys struct {
	Up        key.Binding
	Down      key.Binding
	Toggle    key.Binding // a target in or out of the chain
	MoveUp    key.Binding // earlier in the chain
	MoveDown  key.Binding
	ClearStop key.Binding // what stopped a STOPPED target, and clear it
	Probe     key.Binding // probe the target's limits (a limits card)
}

// defaultTargetsKeys are the targets pane's keys.
func defaultTargetsKeys() TargetsKeys {
	return TargetsKeys{
		Up:        bind("↑/k", "target above", "up", "k"),
		Down:      bind("↓/j", "target below", "down", "j"),
		Toggle:    bind("space", "in/out of the chain", "space"),
		MoveUp:    bind("K/shift+↑", "move up the chain", "K", "shift+up"),
		MoveDown:  bind("J/shift+↓", "move down the chain", "J", "shift+down"),
		ClearStop: bind("x", "clear a stop (STOPPED)", "x"),
		Probe:     bind("p", "probe the target's limits", "p"),
	}
}

// FullHelp lists the targets pane's keys.
func (k TargetsKeys) FullHelp() []key.Binding {
	return []key.Binding{k.Up, k.Down, k.Toggle, k.MoveUp, k.MoveDown, k.ClearStop, k.Probe}
}

// FaultsKeys are the demo menu's: a digit arms its fault, the cursor
// reaches every fault.
type FaultsKeys struct {
	Pick  key.Binding // 1-9, then 0: the fault of that row (a digit with no row says so)
	Up    key.Binding
	Down  key.Binding
	Arm   key.Binding // enter: the fault under the cursor
	Clear key.Binding // every armed fault
	Help  key.Binding
	Back  key.Binding
}

// defaultFaultsKeys are the demo menu's keys.
func defaultFaultsKeys() FaultsKeys {
	return FaultsKeys{
		Pick:  bind("1-9/0", "arm the fault of that row", strings.Split(faultDigits, "")...),
		Up:    bind("↑/k", "fault above", "up", "k"),
		Down:  bind("↓/j", "fault below", "down", "j"),
		Arm:   bind("enter", "arm the fault under the cursor", "enter"),
		Clear: bind("x", "clear every armed fault", "x"),
		Help:  bind("?", "all keys", "?"),
		Back:  bind("esc/d/q", "close", "esc", "d", "q"),
	}
}

// FullHelp lists the demo menu's keys.
func (k FaultsKeys) FullHelp() []key.Binding {
	return []key.Binding{k.Pick, k.Up, k.Down, k.Arm, k.Clear, k.Help, k.Back}
}

// TimelineKeys move, scroll and zoom the timeline (the session's, and a
// past session's in the history).
type TimelineKeys struct {
	Left     key.Binding // the attempt before
	Right    key.Binding // the attempt after
	Up       key.Binding // the lane above
	Down     key.Binding
	PageUp   key.Binding // back in time
	PageDown key.Binding
	ZoomIn   key.Binding // fewer seconds a column
	ZoomOut  key.Binding
	Newest   key.Binding
	Help     key.Binding
	Back     key.Binding
	Quit     key.Binding
}

// defaultTimelineKeys are the timeline's keys.
func defaultTimelineKeys() TimelineKeys {
	return TimelineKeys{
		Left:     bind("←", "attempt before", "left"),
		Right:    bind("→", "attempt after", "right"),
		Up:       bind("↑/k", "lane above", "up", "k"),
		Down:     bind("↓/j", "lane below", "down", "j"),
		PageUp:   bind("pgup/ctrl+u", "scroll back", "pgup", "ctrl+u"),
		PageDown: bind("pgdn/ctrl+d", "scroll ahead", "pgdown", "ctrl+d"),
		ZoomIn:   bind("+/=", "zoom in", "+", "="),
		ZoomOut:  bind("-", "zoom out", "-"),
		Newest:   bind("G/end", "newest (follow now)", "G", "end"),
		Help:     bind("?", "all keys", "?"),
		Back:     bind("esc/t", "back", "esc", "t"),
		Quit:     bind("q", "quit", "q"),
	}
}

// FullHelp lists the timeline's keys.
func (k TimelineKeys) FullHelp() []key.Binding {
	return []key.Binding{k.Left, k.Right, k.Up, k.Down, k.PageUp, k.PageDown, k.ZoomIn, k.ZoomOut,
		k.Newest, k.Help, k.Back, k.Quit}
}

// HistoryKeys are the history's: the list, a call opened, the filter.
type HistoryKeys struct {
	Up       key.Binding // the list: the call above; a call: scroll
	Down     key.Binding
	Open     key.Binding
	Filter   key.Binding
	Timeline key.Binding // the timeline of the session of the call
	Back     key.Binding // a call: back to the list; the list: close
	Close    key.Binding // close the history
	Help     key.Binding
	Quit     key.Binding
	Done     key.Binding // filtering: apply the filter
	Erase    key.Binding // filtering: erase a letter
}

// defaultHistoryKeys are the history's keys.
func defaultHistoryKeys() HistoryKeys {
	return HistoryKeys{
		Up:       bind("↑/k", "up", "up", "k"),
		Down:     bind("↓/j", "down", "down", "j"),
		Open:     bind("enter", "open", "enter"),
		Filter:   bind("/", "filter", "/"),
		Timeline: bind("t", "the session's timeline", "t"),
		Back:     bind("esc", "back", "esc"),
		Close:    bind("h", "close the history", "h"),
		Help:     bind("?", "all keys", "?"),
		Quit:     bind("q", "quit", "q"),
		Done:     bind("enter/esc", "filtering: apply it", "enter", "esc"),
		Erase:    bind("backspace", "filtering: erase", "backspace"),
	}
}

// FullHelp lists the history's keys.
func (k HistoryKeys) FullHelp() []key.Binding {
	return []key.Binding{k.Up, k.Down, k.Open, k.Filter, k.Timeline, k.Back, k.Close, k.Help, k.Quit,
		k.Done, k.Erase}
}

// HelpKeys are the help screen's.
type HelpKeys struct {
	Up       key.Binding
	Down     key.Binding
	PageUp   key.Binding
	PageDown key.Binding
	Back     key.Binding
}

// defaultHelpKeys are the help screen's keys.
func defaultHelpKeys() HelpKeys {
	return HelpKeys{
		Up:       bind("↑/k", "scroll up", "up", "k"),
		Down:     bind("↓/j", "scroll down", "down", "j"),
		PageUp:   bind("pgup", "page up", "pgup"),
		PageDown: bind("pgdn", "page down", "pgdown"),
		Back:     bind("esc/?/q", "back", "esc", "?", "q"),
	}
}

// FullHelp lists the help screen's keys (its footer shows them).
func (k HelpKeys) FullHelp() []key.Binding {
	return []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Back}
}

// ConfirmKeys answer the confirmation of a real quota stop's clear.
type ConfirmKeys struct {
	Yes key.Binding
	No  key.Binding
}

// defaultConfirmKeys are the confirmation's keys.
func defaultConfirmKeys() ConfirmKeys {
	return ConfirmKeys{
		Yes: bind("y", "clear the stop", "y"),
		No:  bind("n/esc/q", "keep it", "n", "esc", "q"),
	}
}

// FullHelp lists the confirmation's keys (its footer shows them).
func (k ConfirmKeys) FullHelp() []key.Binding { return []key.Binding{k.Yes, k.No} }

// keyGroup is one view's key map as its help shows it: a titled section.
type keyGroup struct {
	title string
	keys  interface{ FullHelp() []key.Binding }
}

// faultDigits are the demo menu's keys, in row order: the first ten rows
// have one, the cursor reaches the rest.
const faultDigits = "1234567890"

// The sections' titles; the key table of docs/commands.md names them in its first
// column.
const (
	groupGlobal       = "everywhere"
	groupMain         = "every pane"
	groupInput        = "prompt input"
	groupConversation = "conversation"
	groupAttempts     = "attempt log"
	groupTargets      = "targets pane"
	groupFaults       = "demo faults"
	groupTimeline     = "timeline"
	groupHistory      = "history"
	groupHelp         = "help"
	groupConfirm      = "clear a stop?"
)

// groups is every key map, in the order of docs/commands.md's key table.
func (k KeyMap) groups() []keyGroup {
	return []keyGroup{
		{groupGlobal, k.Global}, {groupMain, k.Main}, {groupInput, k.Input},
		{groupConversation, k.Conversation}, {groupAttempts, k.Attempts}, {groupTargets, k.Targets},
		{groupFaults, k.Faults}, {groupTimeline, k.Timeline}, {groupHistory, k.History},
		{groupHelp, k.Help}, {groupConfirm, k.Confirm},
	}
}

// sections are the key maps a view's help shows, its own first.
func (k KeyMap) sections(v view) []keyGroup {
	pane := func(own keyGroup) []keyGroup {
		return []keyGroup{own, {groupMain, k.Main}, {groupGlobal, k.Global}, {groupInput, k.Input}}
	}
	switch v {
	case viewInput, viewConversation:
		return pane(keyGroup{groupConversation, k.Conversation})
	case viewAttempts:
		return pane(keyGroup{groupAttempts, k.Attempts})
	case viewTargets:
		return pane(keyGroup{groupTargets, k.Targets})
	case viewFaults:
		return []keyGroup{{groupFaults, k.Faults}, {groupGlobal, k.Global}}
	case viewTimeline:
		return []keyGroup{{groupTimeline, k.Timeline}, {groupGlobal, k.Global}}
	case viewHistory:
		return []keyGroup{{groupHistory, k.History}, {groupTimeline + " (t, a past session's)", k.Timeline}, {groupGlobal, k.Global}}
	case viewHelp:
		return []keyGroup{{groupHelp, k.Help}, {groupGlobal, k.Global}}
	case viewConfirm:
		return []keyGroup{{groupConfirm, k.Confirm}, {groupGlobal, k.Global}}
	}
	return nil
}

func withHelp(b key.Binding, k, desc string) key.Binding {
	b.SetHelp(k, desc)
	return b
}
