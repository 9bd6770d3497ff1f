package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/limitscope/limitscope/internal/jsonenc"
)

// reply is a complete non-200 answer: status, headers and body.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// errorInfo is what an error body may mention.
type errorInfo struct {
	provider   string
	model      string
	kind       string        // a Fault* kind
	code       string        // the variant
	retryAfter time.Duration // the server's delay
	metric     string        // "requests" or "tokens" (or "input tokens", "output tokens")
	limit      int64
	used       int64
	requested  int64
	resetAt    time.Time // when a spend or quota stop ends
	requestID  string
}

// withDefaults fills a rate-limit body's numbers that the state left out.
func (e errorInfo) withDefaults() errorInfo { return e.fill(rateDefaults) }

// fill takes from d the numbers e leaves out: the delay, the metric, the
// limit with its use, the request.
func (e errorInfo) fill(d errorInfo) errorInfo {
	if e.retryAfter <= 0 {
		e.retryAfter = d.retryAfter
	}
	if e.metric == "" {
		e.metric = d.metric
	}
	if e.limit == 0 {
		e.limit, e.used = d.limit, d.used
	}
	if e.requested == 0 {
		e.requested = d.requested
	}
	return e
}

// unit is "tokens" for any token metric, else "requests".
func (e errorInfo) unit() string {
	if strings.Contains(e.metric, "tokens") {
		return "tokens"
	}
	return "requests"
}

// contextNumbers are the context-length error's maximum and request size.
func (e errorInfo) contextNumbers() (maxTok, got int64) {
	maxTok, got = e.limit, e.requested
	if maxTok == 0 {
		maxTok = 128000
	}
	if got <= maxTok {
		got = maxTok + 1905
	}
	return maxTok, got
}

// serverStatus is a server_error's status: 500, or the code's 502 or 504.
func (e errorInfo) serverStatus() int {
	switch e.code {
	case "502":
		return 502
	case "504":
		return 504
	}
	return 500
}

// errorReply is the provider's documented answer for one failure kind.
// Kinds that are not HTTP errors (reset, cut, hang, mid_stream) are not
// handled here.
func errorReply(e errorInfo) reply { return providerOf(e.provider).d.errorReply(e) }

// obj is a JSON object that keeps its keys in the order written:
// obj{"type", "error", "error", obj{...}}. It reads like the providers'
// own bodies, whose key order a map would lose.
type obj []any

// MarshalJSON writes the pairs in order, as encoding/json would write
// them (the same escaping), without a Marshal and a compaction per key,
// value and nested object: the simulator writes one for every Anthropic
// token and for every usage chunk.
func (o obj) MarshalJSON() ([]byte, error) { return o.appendJSON(nil) }

func (o obj) appendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	for i := 0; i+1 < len(o); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := o[i].(string)
		var err error
		if b, err = appendJSONValue(b, k); err != nil {
			return nil, err
		}
		b = append(b, ':')
		if b, err = appendJSONValue(b, o[i+1]); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendJSONValue appends v as encoding/json writes it: the common kinds
// directly, the rest through json.Marshal.
func appendJSONValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return jsonenc.AppendString(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case obj:
		return v.appendJSON(b)
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSONValue(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	vb, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, vb...), nil
}

func mustJSON(v any) []byte {
	var b []byte
	var err error
	if o, ok := v.(obj); ok {
		b, err = o.appendJSON(nil) // as Marshal would, without its compaction
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		// Only maps, slices and strings of our own are marshalled here.
		return []byte(`{"error":{"message":"simulator: cannot encode body"}}`)
	}
	return b
}

// ---- envelopes ----------------------------------------------------------

func jsonReply(status int, body []byte) reply {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return reply{status: status, header: h, body: body}
}

// ---- formatting ---------------------------------------------------------

// goDuration formats d the way OpenAI and Groq do in headers and messages
// ("1s", "6m0s", "20ms", "2m59.56s"), to the millisecond.
func goDuration(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return d.Round(time.Millisecond).String()
}

// protoDuration formats d as a protobuf Duration string ("22s", "1.6s").
func protoDuration(d time.Duration) string {
	s := strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	return s + "s"
}

// retryAfterSeconds is the integer retry-after header value: never below
// the real delay.
func retryAfterSeconds(d time.Duration) string {
	s := int64(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}

func regainText(t time.Time) string {
	t = t.UTC()
	return fmt.Sprintf("You will regain access on %s at %s UTC.", t.Format("2006-01-02"), t.Format("15:04"))
}

// ---- shared pieces of error replies -------------------------------------

func withRetryAfter(r reply, d time.Duration) reply {
	r.header.Set("Retry-After", retryAfterSeconds(d))
	return r
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
