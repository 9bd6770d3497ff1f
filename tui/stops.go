package tui

import (
	"context"
	"fmt"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// targetStatesMsg carries what the engine knows of each target now
// (Options.TargetState, read by a command).
type targetStatesMsg struct {
	states map[stream.Target]retry.TargetState
}

// cooldownClearedMsg reports a cooldown cleared from the console.
type cooldownClearedMsg struct {
	cd     retry.Cooldown
	faults string // the provider whose armed demo faults were cleared with it ("" none)
	err    error
}

// armedMsg carries the simulator's armed faults (Options.Armed).
type armedMsg struct {
	faults []ArmedFault
	err    error
}

// faultsClearedMsg reports the demo menu's clear.
type faultsClearedMsg struct{ err error }

// refreshStates reads every target's state from the engine, off Update.
func (m *Model) refreshStates() tea.Cmd {
	get := m.opts.TargetState
	if get == nil {
		return nil
	}
	ts := make([]stream.Target, 0, len(m.targets.list))
	for _, s := range m.targets.list {
		ts = append(ts, s.info.Target)
	}
	return func() tea.Msg {
		out := make(map[stream.Target]retry.TargetState, len(ts))
		for _, t := range ts {
			out[t] = get(t)
		}
		return targetStatesMsg{states: out}
	}
}

// stopKey is the x key on the targets pane: on a STOPPED target it shows
// what stopped it and clears it (a simulated stop at once, a real one after
// a confirmation).
func (m *Model) stopKey() tea.Cmd {
	if len(m.targets.list) == 0 {
		return nil
	}
	s := m.targets.list[m.targets.cursor]
	if word, _ := s.state(m.now, &m.st); word != "STOPPED" {
		return m.setStatus(s.info.Target.String()+" is not stopped: x clears a quota stop on a STOPPED target.", true)
	}
	if s.cooldown == nil {
		return m.setStatus(s.info.Target.String()+" stopped: "+oneLine(s.stopWords)+" (no cooldown record to clear).", true)
	}
	cd := *s.cooldown
	if m.opts.ClearCooldown == nil {
		return m.setStatus("Stopped by "+cooldownWords(cd)+". Clear it with: limitscope cooldowns clear "+cd.Scope, true)
	}
	if m.opts.Simulated {
		// A simulated stop is cleared whole: the cooldown and the demo
		// fault still armed on the provider, or the next prompt meets it.
		return m.clearCooldown(cd, s.info.Target.Provider)
	}
	m.confirm = &cd
	m.mode = modeConfirm
	return nil
}

// confirmKey answers the confirmation of a real cooldown's clear.
func (m *Model) confirmKey(msg tea.KeyPressMsg) tea.Cmd {
	switch k := m.keys.Confirm; {
	case key.Matches(msg, k.Yes):
		cd := *m.confirm
		m.confirm, m.mode = nil, modeMain
		return m.clearCooldown(cd, "")
	case key.Matches(msg, k.No):
		m.confirm, m.mode = nil, modeMain
		return m.setStatus("Kept the stop.", false)
	}
	return nil
}

// clearCooldown clears cd and, for a simulated stop (provider set), the
// faults armed on provider.
func (m *Model) clearCooldown(cd retry.Cooldown, provider string) tea.Cmd {
	clearFn, armed := m.opts.ClearCooldown, m.opts.Armed
	if armed == nil {
		provider = ""
	}
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := clearFn(ctx, cd.Scope); err != nil {
			return cooldownClearedMsg{cd: cd, err: err}
		}
		if provider != "" {
			if err := armed.ClearFaults(ctx, provider); err != nil {
				return cooldownClearedMsg{cd: cd, err: fmt.Errorf("the stop is cleared, but the faults armed on %s are not: %w", provider, err)}
			}
		}
		return cooldownClearedMsg{cd: cd, faults: provider}
	}
}

func (m *Model) cooldownCleared(msg cooldownClearedMsg) tea.Cmd {
	if msg.err != nil {
		return m.setStatus("Could not clear the stop: "+msg.err.Error(), true)
	}
	m.targets.unstop(msg.cd.Scope)
	kind := "the stop"
	if m.opts.Simulated {
		kind = "the simulated stop"
	}
	also := ""
	if msg.faults != "" {
		also = " and the demo faults armed on " + msg.faults
	}
	return tea.Batch(m.setStatus("Cleared "+kind+also+"; the next prompt is sent ("+cooldownWords(msg.cd)+").", false), m.refreshStates(), m.loadArmed())
}

// cooldownWords says what a cooldown is: "insufficient_quota on
// openai/gpt-5.4-mini: You exceeded…".
func cooldownWords(cd retry.Cooldown) string {
	s := orDash(cd.Code) + " on " + orDash(cd.Target)
	if cd.Message != "" {
		s += ": " + oneLine(cd.Message)
	}
	return s
}

// confirmLines is the confirmation screen of a real cooldown's clear.
func (m *Model) confirmLines(w int) []string {
	cd := m.confirm
	st := &m.st
	var out []string
	add := func(s string, style func(...string) string) {
		for _, l := range wrap(s, w) {
			out = append(out, style(l))
		}
	}
	add("A quota stop blocks "+orDash(cd.Target)+": a person must act on the account.", st.Error.Render)
	out = append(out, "")
	add("code: "+orDash(cd.Code), st.Base.Render)
	if cd.Message != "" {
		add("the provider said: "+oneLine(cd.Message), st.Base.Render)
	}
	add("scope: "+cd.Scope, st.Subtle.Render)
	if !cd.Since.IsZero() {
		add("since: "+cd.Since.Local().Format("2006-01-02 15:04"), st.Subtle.Render)
	}
	if cd.Until.IsZero() {
		add("until: cleared", st.Subtle.Render)
	} else {
		add("until: "+cd.Until.Local().Format("2006-01-02 15:04")+" (in "+fmtCountdown(m.now, cd.Until)+")", st.Subtle.Render)
	}
	out = append(out, "")
	add("Clear it only once the account can answer again (plan, billing, spend limit): a call sent too early meets the same stop.", st.Warn.Render)
	out = append(out, "")
	add("y clears it · n or esc keeps it", st.Accent.Render)
	return out
}

// loadArmed lists the simulator's armed faults, off Update.
func (m *Model) loadArmed() tea.Cmd {
	a := m.opts.Armed
	if a == nil {
		return nil
	}
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		fs, err := a.Armed(ctx)
		return armedMsg{faults: fs, err: err}
	}
}

// clearFaults clears every armed fault (and the simulated stops).
func (m *Model) clearFaults() tea.Cmd {
	a := m.opts.Armed
	if a == nil {
		return m.setStatus("This simulator cannot list or clear its faults.", true)
	}
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return faultsClearedMsg{err: a.ClearFaults(ctx, "")}
	}
}

// armedWords says what an armed fault still does.
func armedWords(f ArmedFault, now time.Time) string {
	s := f.Kind + " on " + orDash(f.Provider)
	switch {
	case f.Left > 0:
		s += fmt.Sprintf(" · %d request%s left", f.Left, map[bool]string{true: "", false: "s"}[f.Left == 1])
	case !f.Until.IsZero():
		s += " · " + fmtCountdown(now, f.Until) + " left"
	default:
		s += " · until cleared"
	}
	return s
}
