package tui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"github.com/limitscope/limitscope/internal/sanitize"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/theme"
)

type focus int

const (
	focusInput focus = iota
	focusConversation
	focusAttempts
	focusTargets
	focusCount
)

type mode int

const (
	modeMain mode = iota
	modeHelp
	modeHistory
	modeFaults
	modeConfirm  // clearing a real cooldown: what stopped it, y or n
	modeTimeline // the session's timeline (timeline_view.go)
)

// Minimum terminal size; below it the screen says what it needs.
const (
	minWidth  = 60
	minHeight = 16
)

// tickMsg is the one clock tick that drives every countdown.
type tickMsg struct{ gen int }

// statusClearMsg clears the status line if it still shows message gen.
type statusClearMsg struct{ gen int }

// faultDoneMsg reports a demo fault injection.
type faultDoneMsg struct {
	what string
	err  error
}

// historyListMsg and historyShowMsg carry history loads, tagged with the
// request's generation so a late answer never replaces a newer one.
type historyListMsg struct {
	gen   int
	calls []CallSummary
	err   error
}

type historyShowMsg struct {
	gen    int
	detail CallDetail
	err    error
}

// controller is the part of *retry.Control the console uses: fail over now,
// and whether a target is left to move to.
type controller interface {
	FailOver() bool
	CanFailOver() bool
}

// run is one engine run of a call: one call, one run, also when the user
// fails over (the engine moves on through Call.Control).
type run struct {
	id        string
	chain     []stream.Target
	cancel    context.CancelFunc
	ctl       controller  // nil for a proxied call (its client's)
	canFail   bool        // ctl.CanFailOver as of the last event or tick
	wait      *retry.Wait // the wait in progress (its words), nil when none; its end is its target's (targetWait)
	cancelled bool
	text      sanitize.Filter // the current attempt's deltas, made safe for the screen
}

// Model is the console's root model.
type Model struct {
	opts   Options
	keys   KeyMap
	st     theme.Styles
	dark   bool
	help   help.Model
	input  textinput.Model
	feed   *feed
	now    time.Time
	width  int
	height int

	mode  mode
	focus focus

	chain   []stream.Target
	targets *targetsPane
	conv    *transcript
	log     *attemptLog
	stats   sessionStats
	hist    *historyView
	fleet   *fleetView    // nil without Options.Fleet
	tl      *tlog         // the session's attempts and waits: the strips and the timeline
	tview   *timelineView // the timeline view's cursor and window

	callSeq int
	call    *run                // the run in flight, nil when idle
	turn    *turn               // the turn of the call in flight
	ext     map[string]*extCall // proxied calls in flight, by tagged id
	prompts map[string]string

	showLog bool       // below 24 rows the attempt log hides behind a key
	probing probeState // the p key's confirmation and the probe in flight (probe.go)
	helpOf  helpState  // the help screen's view and scroll (help.go)
	faults  faultMenu  // the demo menu's cursor (faults.go)
	mouse   bool

	status      string
	statusErr   bool
	statusGen   int
	statusUntil statusScope // the status is about a call: it goes when that call starts or ends
	ticking     bool
	statesStale bool // a call ended: read the targets' states again
	tickGen     int
	quitting    bool
	lastAnswer  string
	lastAttempt *retry.Attempt
	lastPrompt  string
	confirm     *retry.Cooldown // the cooldown modeConfirm would clear
	armed       []ArmedFault    // the simulator's armed faults, as last listed
	armedErr    error

	runs       *sync.WaitGroup // runs whose goroutine has not returned
	chrome     map[chromeKey]*chrome
	headerKey  string
	headerLine string
	footerKey  string
	footerLine string
	inputKey   string
	inputLine  string
	inputGen   int    // counts the prompt input's changes: its view's cache key
	typed      []rune // printable keys gathered for a long prompt (typed.go)
	typedN     int    // keys gathered so far
	typedWait  bool   // the frame timer of the gathered keys is set

	// after schedules a message (tea.Tick); model tests replace it.
	after func(d time.Duration, fn func(time.Time) tea.Msg) tea.Cmd
	// control is what the console steers a call with; model tests replace
	// it (the engine sets what a *retry.Control can do).
	control func(*retry.Control) controller
}

// New builds the console's model. Run uses it; tests drive it directly.
func New(opts Options) *Model {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.FaultKinds == nil {
		opts.FaultKinds = DefaultFaultKinds()
	}
	m := &Model{
		opts:    opts,
		keys:    DefaultKeyMap(),
		dark:    true,
		help:    help.New(),
		input:   textinput.New(),
		feed:    newFeed(opts.Recorder),
		now:     opts.Now(),
		chain:   slices.Clone(opts.Chain),
		conv:    newTranscript(),
		log:     newAttemptLog(),
		hist:    &historyView{},
		prompts: map[string]string{},
		showLog: true,
		mouse:   opts.Mouse,
		after:   tea.Tick,
		control: func(c *retry.Control) controller { return c },
		chrome:  map[chromeKey]*chrome{},
		runs:    &sync.WaitGroup{},
	}
	if opts.Inbox != nil {
		// Proxied calls and typed calls share one feed: one goroutine
		// delivers both, in order within each call. Nothing reads rec for
		// the inbox's events, so setting it here races with none of them.
		m.feed = opts.Inbox.f
		m.feed.rec = opts.Recorder
	}
	m.targets = newTargetsPane(opts.Targets, m.chain)
	m.tl, m.tview = newTlog(m.chain), newTimelineView()
	m.targets.tl = m.tl
	m.targets.cooldowns(opts.Cooldowns, m.now)
	m.initFleet()
	m.input.Placeholder = "Type a prompt and press enter"
	m.input.Prompt = "> "
	m.input.SetVirtualCursor(false)
	m.input.Focus()
	m.applyTheme()
	return m
}

func (m *Model) applyTheme() {
	m.st = theme.New(m.dark, m.opts.NoColor)
	clear(m.chrome)
	m.headerKey, m.footerKey, m.inputKey = "", "", ""
	m.help.Styles = m.st.Help
	m.input.SetStyles(m.st.Input)
	m.conv.invalidate()
	m.log.invalidate()
	m.targets.invalidate()
	m.tview.invalidate()
	m.hist.tview.invalidate()
}

// Init asks the terminal for its background colour (light or dark).
func (m *Model) Init() tea.Cmd {
	return tea.Batch(tea.RequestBackgroundColor, m.refreshStates(), m.fleetListen())
}

func (m *Model) inFlight() bool { return m.call != nil }

func (m *Model) waiting() bool { return m.call != nil && m.call.wait != nil }

// canFailOver reports whether ctrl+f can move the call in flight now (the
// engine says a target is left).
func (m *Model) canFailOver() bool { return m.call != nil && m.call.canFail }

// refreshControl reads, once per batch of events or tick, whether the call
// can fail over now (a mutex read, no I/O).
func (m *Model) refreshControl() {
	if m.call != nil && m.call.ctl != nil {
		m.call.canFail = m.call.ctl.CanFailOver()
	}
}

// Update applies one message. It does no I/O: side effects are commands.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		if m.gathers(msg) {
			return m, m.gather(msg)
		}
	case typedMsg:
		return m, m.typedDue(msg)
	}
	m.flushTyped() // the keys gathered come before anything else
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.resize(msg)
	case tea.BackgroundColorMsg:
		m.dark = msg.IsDark()
		m.applyTheme()
	case tickMsg:
		return m, m.tick(msg)
	case statusClearMsg:
		if msg.gen == m.statusGen {
			m.status = ""
		}
	case eventsMsg:
		return m, m.events(msg)
	case targetStatesMsg:
		m.now = m.opts.Now()
		m.targets.states(msg.states, m.now)
		return m, m.ensureTick()
	case extStartMsg:
		m.now = m.opts.Now()
		m.extStart(msg)
		return m, m.ensureTick()
	case runDoneMsg:
		m.now = m.opts.Now()
		return m, m.runDone(msg)
	case fleetMsg:
		return m, m.fleetUpdate(msg)
	case tea.MouseWheelMsg:
		m.wheel(msg)
	case tea.PasteMsg:
		return m, m.paste(msg)
	case tea.KeyPressMsg:
		m.now = m.opts.Now()
		m.inputGen++ // a key may edit the prompt
		return m, m.key(msg)
	default:
		return m, m.commandDone(msg)
	}
	return m, nil
}

// commandDone applies the answer of a command: a load, a clear, an
// injection, a probe.
func (m *Model) commandDone(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case cooldownClearedMsg:
		return m.cooldownCleared(msg)
	case armedMsg:
		m.armed, m.armedErr = msg.faults, msg.err
	case faultsClearedMsg:
		if msg.err != nil {
			return m.setStatus("Could not clear the faults: "+msg.err.Error(), true)
		}
		return tea.Batch(m.setStatus("Cleared every armed fault.", false), m.loadArmed(), m.refreshStates())
	case faultDoneMsg:
		if msg.err != nil {
			return m.setStatus(fmt.Sprintf("Could not inject %s: %v", msg.what, msg.err), true)
		}
		return tea.Batch(m.setCallStatus("Injected "+msg.what+": send a prompt to see it.", statusUntilSend), m.loadArmed())
	case probeDoneMsg:
		return m.probeDone(msg)
	case historyListMsg:
		m.hist.listed(msg)
	case historyShowMsg:
		m.hist.shown(msg)
	case historyTimelineMsg:
		m.hist.timelined(msg)
	}
	return nil
}

func (m *Model) resize(msg tea.WindowSizeMsg) {
	m.width, m.height = msg.Width, msg.Height
	m.input.SetWidth(max(1, m.width-6))
	m.help.SetWidth(m.width)
	m.conv.invalidate()
	m.log.invalidate()
	m.targets.invalidate()
}

// tick is the clock tick: every countdown on screen reads the new now.
func (m *Model) tick(msg tickMsg) tea.Cmd {
	if msg.gen != m.tickGen {
		return nil
	}
	m.now = m.opts.Now()
	m.ticking = false
	m.refreshControl()
	m.extTick()
	return m.ensureTick()
}

// events applies a frame's engine events.
func (m *Model) events(msg eventsMsg) tea.Cmd {
	m.now = m.opts.Now()
	for i := range msg.events {
		m.applyEvent(msg.events[i])
	}
	m.refreshControl()
	cmd := m.ensureTick()
	if m.statesStale {
		m.statesStale = false
		cmd = tea.Batch(cmd, m.refreshStates())
	}
	return cmd
}

// wheel scrolls the conversation (mouse capture on).
func (m *Model) wheel(msg tea.MouseWheelMsg) {
	switch msg.Mouse().Button {
	case tea.MouseWheelUp:
		m.scroll(-3)
	case tea.MouseWheelDown:
		m.scroll(3)
	}
}

// paste goes into the prompt input when it has the focus.
func (m *Model) paste(msg tea.PasteMsg) tea.Cmd {
	m.inputGen++
	if m.focus != focusInput || m.mode != modeMain {
		return nil
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	return cmd
}

func (m *Model) setChain(chain []stream.Target, note string) tea.Cmd {
	m.chain = chain
	if note != "" {
		return m.setStatus(note, false)
	}
	return nil
}

func (m *Model) setFocus(f focus) {
	m.focus = f
	if f == focusInput {
		m.input.Focus()
	} else {
		m.input.Blur()
	}
	m.targets.focused = f == focusTargets
	m.targets.invalidate()
	if m.log.focused && f != focusAttempts {
		m.log.sel = -1 // a selection lives while the log has the focus
	}
	m.log.focused = f == focusAttempts
	m.log.invalidate()
}

func (m *Model) scroll(n int) {
	m.conv.scroll(n, m.convHeight())
}

func (m *Model) quit() tea.Cmd {
	m.quitting = true
	if m.call != nil {
		m.call.cancel()
	}
	return tea.Quit
}

// statusScope says when a status stops being true.
type statusScope int

const (
	statusTimed     statusScope = iota // clears after a few seconds
	statusUntilSend                    // also when the next call starts ("send a prompt to see it")
	statusUntilEnd                     // also when the call in flight ends ("Cancelling the call…")
)

// setCallStatus is setStatus for a message about a call, cleared as soon
// as it goes stale (until).
func (m *Model) setCallStatus(s string, until statusScope) tea.Cmd {
	cmd := m.setStatus(s, false)
	m.statusUntil = until
	return cmd
}

// staleStatus clears the status line when it was about a call and the
// call has now started (start) or ended.
func (m *Model) staleStatus(start bool) {
	if (start && m.statusUntil == statusUntilSend) || (!start && m.statusUntil == statusUntilEnd) {
		m.status, m.statusUntil = "", statusTimed
		m.statusGen++
	}
}

// setStatus shows a message on the status line; it clears after a few
// seconds.
func (m *Model) setStatus(s string, isErr bool) tea.Cmd {
	m.statusGen++
	m.status, m.statusErr = s, isErr
	m.statusUntil = statusTimed
	gen := m.statusGen
	return m.after(5*time.Second, func(time.Time) tea.Msg { return statusClearMsg{gen} })
}

// ensureTick starts the clock tick if something on screen counts down and it
// is not running. It stops by itself when nothing does.
func (m *Model) ensureTick() tea.Cmd {
	if m.ticking {
		return nil
	}
	d := m.tickEvery()
	if d == 0 {
		return nil
	}
	m.ticking = true
	m.tickGen++
	gen := m.tickGen
	return m.after(d, func(time.Time) tea.Msg { return tickMsg{gen} })
}

// tickEvery is how often the clock must tick now: fast during a wait, once a
// second while a call runs or a near reset counts down, never when idle.
func (m *Model) tickEvery() time.Duration {
	if m.waiting() || m.extWaiting() {
		return 250 * time.Millisecond
	}
	if m.call != nil || len(m.ext) > 0 || m.targets.counting(m.now) {
		return time.Second
	}
	return 0
}

// send starts a call with the prompt in the input.
func (m *Model) send() tea.Cmd {
	m.now = m.opts.Now()
	prompt := strings.TrimSpace(m.input.Value())
	if prompt == "" {
		return nil
	}
	if m.inFlight() {
		return m.setStatus("A call is in flight: wait for it, or press esc to cancel it.", true)
	}
	if m.opts.Runner == nil {
		return m.setStatus("No engine is connected: this console cannot send.", true)
	}
	if len(m.chain) == 0 {
		return m.setStatus("The chain is empty: tab to the targets pane and press space on a target.", true)
	}
	var missing []string
	for _, t := range m.chain {
		if ti, ok := m.targets.info(t); ok && !ti.Available {
			missing = append(missing, t.String()+" needs "+ti.Missing)
		}
	}
	if len(missing) == len(m.chain) {
		return m.setStatus("No target in the chain has a key: "+strings.Join(missing, "; ")+".", true)
	}
	m.input.Reset()
	m.callSeq++
	id := fmt.Sprintf("%s-%d", m.now.Format("150405"), m.callSeq)
	chain := make([]stream.Target, 0, len(m.chain))
	for _, t := range m.chain {
		if ti, ok := m.targets.info(t); ok && !ti.Available {
			continue
		}
		chain = append(chain, t)
	}
	m.lastPrompt = prompt
	m.turn = m.conv.add(id, prompt, chain[0], m.now)
	m.conv.bottom()
	return m.startRun(id, chain)
}

// startRun runs the call (or its continuation) on its own goroutine; its
// events and its end come back through the feed.
func (m *Model) startRun(id string, chain []stream.Target) tea.Cmd {
	ctx, cancel := context.WithCancel(context.Background())
	ctl := retry.NewControl()
	r := &run{id: id, chain: chain, cancel: cancel, ctl: m.control(ctl)}
	m.call = r
	m.staleStatus(true)
	m.prompts[id] = m.turn.prompt
	call := retry.Call{ID: id, Chain: chain, Prompt: m.turn.prompt, MaxTokens: m.opts.MaxTokens, Policy: m.opts.Policy, Control: ctl}
	runner, f, runs := m.opts.Runner, m.feed, m.runs
	cr, _ := m.opts.Recorder.(CallRecorder)
	runs.Add(1)
	runCmd := func() tea.Msg {
		defer runs.Done()
		defer cancel()
		if cr != nil {
			cr.RecordCall(call)
		}
		res := runner.Run(ctx, call, f.sink)
		f.push(runDoneMsg{runID: id, result: res})
		return nil
	}
	return tea.Batch(runCmd, m.ensureTick())
}

func (m *Model) cancelCall() tea.Cmd {
	if m.call == nil {
		return nil
	}
	m.call.cancelled = true
	m.call.cancel()
	return m.setCallStatus("Cancelling the call…", statusUntilEnd)
}

// failOverNow asks the engine to move the call to its next target now
// (Call.Control): a wait in progress ends at once, a stream in flight is
// ended. One call, one record; the engine says what was waited.
func (m *Model) failOverNow() tea.Cmd {
	if m.call == nil || m.call.ctl == nil {
		return m.setStatus("Fail over now works while your call runs (during a wait or a stream).", true)
	}
	m.refreshControl()
	if !m.call.canFail || !m.call.ctl.FailOver() {
		m.call.canFail = false
		return m.setStatus("No fallback left for this call: esc cancels it.", true)
	}
	return m.setStatus("Failing over now…", false)
}

// runDone ends a run.
func (m *Model) runDone(msg runDoneMsg) tea.Cmd {
	if m.call == nil || msg.runID != m.call.id {
		return nil
	}
	m.call = nil
	m.turn = nil
	m.staleStatus(false)
	return nil
}

func (m *Model) copyCurl() tea.Cmd {
	if m.opts.Curl == nil {
		return m.setStatus("Copy as curl is not available in this build.", true)
	}
	a := m.log.selected()
	if a == nil {
		return m.setStatus("No attempt to copy: tab to the attempt log and pick one.", true)
	}
	if fleetTag(a) != "" {
		return m.setStatus("That attempt is another process's: its prompt is not shared, so there is no curl to copy.", true)
	}
	cmd := m.opts.Curl(a.attempt, m.prompts[a.callID])
	if cmd == "" {
		return m.setStatus("No curl for that attempt: its provider's endpoint or key variable is unknown.", true)
	}
	said := "Copied the attempt as curl; the key is a reference to its variable, not its value (OSC 52)."
	if m.opts.Simulated {
		said = "Copied the attempt as curl, with the simulator's key: no secret (OSC 52)."
	}
	return tea.Batch(tea.SetClipboard(cmd), m.setStatus(said, false))
}

// errSentence turns an attempt's failure into a sentence a person reads.
func errSentence(a *retry.Attempt) string {
	who := providerTier(a.Target)
	switch a.Class {
	case stream.ClassRateLimit:
		return who + " is rate limiting this key"
	case stream.ClassOverload:
		return who + " is overloaded"
	case stream.ClassFlexCapacity:
		return who + "'s flex capacity is short"
	case stream.ClassQuota:
		if cd := a.Cooldown; cd != nil && !cd.Until.IsZero() {
			// A quota with a known reset ends by itself: no person needed.
			return who + "'s quota is spent until it resets at " + cd.Until.Local().Format("15:04")
		}
		return who + "'s quota is spent: a person must act"
	case stream.ClassCaller:
		return who + " rejected the request"
	case stream.ClassServer:
		return who + " had a server error"
	case stream.ClassConnection:
		if a.MidStream {
			return "the connection to " + who + " broke mid-stream"
		}
		return "could not reach " + who
	case stream.ClassTimeout:
		return who + " timed out"
	case stream.ClassCancelled:
		return "cancelled"
	}
	return who + " failed"
}

// rawDetail is the raw detail under an error sentence.
func rawDetail(a *retry.Attempt) string {
	var b strings.Builder
	if a.Status != 0 {
		fmt.Fprintf(&b, "HTTP %d ", a.Status)
	}
	b.WriteString(string(a.Class))
	if a.Code != "" {
		b.WriteString(" " + a.Code)
	}
	if a.Message != "" {
		b.WriteString(": " + oneLine(a.Message))
	}
	return b.String()
}

var errNoHistory = errors.New("no history store is connected")
