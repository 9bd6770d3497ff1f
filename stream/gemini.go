package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	_ "time/tzdata" // Gemini's daily quota resets at midnight Pacific, on any machine
	"unicode/utf8"
)

// The Gemini dialect: generateContent, streamed with alt=sse.
var geminiDialect = &dialectSpec{
	name:       DialectGemini,
	request:    geminiRequest,
	newDecoder: func() decoder { return &geminiDecoder{} },
	// error.status (the canonical google.rpc code), else error.code.
	codeOrder:           func(b ErrorBody) []string { return []string{b.Status, b.Code, b.Type} },
	endSignal:           "finishReason",
	bareJSON:            true,
	contextTooLongOn500: true,
	deadlineIsCaller:    true,
	dailyReset:          NextPacificMidnight,
	// Gemini sends no rate-limit headers and no request-id header.
}

// geminiRequest builds a generateContent body: POST
// {base}/v1beta/models/{model}:streamGenerateContent?alt=sse with
// x-goog-api-key.
func geminiRequest(u *url.URL, _ *ProviderInfo, req Request, maxTokens int, key string) (map[string]any, http.Header) {
	m := strings.TrimPrefix(req.Target.Model, "models/")
	u.Path += "/v1beta/models/" + m + ":streamGenerateContent" // u.String() escapes it
	q := u.Query()
	q.Set("alt", "sse")
	u.RawQuery = q.Encode()
	body := map[string]any{}
	geminiBody(body, req, maxTokens)
	h := http.Header{}
	if key != "" {
		h.Set("X-Goog-Api-Key", key)
	}
	return body, h
}

// geminiBody fills a generateContent body: contents (roles user and model),
// systemInstruction and generationConfig.
func geminiBody(body map[string]any, req Request, maxTokens int) {
	var contents []map[string]any
	for _, m := range req.turns() {
		role := "user"
		if m.Role == "assistant" {
			role = "model"
		}
		contents = append(contents, map[string]any{"role": role, "parts": []map[string]string{{"text": m.Content}}})
	}
	body["contents"] = contents
	if req.System != "" {
		body["systemInstruction"] = map[string]any{"parts": []map[string]string{{"text": req.System}}}
	}
	gc := map[string]any{"maxOutputTokens": maxTokens}
	if s := req.Sampling; s.Temperature != nil {
		gc["temperature"] = *s.Temperature
	}
	if s := req.Sampling; s.TopP != nil {
		gc["topP"] = *s.TopP
	}
	if len(req.Sampling.Stop) > 0 {
		gc["stopSequences"] = req.Sampling.Stop
	}
	body["generationConfig"] = gc
}

// NextPacificMidnight returns the next midnight in America/Los_Angeles after
// now, in UTC (Gemini's daily quotas reset then). The zone comes from the
// embedded tzdata, so it works on machines without a zoneinfo database.
func NextPacificMidnight(now time.Time) time.Time {
	loc, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		loc = pacificFallback(now)
	}
	t := now.In(loc)
	y, m, d := t.Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, loc).UTC()
}

// pacificFallback is US Pacific time by the post-2007 DST rule (second
// Sunday of March to first Sunday of November), for the unlikely case the
// embedded zone cannot load.
func pacificFallback(now time.Time) *time.Location {
	u := now.UTC()
	sunday := func(month time.Month, nth int) time.Time {
		t := time.Date(u.Year(), month, 1, 0, 0, 0, 0, time.UTC)
		for t.Weekday() != time.Sunday {
			t = t.AddDate(0, 0, 1)
		}
		return t.AddDate(0, 0, 7*(nth-1))
	}
	start := sunday(time.March, 2).Add(10 * time.Hour) // 02:00 PST
	end := sunday(time.November, 1).Add(9 * time.Hour) // 02:00 PDT
	if !u.Before(start) && u.Before(end) {
		return time.FixedZone("PDT", -7*3600)
	}
	return time.FixedZone("PST", -8*3600)
}

// geminiDecoder reads streamGenerateContent chunks: candidates[0].content.
// parts[].text, finishReason, usageMetadata and modelVersion, and an error
// object on a data: line or (see geminiBareReader) on its own.
type geminiDecoder struct{ decoded }

func (d *geminiDecoder) handleMap(_, data string) step {
	m := obj(strings.TrimSpace(data))
	if m == nil {
		return step{}
	}
	h := chunkHead{err: m["error"], model: jsonString(m["modelVersion"]), id: jsonString(m["responseId"])}
	if u := obj(string(m["usageMetadata"])); u != nil {
		h.in, h.out = rawNumber(u["promptTokenCount"]), rawNumber(u["candidatesTokenCount"])
		if r, ok := jsonInt(u["thoughtsTokenCount"]); ok { // reasoning tokens
			d.reasoning = r
		}
	}
	s, stop := d.open(h, data)
	if stop {
		return s
	}
	cands := jsonArray(m["candidates"])
	for i, c := range cands {
		if idx, ok := jsonInt(c["index"]); (ok && idx != 0) || (!ok && i > 0) {
			continue
		}
		for _, p := range jsonArray(field(c, "content", "parts")) {
			if string(p["thought"]) == "true" {
				s.progress, s.thinking = true, true // a thought is reasoning
				continue
			}
			if t := jsonString(p["text"]); t != "" {
				s.text += t
				s.progress = true
			} else if len(p) > 0 {
				s.progress = true
			}
		}
		if fr := jsonString(c["finishReason"]); fr != "" {
			d.finish = fr
			s.finished = true
		}
	}
	if len(cands) == 0 {
		if br := jsonString(field(m, "promptFeedback", "blockReason")); br != "" {
			d.finish = br
			s.finished = true
		}
	}
	return s
}
func (d *geminiDecoder) handle(typ, data string) step {
	if s, ok := d.fast(data, strings.TrimSpace(data)); ok {
		return s
	}
	return d.handleMap(typ, data)
}

// geminiFast is a streamGenerateContent chunk; its model version is read
// only until the decoder has one (geminiFastBody alone skips it).
type geminiFast struct {
	ModelVersion *string `json:"modelVersion"`
	ResponseID   *string `json:"responseId"`
	geminiFastBody
}

// geminiFastBody is the rest of a chunk.
type geminiFastBody struct {
	Error         json.RawMessage `json:"error"`
	UsageMetadata *struct {
		PromptTokenCount     *float64 `json:"promptTokenCount"`
		CandidatesTokenCount *float64 `json:"candidatesTokenCount"`
		ThoughtsTokenCount   *float64 `json:"thoughtsTokenCount"` // reasoning tokens
	} `json:"usageMetadata"`
	PromptFeedback json.RawMessage `json:"promptFeedback"`
	Candidates     []*struct {
		Index   *float64 `json:"index"`
		Content *struct {
			Parts []geminiFastPart `json:"parts"`
		} `json:"content"`
		FinishReason *string `json:"finishReason"`
	} `json:"candidates"`
}

// geminiFastPart is one content part, read as a struct (no map per part):
// its text and thought flag, and whether it has any key at all (a part with
// only a function call or inline data is still model output).
type geminiFastPart struct {
	Text    fastText        `json:"text"`
	Thought json.RawMessage `json:"thought"`
	keys    bool            // the object has a key
	null    bool            // the part was null (the map path skips it)
}

// UnmarshalJSON implements json.Unmarshaler; a part that is not an object
// fails the fast path, as it would fail []map[string]json.RawMessage.
func (p *geminiFastPart) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		*p = geminiFastPart{null: true}
		return nil
	}
	if len(b) == 0 || b[0] != '{' {
		return errNotObject
	}
	if t, ok := plainTextPart(b); ok { // the common part: just its text
		*p = geminiFastPart{Text: fastText{s: t, str: true}, keys: true}
		return nil
	}
	type plain geminiFastPart // without this method
	var q plain
	if err := fastUnmarshal(b, &q); err != nil {
		return err
	}
	*p = geminiFastPart(q)
	p.keys = len(bytes.TrimLeft(b[1:], " \t\r\n")) > 0 && bytes.TrimLeft(b[1:], " \t\r\n")[0] != '}'
	return nil
}

// plainTextPart reads a part that is exactly {"text":"..."} with a plain
// string (no escape, valid UTF-8), the common streamed part, without a
// second decoding: b is a valid JSON object (the outer decoder checked it),
// so a string with no backslash ends at the first quote.
func plainTextPart(b []byte) (string, bool) {
	const head = `{"text":"`
	if !bytes.HasPrefix(b, []byte(head)) || !bytes.HasSuffix(b, []byte(`"}`)) || len(b) < len(head)+2 {
		return "", false
	}
	inner := b[len(head) : len(b)-2]
	if bytes.IndexByte(inner, '"') >= 0 || bytes.IndexByte(inner, '\\') >= 0 || !utf8.Valid(inner) {
		return "", false
	}
	return string(inner), true
}

// errNotObject fails a fast decoding that met something other than an object.
var errNotObject = errors.New("not an object")

// fast decodes a trimmed chunk; ok is false when the map path must decide.
func (d *geminiDecoder) fast(data, trimmed string) (step, bool) {
	var c geminiFast
	var into any = &c
	if d.model != "" {
		into = &c.geminiFastBody
	}
	if !fastChunk(trimmed, into) {
		return step{}, false
	}
	h := chunkHead{err: c.Error, model: fastString(c.ModelVersion), id: fastString(c.ResponseID)}
	if u := c.UsageMetadata; u != nil {
		h.in, h.out = u.PromptTokenCount, u.CandidatesTokenCount
		if r, ok := fastInt(u.ThoughtsTokenCount); ok { // reasoning tokens
			d.reasoning = r
		}
	}
	s, stop := d.open(h, data)
	if stop {
		return s, true
	}
	i := 0 // counts objects only, as the map path's jsonArray does
	for _, cd := range c.Candidates {
		if cd == nil {
			continue
		}
		if idx, ok := fastInt(cd.Index); (ok && idx != 0) || (!ok && i > 0) {
			i++
			continue
		}
		i++
		if cd.Content != nil {
			for _, p := range cd.Content.Parts {
				if p.null {
					continue
				}
				if string(p.Thought) == "true" {
					s.progress, s.thinking = true, true // a thought is reasoning
					continue
				}
				if t := p.Text.text(jsonString); t != "" {
					s.text += t
					s.progress = true
				} else if p.keys {
					s.progress = true
				}
			}
		}
		if fr := fastString(cd.FinishReason); fr != "" {
			d.finish = fr
			s.finished = true
		}
	}
	if i == 0 {
		if br := jsonString(field(obj(string(c.PromptFeedback)), "blockReason")); br != "" {
			d.finish = br
			s.finished = true
		}
	}
	return s, true
}

// geminiBareReader passes an SSE stream through unchanged, except that a
// JSON object written on its own lines (not after "data:") becomes a data
// event. Gemini's SDKs accept an error sent that way: python-genai buffers
// non-"data: " lines by brace balance, go-genai reads any non-data block as
// {"error": ...}. Each line of such a block is prefixed "data: " and the
// block is closed with a blank line once its braces balance, so go-sse then
// sees an ordinary event. It buffers nothing beyond one read, so the event
// size limit stays go-sse's.
//
// Outside a block (the whole of an ordinary stream) it reads straight into
// the caller's buffer and only looks for a line that starts with '{' (two
// vectorised searches per read); from such a line on, the bytes go through
// feed, the state machine, until the block is closed.
type geminiBareReader struct {
	r       io.Reader
	in      []byte // feed's read buffer
	pending []byte // bytes read but not yet fed (from a block's start on)
	out     []byte
	err     error

	lineStart bool // the next byte starts a line
	afterCR   bool // the previous byte was a '\r' (a following '\n' belongs to it)

	inBlock bool // inside a bare JSON block
	depth   int
	inStr   bool
	esc     bool
	closing bool // the block's braces balanced; finish its line, then dispatch

	swallowLF bool // a CRLF's '\r' was already replaced by the dispatching blank line
}

func newGeminiBareReader(r io.Reader) *geminiBareReader {
	return &geminiBareReader{r: r, in: make([]byte, 4096), lineStart: true}
}

func (g *geminiBareReader) Read(p []byte) (int, error) {
	for len(g.out) == 0 {
		if len(g.pending) == 0 {
			if g.err != nil {
				return 0, g.err
			}
			if !g.inBlock && !g.swallowLF && len(p) > 0 {
				// Between blocks: the bytes pass unchanged up to a line
				// that starts one.
				n, err := g.r.Read(p)
				g.err = err
				k := g.blockStart(p[:n])
				g.passed(p[:k])
				g.pending = append(g.pending[:0], p[k:n]...)
				if k > 0 {
					return k, nil // g.err, if any, comes with the next Read
				}
				continue
			}
			n, err := g.r.Read(g.in)
			g.err = err
			g.pending = g.in[:n]
		}
		g.feedAll(g.pending)
		g.pending = g.pending[:0]
		if g.err != nil && g.inBlock && g.closing {
			g.out = append(g.out, '\n', '\n')
			g.inBlock = false
		}
	}
	n := copy(p, g.out)
	g.out = g.out[n:]
	return n, nil
}

// blockStart returns the index of the first '{' in b that starts a line
// (len(b) when none does): where a bare block begins.
func (g *geminiBareReader) blockStart(b []byte) int {
	if len(b) > 0 && g.lineStart && b[0] == '{' {
		return 0
	}
	k := len(b)
	if i := bytes.Index(b, []byte("\n{")); i >= 0 {
		k = i + 1
	}
	if i := bytes.Index(b[:k], []byte("\r{")); i >= 0 {
		k = i + 1
	}
	return k
}

// passed notes the state after bytes passed unchanged outside a block (as
// feed would leave it: only the last byte matters).
func (g *geminiBareReader) passed(b []byte) {
	if len(b) == 0 {
		return
	}
	last := b[len(b)-1]
	g.lineStart = last == '\n' || last == '\r'
	g.afterCR = last == '\r'
}

// feedAll runs buf through feed, passing the middle of lines outside a
// block unchanged in one copy.
func (g *geminiBareReader) feedAll(buf []byte) {
	g.out = g.out[:0]
	for i := 0; i < len(buf); {
		if !g.inBlock && !g.lineStart && !g.afterCR {
			// Mid-line outside a block: up to the line's end the
			// bytes pass unchanged, as feed would pass them one by one.
			j := bytes.IndexAny(buf[i:], "\r\n")
			if j < 0 {
				j = len(buf) - i
			}
			if j > 0 {
				g.out = append(g.out, buf[i:i+j]...)
				g.swallowLF = false
				i += j
				continue
			}
		}
		g.feed(buf[i])
		i++
	}
}

func (g *geminiBareReader) feed(c byte) {
	crlf := g.afterCR && c == '\n'
	g.afterCR = c == '\r'
	if crlf { // the second byte of a CRLF line end
		if !g.swallowLF {
			g.out = append(g.out, c)
		}
		g.swallowLF = false
		return
	}
	g.swallowLF = false
	eol := c == '\n' || c == '\r'

	if !g.inBlock {
		if g.lineStart && c == '{' {
			g.inBlock, g.depth, g.inStr, g.esc, g.closing = true, 0, false, false, false
			// A blank line first dispatches whatever event was pending.
			g.out = append(g.out, '\n')
		} else {
			g.out = append(g.out, c)
			g.lineStart = eol
			return
		}
	}

	if g.closing {
		if eol {
			g.out = append(g.out, '\n', '\n')
			g.inBlock = false
			g.lineStart = true
			g.swallowLF = c == '\r'
			return
		}
		g.out = append(g.out, c)
		return
	}
	if g.lineStart {
		g.out = append(g.out, "data: "...)
	}
	g.out = append(g.out, c)
	g.lineStart = eol
	switch {
	case g.inStr && g.esc:
		g.esc = false
	case g.inStr && c == '\\':
		g.esc = true
	case g.inStr && c == '"':
		g.inStr = false
	case g.inStr:
	case c == '"':
		g.inStr = true
	case c == '{':
		g.depth++
	case c == '}':
		g.depth--
		if g.depth <= 0 {
			g.closing = true
		}
	}
}
