package tui

import (
	"strings"
	"time"

	"github.com/limitscope/limitscope/internal/sanitize"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// extPrefix tags the ids of calls the console did not start (the proxy's),
// so a proxied call's events never land on a typed call: typed ids are
// "hhmmss-N" (and "hhmmss-N.fK"), never with this prefix.
const extPrefix = "proxy:"

// isExt reports whether id is a proxied call's (tagged) id.
func isExt(id string) bool { return strings.HasPrefix(id, extPrefix) }

// Inbox carries the events of calls the console did not start (the
// proxy's, served inside the console) into the console's one feed: text
// deltas are coalesced, every other event is delivered, in order within a
// call. Make one with NewInbox, hand its Event method to the proxy
// (proxy.Options.Events) and set Options.Inbox; one Inbox feeds one console.
// Event is safe for concurrent use; events that arrive before the console
// runs wait for it.
type Inbox struct {
	f *feed
}

// NewInbox returns an empty inbox.
func NewInbox() *Inbox { return &Inbox{f: newFeed(nil)} }

// Event delivers one event of call c. It is called from the goroutines that
// run the calls: concurrently across calls, in order within one. Every call
// must begin with its EventCallStart (the engine's first event).
func (b *Inbox) Event(c retry.Call, ev retry.Event) {
	if b == nil {
		return
	}
	id := c.ID
	if id == "" {
		id = ev.CallID
	}
	ev.CallID = extPrefix + id
	if ev.Kind == retry.EventCallStart {
		at := ev.Time
		b.f.push(extStartMsg{
			id:     ev.CallID,
			short:  shortID(id),
			prompt: sanitize.Text(c.Prompt),
			route:  label(c.Route),
			client: label(c.Client),
			chain:  append([]stream.Target(nil), c.Chain...),
			at:     at,
		})
		return
	}
	b.f.add(ev)
}

// maxLabel caps a client's user agent or route on the screen.
const maxLabel = 80

// label makes a caller's user agent or route safe to show: no escape
// sequence, nothing shaped like a key, one line, capped.
func label(s string) string {
	s = oneLine(sanitize.Secrets(sanitize.Text(s)))
	if r := []rune(s); len(r) > maxLabel {
		s = string(r[:maxLabel-1]) + "…"
	}
	return s
}

// extStartMsg says a proxied call began: what the screen shows about it
// (the call's messages are not kept; the history has them).
type extStartMsg struct {
	id     string // tagged with extPrefix
	short  string // the proxy's request id, shortened for the screen
	prompt string
	route  string // the model the client asked for
	client string // its user agent
	chain  []stream.Target
	at     time.Time
}

// shortID shortens a proxy request id (24 hex digits) for the screen.
func shortID(id string) string {
	id = sanitize.Text(id)
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// extCall is a proxied call in flight.
type extCall struct {
	run       *run
	turn      *turn
	waitBlock *block // the live countdown of its wait, nil when none
}

// extStart opens a proxied call: its own turn in the conversation, marked
// as the proxy's, and its own run that only its events reach.
func (m *Model) extStart(msg extStartMsg) {
	if m.ext == nil {
		m.ext = map[string]*extCall{}
	}
	at := msg.at
	if at.IsZero() {
		at = m.now
	}
	var primary stream.Target
	if len(msg.chain) > 0 {
		primary = cleanTarget(msg.chain[0])
	}
	chain := make([]stream.Target, len(msg.chain))
	for i, t := range msg.chain {
		chain[i] = cleanTarget(t)
	}
	prompt := msg.prompt
	if strings.TrimSpace(prompt) == "" {
		prompt = "(no user message)"
	}
	t := m.conv.add(msg.id, prompt, primary, at)
	t.origin = proxyOrigin(msg)
	m.ext[msg.id] = &extCall{run: &run{id: msg.id, chain: chain, cancel: func() {}}, turn: t}
}

// proxyOrigin is the line above a proxied call's prompt: where it came from.
func proxyOrigin(msg extStartMsg) string {
	s := "via proxy"
	if msg.client != "" {
		s += " · client " + oneLine(msg.client)
	}
	if msg.route != "" {
		s += " · model " + oneLine(msg.route)
	}
	if msg.short != "" {
		s += " · id " + msg.short
	}
	return s
}

// extWaiting reports whether a proxied call is waiting.
func (m *Model) extWaiting() bool {
	for _, x := range m.ext {
		if x.run.wait != nil {
			return true
		}
	}
	return false
}

// extWait shows a proxied call's wait as a live countdown in its turn.
func (m *Model) extWait(x *extCall) {
	if x.waitBlock == nil {
		x.waitBlock = x.turn.note(noteWait, "")
	}
	x.waitBlock.text = waitHead(x.run.wait, m.targets.waitEnds(x.run.wait.Target), m.now)
	x.waitBlock.dirty = true
}

// extWaitOver freezes a proxied call's countdown into what it waited.
func (m *Model) extWaitOver(x *extCall) {
	if x.waitBlock == nil {
		return
	}
	w := x.run.wait
	if w != nil {
		s := "⏳ waited " + fmtDur(w.Duration) + " for " + providerTier(w.Target)
		if w.Asked > 0 {
			s += " (it asked " + fmtDur(w.Asked) + ", " + string(w.Source) + ")"
		} else if w.Source != "" {
			s += " (" + string(w.Source) + ")"
		}
		x.waitBlock.text = s
		x.waitBlock.dirty = true
	}
	x.waitBlock = nil
}

// extTick redraws the countdowns of proxied calls that wait.
func (m *Model) extTick() {
	for _, x := range m.ext {
		if x.run.wait != nil && x.waitBlock != nil {
			m.extWait(x)
		}
	}
}
