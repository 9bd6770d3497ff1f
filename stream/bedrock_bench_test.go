package stream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// longBedrockStream is a long successful ConverseStream body: messageStart,
// benchDeltas text deltas, contentBlockStop, messageStop, metadata.
func longBedrockStream(tb testing.TB) []byte {
	var b bytes.Buffer
	b.Write(esMessage(tb, "event", "messageStart", `{"role":"assistant"}`))
	for i := 0; i < benchDeltas; i++ {
		b.Write(esMessage(tb, "event", "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":`+strconv.Quote(benchWords[i%len(benchWords)])+`},"p":"abcdefghijkl"}`))
	}
	b.Write(esMessage(tb, "event", "contentBlockStop", `{"contentBlockIndex":0}`))
	b.Write(esMessage(tb, "event", "messageStop", `{"stopReason":"end_turn"}`))
	b.Write(esMessage(tb, "event", "metadata", `{"usage":{"inputTokens":22,"outputTokens":5000,"totalTokens":5022},"metrics":{"latencyMs":2040}}`))
	return b.Bytes()
}

// esTransport answers every request with body as an event stream.
type esTransport struct{ body []byte }

func (t esTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	return &http.Response{StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"application/vnd.amazon.eventstream"}},
		Body:    io.NopCloser(bytes.NewReader(t.body)),
		Request: req}, nil
}

// esMinimal is the baseline: a loop of the AWS SDK's eventstream decoder
// and encoding/json into a small struct, counting the text deltas.
func esMinimal(r io.Reader) (int, error) {
	dec := eventstream.NewDecoder()
	br := bufio.NewReader(r)
	var buf []byte
	n := 0
	for {
		msg, err := dec.Decode(br, buf[:0])
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		buf = msg.Payload
		var ev struct {
			Delta *struct {
				Text string `json:"text"`
			} `json:"delta"`
		}
		if err := json.Unmarshal(msg.Payload, &ev); err != nil {
			return n, err
		}
		if ev.Delta != nil && ev.Delta.Text != "" {
			n++
		}
	}
}

// BenchmarkBedrockDecodeRatio decodes a long ConverseStream both ways in
// every iteration (limitscope's whole path: Client.Do over an in-memory
// response, the framing, the dialect, watchdog, text and onText; and the
// minimal loop, in alternating order) and reports the median of
// limitscope's rate as a share of the loop's (x-minimal; the goal is at
// least 0.6).
//
//	go test -run '^$' -bench BedrockDecodeRatio -benchtime 60x -count 3 ./stream/
func BenchmarkBedrockDecodeRatio(b *testing.B) {
	body := longBedrockStream(b)
	c := &Client{HTTP: &http.Client{Transport: esTransport{body}}}
	ep := Endpoint{Provider: "bedrock", BaseURL: "http://bench.invalid", Key: Secret("k")}
	req := Request{Target: Target{Provider: "bedrock", Model: "anthropic.claude-haiku-5-5-v1:0"}, Prompt: "hi"}
	decodeRatio(b, c, ep, req, func() (int, error) { return esMinimal(bytes.NewReader(body)) })
}
