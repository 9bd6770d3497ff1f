package stream

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// scanSeeds are the chunks the scanner's tests start from: every OpenAI
// token case and edge case, and the fixtures' events.
func scanSeeds(t testing.TB) []string {
	var out []string
	for _, c := range openaiTokenCases {
		out = append(out, c...)
	}
	out = append(out, fastEdgeCases...)
	for _, dir := range []string{"openai", "groq", "mistral", "deepseek", "xai"} {
		files, _ := filepath.Glob(filepath.Join("testdata/fixtures", dir, "*.sse"))
		for _, f := range files {
			for _, ev := range fixtureEvents(t, f) {
				out = append(out, ev.data)
			}
		}
	}
	return out
}

// sameScan checks that whatever openaiChunk.scan accepts, the jsontext
// path reads into the same chunk (when it accepts it too: it refuses
// repeated names the scanner skips, and the map path then decides), and
// that the decoder as a whole reads it as the map path does.
func sameScan(t *testing.T, data string, modelKnown bool) {
	t.Helper()
	trimmed := strings.TrimSpace(data)
	var a, b openaiChunk
	a.wantModel, b.wantModel = !modelKnown, !modelKnown
	if !a.scan(trimmed) {
		return
	}
	b.src = trimmed
	if fastChunk(trimmed, &b) && !reflect.DeepEqual(a, b) {
		t.Fatalf("%q (model known %v):\n scan    %+v\n jsontext %+v", data, modelKnown, a, b)
	}
	evs := []sseEvent{{"", data}}
	if modelKnown {
		evs = append([]sseEvent{{"", `{"model":"known","choices":[]}`}}, evs...)
	}
	sameDecoding(t, DialectOpenAI, evs)
}

func TestOpenAIScanMatches(t *testing.T) {
	for _, data := range scanSeeds(t) {
		sameScan(t, data, false)
		sameScan(t, data, true)
	}
}

// The scanner reads the chunks streams are made of (else it would only
// cost time): every event of the fixtures and of the benchmark's stream
// but [DONE], text deltas with escapes included.
func TestOpenAIScanAccepts(t *testing.T) {
	body, _ := longStream(DialectOpenAI)
	events := fixtureEvents(t, writeTemp(t, body))
	files, _ := filepath.Glob("testdata/fixtures/openai/*.sse")
	for _, f := range files {
		events = append(events, fixtureEvents(t, f)...)
	}
	n := 0
	for _, ev := range events {
		d := strings.TrimSpace(ev.data)
		if !strings.HasPrefix(d, "{") || ev.typ == "error" {
			continue
		}
		n++
		var c openaiChunk
		if !c.scan(d) {
			t.Errorf("the scanner refused %q", d)
		}
	}
	if n < 100 {
		t.Fatalf("only %d chunks checked", n)
	}
	var c openaiChunk
	if !c.scan(`{"choices":[{"delta":{"content":"say \"hi\"\n\u00e9"}}]}`) || c.choices[0].content.str {
		t.Fatalf("a delta with escapes: %+v", c)
	}
}

// FuzzOpenAIScan: whatever the scanner accepts decodes as the jsontext
// path and the map path decode it.
func FuzzOpenAIScan(f *testing.F) {
	for _, s := range scanSeeds(f) {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, data string, modelKnown bool) {
		sameScan(t, data, modelKnown)
	})
}
