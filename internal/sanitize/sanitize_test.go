package sanitize

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text, ünïcödé, 日本語 and emoji 👍🏽\n\tindented", "plain text, ünïcödé, 日本語 and emoji 👍🏽\n\tindented"},
		{"red \x1b[31mRED\x1b[0m done", "red RED done"},
		{"clear \x1b[2J\x1b[H screen", "clear  screen"},
		{"title \x1b]0;pwned\x07 bel", "title  bel"},
		{"title \x1b]2;pwned\x1b\\ st", "title  st"},
		{"link \x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\", "link click"},
		{"dcs \x1bP1$r0m\x1b\\ x", "dcs  x"},
		{"apc \x1b_payload\x1b\\ pm \x1b^p\x1b\\ sos \x1bXs\x1b\\.", "apc  pm  sos ."},
		{"charset \x1b(0qqq\x1b(B", "charset qqq"},
		{"keypad \x1b= save \x1b7 restore \x1b8!", "keypad  save  restore !"},
		{"c1 csi \u009b31m red \u009d0;t\u009c osc", "c1 csi  red  osc"},
		{"cr\rover\x08\x08bs\x00nul\x7fdel\x05enq", "croverbsnuldelenq"},
		{"bidi \u202eevil\u202c \u2067iso\u2069", "bidi evil iso"},
		{"bad \xff\xfe utf8", "bad \uFFFD\uFFFD utf8"},
		{"unterminated \x1b]0;no end\nnext line", "unterminated \nnext line"},
		{"esc at end \x1b", "esc at end "},
		{"csi with newline \x1b[3\nx", "csi with newline \nx"},
		{"\x1b\x1b[1mbold", "bold"},
		{"\x1b[?1049h alt screen \x1b[?25l", " alt screen "},
		{"report \x1b[6n \x1b[>c \x1b[21t", "report   "},
	} {
		got := Text(c.in)
		if got != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
		checkSafe(t, got)
	}
}

func TestPlainTextIsNotCopied(t *testing.T) {
	s := strings.Repeat("hello wörld\n", 100)
	if n := testing.AllocsPerRun(100, func() { _ = Text(s) }); n != 0 {
		t.Errorf("%v allocations for clean text", n)
	}
}

// A sequence or a rune split across two deltas is still handled whole.
func TestFilterAcrossPieces(t *testing.T) {
	in := "a\x1b[38;5;196mred\x1b[0m é \x1b]0;title\x07b 日本\u009b1mc"
	want := Text(in)
	for cut := 0; cut <= len(in); cut++ {
		for cut2 := cut; cut2 <= len(in); cut2++ {
			var f Filter
			got := f.Text(in[:cut]) + f.Text(in[cut:cut2]) + f.Text(in[cut2:]) + f.Flush()
			if got != want {
				t.Fatalf("cut at %d,%d: %q, want %q", cut, cut2, got, want)
			}
		}
	}
	var f Filter
	if got := f.Text("x\xe6\x97") + f.Flush(); got != "x\uFFFD" {
		t.Errorf("incomplete rune at the end: %q", got)
	}
	f.Text("\x1b]0;")
	f.Reset()
	if got := f.Text("visible"); got != "visible" {
		t.Errorf("after Reset: %q", got)
	}
}

// A long unterminated string does not hide the rest forever.
func TestUnterminatedStringGivesUp(t *testing.T) {
	got := Text("\x1b]0;" + strings.Repeat("x", maxString+10) + "tail")
	if !strings.HasSuffix(got, "tail") || len(got) > 20 {
		t.Errorf("%d bytes: %q...", len(got), got[:min(len(got), 40)])
	}
}

func TestJSON(t *testing.T) {
	b, err := json.Marshal(map[string]string{"text": "a\x1b[31mb\u009b1m\u202e\x7fc"})
	if err != nil {
		t.Fatal(err)
	}
	out := JSON(b)
	checkSafe(t, string(out))
	var back map[string]string
	if err := json.Unmarshal(out, &back); err != nil || back["text"] != "a\x1b[31mb\u009b1m\u202e\x7fc" {
		t.Fatalf("%s does not decode to the same value: %q %v", out, back["text"], err)
	}
	plain := []byte(`{"a":"b"}`)
	if got := JSON(plain); &got[0] != &plain[0] {
		t.Error("clean JSON was copied")
	}
}

func checkSafe(t *testing.T, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Errorf("invalid UTF-8 in %q", s)
	}
	for _, r := range s {
		if r != '\n' && r != '\t' && dropped(r) || r == 0x1b {
			t.Errorf("%q still has %U", s, r)
		}
	}
}

func FuzzText(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[31mred", "\x1b]0;t\x07", "\u009b1m", "\xff", "a\x1bP\x1b\\b", "\u202e"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, cut int) {
		out := Text(s)
		checkSafe(t, out)
		if len(out) > len(s)+2*utf8.UTFMax*len(s) {
			t.Fatalf("grew from %d to %d bytes", len(s), len(out))
		}
		if Text(out) != out {
			t.Fatalf("not idempotent: %q -> %q", out, Text(out))
		}
		if cut < 0 {
			cut = -cut
		}
		if len(s) > 0 {
			cut %= len(s) + 1
		} else {
			cut = 0
		}
		var fl Filter
		if got := fl.Text(s[:cut]) + fl.Text(s[cut:]) + fl.Flush(); got != out {
			t.Fatalf("split at %d: %q, whole: %q", cut, got, out)
		}
	})
}

func TestSecrets(t *testing.T) {
	for in, want := range map[string]string{
		"my-app/1.0 (key sk-proj-ABCDEFGHIJKLMNOPQRSTUV)":               "my-app/1.0 (key [redacted])",
		"GET /v1beta/models?key=AIzaSyABCDEFGHIJKLMNOPQRSTUVWXYZ012345": "GET /v1beta/models?key=[redacted]",
		"Authorization: Bearer lsp-0123456789abcdef0123":                "Authorization: Bearer [redacted]",
		"openai-python/1.99.0":                                          "openai-python/1.99.0",
	} {
		if got := Secrets(in); got != want {
			t.Errorf("Secrets(%q) = %q, want %q", in, got, want)
		}
	}
}
