package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
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
func (e errorInfo) withDefaults() errorInfo {
	if e.retryAfter <= 0 {
		e.retryAfter = 2 * time.Second
	}
	if e.metric == "" {
		e.metric = "requests"
	}
	if e.limit == 0 {
		e.limit, e.used = 60, 60
	}
	if e.requested == 0 {
		e.requested = 1
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

// MarshalJSON writes the pairs in order.
func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i+1 < len(o); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := o[i].(string)
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		vb, err := json.Marshal(o[i+1])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
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

func perMinuteText(metric string) (long, abbrev string) {
	switch metric {
	case "tokens":
		return "tokens per min", "TPM"
	default:
		return "requests per min", "RPM"
	}
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
