package stream

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// The OpenAI dialect: Chat Completions, spoken by OpenAI and every
// OpenAI-compatible API (Groq, DeepSeek, Mistral, xAI). Per-provider
// differences (stream_options, the max-tokens field, Groq's per-day request
// window) are columns of the provider table.
var openaiDialect = &dialectSpec{
	name:       DialectOpenAI,
	request:    openaiRequest,
	newDecoder: func() decoder { return &openaiDecoder{} },
	// error.code, else error.type.
	codeOrder:       func(b ErrorBody) []string { return []string{b.Code, b.Type, b.Status} },
	endSignal:       "finish_reason",
	limits:          openaiLimits,
	requestIDHeader: "X-Request-Id",
}

// openaiRequest builds a Chat Completions body: POST {base}/chat/completions
// with a bearer token.
func openaiRequest(u *url.URL, p *ProviderInfo, req Request, maxTokens int, key string) (map[string]any, http.Header) {
	u.Path += "/chat/completions"
	body := map[string]any{
		"model":    req.Target.Model,
		"messages": openAIMessages(req),
		"stream":   true,
	}
	addSampling(body, "stop", req.Sampling)
	if !p.NoStreamOptions {
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	mt := p.MaxTokensField
	if mt == "" {
		mt = "max_tokens"
	}
	body[mt] = maxTokens
	h := http.Header{}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	return body, h
}

// openAIMessages renders the conversation as Chat Completions messages, the
// system prompt first.
func openAIMessages(req Request) []map[string]string {
	var msgs []map[string]string
	if req.System != "" {
		msgs = append(msgs, map[string]string{"role": "system", "content": req.System})
	}
	for _, m := range req.turns() {
		msgs = append(msgs, map[string]string{"role": m.Role, "content": m.Content})
	}
	return msgs
}

// openaiLimits reads x-ratelimit-{limit,remaining,reset}-{requests,tokens}
// (resets are durations; the table's RequestsPerDay marks a request window
// that is per day, as Groq's is).
func openaiLimits(p *ProviderInfo, h http.Header, now time.Time) *Limits {
	l := &Limits{At: now}
	l.Requests = xWindow(h, &openaiHeaders[0], now)
	l.Tokens = xWindow(h, &openaiHeaders[1], now)
	if l.Requests != nil && p.RequestsPerDay {
		l.Requests.PerDay = true
	}
	if l.Empty() {
		return nil
	}
	return l
}

// openaiHeaders are each window's limit, remaining and reset headers, in
// canonical form (reading them allocates nothing). Never written.
var openaiHeaders = [2][3]string{
	{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"},
	{"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"},
}

func xWindow(h http.Header, names *[3]string, now time.Time) *Window {
	lim, okL := parseCount(headerValue(h, names[0]))
	rem, okR := parseCount(headerValue(h, names[1]))
	reset, okT := parseReset(headerValue(h, names[2]), now)
	if !okL && !okR && !okT {
		return nil
	}
	return &Window{Limit: lim, Remaining: rem, HasLimit: okL, HasRemaining: okR, Reset: reset}
}

// openaiDecoder reads Chat Completions chunks (OpenAI and every compatible
// API): text in choices[].delta.content, finish_reason, a usage chunk with
// empty choices after it, and data: [DONE].
type openaiDecoder struct {
	decoded
	chunk openaiChunk // the fast path's, reused
}

func (d *openaiDecoder) handleMap(typ, data string) step {
	trimmed := strings.TrimSpace(data)
	if strings.HasPrefix(trimmed, "[DONE]") {
		return step{done: true, finished: d.finish != "", recognize: true}
	}
	if typ == "error" {
		return errorStep(data)
	}
	m := obj(trimmed)
	if m == nil {
		return step{}
	}
	h := chunkHead{err: m["error"], model: jsonString(m["model"]), id: jsonString(m["id"])}
	u := obj(string(m["usage"]))
	xg := obj(string(m["x_groq"]))
	if u == nil && xg != nil {
		u = obj(string(xg["usage"])) // Groq's own envelope: on the last chunk, usage
	}
	if u != nil {
		h.in, h.out = rawNumber(u["prompt_tokens"]), rawNumber(u["completion_tokens"])
		if r, ok := jsonInt(field(u, "completion_tokens_details", "reasoning_tokens")); ok {
			d.reasoning = r
		}
	}
	s, stop := d.open(h, trimmed)
	if stop {
		return s
	}
	if id := jsonString(xg["id"]); id != "" && d.requestID == "" {
		d.requestID = id // and Groq's request id
	}
	for _, c := range jsonArray(m["choices"]) {
		if idx, ok := jsonInt(c["index"]); ok && idx != 0 {
			continue
		}
		delta := obj(string(c["delta"]))
		if delta != nil {
			if t := contentText(delta["content"]); t != "" {
				s.text += t
				s.progress = true
			}
			for _, k := range []string{"reasoning_content", "reasoning", "refusal", "tool_calls"} {
				if !isNull(delta[k]) {
					s.progress = true
				}
			}
			s.thinking = s.thinking || !isNull(delta["reasoning_content"]) || !isNull(delta["reasoning"])
		}
		if fr := jsonString(c["finish_reason"]); fr != "" {
			d.finish = fr
			s.finished = true
		}
	}
	return s
}

// deltaText is contentText for the fast path's raw delta content: a string
// with escapes is unquoted by jsontext, which reads it as encoding/json
// does (what it refuses, a lone surrogate among them, goes to
// contentText), in about a quarter of encoding/json's time.
func deltaText(raw json.RawMessage) string {
	if len(raw) > 1 && raw[0] == '"' {
		if b, err := jsontext.AppendUnquote(nil, raw); err == nil {
			return string(b)
		}
	}
	return contentText(raw)
}

// contentText reads a delta's content: a string, or (Mistral) a list of
// typed parts whose text parts are joined.
func contentText(raw json.RawMessage) string {
	if isNull(raw) {
		return ""
	}
	if s := jsonString(raw); s != "" {
		return s
	}
	var b strings.Builder
	for _, p := range jsonArray(raw) {
		if t := jsonString(p["type"]); t == "" || t == "text" {
			b.WriteString(jsonString(p["text"]))
		}
	}
	return b.String()
}

func (d *openaiDecoder) handle(typ, data string) step {
	trimmed := strings.TrimSpace(data)
	if typ != "error" && !strings.HasPrefix(trimmed, "[DONE]") {
		if s, ok := d.fast(trimmed); ok {
			return s
		}
	}
	return d.handleMap(typ, data)
}

// openaiChunk is the part of a Chat Completions chunk the fast path reads,
// decoded token by token with encoding/json/v2's jsontext (UnmarshalJSONFrom)
// into fields reused from chunk to chunk: a text delta is a substring of
// the event's data (no copy when it has no escapes), the model is read
// only until it is known, and nothing is allocated for an ordinary chunk
// (the struct decoding it replaces took 1.7 us and 6 allocations per chunk,
// most of the proxy's decoding cost). It reads what the struct decoding
// read and refuses what it refused: a field of another type than its own
// (then the map path decides), and whatever jsontext refuses (invalid
// UTF-8, a duplicate name), so whatever it accepts the map path reads the
// same way (FuzzFastPathMatchesMapPath).
type openaiChunk struct {
	src       string // the chunk: every string below is a substring of it
	wantModel bool   // read the model (the stream has not named it yet)
	wantID    bool   // read the id (the stream has not given one yet)

	model   *string
	modelV  string
	id      string // the chunk's id, read with the model ("": none)
	err     string // the raw error member ("": none)
	usage   bool   // a usage object was given
	in, out *float64
	inV     float64
	outV    float64
	reason  *float64 // completion_tokens_details.reasoning_tokens
	reasonV float64
	xgroq   string // the raw x_groq member ("": none)
	choices []openaiChoice
}

// openaiChoice is one non-null element of choices.
type openaiChoice struct {
	index   *float64
	indexV  float64
	delta   bool // an object (not null) was given
	content fastText
	// The raw reasoning_content, reasoning, refusal and tool_calls ("":
	// absent).
	reasoningContent, reasoning, refusal, toolCalls string
	finish                                          *string
	finishV                                         string
}

// errFastType is a chunk field of a type the fast path does not read: the
// map path decides.
var errFastType = errors.New("stream: a chunk field of an unexpected type")

// UnmarshalJSONFrom implements json.UnmarshalerFrom (the whole chunk, from
// a decoder over c.src).
func (c *openaiChunk) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*c = openaiChunk{src: c.src, wantModel: c.wantModel, wantID: c.wantID, choices: c.choices[:0]}
	return c.object(dec, func(name []byte) error {
		switch string(name) {
		case "model":
			if !c.wantModel {
				return dec.SkipValue()
			}
			s, ok, err := c.stringOrNull(dec)
			if ok {
				c.modelV, c.model = s, &c.modelV
			}
			return err
		case "id":
			if !c.wantID {
				return dec.SkipValue()
			}
			s, _, err := c.stringOrNull(dec)
			c.id = s
			return err
		case "error":
			v, err := c.raw(dec)
			c.err = v
			return err
		case "usage":
			return c.readUsage(dec)
		case "x_groq":
			v, err := c.raw(dec)
			c.xgroq = v
			return err
		case "choices":
			return c.readChoices(dec)
		}
		return dec.SkipValue()
	})
}

// object reads an object (the next value must be one), calling member for
// each name with the decoder at its value, which member must read.
func (c *openaiChunk) object(dec *jsontext.Decoder, member func(name []byte) error) error {
	if dec.PeekKind() != '{' {
		return errFastType
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		if err := member(unquoted(v)); err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

// unquoted is a JSON string value's text: a view of v when it has no
// escapes (the common case), else unquoted into a new slice.
func unquoted(v jsontext.Value) []byte {
	if bytes.IndexByte(v, '\\') < 0 {
		return v[1 : len(v)-1]
	}
	b, _ := jsontext.AppendUnquote(nil, v) // jsontext has validated it
	return b
}

// raw reads the next value and returns it as a substring of src.
func (c *openaiChunk) raw(dec *jsontext.Decoder) (string, error) {
	v, err := dec.ReadValue()
	if err != nil {
		return "", err
	}
	end := int(dec.InputOffset())
	return c.src[end-len(v) : end], nil
}

// stringOrNull reads a string (ok) or null (not ok); any other kind is
// errFastType.
func (c *openaiChunk) stringOrNull(dec *jsontext.Decoder) (s string, ok bool, err error) {
	switch dec.PeekKind() {
	case 'n':
		_, err = dec.ReadValue()
		return "", false, err
	case '"':
		v, err := c.raw(dec)
		if err != nil {
			return "", false, err
		}
		if strings.IndexByte(v, '\\') < 0 {
			return v[1 : len(v)-1], true, nil
		}
		b, err := jsontext.AppendUnquote(nil, v)
		return string(b), err == nil, err
	}
	return "", false, errFastType
}

// number reads a number into *v and points *p at it, or null (leaving *p
// nil); any other kind is errFastType.
func number(dec *jsontext.Decoder, p **float64, v *float64) error {
	switch dec.PeekKind() {
	case 'n':
		_, err := dec.ReadValue()
		return err
	case '0':
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		f, err := tok.Float()
		if err != nil {
			return err
		}
		*v, *p = f, v
		return nil
	}
	return errFastType
}

// nullOr reads null (true: nothing else to read) or checks the next value
// is of kind k.
func nullOr(dec *jsontext.Decoder, k jsontext.Kind) (bool, error) {
	switch dec.PeekKind() {
	case 'n':
		_, err := dec.ReadValue()
		return true, err
	case k:
		return false, nil
	}
	return false, errFastType
}

func (c *openaiChunk) readUsage(dec *jsontext.Decoder) error {
	if null, err := nullOr(dec, '{'); null || err != nil {
		return err
	}
	c.usage = true
	return c.object(dec, func(name []byte) error {
		switch string(name) {
		case "prompt_tokens":
			return number(dec, &c.in, &c.inV)
		case "completion_tokens":
			return number(dec, &c.out, &c.outV)
		case "completion_tokens_details":
			if null, err := nullOr(dec, '{'); null || err != nil {
				return err
			}
			return c.object(dec, func(name []byte) error {
				if string(name) == "reasoning_tokens" {
					return number(dec, &c.reason, &c.reasonV)
				}
				return dec.SkipValue()
			})
		}
		return dec.SkipValue()
	})
}

func (c *openaiChunk) readChoices(dec *jsontext.Decoder) error {
	if null, err := nullOr(dec, '['); null || err != nil {
		return err
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != ']' {
		if null, err := nullOr(dec, '{'); err != nil {
			return err
		} else if null {
			continue // the map path skips it too
		}
		c.choices = append(c.choices, openaiChoice{})
		ch := &c.choices[len(c.choices)-1]
		err := c.object(dec, func(name []byte) error {
			switch string(name) {
			case "index":
				return number(dec, &ch.index, &ch.indexV)
			case "delta":
				return c.readDelta(dec, ch)
			case "finish_reason":
				s, ok, err := c.stringOrNull(dec)
				if ok {
					ch.finishV, ch.finish = s, &ch.finishV
				}
				return err
			}
			return dec.SkipValue()
		})
		if err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

func (c *openaiChunk) readDelta(dec *jsontext.Decoder, ch *openaiChoice) error {
	if null, err := nullOr(dec, '{'); null || err != nil {
		return err
	}
	ch.delta = true
	return c.object(dec, func(name []byte) error {
		var err error
		switch string(name) {
		case "content":
			var v string
			if v, err = c.raw(dec); err == nil {
				if v[0] == '"' && strings.IndexByte(v, '\\') < 0 {
					ch.content = fastText{s: v[1 : len(v)-1], str: true}
				} else {
					ch.content = fastText{raw: bytesOf(v)}
				}
			}
		case "reasoning_content":
			ch.reasoningContent, err = c.raw(dec)
		case "reasoning":
			ch.reasoning, err = c.raw(dec)
		case "refusal":
			ch.refusal, err = c.raw(dec)
		case "tool_calls":
			ch.toolCalls, err = c.raw(dec)
		default:
			err = dec.SkipValue()
		}
		return err
	})
}

// fast decodes trimmed (the data, already past [DONE] and error events);
// ok is false when the map path must decide.
func (d *openaiDecoder) fast(trimmed string) (step, bool) {
	c := &d.chunk
	c.src, c.wantModel, c.wantID = trimmed, d.model == "", d.respID == ""
	ok := c.scan(trimmed) || fastChunk(trimmed, c)
	c.src = "" // the event's data is not kept past its step
	if !ok {
		return step{}, false
	}
	h := chunkHead{err: bytesOf(c.err), model: strings.Clone(fastString(c.model)), id: strings.Clone(c.id)}
	if c.usage {
		h.in, h.out = c.in, c.out
		if r, ok := fastInt(c.reason); ok {
			d.reasoning = r
		}
	}
	var xg map[string]json.RawMessage
	if c.xgroq != "" {
		if xg = obj(c.xgroq); xg != nil && !c.usage {
			if u := obj(string(xg["usage"])); u != nil {
				h.in, h.out = rawNumber(u["prompt_tokens"]), rawNumber(u["completion_tokens"])
			}
		}
	}
	s, stop := d.open(h, trimmed)
	if stop {
		return s, true
	}
	if id := jsonString(xg["id"]); id != "" && d.requestID == "" {
		d.requestID = id
	}
	for i := range c.choices {
		ch := &c.choices[i]
		if idx, ok := fastInt(ch.index); ok && idx != 0 {
			continue
		}
		if ch.delta {
			if t := ch.content.text(deltaText); t != "" {
				s.text += t
				s.progress = true
			}
			rc, r := bytesOf(ch.reasoningContent), bytesOf(ch.reasoning)
			if !isNull(rc) || !isNull(r) || !isNull(bytesOf(ch.refusal)) || !isNull(bytesOf(ch.toolCalls)) {
				s.progress = true
			}
			s.thinking = s.thinking || !isNull(rc) || !isNull(r)
		}
		if fr := fastString(ch.finish); fr != "" {
			d.finish = strings.Clone(fr)
			s.finished = true
		}
	}
	return s, true
}

// scan is UnmarshalJSONFrom without jsontext, for the chunks a stream is
// made of: one pass over src with no decoder state, filling c exactly as
// UnmarshalJSONFrom does. It accepts only plain JSON, a subset of what
// both other paths accept alike: it gives up (false, c then undefined) on
// an escape in a name or in the model or a finish reason (a text delta's
// escapes are left to encoding/json, as UnmarshalJSONFrom leaves them), a
// control byte or invalid UTF-8 in a string, a name repeated among those
// it reads, a field of another type than its own, a number strconv
// refuses, nesting past scanMaxDepth, or anything that is not JSON, and
// the jsontext path then decides (and after it the map path). Repeated
// names among those it skips change nothing in the map path's reading
// either.
func (c *openaiChunk) scan(src string) bool {
	*c = openaiChunk{src: src, wantModel: c.wantModel, wantID: c.wantID, choices: c.choices[:0]}
	p := jscan{s: src}
	var seen uint8
	ok := p.object(0, func(name string) bool {
		var bit uint8
		switch name {
		case "model":
			bit = 1
			if !c.wantModel {
				return p.skip(1)
			}
			s, ok, isStr := p.stringOrNull()
			if isStr {
				c.modelV, c.model = s, &c.modelV
			}
			return ok && p.once(&seen, bit)
		case "id":
			if !c.wantID {
				return p.skip(1)
			}
			s, ok, isStr := p.stringOrNull()
			if isStr {
				c.id = s
			}
			return ok
		case "error":
			bit = 2
			c.err = p.raw(1)
		case "usage":
			bit = 4
			return p.once(&seen, bit) && c.scanUsage(&p)
		case "x_groq":
			bit = 8
			c.xgroq = p.raw(1)
		case "choices":
			bit = 16
			return p.once(&seen, bit) && c.scanChoices(&p)
		default:
			return p.skip(1)
		}
		return !p.failed && p.once(&seen, bit)
	})
	return ok && p.end()
}

func (c *openaiChunk) scanUsage(p *jscan) bool {
	if null, ok := p.nullOr('{'); null || !ok {
		return ok
	}
	c.usage = true
	var seen uint8
	return p.object(1, func(name string) bool {
		switch name {
		case "prompt_tokens":
			return p.once(&seen, 1) && p.number(&c.in, &c.inV)
		case "completion_tokens":
			return p.once(&seen, 2) && p.number(&c.out, &c.outV)
		case "completion_tokens_details":
			if !p.once(&seen, 4) {
				return false
			}
			if null, ok := p.nullOr('{'); null || !ok {
				return ok
			}
			var seen2 uint8
			return p.object(2, func(name string) bool {
				if name == "reasoning_tokens" {
					return p.once(&seen2, 1) && p.number(&c.reason, &c.reasonV)
				}
				return p.skip(3)
			})
		}
		return p.skip(2)
	})
}

func (c *openaiChunk) scanChoices(p *jscan) bool {
	if null, ok := p.nullOr('['); null || !ok {
		return ok
	}
	return p.array(1, func() bool {
		if null, ok := p.nullOr('{'); null || !ok {
			return ok // the map path skips a null element too
		}
		c.choices = append(c.choices, openaiChoice{})
		ch := &c.choices[len(c.choices)-1]
		var seen uint8
		return p.object(2, func(name string) bool {
			switch name {
			case "index":
				return p.once(&seen, 1) && p.number(&ch.index, &ch.indexV)
			case "delta":
				return p.once(&seen, 2) && c.scanDelta(p, ch)
			case "finish_reason":
				s, ok, isStr := p.stringOrNull()
				if isStr {
					ch.finishV, ch.finish = s, &ch.finishV
				}
				return ok && p.once(&seen, 4)
			}
			return p.skip(3)
		})
	})
}

func (c *openaiChunk) scanDelta(p *jscan, ch *openaiChoice) bool {
	if null, ok := p.nullOr('{'); null || !ok {
		return ok
	}
	ch.delta = true
	var seen uint8
	return p.object(3, func(name string) bool {
		var bit uint8
		switch name {
		case "content":
			bit = 1
			v := p.raw(4)
			if p.failed {
				return false
			}
			if v[0] == '"' && strings.IndexByte(v, '\\') < 0 {
				ch.content = fastText{s: v[1 : len(v)-1], str: true}
			} else {
				ch.content = fastText{raw: bytesOf(v)}
			}
		case "reasoning_content":
			bit = 2
			ch.reasoningContent = p.raw(4)
		case "reasoning":
			bit = 4
			ch.reasoning = p.raw(4)
		case "refusal":
			bit = 8
			ch.refusal = p.raw(4)
		case "tool_calls":
			bit = 16
			ch.toolCalls = p.raw(4)
		default:
			return p.skip(4)
		}
		return !p.failed && p.once(&seen, bit)
	})
}

// scanMaxDepth bounds the nesting openaiChunk.scan reads (deeper: it gives
// up, and the jsontext path decides).
const scanMaxDepth = 32

// jscan reads plain JSON from s (see openaiChunk.scan): every method
// reports false (and failed is set) on anything it does not accept.
type jscan struct {
	s      string
	i      int
	failed bool
}

func (p *jscan) fail() bool {
	p.failed = true
	return false
}

// once marks bit in *seen, false when it was already (a repeated name).
func (p *jscan) once(seen *uint8, bit uint8) bool {
	if *seen&bit != 0 {
		return p.fail()
	}
	*seen |= bit
	return true
}

func (p *jscan) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// end reports whether only whitespace is left.
func (p *jscan) end() bool {
	p.ws()
	return p.i == len(p.s) || p.fail()
}

// peek is the next byte after whitespace (0 at the end).
func (p *jscan) peek() byte {
	if p.i < len(p.s) && p.s[p.i] > ' ' { // compact JSON: no whitespace to skip
		return p.s[p.i]
	}
	p.ws()
	if p.i == len(p.s) {
		return 0
	}
	return p.s[p.i]
}

// jsonPlain marks the bytes a JSON string holds as they are: not a quote,
// a backslash, a control byte or a byte of a multi-byte rune. Never
// written.
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str reads a string and returns what is between its quotes, and whether
// that has escapes (valid ones: what the string means is then for
// encoding/json to read).
func (p *jscan) str() (v string, esc, ok bool) {
	if p.peek() != '"' {
		return "", false, p.fail()
	}
	s := p.s
	start, high := p.i+1, false
	j := start
	// Eight bytes at a time while none is a quote, a backslash, a control
	// byte or a byte of a multi-byte rune (a word that may hold one, the
	// bit tricks erring only that way, goes to the loop byte by byte).
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for b := bytesOf(s); j+8 <= len(b); j += 8 {
		x := binary.LittleEndian.Uint64(b[j:])
		q, bs := x^('"'*ones), x^('\\'*ones)
		if ((x-0x20*ones)|(q-ones)|(bs-ones)|x)&highs != 0 {
			break
		}
	}
	for j < len(s) {
		c := s[j]
		if jsonPlain[c] {
			j++
			continue
		}
		switch {
		case c == '"':
			v := s[start:j]
			if high && !utf8.ValidString(v) {
				return "", false, p.fail()
			}
			p.i = j + 1
			return v, esc, true
		case c == '\\':
			esc = true
			if j+1 == len(s) {
				return "", false, p.fail()
			}
			switch s[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(s) || !isHex4(s[j+2:j+6]) {
					return "", false, p.fail()
				}
				j += 6
			default:
				return "", false, p.fail()
			}
		case c < 0x20:
			return "", false, p.fail()
		default:
			high = true
			j++
		}
	}
	return "", false, p.fail()
}

func isHex4(h string) bool {
	for i := range 4 {
		if c := h[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// plainStr reads a string without escapes.
func (p *jscan) plainStr() (string, bool) {
	v, esc, ok := p.str()
	if esc {
		return "", p.fail()
	}
	return v, ok
}

// lit reads the literal w.
func (p *jscan) lit(w string) bool {
	if !strings.HasPrefix(p.s[p.i:], w) {
		return p.fail()
	}
	p.i += len(w)
	return true
}

// num reads a number (JSON's grammar) and returns its text.
func (p *jscan) num() (string, bool) {
	s, start := p.s, p.i
	i := start
	digits := func() bool {
		j := i
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		return i > j
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case !digits():
		return "", p.fail()
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return "", p.fail()
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return "", p.fail()
		}
	}
	p.i = i
	return s[start:i], true
}

// skip reads any value at nesting depth.
func (p *jscan) skip(depth int) bool {
	switch c := p.peek(); {
	case c == '"':
		_, _, ok := p.str()
		return ok
	case c == '{':
		return p.object(depth, func(string) bool { return p.skip(depth + 1) })
	case c == '[':
		return p.array(depth, func() bool { return p.skip(depth + 1) })
	case c == 't':
		return p.lit("true")
	case c == 'f':
		return p.lit("false")
	case c == 'n':
		return p.lit("null")
	case c == '-' || '0' <= c && c <= '9':
		_, ok := p.num()
		return ok
	}
	return p.fail()
}

// raw reads any value and returns its text ("" and p.failed when it is
// not one).
func (p *jscan) raw(depth int) string {
	p.ws()
	start := p.i
	if !p.skip(depth) {
		return ""
	}
	return p.s[start:p.i]
}

// object reads an object, calling member with each name (the scanner at
// its value, which member reads).
func (p *jscan) object(depth int, member func(name string) bool) bool {
	if depth > scanMaxDepth || p.peek() != '{' {
		return p.fail()
	}
	p.i++
	if p.peek() == '}' {
		p.i++
		return true
	}
	for {
		name, ok := p.plainStr()
		if !ok || p.peek() != ':' {
			return p.fail()
		}
		p.i++
		if !member(name) {
			return p.fail()
		}
		switch p.peek() {
		case ',':
			p.i++
		case '}':
			p.i++
			return true
		default:
			return p.fail()
		}
	}
}

// array reads an array, calling elem for each element.
func (p *jscan) array(depth int, elem func() bool) bool {
	if depth > scanMaxDepth || p.peek() != '[' {
		return p.fail()
	}
	p.i++
	if p.peek() == ']' {
		p.i++
		return true
	}
	for {
		if !elem() {
			return p.fail()
		}
		switch p.peek() {
		case ',':
			p.i++
		case ']':
			p.i++
			return true
		default:
			return p.fail()
		}
	}
}

// nullOr reads null (null true) or checks that the next value opens with
// k ('{' or '['), leaving it to be read.
func (p *jscan) nullOr(k byte) (null, ok bool) {
	switch p.peek() {
	case 'n':
		return true, p.lit("null")
	case k:
		return false, true
	}
	return false, p.fail()
}

// stringOrNull reads a string (isStr) or null; any other value fails.
func (p *jscan) stringOrNull() (s string, ok, isStr bool) {
	switch p.peek() {
	case 'n':
		return "", p.lit("null"), false
	case '"':
		s, ok := p.plainStr()
		return s, ok, ok
	}
	return "", p.fail(), false
}

// number reads a number into *v and points *p at it, or null (leaving *ptr
// nil); any other value, or one strconv refuses, fails.
func (p *jscan) number(ptr **float64, v *float64) bool {
	switch c := p.peek(); {
	case c == 'n':
		return p.lit("null")
	case c == '-' || '0' <= c && c <= '9':
		s, ok := p.num()
		if !ok {
			return false
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return p.fail()
		}
		*v, *ptr = f, v
		return true
	}
	return p.fail()
}
