package tui

import (
	"time"

	tea "charm.land/bubbletea/v2"
)

// A paste the terminal does not bracket arrives as one key press a
// character. The prompt input re-measures its whole value on every insert,
// so a key at a time a long paste would cost time quadratic in its size.
// Past longInput characters, printable keys are gathered instead and
// inserted together: when a frame passes with no key, when the gathered
// keys are as many as the input already holds (so the inserts cost linear
// time in all), or before any other message, so that the order of keys and
// everything else is kept.

// longInput is the prompt length from which typed keys are gathered.
const longInput = 1024

// typedMsg is the frame timer of gathered keys: n is how many keys had been
// gathered when it was set.
type typedMsg struct{ n int }

// gathers reports whether k is a printable key for the focused prompt that
// is to be gathered rather than inserted at once.
func (m *Model) gathers(k tea.KeyPressMsg) bool {
	if m.focus != focusInput || m.mode != modeMain || k.Text == "" || k.Mod&^tea.ModShift != 0 {
		return false
	}
	for _, r := range k.Text {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return len(m.typed) > 0 || m.input.Position() >= longInput
}

// gather adds k's text to the keys gathered, inserting them all when they
// are as many as the prompt holds; it sets the frame timer on the first.
func (m *Model) gather(k tea.KeyPressMsg) tea.Cmd {
	m.typed = append(m.typed, []rune(k.Text)...)
	m.typedN++
	if len(m.typed) >= max(longInput, m.input.Position()) {
		m.flushTyped()
		return nil
	}
	return m.typedTimer()
}

// typedTimer sets the frame timer, unless it is set.
func (m *Model) typedTimer() tea.Cmd {
	if m.typedWait || len(m.typed) == 0 {
		return nil
	}
	m.typedWait = true
	n := m.typedN
	return m.after(frame, func(time.Time) tea.Msg { return typedMsg{n} })
}

// typedDue is the frame timer: with no key since it was set, the gathered
// keys are inserted; else it waits another frame.
func (m *Model) typedDue(t typedMsg) tea.Cmd {
	m.typedWait = false
	if t.n != m.typedN {
		return m.typedTimer()
	}
	m.flushTyped()
	return nil
}

// flushTyped inserts the gathered keys into the prompt, as one insert.
func (m *Model) flushTyped() {
	if len(m.typed) == 0 {
		return
	}
	m.input, _ = m.input.Update(tea.PasteMsg{Content: string(m.typed)})
	m.typed = m.typed[:0]
	m.inputGen++
}
