package tui

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/limitscope/limitscope/retry"
)

// The help is derived from the live bindings (crush's help-honesty test):
// every binding of a view's key maps shows, key and words, on the help that
// view opens with ?, whole, at 120x40 and at 80x24. The key maps are read
// by reflection (every key.Binding field), so a binding left out of a
// FullHelp fails here.

// helpOpeners reach each view and open its help; each lists the key maps
// whose every binding its help must show.
var helpOpeners = []struct {
	name string
	keys func(KeyMap) []any
	open func(h *harness)
}{
	{"conversation", func(k KeyMap) []any { return []any{k.Conversation, k.Main, k.Global, k.Input} },
		func(h *harness) { h.press("tab"); h.press("?") }},
	{"attempts", func(k KeyMap) []any { return []any{k.Attempts, k.Main, k.Global, k.Input} },
		func(h *harness) { h.press("tab"); h.press("tab"); h.press("?") }},
	{"targets", func(k KeyMap) []any { return []any{k.Targets, k.Main, k.Global, k.Input} },
		func(h *harness) { h.press("shift+tab"); h.press("?") }},
	{"faults", func(k KeyMap) []any { return []any{k.Faults, k.Global} },
		func(h *harness) { h.press("tab"); h.press("d"); h.press("?") }},
	{"timeline", func(k KeyMap) []any { return []any{k.Timeline, k.Global} },
		func(h *harness) { h.press("tab"); h.press("t"); h.press("?") }},
	{"history", func(k KeyMap) []any { return []any{k.History, k.Timeline, k.Global} },
		func(h *harness) {
			h.press("tab")
			h.press("h")
			h.until("the list", func() bool { return len(h.m.hist.calls) > 0 })
			h.press("?")
		}},
}

func helpOpts() Options {
	o := simOpts()
	o.History = goldenHistory()
	return o
}

// shows reports whether screen shows b: its key, then its words, on one
// line.
func shows(screen string, b key.Binding) bool {
	h := b.Help()
	re := regexp.MustCompile(`(^|[\s│])` + regexp.QuoteMeta(h.Key) + ` +` + regexp.QuoteMeta(h.Desc) + `(\s|│|$)`)
	return re.MatchString(screen)
}

// missingFromHelp lists the bindings of key maps that screen does not show.
func missingFromHelp(screen string, maps ...any) []string {
	var out []string
	for _, nb := range namedBindings(maps...) {
		if !shows(screen, nb.b) {
			out = append(out, fmt.Sprintf("%s (%s %s)", nb.name, nb.b.Help().Key, nb.b.Help().Desc))
		}
	}
	return out
}

func TestHelpHonesty_EveryViewShowsEveryBinding(t *testing.T) {
	km := DefaultKeyMap()
	for _, v := range helpOpeners {
		for _, sz := range [][2]int{{120, 40}, {80, 24}} {
			t.Run(fmt.Sprintf("%s/%dx%d", v.name, sz[0], sz[1]), func(t *testing.T) {
				h := newHarness(t, sz[0], sz[1], helpOpts())
				v.open(h)
				if h.m.mode != modeHelp {
					t.Fatalf("? did not open the help:\n%s", h.screen())
				}
				s := h.screen()
				for _, miss := range missingFromHelp(s, v.keys(km)...) {
					t.Errorf("the help lacks %s", miss)
				}
				if strings.Contains(s, "…") || strings.Contains(s, "(↓ more)") {
					t.Errorf("the help is cut:\n%s", s)
				}
				if t.Failed() {
					t.Logf("help shown:\n%s", s)
				}
			})
		}
	}
}

// TestHelpHonesty_FootersOfHelpAndConfirm: the help screen and the
// confirmation show their own keys on the footer, whole.
func TestHelpHonesty_FootersOfHelpAndConfirm(t *testing.T) {
	km := DefaultKeyMap()
	h := newHarness(t, 80, 24, helpOpts())
	h.press("tab")
	h.press("?")
	if miss := missingFromHelp(footerOf(h.screen()), km.Help); len(miss) > 0 {
		t.Errorf("the help's footer lacks %v:\n%s", miss, h.screen())
	}
	h.press("esc")
	h.m.confirm, h.m.mode = &retry.Cooldown{Scope: "openai", Target: "openai/gpt-5.4-mini", Since: t0}, modeConfirm
	if miss := missingFromHelp(footerOf(h.screen()), km.Confirm); len(miss) > 0 {
		t.Errorf("the confirmation's footer lacks %v:\n%s", miss, h.screen())
	}
}

func footerOf(screen string) string {
	lines := strings.Split(screen, "\n")
	return lines[len(lines)-1]
}

// TestHelpHonesty_CatchesAMissingBinding: the check itself fails a help
// that leaves a binding out.
func TestHelpHonesty_CatchesAMissingBinding(t *testing.T) {
	km := DefaultKeyMap()
	h := newHarness(t, 120, 40, helpOpts())
	h.press("shift+tab")
	h.press("?")
	s := h.screen()
	cut := strings.Replace(s, "clear a stop (STOPPED)", "", 1)
	if miss := missingFromHelp(cut, km.Targets); len(miss) != 1 || !strings.Contains(miss[0], "ClearStop") {
		t.Errorf("a help without x's line: missing %v, want TargetsKeys.ClearStop", miss)
	}
	renamed := DefaultKeyMap()
	renamed.Targets.ClearStop.SetHelp("X", "clear a stop (STOPPED)")
	if miss := missingFromHelp(s, renamed.Targets); len(miss) != 1 {
		t.Errorf("a help showing a stale key: missing %v, want the renamed binding", miss)
	}
}

// TestHelpHonesty_LabelsNameEveryKey: a binding's help key names every key
// it is bound to (no hidden alias).
func TestHelpHonesty_LabelsNameEveryKey(t *testing.T) {
	for _, g := range DefaultKeyMap().groups() {
		for _, nb := range namedBindings(g.keys) {
			label := map[string]bool{}
			for _, k := range keyTokens(nb.b.Help().Key) {
				label[k] = true
			}
			for _, k := range nb.b.Keys() {
				if !label[keyName(k)] {
					t.Errorf("%s is bound to %q, which its help %q does not name", nb.name, k, nb.b.Help().Key)
				}
			}
		}
	}
}

// keyName is a key as help labels write it.
func keyName(k string) string {
	mod, name := "", k
	if i := strings.LastIndex(k, "+"); i > 0 {
		mod, name = k[:i+1], k[i+1:]
	}
	if n, ok := map[string]string{"up": "↑", "down": "↓", "left": "←", "right": "→", "pgdown": "pgdn"}[name]; ok {
		name = n
	}
	return mod + name
}

// keyTokens splits a help key label ("↑/k", "esc/?/q", "1-9/0", "/") or a
// README key cell ("space, K/shift+↑") into key names.
func keyTokens(label string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(label, func(r rune) bool { return r == ' ' || r == ',' }) {
		parts := []string{f}
		if f != "/" {
			parts = strings.Split(f, "/")
		}
		for _, p := range parts {
			if p == "1-9" {
				for d := '1'; d <= '9'; d++ {
					out = append(out, string(d))
				}
				continue
			}
			if p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// TestHelpScrollsWhenShort: on a short terminal the help scrolls to its
// last key, and says more is below until then.
func TestHelpScrollsWhenShort(t *testing.T) {
	h := newHarness(t, 60, 16, helpOpts())
	h.press("shift+tab")
	h.press("?")
	if !strings.Contains(h.screen(), "(↓ more)") {
		t.Fatalf("a cut help does not say more is below:\n%s", h.screen())
	}
	for i := 0; i < 10 && strings.Contains(h.screen(), "(↓ more)"); i++ {
		h.send(tea.KeyPressMsg{Code: tea.KeyPgDown})
	}
	if s := h.screen(); strings.Contains(s, "(↓ more)") || !shows(s, DefaultKeyMap().Input.PageDown) {
		t.Errorf("pgdn did not reach the help's end:\n%s", s)
	}
}
