package theme

import (
	"strings"
	"testing"
)

func TestLightAndDarkDiffer(t *testing.T) {
	d, l := NewPalette(true), NewPalette(false)
	if d.Accent == l.Accent || d.Error == l.Error || d.Base == l.Base {
		t.Errorf("light and dark palettes share tokens")
	}
	if s := New(true, false); !s.Dark || s.NoColor {
		t.Errorf("flags: %+v", s)
	}
}

func TestNoColorHasNoColour(t *testing.T) {
	s := New(true, true)
	for name, st := range map[string]interface{ Render(...string) string }{
		"error": s.Error, "wait": s.Wait, "ok": s.OK, "stopped": s.Stopped, "simulated": s.Simulated, "border": s.Border,
		"strip": s.Strip, "strip-low": s.StripLow, "span-wait": s.SpanWait, "span-asked": s.SpanAsked, "join": s.Join,
		"axis": s.Axis, "mark": s.Mark("rate_limit"),
	} {
		out := st.Render("STOPPED")
		if strings.Contains(out, "38;") || strings.Contains(out, "48;") {
			t.Errorf("%s renders colour under NO_COLOR: %q", name, out)
		}
		if !strings.Contains(out, "STOPPED") {
			t.Errorf("%s lost its text", name)
		}
	}
	if out := New(true, false).Error.Render("x"); !strings.Contains(out, "38;") {
		t.Errorf("the error token has no colour with colour on: %q", out)
	}
	c := New(true, false)
	if c.Mark("rate_limit").GetForeground() == c.Mark("overload").GetForeground() || !strings.Contains(c.Mark("quota").Render("Q"), "38;") {
		t.Errorf("marks are not coloured by class with colour on")
	}
}

// Every class has its own mark letter (the console's charts and the HTML
// report read them without colour), and the legend names each one.
func TestMarkLettersDistinct(t *testing.T) {
	seen := map[string]string{}
	for _, c := range []string{"ok", "rate_limit", "overload", "quota", "caller", "server", "connection", "timeout", "cancelled"} {
		l := MarkLetter(c, false)
		if l == "?" || seen[l] != "" {
			t.Errorf("%s: letter %q (also %q)", c, l, seen[l])
		}
		seen[l] = c
		if !strings.Contains(MarkLegend, l+" ") {
			t.Errorf("the legend lacks %q", l)
		}
	}
	if MarkLetter("server", true) != "B" || MarkLetter("ok", true) != "✓" {
		t.Error("a stream broken after HTTP 200 is B, an answer is not")
	}
}
