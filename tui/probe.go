package tui

import (
	"context"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/limitscope/limitscope/internal/sanitize"
	"github.com/limitscope/limitscope/stream"
)

// The p key probes the selected target's limits (Options.Probe)
// and shows its limits card in the conversation.

// probeTimeout bounds a probe from the console.
const probeTimeout = 3 * time.Minute

// probeState is the p key's state: the target a first press armed (a real
// provider asks for a second press) and the probe in flight.
type probeState struct {
	armed   stream.Target
	running bool
	seq     int
}

// probeDoneMsg carries a probe's card (or its error).
type probeDoneMsg struct {
	target stream.Target
	lines  []string
	err    error
}

// cursorTarget is the target under the targets pane's cursor.
func (p *targetsPane) cursorTarget() (TargetInfo, bool) {
	if p.cursor < 0 || p.cursor >= len(p.list) {
		return TargetInfo{}, false
	}
	return p.list[p.cursor].info, true
}

// probeKey probes the target under the cursor: at once on the simulator,
// on a second press for a real provider (the first says what it spends).
func (m *Model) probeKey() tea.Cmd {
	info, ok := m.targets.cursorTarget()
	switch {
	case m.opts.Probe == nil:
		return m.setStatus("Probing is not available in this session.", true)
	case !ok:
		return nil
	case !info.Available:
		return m.setStatus(info.Target.String()+" has no key: nothing to probe.", true)
	case m.probing.running:
		return m.setStatus("A probe is running; its card will show in the conversation.", true)
	}
	t := info.Target
	if !m.opts.Simulated && m.probing.armed != t {
		m.probing.armed = t
		plan := ""
		if m.opts.ProbePlan != nil {
			plan = " (" + m.opts.ProbePlan(t) + ")"
		}
		return m.setStatus("p again probes "+t.String()+" on the real provider"+plan+".", false)
	}
	m.probing.armed, m.probing.running = stream.Target{}, true
	m.probing.seq++
	probe := m.opts.Probe
	return tea.Batch(m.setStatus("Probing "+t.String()+"…", false), func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		defer cancel()
		lines, err := probe(ctx, t)
		return probeDoneMsg{target: t, lines: lines, err: err}
	})
}

// probeDone shows a probe's card as a turn of the conversation.
func (m *Model) probeDone(msg probeDoneMsg) tea.Cmd {
	m.probing.running = false
	if msg.err != nil {
		return m.setStatus("Probe of "+msg.target.String()+": "+sanitize.Text(msg.err.Error()), true)
	}
	t := m.conv.add("", "probe "+msg.target.String(), msg.target, m.now)
	for _, l := range msg.lines {
		kind := noteInfo
		if strings.HasPrefix(l, "limits card") {
			kind = noteOK
		}
		t.blocks = append(t.blocks, &block{kind: blockNote, note: kind, text: sanitize.Text(l), dirty: true})
	}
	t.done = true
	m.conv.invalidate()
	m.conv.bottom()
	return m.setStatus("Probed "+msg.target.String()+": its limits card is in the conversation and the history.", false)
}
