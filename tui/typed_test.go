package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
)

// pasteText is n bytes of prompt text, as an unbracketed paste types it.
func pasteText(n int) string {
	const word = "limits "
	return strings.Repeat(word, n/len(word)+1)[:n]
}

// TestLongUnbracketedPasteIsWhole: a paste of key presses longer than
// longInput ends up in the prompt whole and in order, also when the next key
// (enter) comes before the frame timer: the prompt sent is the paste.
func TestLongUnbracketedPasteIsWhole(t *testing.T) {
	h := newManualHarness(t, 120, 40, simOpts(), okScript(openai, "ok"))
	text := pasteText(5000) + "END"
	h.typeText(text)
	h.press("enter")
	h.settle()
	calls := h.runner.Calls()
	if len(calls) != 1 || calls[0].Prompt != strings.TrimSpace(text) {
		got := ""
		if len(calls) == 1 {
			got = calls[0].Prompt
		}
		t.Fatalf("sent %d calls; prompt of %d bytes ending %q, want the %d-byte paste", len(calls), len(got), got[max(0, len(got)-10):], len(text))
	}
}

// TestGatheredKeysShowAfterAFrame: keys gathered for a long prompt are on
// screen once the frame timer fires with no key since.
func TestGatheredKeysShowAfterAFrame(t *testing.T) {
	h := newManualHarness(t, 120, 40, simOpts())
	h.typeText(pasteText(longInput + 10))
	h.typeText("TAIL")
	if len(h.m.typed) == 0 {
		t.Fatal("no key was gathered past longInput")
	}
	h.send(typedMsg{n: h.m.typedN})
	if len(h.m.typed) != 0 || !strings.HasSuffix(h.m.input.Value(), "TAIL") {
		t.Fatalf("the frame timer did not insert the gathered keys: %d left", len(h.m.typed))
	}
	if !strings.Contains(h.screen(), "TAIL") {
		t.Errorf("the prompt line does not show the last keys:\n%s", h.screen())
	}
}

// BenchmarkUnbracketedPaste types 2 KB, 20 KB and 200 KB pastes a key at a
// time, with a View after each key as the program renders: the cost per
// byte must stay flat (linear time), not grow with the size.
func BenchmarkUnbracketedPaste(b *testing.B) {
	for _, n := range []int{2 << 10, 20 << 10, 200 << 10} {
		text := pasteText(n)
		keys := make([]tea.KeyPressMsg, 0, n)
		for _, r := range text {
			keys = append(keys, tea.KeyPressMsg{Code: r, Text: string(r)})
		}
		b.Run(fmt.Sprintf("%dKB", n>>10), func(b *testing.B) {
			m := New(simOpts())
			m.after = func(time.Duration, func(time.Time) tea.Msg) tea.Cmd { return nil }
			m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
			b.SetBytes(int64(n))
			b.ResetTimer()
			for b.Loop() {
				m.input.Reset()
				for _, k := range keys {
					m.Update(k)
					_ = m.View()
				}
				m.Update(typedMsg{n: m.typedN})
				if got := len(m.input.Value()); got != n {
					b.Fatalf("the prompt holds %d bytes, want %d", got, n)
				}
			}
		})
	}
}
