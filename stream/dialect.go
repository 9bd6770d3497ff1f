package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/limitscope/limitscope/internal/jsonenc"
	"github.com/limitscope/limitscope/internal/sanitize"
)

// A dialect is one wire format, written once in its own file (openai.go,
// anthropic.go, gemini.go) and selected by the provider table's Dialect
// column. Everything that differs between wire formats is a field here;
// everything that differs between providers of one format is a column of
// the provider table (providers.go). Adding a dialect is one file that
// defines its dialectSpec, plus its entry in dialects and its constant.
type dialectSpec struct {
	name Dialect
	// request sets u's path and query and returns the JSON body and the
	// auth headers of a streaming request for req (maxTokens already
	// defaulted; key empty when there is none).
	request func(u *url.URL, p *ProviderInfo, req Request, maxTokens int, key string) (map[string]any, http.Header)
	// newDecoder returns a decoder of the dialect's SSE events.
	newDecoder func() decoder
	// codeOrder lists an error body's codes, most specific first.
	codeOrder func(b ErrorBody) []string
	// endSignal names the event that ends a complete stream, for messages.
	endSignal string
	// bareJSON: the stream may carry JSON objects outside data: lines
	// (read through geminiBareReader), so a body starting with '{' is not
	// taken for a JSON answer sent instead of a stream.
	bareJSON bool
	// limits reads the dialect's rate-limit headers (nil: it sends none).
	limits func(p *ProviderInfo, h http.Header, now time.Time) *Limits
	// requestIDHeader is the response header the dialect's servers put the
	// request id in ("" when they send none).
	requestIDHeader string
	// class-table rows that hold for this dialect only; see classify.
	contextTooLongOn500 bool // a 500 whose message says the context is too long is the caller's (Gemini)
	deadlineIsCaller    bool // DEADLINE_EXCEEDED on 504 (or in a stream) is the caller's: the request is too big for the deadline (Gemini)
	// dailyReset says when a per-day quota ends (nil: after the server's
	// delay, when it gave one).
	dailyReset func(now time.Time) time.Time

	// Hooks of the non-SSE dialects (nil: the SSE defaults); Bedrock's.

	// accept is the Accept header ("" = text/event-stream).
	accept string
	// frames reads the stream's messages instead of SSE (nil: SSE events),
	// refusing one longer than maxEvent with bufio.ErrTooLong.
	frames func(r io.Reader, maxEvent int) iter.Seq2[wireEvent, error]
	// baseURL rewrites the base URL for one request before it is parsed
	// (Bedrock: its {region}).
	baseURL func(base string, ep Endpoint, req Request) string
	// sign authenticates the finished request (Bedrock: SigV4), with the
	// body as sent; now is the client's clock.
	sign func(ctx context.Context, hr *http.Request, body []byte, p *ProviderInfo, ep Endpoint, req Request, now time.Time) error
	// errorBody completes a parsed HTTP error body from the headers and the
	// raw body (Bedrock: x-amzn-ErrorType, __type).
	errorBody func(h http.Header, body []byte, b *ErrorBody)
	// classRows are the dialect's own class rows, checked before the shared
	// table (nil: none); ok false falls through to the table.
	classRows func(d *dialectSpec, status int, b ErrorBody) (v verdict, ok bool)
}

// wireEvent is one message of a stream: an SSE event's type and data, or
// a dialect's own framing's equivalent (see dialectSpec.frames).
type wireEvent struct{ Type, Data string }

// dialects maps each Dialect to its spec; it is never written after init.
var dialects = map[Dialect]*dialectSpec{
	DialectOpenAI:       openaiDialect,
	DialectAnthropic:    anthropicDialect,
	DialectGemini:       geminiDialect,
	DialectResponses:    responsesDialect,
	DialectInteractions: interactionsDialect,
	DialectBedrock:      bedrockDialect,
}

// spec returns the provider's dialect (OpenAI-compatible when the table
// names none it knows).
func (p *ProviderInfo) spec() *dialectSpec {
	if d, ok := dialects[p.Dialect]; ok {
		return d
	}
	return dialects[DialectOpenAI]
}

// newDecoder returns a decoder for dialect d.
func newDecoder(d Dialect) decoder {
	p := ProviderInfo{Dialect: d}
	return p.spec().newDecoder()
}

// DefaultMaxTokens is the token cap sent when Request.MaxTokens is not set
// (Anthropic requires one).
const DefaultMaxTokens = 1024

// userAgent names limitscope to the providers.
const userAgent = "limitscope/0"

// BuildRequest builds the provider's streaming HTTP request for req: the URL,
// the auth header and the JSON body of ep's dialect. It is exported so the
// simulator's tests can check what goes on the wire.
func BuildRequest(ctx context.Context, ep Endpoint, req Request) (*http.Request, error) {
	provider := ep.Provider
	if provider == "" {
		provider = req.Target.Provider
	}
	info, ok := lookupProvider(provider)
	if !ok {
		return nil, fmt.Errorf("unknown provider %q", provider)
	}
	return buildRequest(ctx, &info, ep, req)
}

func buildRequest(ctx context.Context, info *ProviderInfo, ep Endpoint, req Request) (*http.Request, error) {
	return buildRequestAt(ctx, info, ep, req, time.Now())
}

// buildRequestAt is buildRequest on a given clock (a signature's time).
func buildRequestAt(ctx context.Context, info *ProviderInfo, ep Endpoint, req Request, now time.Time) (*http.Request, error) {
	base := ep.BaseURL
	if base == "" {
		base = info.DefaultBaseURL
	}
	d := info.spec()
	if d.baseURL != nil {
		base = d.baseURL(base, ep, req)
	}
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil {
		return nil, fmt.Errorf("%s base URL: %w", info.Name, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%s base URL %q: want http(s)://host[/path]", info.Name, RedactURL(base))
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	u.Path = strings.TrimRight(u.Path, "/")
	body, h := d.request(u, info, req, maxTokens, ep.Key.Reveal())
	addTier(body, info, req.Target.Tier)
	u.RawPath = ""
	buf, err := appendBody(make([]byte, 0, 512), body)
	if err != nil {
		return nil, fmt.Errorf("encoding %s request: %w", info.Name, err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(buf))
	if err != nil {
		return nil, fmt.Errorf("%s request: %w", info.Name, err)
	}
	hdr := make(http.Header, len(h)+4)
	for k, v := range h {
		hdr[k] = v
	}
	accept := d.accept
	if accept == "" {
		accept = "text/event-stream"
	}
	// Ask for no compression (Accept-Encoding): the transport then never
	// decodes on its own, so a body that claims gzip is decoded (and
	// judged) here. The four values share one array, each its own slice of
	// capacity 1 (as Header.Set makes them: an Add copies it).
	vals := append(make([]string, 0, 4), "application/json", accept, "identity", userAgent)
	hdr["Content-Type"], hdr["Accept"], hdr["Accept-Encoding"], hdr["User-Agent"] = vals[0:1:1], vals[1:2:2], vals[2:3:3], vals[3:4:4]
	hr.Header = hdr
	if d.sign != nil {
		if err := d.sign(ctx, hr, buf, info, ep, req, now); err != nil {
			return nil, fmt.Errorf("%s request: %w", info.Name, err)
		}
	}
	return hr, nil
}

// appendBody appends v as json.Marshal encodes it, byte for byte (keys
// sorted, HTML characters escaped), without its reflection: the types the
// dialects build request bodies of are written here (strings that need no
// escaping as they are), anything else by json.Marshal.
func appendBody(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendBodyString(b, v)
	case bool:
		return strconv.AppendBool(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case map[string]any:
		return appendBodyMap(b, v, appendBody)
	case map[string]string:
		return appendBodyMap(b, v, appendBodyString)
	case []any:
		return appendBodyList(b, v, appendBody)
	case []map[string]any:
		return appendBodyList(b, v, func(b []byte, m map[string]any) ([]byte, error) { return appendBodyMap(b, m, appendBody) })
	case []map[string]string:
		return appendBodyList(b, v, func(b []byte, m map[string]string) ([]byte, error) { return appendBodyMap(b, m, appendBodyString) })
	case []string:
		return appendBodyList(b, v, appendBodyString)
	}
	enc, err := json.Marshal(v)
	return append(b, enc...), err
}

// appendBodyString appends s as json.Marshal does (see jsonenc), in the
// shape the other appenders take.
func appendBodyString(b []byte, s string) ([]byte, error) {
	return jsonenc.AppendString(b, s), nil
}

// appendBodyMap appends m with its keys sorted, each value by enc.
func appendBodyMap[V any](b []byte, m map[string]V, enc func([]byte, V) ([]byte, error)) ([]byte, error) {
	if m == nil {
		return append(b, "null"...), nil
	}
	var arr [16]string
	keys := arr[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	var err error
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendBodyString(b, k); err != nil {
			return b, err
		}
		b = append(b, ':')
		if b, err = enc(b, m[k]); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// appendBodyList appends l, each element by enc.
func appendBodyList[V any](b []byte, l []V, enc func([]byte, V) ([]byte, error)) ([]byte, error) {
	if l == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	var err error
	for i, v := range l {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = enc(b, v); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

// step is what one SSE event meant.
type step struct {
	text      string     // a text delta
	progress  bool       // content arrived (text, reasoning or tool input)
	thinking  bool       // the content was reasoning (thinking, a reasoning summary, a thought)
	err       *ErrorBody // an error inside the stream
	finished  bool       // the end was signalled (finish_reason, finishReason, message_stop)
	done      bool       // nothing more is expected: stop reading now
	recognize bool       // the event was in the dialect's format
}

// decoder turns one dialect's SSE events into steps, keeping what it learnt.
// Each dialect has two paths: a fast one (one fastUnmarshal of the common
// event into a small struct) and the map path (encoding/json, a map per
// nesting level), which stays the reference: the fast path gives the same
// step for every event it accepts and hands the others to the map path
// (FuzzFastPathMatchesMapPath holds them to it).
type decoder interface {
	handle(typ, data string) step
	state() *decoded
}

// decoded is what a stream told about itself.
type decoded struct {
	finish    string
	usage     *Usage
	model     string
	requestID string // from the body, when the headers had none
	reasoning int    // reasoning tokens, where reported
	respID    string // the response's id, where the provider gives one (the first)
}

func (d *decoded) state() *decoded { return d }

// fastUnmarshal decodes one event for a fast path with encoding/json/v2
// (the github.com/go-json-experiment/json module: a mirror of the standard
// library's v2, stable from Go 1.27, where it aliases the standard one):
// into these structs it takes about half encoding/json's time, which was
// most of a stream's decoding. It is stricter than encoding/json, never
// looser, so whatever it accepts reads as the map path reads it: object
// keys match a field's name exactly (as a map lookup does; encoding/json
// matched "Text" to text), and invalid UTF-8 or a duplicate key is an error
// (the map path then decides, as encoding/json does). The bytes are only
// read, so bytesOf may give them.
func fastUnmarshal(data []byte, v any) error { return jsonv2.Unmarshal(data, v) }

// fastChunk decodes trimmed, which must be one JSON object, into c with
// fastUnmarshal; false when it is not one or does not decode (the map path
// decides).
func fastChunk(trimmed string, c any) bool {
	return strings.HasPrefix(trimmed, "{") && fastUnmarshal(bytesOf(trimmed), c) == nil
}

// chunkHead is what an OpenAI-style or Gemini chunk opens with, from either
// path's decoding: its error member, its model and its token counts (nil:
// not given as a number).
type chunkHead struct {
	err     json.RawMessage
	model   string
	id      string // the response's id ("": not given)
	in, out *float64
}

// open reads a chunk's head into d. A non-null error member makes the chunk
// an error (errData is what errorStep reads; stop is true: the chunk says
// nothing more); otherwise the first model given is kept, and the usage
// when either count is, and the step is a recognised one.
func (d *decoded) open(h chunkHead, errData string) (s step, stop bool) {
	if !isNull(h.err) {
		return errorStep(errData), true
	}
	if d.model == "" {
		d.model = h.model
	}
	if d.respID == "" {
		d.respID = h.id
	}
	d.noteUsage(h.in, h.out)
	return step{recognize: true}, false
}

// noteUsage keeps the token counts when either is given.
func (d *decoded) noteUsage(in, out *float64) {
	i, okIn := fastInt(in)
	o, okOut := fastInt(out)
	if okIn || okOut {
		d.usage = &Usage{InputTokens: i, OutputTokens: o}
	}
}

// rawNumber returns raw as a number, nil when it is not one (the map path's
// side of fastInt): null is none, as the fast paths read it (encoding/json
// leaves a float64 at 0 for null, which read a null count as 0).
func rawNumber(raw json.RawMessage) *float64 {
	var f float64
	if len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null" || json.Unmarshal(raw, &f) != nil {
		return nil
	}
	return &f
}

// obj decodes data as a JSON object, or returns nil.
func obj(data string) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(bytesOf(data), &m) != nil {
		return nil
	}
	return m
}

func field(m map[string]json.RawMessage, path ...string) json.RawMessage {
	var raw json.RawMessage
	for i, k := range path {
		raw = m[k]
		if i == len(path)-1 || raw == nil {
			break
		}
		if m = obj(string(raw)); m == nil {
			return nil
		}
	}
	return raw
}

func jsonInt(raw json.RawMessage) (int, bool) { return fastInt(rawNumber(raw)) }

func jsonArray(raw json.RawMessage) []map[string]json.RawMessage {
	var a []json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &a) != nil {
		return nil
	}
	out := make([]map[string]json.RawMessage, 0, len(a))
	for _, r := range a {
		if m := obj(string(r)); m != nil {
			out = append(out, m)
		}
	}
	return out
}

// fastInt is jsonInt for a number already decoded (nil: absent or null).
func fastInt(f *float64) (int, bool) {
	if f == nil || *f < 0 || *f > 1e15 {
		return 0, false
	}
	return int(*f), true
}

func fastString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// fastText is a JSON value decoded as a string in one pass when it is a
// plain one (no escapes: the common text delta), else kept raw for the
// dialect's own reading.
type fastText struct {
	s   string
	raw json.RawMessage
	str bool
}

// UnmarshalJSON implements json.Unmarshaler.
func (t *fastText) UnmarshalJSON(b []byte) error {
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		if inner := b[1 : len(b)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
			t.s, t.str = string(inner), true
			return nil
		}
	}
	t.raw = append(json.RawMessage(nil), b...)
	return nil
}

// text returns the string, or what read makes of the raw value.
func (t *fastText) text(read func(json.RawMessage) string) string {
	if t.str {
		return t.s
	}
	return read(t.raw)
}

func errorStep(data string) step {
	b := ParseErrorBody([]byte(data))
	if !b.Found {
		b.Found = true
		b.Message = sanitize.Truncate(strings.TrimSpace(data), maxMessage)
	}
	return step{err: &b, recognize: true}
}

// bytesOf returns s's bytes without copying them, for json.Unmarshal and
// fastUnmarshal, which only read their input and copies what it keeps (strings, RawMessage; the
// fast paths' UnmarshalJSON methods copy too): the per-event copy of every
// chunk was a tenth of the fast paths' cost. The bytes must not be written.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
