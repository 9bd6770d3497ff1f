package tui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// The demo menu (d, simulated sessions): a fault is a row of data, its
// words and the parameters it is injected with in one place; the menu is
// built from the list. Keys 1-9 then 0 arm the first ten, the cursor
// (↑/↓, enter) reaches every one.

// FaultInfo is one demo fault the menu offers: a simulator fault kind
// (sim.Fault* names), what the simulator answers, how long it lasts, and
// the parameters it is injected with (FaultRequest's).
type FaultInfo struct {
	Name        string
	Description string        // what the simulator answers
	Lasts       string        // "next request", "next 3 in 15s", "1 minute", "until cleared"
	RetryAfter  time.Duration // the delay the server names (failover-demo: how long it lasts)
	Count       int           // how many requests it hits (0 = 1)
	For         time.Duration // bounds it in time after its first hit (0: none)
	Code        string        // an optional variant
}

// DefaultFaultKinds is the demo faults offered when Options.FaultKinds is
// nil: the simulator's kinds that show retries, failover and stops best.
func DefaultFaultKinds() []FaultInfo {
	return []FaultInfo{
		{Name: "rate_limit", Description: "a 429 asking a 20s wait (retry-after)", Lasts: "refuses for 20s", RetryAfter: 20 * time.Second},
		{Name: "overload", Description: "overloaded: 529, 498 or 503 by provider", Lasts: "next 3 in 15s", Count: 3, For: 15 * time.Second},
		{Name: "spend_cap", Description: "a billing stop: a person must act", Lasts: "until cleared"},
		{Name: "mid_stream", Description: "HTTP 200, some text, then an error", Lasts: "next request"},
		{Name: "failover-demo", Description: "429s, overloads; fallbacks stay healthy", Lasts: "1 minute", RetryAfter: time.Minute},
		{Name: "daily_quota", Description: "the provider's per-day quota is spent", Lasts: "until cleared"},
		{Name: "cut", Description: "the stream breaks before its end event", Lasts: "next request"},
		{Name: "server_error", Description: "a 500 internal server error", Lasts: "next request"},
		{Name: "slow_down", Description: "429 slow_down: traffic grew too fast", Lasts: "next request"},
	}
}

// request is the fault as the simulator is asked for it, on provider.
func (f FaultInfo) request(provider string) FaultRequest {
	return FaultRequest{Provider: provider, Kind: f.Name, RetryAfter: f.RetryAfter, Count: f.Count, Code: f.Code, For: f.For}
}

// faultMenu is the demo menu's state.
type faultMenu struct {
	cursor int
}

// openFaults opens the demo menu (a simulated session only).
func (m *Model) openFaults() tea.Cmd {
	if !m.opts.Simulated || m.opts.Faults == nil {
		return m.setStatus("Demo faults work in a simulated session only (no keys set, or --sim).", true)
	}
	m.mode = modeFaults
	return m.loadArmed()
}

// faultKey: a digit arms its row's fault, the cursor any fault, x clears
// the armed ones.
func (m *Model) faultKey(msg tea.KeyPressMsg) tea.Cmd {
	k, n := m.keys.Faults, len(m.opts.FaultKinds)
	switch {
	case key.Matches(msg, k.Back):
		m.mode = modeMain
	case key.Matches(msg, k.Clear):
		return m.clearFaults()
	case key.Matches(msg, k.Help):
		m.openHelp()
	case key.Matches(msg, k.Up):
		m.faults.cursor = max(0, m.faults.cursor-1)
	case key.Matches(msg, k.Down):
		m.faults.cursor = max(0, min(n-1, m.faults.cursor+1))
	case key.Matches(msg, k.Arm):
		if m.faults.cursor < n {
			return m.inject(m.opts.FaultKinds[m.faults.cursor])
		}
	case key.Matches(msg, k.Pick):
		if i := strings.Index(faultDigits, msg.String()); i < n {
			return m.inject(m.opts.FaultKinds[i])
		}
		return m.setStatus(fmt.Sprintf("No fault on %s: the menu lists %d.", msg.String(), n), true)
	}
	return nil
}

// inject closes the menu and arms fk on the primary's provider.
func (m *Model) inject(fk FaultInfo) tea.Cmd {
	m.mode = modeMain
	provider := ""
	if len(m.chain) > 0 {
		provider = m.chain[0].Provider
	}
	faults, f := m.opts.Faults, fk.request(provider)
	what := fk.Name + " on " + orDash(provider)
	if fk.Lasts != "" {
		what += " (" + fk.Lasts + ")"
	}
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return faultDoneMsg{what: what, err: faults.Inject(ctx, f)}
	}
}

// faultsView is the demo menu's inner lines at w x h: what each key arms,
// from the list, then what is armed now.
func (m *Model) faultsView(w, h int) []string {
	st := &m.st
	prov := "-"
	if len(m.chain) > 0 {
		prov = m.chain[0].String()
	}
	var head, tail []string
	for _, l := range wrap("Each key arms one fault on the primary, "+prov+"; the next prompt meets it.", w) {
		head = append(head, st.Subtle.Render(l))
	}
	head = append(head, "")
	tail = append(tail, "")
	switch {
	case m.opts.Armed == nil:
	case m.armedErr != nil:
		tail = append(tail, st.Error.Render(fit("Could not list the armed faults: "+m.armedErr.Error(), w)))
	case len(m.armed) == 0:
		tail = append(tail, st.Subtle.Render("Nothing is armed now."))
	default:
		tail = append(tail, st.Warn.Render(fmt.Sprintf("Armed now (%d) · x clears them all:", len(m.armed))))
		for _, a := range m.armed {
			tail = append(tail, st.Warn.Render(fit("  "+armedWords(a, m.now), w)))
		}
	}
	tail = append(tail, st.Subtle.Render("esc closes."))
	rows := m.faultRows(w, max(1, h-len(head)-len(tail)))
	return append(append(head, rows...), tail...)
}

// faultRows are the menu's rows, a window of n around the cursor.
func (m *Model) faultRows(w, n int) []string {
	st := &m.st
	kinds := m.opts.FaultKinds
	m.faults.cursor = min(m.faults.cursor, max(0, len(kinds)-1))
	start := min(max(0, m.faults.cursor-n+1), max(0, len(kinds)-n))
	var out []string
	for i := start; i < len(kinds) && i < start+n; i++ {
		f := kinds[i]
		k := " "
		if i < len(faultDigits) {
			k = faultDigits[i : i+1]
		}
		if i == m.faults.cursor {
			line := fmt.Sprintf(" %s  %-13s %-15s %s", k, f.Name, orDash(f.Lasts), f.Description)
			out = append(out, st.Selected.Render(fit(line, w)))
			continue
		}
		line := fmt.Sprintf(" %s  %-13s %-15s ", st.Accent.Render(k), f.Name, orDash(f.Lasts))
		out = append(out, fit(line+st.Subtle.Render(f.Description), w))
	}
	return out
}
