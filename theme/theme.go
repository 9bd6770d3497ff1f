package theme

import (
	"image/color"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/textinput"
	"charm.land/lipgloss/v2"
)

// Palette is the semantic colour tokens. A nil token means "no colour" (the
// terminal's default), which is what NO_COLOR gives for every token.
type Palette struct {
	Base   color.Color // ordinary text
	Subtle color.Color // borders, secondary text, raw detail
	Accent color.Color // titles, keys, the focused pane
	OK     color.Color // ready, served, success
	Warn   color.Color // overloaded, retried, fallback notes
	Error  color.Color // stopped, quota, broken streams
	Wait   color.Color // waiting, paused, countdowns
}

// NewPalette returns the tokens for a dark or a light background, picked with
// lipgloss.LightDark.
func NewPalette(dark bool) Palette {
	ld := lipgloss.LightDark(dark)
	c := lipgloss.Color
	return Palette{
		Base:   ld(c("#1F2328"), c("#E6E6E6")),
		Subtle: ld(c("#6E7781"), c("#7D8590")),
		Accent: ld(c("#0969DA"), c("#58A6FF")),
		OK:     ld(c("#1A7F37"), c("#3FB950")),
		Warn:   ld(c("#9A6700"), c("#D29922")),
		Error:  ld(c("#CF222E"), c("#F85149")),
		Wait:   ld(c("#8250DF"), c("#BC8CFF")),
	}
}

// Styles is every style the console uses, built from one Palette.
type Styles struct {
	Dark    bool // built for a dark background
	NoColor bool // built without any colour (NO_COLOR)

	// The tokens as plain foreground styles.
	Base, Subtle, Accent, OK, Warn, Error, Wait lipgloss.Style

	Title     lipgloss.Style // the app name in the header
	Simulated lipgloss.Style // the SIMULATED badge
	Live      lipgloss.Style // the LIVE badge of a real session

	Border        lipgloss.Style // a pane's frame
	BorderFocused lipgloss.Style // the focused pane's frame
	PaneTitle     lipgloss.Style // a pane's title inside its frame

	// Target states, always shown as words too.
	Ready, Busy, Waiting, Paused, Overloaded, Stopped, Unavailable lipgloss.Style

	GaugeFull, GaugeEmpty lipgloss.Style // the filled and empty cells of a gauge
	Selected              lipgloss.Style // the selected row of a list

	Prompt        lipgloss.Style // the user's prompt in the transcript
	Answer        lipgloss.Style // answer text
	Partial       lipgloss.Style // text of an attempt that broke
	Badge         lipgloss.Style // "served by" badge
	Fallback      lipgloss.Style // the note that a fallback served
	Break         lipgloss.Style // where a stream broke
	Detail        lipgloss.Style // raw detail under an error sentence
	Countdown     lipgloss.Style // a wait's notes in the transcript
	CountdownHead lipgloss.Style // the live countdown line of a wait ("⏳ openai says 20s · 12s left")

	Status      lipgloss.Style // the status line
	StatusError lipgloss.Style // an error on the status line

	// Charts: the targets' strips and the timeline. Marks are letters too
	// (their colour is Class's), so NO_COLOR loses nothing.
	Strip     lipgloss.Style // a strip's cells: what is left of a limit, latency
	StripLow  lipgloss.Style // a strip's cell where a limit is (nearly) spent
	SpanWait  lipgloss.Style // a wait the call took (━ on the timeline)
	SpanAsked lipgloss.Style // the server's asked delay after the call moved on (┄)
	Join      lipgloss.Style // a failover: the arrow between two lanes, → in a strip
	Axis      lipgloss.Style // the timeline's time axis and a lane's baseline

	Help  help.Styles      // the bubbles/help styles
	Input textinput.Styles // the prompt input (bubbles/textinput)
}

// New builds the Styles for a dark or light background; noColor drops every
// colour (NO_COLOR) but keeps bold and reverse so states still stand out.
func New(dark, noColor bool) Styles {
	p := NewPalette(dark)
	if noColor {
		p = Palette{}
	}
	fg := func(c color.Color) lipgloss.Style {
		s := lipgloss.NewStyle()
		if c != nil {
			s = s.Foreground(c)
		}
		return s
	}
	s := Styles{Dark: dark, NoColor: noColor}
	s.Base, s.Subtle, s.Accent = fg(p.Base), fg(p.Subtle), fg(p.Accent)
	s.OK, s.Warn, s.Error, s.Wait = fg(p.OK), fg(p.Warn), fg(p.Error), fg(p.Wait)

	s.Title = s.Accent.Bold(true)
	s.Simulated = lipgloss.NewStyle().Bold(true).Reverse(true)
	if !noColor {
		ld := lipgloss.LightDark(dark)
		s.Simulated = lipgloss.NewStyle().Bold(true).Foreground(ld(lipgloss.Color("#FFFFFF"), lipgloss.Color("#000000"))).Background(p.Warn)
	}
	s.Live = s.OK.Bold(true)

	s.Border = s.Subtle
	s.BorderFocused = s.Accent
	s.PaneTitle = s.Accent.Bold(true)

	s.Ready = s.OK.Bold(true)
	s.Busy = s.Accent.Bold(true)
	s.Waiting = s.Wait.Bold(true)
	s.Paused = s.Wait.Bold(true)
	s.Overloaded = s.Warn.Bold(true)
	s.Stopped = s.Error.Bold(true)
	s.Unavailable = s.Subtle.Bold(true)

	s.GaugeFull = s.Accent
	s.GaugeEmpty = s.Subtle
	s.Selected = lipgloss.NewStyle().Reverse(true)

	s.Prompt = s.Accent.Bold(true)
	s.Answer = s.Base
	s.Partial = s.Subtle.Strikethrough(false)
	s.Badge = s.OK.Bold(true)
	s.Fallback = s.Warn
	s.Break = s.Error.Bold(true)
	s.Detail = s.Subtle
	s.Countdown = s.Wait
	s.CountdownHead = s.Wait.Bold(true)

	s.Status = s.Subtle
	s.StatusError = s.Error

	s.Strip = s.Accent
	s.StripLow = s.Warn.Bold(true)
	s.SpanWait = s.Wait.Bold(true)
	s.SpanAsked = s.Wait
	s.Join = s.Warn.Bold(true)
	s.Axis = s.Subtle

	s.Help = help.Styles{
		Ellipsis:       s.Subtle,
		ShortKey:       s.Accent,
		ShortDesc:      s.Subtle,
		ShortSeparator: s.Subtle,
		FullKey:        s.Accent,
		FullDesc:       s.Base,
		FullSeparator:  s.Subtle,
	}
	if noColor {
		s.Input = textinput.Styles{}
	} else {
		s.Input = textinput.DefaultStyles(dark)
		s.Input.Focused.Prompt = s.Accent
		s.Input.Blurred.Prompt = s.Subtle
		s.Input.Focused.Placeholder = s.Subtle
		s.Input.Blurred.Placeholder = s.Subtle
	}
	return s
}

// Outcome returns the style of a call's outcome ("ok", "stopped", "deferred",
// "gave_up", "failed", "cancelled", "running", "interrupted"), shared by the
// console and the CLI. Unknown outcomes are Base.
func (s Styles) Outcome(o string) lipgloss.Style {
	switch o {
	case "ok":
		return s.OK
	case "stopped", "failed":
		return s.Error.Bold(true)
	case "deferred", "gave_up":
		return s.Warn
	case "cancelled", "interrupted":
		return s.Subtle
	case "running":
		return s.Wait
	}
	return s.Base
}

// Mark returns the style of an attempt's mark on a chart: its class's
// colour, bold so a one-cell letter stands out.
func (s Styles) Mark(c string) lipgloss.Style { return s.Class(c).Bold(true) }

// Class returns the style of an attempt's class ("ok", "rate_limit",
// "overload", "flex_capacity", "quota", "caller", "server", "connection",
// "timeout", "cancelled"), shared by the console and the CLI. Unknown classes are Base.
func (s Styles) Class(c string) lipgloss.Style {
	switch c {
	case "ok":
		return s.OK
	case "rate_limit", "flex_capacity":
		return s.Wait
	case "overload", "server", "connection", "timeout":
		return s.Warn
	case "quota", "caller":
		return s.Error
	case "cancelled":
		return s.Subtle
	}
	return s.Base
}

// MarkLetter is the one-cell letter of an attempt's mark, by its class (as
// Class takes it), so that a mark reads without its colour (NO_COLOR, a
// printed report): the console's charts and the HTML report use the same
// letters. A stream broken after HTTP 200 is B whatever its class, but a
// cancel is X wherever it came: the caller stopped it, nothing broke.
func MarkLetter(class string, midStream bool) string {
	if midStream && class != "ok" && class != "cancelled" {
		return "B"
	}
	switch class {
	case "ok":
		return "✓"
	case "rate_limit":
		return "R"
	case "overload":
		return "O"
	case "flex_capacity":
		return "F"
	case "quota":
		return "Q"
	case "caller":
		return "C"
	case "server":
		return "S"
	case "connection":
		return "N"
	case "timeout":
		return "T"
	case "cancelled":
		return "X"
	}
	return "?"
}

// MarkLegend says what each of MarkLetter's letters means.
const MarkLegend = "✓ ok · R rate limit · O overload · F flex capacity · Q quota · B broken stream · T timeout · S server · N network · C rejected · X cancelled"
