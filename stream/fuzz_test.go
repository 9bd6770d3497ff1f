package stream

import (
	"bytes"
	"context"
	"github.com/limitscope/limitscope/internal/sanitize"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// fixtureFiles lists every body and transcript under testdata/fixtures.
func fixtureFiles(f *testing.F) [][]byte {
	var out [][]byte
	_ = filepath.WalkDir(filepath.Join("testdata", "fixtures"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".meta") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err == nil {
			out = append(out, b)
		}
		return nil
	})
	if len(out) == 0 {
		f.Fatal("no fixtures")
	}
	return out
}

var fuzzProviders = []string{"openai", "anthropic", "gemini", "groq", "deepseek", "mistral", "xai", "bedrock"}

// decodeBytes runs the 200-response path of Do (content sniffing, gzip,
// Gemini's bare blocks, SSE decoding, the dialect) over body, with no
// network and no timers firing.
func decodeBytes(provider, contentType, encoding string, body []byte) Result {
	o := DefaultOptions()
	o.MaxEventSize = 64 << 10
	o.UsageGrace = -1
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	p := providerRow(provider)
	a := &attempt{c: &Client{Now: func() time.Time { return fixedNow }}, o: o, p: p, d: p.spec(),
		parent: context.Background(), ctx: ctx, start: fixedNow, onText: func(string) {}, red: newRedactor(testKey)}
	a.wd = &watchdog{cancel: cancel, o: o}
	defer a.wd.stop()
	a.res.Status = 200
	h := http.Header{}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	if encoding != "" {
		h.Set("Content-Encoding", encoding)
	}
	resp := &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(bytes.NewReader(body))}
	return a.red.scrub(a.stream(resp, &wireReader{r: resp.Body, touch: a.wd.touch}))
}

func checkPrintable(t *testing.T, what, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatalf("%s is not valid UTF-8: %q", what, s)
	}
	for _, r := range s {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r < 0xa0 {
			t.Fatalf("%s holds control character %U: %q", what, r, s)
		}
	}
}

func FuzzDecodeStream(f *testing.F) {
	for _, b := range fixtureFiles(f) {
		for i := range fuzzProviders[:3] {
			f.Add(uint8(i), uint8(0), b)
		}
	}
	f.Add(uint8(0), uint8(1), []byte(oaText+oaFinish+oaUsage+"data: [DONE]\n\n"))
	f.Add(uint8(2), uint8(3), []byte("{\"error\":{\"code\":503}}\r\n"))
	f.Add(uint8(1), uint8(2), gz([]byte("event: message_stop\ndata: {}\n\n")))
	cts := []string{"text/event-stream", "", "application/json", "text/html", "text/plain"}
	f.Fuzz(func(t *testing.T, p, ct uint8, body []byte) {
		provider := fuzzProviders[int(p)%len(fuzzProviders)]
		enc := ""
		if ct >= 128 {
			enc = "gzip"
		}
		res := decodeBytes(provider, cts[int(ct)%len(cts)], enc, body)
		if res.Err == nil {
			if res.FinishReason == "" && providerRow(provider).Dialect != DialectAnthropic {
				t.Fatalf("success without an end signal: %+v", res)
			}
		} else {
			if res.Err.Class == "" || res.Err.Class == ClassOK {
				t.Fatalf("error without a class: %+v", res.Err)
			}
			checkPrintable(t, "message", res.Err.Message)
			checkPrintable(t, "snippet", res.Err.Snippet)
			if len(res.Err.Snippet) > 4*SnippetSize {
				t.Fatalf("snippet of %d bytes", len(res.Err.Snippet))
			}
		}
		if !utf8.ValidString(res.Text) {
			t.Fatalf("text is not valid UTF-8: %q", res.Text)
		}
		if strings.Contains(res.Text, testKey) || strings.Contains(sanitize.Text(res.Text), testKey) {
			t.Fatalf("the key in the text: %q", res.Text)
		}
		if res.Usage != nil && (res.Usage.InputTokens < 0 || res.Usage.OutputTokens < 0) {
			t.Fatalf("usage %+v", res.Usage)
		}
	})
}

func FuzzGeminiBareReader(f *testing.F) {
	for _, b := range fixtureFiles(f) {
		f.Add(b)
	}
	f.Add([]byte("data: {}\r\n\r\n{\"error\":\r\n{}}\r\n"))
	f.Add([]byte("{\"a\":\"}\\\"{\"}\r{}\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := io.ReadAll(newGeminiBareReader(iotestHalf{bytes.NewReader(in)}))
		if err != nil {
			t.Fatal(err)
		}
		// The same bytes as feeding the reader's state machine one byte at
		// a time (the reference its line fast path must match).
		ref := newGeminiBareReader(nil)
		for _, c := range in {
			ref.feed(c)
		}
		if ref.inBlock && ref.closing {
			ref.out = append(ref.out, '\n', '\n')
		}
		if !bytes.Equal(out, ref.out) {
			t.Fatalf("%q: fast %q, byte by byte %q", in, out, ref.out)
		}
		// Without a line that starts with '{' the stream passes unchanged.
		starts := len(in) > 0 && in[0] == '{' || bytes.Contains(in, []byte("\n{")) || bytes.Contains(in, []byte("\r{"))
		if !starts && !bytes.Equal(in, out) {
			t.Fatalf("changed %q into %q", in, out)
		}
		// Every input byte survives, in order (only data prefixes and
		// blank lines are added; a CRLF after a block may become LF).
		i := 0
		for _, c := range out {
			if i < len(in) && c == in[i] {
				i++
			} else if i < len(in) && in[i] == '\r' && c == '\n' {
				i++
			}
		}
		if i < len(in) {
			t.Fatalf("lost input byte %d of %q: %q", i, in, out)
		}
	})
}

// iotestHalf reads at most half of what is asked (at least one byte), to
// exercise split reads.
type iotestHalf struct{ r io.Reader }

func (h iotestHalf) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:(len(p)+1)/2]
	}
	return h.r.Read(p)
}

func FuzzParseError(f *testing.F) {
	for _, b := range fixtureFiles(f) {
		f.Add(uint8(0), 429, b)
		f.Add(uint8(2), 400, b)
	}
	f.Add(uint8(6), 403, []byte(`{"code":"x","error":"used all available credits"}`))
	f.Add(uint8(1), 200, []byte(`{"type":"error","error":{"type":"x","details":[1]},"request_id":7}`))
	f.Fuzz(func(t *testing.T, p uint8, status int, body []byte) {
		provider := fuzzProviders[int(p)%len(fuzzProviders)]
		h := http.Header{"Retry-After": {string(body[:min(len(body), 12)])}}
		e := ParseError(provider, status, h, body, fixedNow)
		if e == nil || e.Class == "" || e.Class == ClassOK || e.Status != status {
			t.Fatalf("%+v", e)
		}
		if e.Delay < 0 || e.Delay > MaxServerDelay || (e.DelaySource == SourceNone) != (e.Delay == 0) {
			t.Fatalf("delay %v from %q", e.Delay, e.DelaySource)
		}
		if e.Class == ClassQuota && e.Scope == ScopeNone {
			t.Fatalf("quota without a scope: %+v", e)
		}
		checkPrintable(t, "message", e.Message)
		checkPrintable(t, "snippet", e.Snippet)
		_ = e.Error()
		b := ParseErrorBody(body)
		_ = b.ProviderCode(provider)
		_ = b.impliedStatus()
	})
}

func FuzzParseDelays(f *testing.F) {
	for _, s := range []string{"1s", "6m0s", "2m59.56s", "20ms", "9m38.016s", "33740.910400305s", "56", "1.5",
		"Sun, 29 Nov 2026 21:01:00 GMT", "Please try again in 1.984999999s.", "Please retry in 44.097740004s.",
		"try again in 174ms", "try again in 20 seconds", "-1", "1e400", "NaN", "9223372036854775807ns"} {
		f.Add(s)
	}
	for _, b := range fixtureFiles(f) {
		f.Add(string(b[:min(len(b), 300)]))
	}
	f.Fuzz(func(t *testing.T, s string) {
		check := func(name string, d time.Duration, ok bool) {
			if ok && (d < 0 || d > MaxServerDelay) || !ok && d != 0 {
				t.Fatalf("%s(%q) = %v, %v", name, s, d, ok)
			}
		}
		d, ok := ParseDuration(s)
		check("ParseDuration", d, ok)
		d, ok = ParseRetryAfter(s, fixedNow)
		check("ParseRetryAfter", d, ok)
		if ok && d == 0 {
			t.Fatalf("zero retry-after accepted: %q", s)
		}
		d, ok = ParseRetryAfterMs(s)
		check("ParseRetryAfterMs", d, ok)
		d, ok = ParseMessageDelay(s)
		check("ParseMessageDelay", d, ok)
	})
}

func FuzzParseLimits(f *testing.F) {
	for _, p := range []string{"openai/ratelimit-headers-doc.txt", "groq/ratelimit-headers-doc.txt", "anthropic/ratelimit-headers-recorded-200.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", "fixtures", p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(0), string(b))
		f.Add(uint8(3), string(b))
	}
	f.Add(uint8(1), "anthropic-ratelimit-tokens-remaining: -1e99\nanthropic-ratelimit-tokens-reset: 2026-13-01T00:00:00Z\n")
	f.Fuzz(func(t *testing.T, p uint8, text string) {
		h := http.Header{}
		for _, line := range strings.Split(text, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			}
		}
		l := ParseLimits(fuzzProviders[int(p)%len(fuzzProviders)], h, fixedNow)
		if l == nil {
			return
		}
		if l.Empty() {
			t.Fatal("empty snapshot returned")
		}
		for _, w := range []*Window{l.Requests, l.Tokens, l.InputTokens, l.OutputTokens} {
			if w != nil && (w.Limit < 0 || w.Remaining < 0) {
				t.Fatalf("window %+v", w)
			}
		}
	})
}
