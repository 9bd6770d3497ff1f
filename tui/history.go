package tui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/limitscope/limitscope/theme"
)

// historyView lists past calls from the store and opens one.
type historyView struct {
	gen       int
	loading   bool
	err       error
	calls     []CallSummary
	cursor    int
	filter    string
	filtering bool
	detail    *CallDetail
	detailErr error
	scroll    int

	// The timeline of a past session (t): its calls, read through History.
	tl        *tlog
	tview     timelineView
	tlLoading bool
	tlErr     error
}

// historyTimelineMsg carries a past session's calls for its timeline.
type historyTimelineMsg struct {
	gen   int
	calls []CallDetail
	err   error
}

// maxSessionCalls bounds the calls a past session's timeline reads.
const maxSessionCalls = 300

func (h *historyView) timelined(msg historyTimelineMsg) {
	if msg.gen != h.gen {
		return
	}
	h.tlLoading, h.tlErr = false, msg.err
	if msg.err != nil {
		return
	}
	calls := make([]CallDetail, len(msg.calls))
	for i := range msg.calls {
		calls[i] = cleanDetail(msg.calls[i])
	}
	h.tl = tlogOf(calls)
	h.tview = timelineView{cursor: -1, zoom: defaultZoom}
}

// openTimeline reads the calls of the session of the call under the cursor
// (those the list holds, up to maxSessionCalls) and shows their timeline.
func (m *Model) openTimeline() tea.Cmd {
	h := m.hist
	if len(h.calls) == 0 || m.opts.History == nil {
		return nil
	}
	pick := h.calls[h.cursor]
	if h.detail != nil {
		pick = h.detail.CallSummary
	}
	var ids []string
	for _, c := range h.calls {
		if len(ids) == maxSessionCalls {
			break
		}
		if c.ID == pick.ID || (pick.Session != "" && c.Session == pick.Session) {
			ids = append(ids, c.ID)
		}
	}
	if len(ids) == 0 {
		ids = []string{pick.ID}
	}
	h.gen++
	h.tlLoading, h.tlErr = true, nil
	gen, hist := h.gen, m.opts.History
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var out []CallDetail
		for _, id := range ids {
			d, err := hist.Show(ctx, id)
			if err != nil {
				return historyTimelineMsg{gen: gen, err: fmt.Errorf("reading call %s: %w", id, err)}
			}
			out = append(out, d)
		}
		return historyTimelineMsg{gen: gen, calls: out}
	}
}

func (h *historyView) listed(msg historyListMsg) {
	if msg.gen != h.gen {
		return
	}
	h.loading = false
	h.err = msg.err
	h.calls = cleanSummaries(msg.calls)
	h.cursor = min(h.cursor, max(0, len(h.calls)-1))
}

func (h *historyView) shown(msg historyShowMsg) {
	if msg.gen != h.gen {
		return
	}
	h.loading = false
	h.detailErr = msg.err
	if msg.err == nil {
		d := cleanDetail(msg.detail)
		h.detail = &d
		h.scroll = 0
	}
}

func (m *Model) openHistory() tea.Cmd {
	m.mode = modeHistory
	m.hist.detail = nil
	return m.loadHistory()
}

func (m *Model) loadHistory() tea.Cmd {
	h := m.hist
	h.gen++
	gen := h.gen
	if m.opts.History == nil {
		h.err = errNoHistory
		h.calls = nil
		return nil
	}
	h.loading, h.err = true, nil
	hist, f := m.opts.History, HistoryFilter{Text: h.filter, Limit: 500}
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		calls, err := hist.List(ctx, f)
		return historyListMsg{gen: gen, calls: calls, err: err}
	}
}

// historyKey dispatches by what the history shows: a past session's
// timeline, the filter being typed, a call opened, or the list.
func (m *Model) historyKey(msg tea.KeyPressMsg) tea.Cmd {
	h := m.hist
	switch {
	case h.tl != nil || h.tlLoading || h.tlErr != nil:
		return m.historyTimelineKey(msg)
	case h.filtering:
		return m.historyFilterKey(msg)
	case h.detail != nil || h.detailErr != nil:
		return m.historyCallKey(msg)
	}
	return m.historyListKey(msg)
}

// historyTimelineKey: a past session's timeline (the timeline's keys).
func (m *Model) historyTimelineKey(msg tea.KeyPressMsg) tea.Cmd {
	h, k := m.hist, m.keys.Timeline
	switch {
	case key.Matches(msg, k.Back):
		h.tl, h.tlLoading, h.tlErr = nil, false, nil
		h.gen++ // a load still on its way is dropped
	case key.Matches(msg, k.Quit):
		return m.quit()
	case key.Matches(msg, k.Help):
		m.openHelp()
	case h.tl != nil:
		h.tview.keyTimeline(msg, k, h.tl, time.Time{})
	}
	return nil
}

// historyFilterKey: the filter being typed; every other key types.
func (m *Model) historyFilterKey(msg tea.KeyPressMsg) tea.Cmd {
	h, k := m.hist, m.keys.History
	switch {
	case key.Matches(msg, k.Done):
		h.filtering = false
		return m.loadHistory()
	case key.Matches(msg, k.Erase):
		if r := []rune(h.filter); len(r) > 0 {
			h.filter = string(r[:len(r)-1])
		}
	default:
		if t := msg.Key().Text; t != "" {
			h.filter += t
		}
	}
	return nil
}

// historyCallKey: a call opened from the list.
func (m *Model) historyCallKey(msg tea.KeyPressMsg) tea.Cmd {
	h, k := m.hist, m.keys.History
	switch {
	case key.Matches(msg, k.Back):
		h.detail, h.detailErr = nil, nil
	case key.Matches(msg, k.Up):
		h.scroll = max(0, h.scroll-1)
	case key.Matches(msg, k.Down):
		h.scroll++
	case key.Matches(msg, k.Timeline):
		return m.openTimeline()
	case key.Matches(msg, k.Close):
		m.mode = modeMain
	case key.Matches(msg, k.Help):
		m.openHelp()
	case key.Matches(msg, k.Quit):
		return m.quit()
	}
	return nil
}

// historyListKey: the list of past calls.
func (m *Model) historyListKey(msg tea.KeyPressMsg) tea.Cmd {
	h, k := m.hist, m.keys.History
	switch {
	case key.Matches(msg, k.Back, k.Close):
		m.mode = modeMain
	case key.Matches(msg, k.Quit):
		return m.quit()
	case key.Matches(msg, k.Help):
		m.openHelp()
	case key.Matches(msg, k.Up):
		h.cursor = max(0, h.cursor-1)
	case key.Matches(msg, k.Down):
		h.cursor = min(max(0, len(h.calls)-1), h.cursor+1)
	case key.Matches(msg, k.Filter):
		h.filtering = true
	case key.Matches(msg, k.Timeline):
		return m.openTimeline()
	case key.Matches(msg, k.Open):
		return m.openCall()
	}
	return nil
}

// openCall opens the call under the cursor.
func (m *Model) openCall() tea.Cmd {
	h := m.hist
	if len(h.calls) == 0 || m.opts.History == nil {
		return nil
	}
	h.gen++
	gen, id, hist := h.gen, h.calls[h.cursor].ID, m.opts.History
	h.loading = true
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d, err := hist.Show(ctx, id)
		return historyShowMsg{gen: gen, detail: d, err: err}
	}
}

// view renders the history pane's inner lines.
func (h *historyView) view(w, ht int, st *theme.Styles) []string {
	var out []string
	switch {
	case h.tlErr != nil:
		out = append(out, st.Error.Render("Could not read that session's calls."), st.Detail.Render("  "+h.tlErr.Error()))
		return padLines(out, w, ht)
	case h.tlLoading:
		return padLines([]string{st.Subtle.Render("Reading the session's calls…")}, w, ht)
	case h.tl != nil:
		return h.tview.view(h.tl, w, ht, time.Time{}, st)
	}
	if h.detailErr != nil {
		out = append(out, st.Error.Render("Could not open that call."), st.Detail.Render("  "+h.detailErr.Error()))
		return padLines(out, w, ht)
	}
	if d := h.detail; d != nil {
		out = append(out, st.Accent.Render(fmt.Sprintf("call %s · %s · %s · served by %s · %d attempts · %s",
			d.ID, d.Time.Local().Format("2006-01-02 15:04:05"), d.Outcome, orDash(d.ServedBy), len(d.Attempts), fmtDur(d.Duration))))
		for _, l := range wrap(d.Prompt, w-2) {
			out = append(out, st.Prompt.Render("> "+l))
		}
		out = append(out, "")
		pw := minProviderColumn
		for i := range d.Attempts {
			pw = max(pw, len([]rune(providerLabel(d.Attempts[i].Target))))
		}
		for i := range d.Attempts {
			out = append(out, fit(rowText(&logRow{at: d.Attempts[i].StartedAt, attempt: d.Attempts[i]}, w < 98, pw), w))
		}
		out = append(out, "")
		out = append(out, wrap(d.Text, w)...)
		if h.scroll > 0 {
			out = out[min(h.scroll, len(out)):]
		}
		return padLines(out, w, ht)
	}
	f := "filter: " + h.filter
	if h.filtering {
		f += "▏"
	} else if h.filter == "" {
		f = "/ filters"
	}
	out = append(out, st.Subtle.Render(f))
	switch {
	case h.err != nil:
		out = append(out, st.Error.Render("The history is not available."), st.Detail.Render("  "+h.err.Error()))
		return padLines(out, w, ht)
	case h.loading && len(h.calls) == 0:
		out = append(out, st.Subtle.Render("Loading…"))
		return padLines(out, w, ht)
	case len(h.calls) == 0:
		out = append(out, st.Subtle.Render("No calls recorded yet."))
		return padLines(out, w, ht)
	}
	rows := ht - 1
	start := 0
	if h.cursor >= rows {
		start = h.cursor - rows + 1
	}
	for i := start; i < len(h.calls) && len(out) < ht; i++ {
		c := h.calls[i]
		who := c.ServedBy
		if who == "" && c.Target != "" {
			who = "✗ " + c.Target // nothing served it: the target it was for
		}
		line := fmt.Sprintf("%s  %-9s %s %2d att  %7s  %s", c.Time.Local().Format("01-02 15:04:05"), c.Outcome,
			fit(orDash(who), min(36, max(12, w-64))), c.Attempts, fmtDur(c.Duration), oneLine(c.PromptHead))
		line = fit(line, w)
		if i == h.cursor {
			line = st.Selected.Render(line)
		}
		out = append(out, line)
	}
	return padLines(out, w, ht)
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
