package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/limitscope/limitscope/stream"
	"github.com/limitscope/limitscope/theme"
)

type blockKind int

const (
	blockText   blockKind = iota // an attempt's text
	blockNote                    // a one-line (wrapped) note
	blockDetail                  // raw detail under a note, dimmer
)

// maxDetailLines bounds a raw detail on screen (the history keeps it whole).
const maxDetailLines = 12

type noteKind int

const (
	noteInfo noteKind = iota
	noteOK
	noteWarn
	noteError
	noteWait
)

// block is a piece of a turn, with its wrapped, styled lines cached for one
// width.
type block struct {
	kind     blockKind
	note     noteKind
	header   string // blockText: the badge line above the text
	badgeOK  bool   // the header is the served-by badge
	fallback string // blockText: the fallback note beside the badge
	text     string
	buf      strings.Builder // a streaming text block's text (text shares its bytes)
	broken   bool            // blockText: the attempt failed; its text is partial
	// thinkingAt: when the attempt's model began thinking (reasoning
	// deltas before any text; zero: not thinking).
	thinkingAt time.Time
	thought    string // " · thought 6s" once the text came after thinking: kept in the served-by badge

	lines []string
	w     int
	dirty bool

	// A text block's lines are its header lines, the text's final lines
	// (fixed, kept across frames) and its open lines (redone each frame).
	tw      textWrap
	fixed   int    // len of lines that stay: header and final text lines
	wrapKey string // what the fixed lines were made for: width, header, broken
}

// wrapLines wraps plain text to w cells and styles it, each line padded to
// exactly w cells.
func wrapLines(dst []string, s string, w int, style func(...string) string, indent string) []string {
	for _, l := range wrap(s, w-widthOf(indent)) {
		dst = append(dst, styleLine(l, w, style, indent))
	}
	return dst
}

// styleLine styles one wrapped line and pads it to exactly w cells.
func styleLine(l string, w int, style func(...string) string, indent string) string {
	pad := max(0, w-widthOf(indent)-widthOf(l))
	line := indent + l
	if style != nil && l != "" {
		line = indent + style(l)
	}
	return line + strings.Repeat(" ", pad)
}

// appendText adds a delta to a streaming text block without copying the
// text so far.
func (b *block) appendText(s string) {
	if b.buf.Len() != len(b.text) { // text was set directly
		b.buf.Reset()
		b.buf.WriteString(b.text)
	}
	b.buf.WriteString(s)
	b.text = b.buf.String() // shares the builder's bytes: no copy
	b.dirty = true
}

// setText replaces a text block's text.
func (b *block) setText(s string) {
	b.buf.Reset()
	b.text = s
	b.dirty = true
}

// turn is one prompt and everything that answered it.
type turn struct {
	callID  string
	prompt  string
	origin  string // a proxied call: where it came from (client, model, id); "" when typed
	primary stream.Target
	blocks  []*block
	current *block // the text block of the attempt streaming now
	done    bool

	currentTarget stream.Target
	primaryWhy    string    // why the primary did not serve
	requests      int       // requests over every run of the call
	started       time.Time // when the user sent it
}

func (t *turn) note(k noteKind, s string) *block {
	b := &block{kind: blockNote, note: k, text: s, dirty: true}
	t.blocks = append(t.blocks, b)
	return b
}

func (t *turn) detail(s string) {
	if s == "" {
		return
	}
	t.blocks = append(t.blocks, &block{kind: blockDetail, text: s, dirty: true})
}

// render returns the block's lines, each exactly w cells wide.
func (b *block) render(w int, st *theme.Styles) []string {
	if !b.dirty && b.w == w && b.lines != nil {
		return b.lines
	}
	b.w, b.dirty = w, false
	if b.kind != blockText {
		b.lines = b.lines[:0]
	}
	add := func(s string, style func(...string) string, indent string) {
		b.lines = wrapLines(b.lines, s, w, style, indent)
	}
	switch b.kind {
	case blockText:
		var style func(...string) string
		if b.broken {
			style = st.Partial.Render
		}
		key := fmt.Sprintf("%d/%v/%v/%s/%s/%v/%p", w, b.broken, b.badgeOK, b.header, b.fallback, b.text != "", st)
		if key != b.wrapKey || len(b.text) < b.tw.srcEnd {
			b.wrapKey = key
			b.lines = b.lines[:0]
			switch {
			case b.badgeOK && b.fallback != "":
				line := st.Badge.Render(b.header) + st.Fallback.Render(" ("+b.fallback+")")
				if widthOf(b.header)+3+widthOf(b.fallback) <= w {
					b.lines = append(b.lines, fit(line, w))
				} else {
					add(b.header, st.Badge.Render, "")
					add("("+b.fallback+")", st.Fallback.Render, "")
				}
			case b.badgeOK:
				add(b.header, st.Badge.Render, "")
			case b.header != "" && b.text != "":
				add(b.header, st.Subtle.Render, "")
			}
			b.fixed = len(b.lines)
			b.tw.reset(w, style)
		}
		if b.text == "" {
			b.lines = b.lines[:b.fixed]
			break
		}
		final, all := b.tw.lines(b.lines[:b.fixed], b.text)
		b.fixed = len(final)
		b.lines = all
	case blockNote:
		var style func(...string) string
		switch b.note {
		case noteOK:
			style = st.OK.Render
		case noteWarn:
			style = st.Warn.Render
		case noteError:
			style = st.Break.Render
		case noteWait:
			style = st.Countdown.Render
		default:
			style = st.Subtle.Render
		}
		add(b.text, style, "")
	case blockDetail:
		// Raw detail is for reference, wrapped whole (a provider's sentence
		// is never cut); only a hostile server's wall of text is bounded.
		add(b.text, st.Detail.Render, "  ")
		if len(b.lines) > maxDetailLines {
			b.lines = b.lines[:maxDetailLines]
			b.lines[maxDetailLines-1] = fit(ansi.Truncate(b.lines[maxDetailLines-1], w-1, "")+st.Detail.Render("…"), w)
		}
	}
	return b.lines
}

// transcript is the conversation: turns, oldest first, rendered from the
// bottom up so a frame touches only the visible lines.
type transcript struct {
	turns       []*turn
	offset      int // lines scrolled up from the bottom
	promptCache map[*turn][]string
	dropped     int // turns dropped off the top (maxTurns)

	anchorTurn  *turn // the last turn at the previous frame
	anchorLines int   // its lines (with live lines) then
	anchorW     int
	pw          int
}

func newTranscript() *transcript { return &transcript{promptCache: map[*turn][]string{}} }

// maxTurns bounds the transcript so memory stays flat over a long session;
// older calls stay in the history.
const maxTurns = 2000

func (c *transcript) add(id, prompt string, primary stream.Target, now time.Time) *turn {
	t := &turn{callID: id, prompt: prompt, primary: primary, started: now}
	if len(c.turns) >= maxTurns {
		n := len(c.turns) - maxTurns + 1
		for _, old := range c.turns[:n] {
			delete(c.promptCache, old)
		}
		c.turns = append(c.turns[:0], c.turns[n:]...)
		c.dropped += n
	}
	c.turns = append(c.turns, t)
	return t
}

// isLast reports whether t is the newest turn.
func (c *transcript) isLast(t *turn) bool { return len(c.turns) > 0 && c.turns[len(c.turns)-1] == t }

func (c *transcript) invalidate() {
	for _, t := range c.turns {
		for _, b := range t.blocks {
			b.dirty = true
			b.wrapKey = ""
		}
	}
	c.promptCache = map[*turn][]string{}
}

func (c *transcript) bottom() { c.offset = 0 }

func (c *transcript) scroll(n, h int) {
	c.offset -= n
	if c.offset < 0 {
		c.offset = 0
	}
	_ = h
}

// promptLines renders a turn's prompt (cached per width).
func (c *transcript) promptLines(t *turn, w int, st *theme.Styles) []string {
	if c.pw != w {
		c.promptCache = map[*turn][]string{}
		c.pw = w
	}
	if l, ok := c.promptCache[t]; ok {
		return l
	}
	var out []string
	if t.origin != "" {
		for _, l := range wrap(t.origin, w) {
			out = append(out, st.Accent.Render(l)+strings.Repeat(" ", max(0, w-widthOf(l))))
		}
	}
	for i, l := range wrap(t.prompt, w-2) {
		p := "> "
		if i > 0 {
			p = "  "
		}
		out = append(out, st.Prompt.Render(p+l)+strings.Repeat(" ", max(0, w-2-widthOf(l))))
	}
	c.promptCache[t] = out
	return out
}

// view returns h lines of w cells: the visible window of the transcript, with
// live lines (a countdown) appended under the last turn; empty (nil: blank)
// gives the empty transcript's lines, asked only when it is empty, since
// styling them costs as much as the rest of a frame.
func (c *transcript) view(w, h int, st *theme.Styles, live []string, empty func() []string) []string {
	if len(c.turns) == 0 && len(live) == 0 {
		var lines []string
		if empty != nil {
			lines = empty()
		}
		return padLines(lines, w, h)
	}
	c.anchor(w, st, len(live))
	need := h + c.offset
	// Gather lines bottom-up.
	var rev [][]string
	n := 0
	if len(live) > 0 {
		fl := make([]string, len(live))
		for i, l := range live {
			fl[i] = fit(l, w)
		}
		rev = append(rev, fl)
		n += len(fl)
	}
	blank := []string{strings.Repeat(" ", w)}
	for i := len(c.turns) - 1; i >= 0 && n < need; i-- {
		t := c.turns[i]
		for j := len(t.blocks) - 1; j >= 0 && n < need; j-- {
			l := t.blocks[j].render(w, st)
			if len(l) > need-n { // a long answer: only its visible tail
				l = l[len(l)-(need-n):]
			}
			rev = append(rev, l)
			n += len(l)
		}
		if n < need {
			rev = append(rev, blank)
			n++
			p := c.promptLines(t, w, st)
			rev = append(rev, p)
			n += len(p)
		}
		if i > 0 && n < need {
			rev = append(rev, blank)
			n++
		}
	}
	if c.dropped > 0 && n < need {
		rev = append(rev, []string{fit(st.Subtle.Render(fmt.Sprintf("… %d older calls are in the history (h).", c.dropped)), w)})
		n++
	}
	if c.offset > n-h {
		c.offset = max(0, n-h)
	}
	all := make([]string, 0, n)
	for i := len(rev) - 1; i >= 0; i-- {
		all = append(all, rev[i]...)
	}
	end := len(all) - c.offset
	start := max(0, end-h)
	out := all[start:end]
	return padFitted(out, w, h)
}

// anchor keeps a scrolled-up view still while the last turn grows below it:
// the offset from the bottom grows by the lines added since the last frame.
func (c *transcript) anchor(w int, st *theme.Styles, live int) {
	var last *turn
	n := live
	if k := len(c.turns); k > 0 {
		last = c.turns[k-1]
		n += len(c.promptLines(last, w, st)) + 1
		for _, b := range last.blocks {
			n += len(b.render(w, st))
		}
	}
	if c.offset > 0 && c.anchorW == w {
		switch {
		case last == c.anchorTurn:
			c.offset += n - c.anchorLines
		case last != nil:
			c.offset += n + 1 // a new turn and its separator
		}
		c.offset = max(c.offset, 0)
	}
	c.anchorTurn, c.anchorLines, c.anchorW = last, n, w
}

// padLines pads lines to h lines of w cells.
func padLines(lines []string, w, h int) []string {
	out := make([]string, 0, h)
	for _, l := range lines {
		if len(out) == h {
			break
		}
		out = append(out, fit(l, w))
	}
	blank := strings.Repeat(" ", w)
	for len(out) < h {
		out = append(out, blank)
	}
	return out
}
