package stream

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// chunkedBody returns one of its chunks per Read.
type chunkedBody struct{ chunks []string }

func (b *chunkedBody) Read(p []byte) (int, error) {
	if len(b.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.chunks[0])
	if b.chunks[0] = b.chunks[0][n:]; b.chunks[0] == "" {
		b.chunks = b.chunks[1:]
	}
	return n, nil
}

func (b *chunkedBody) Close() error { return nil }

// chunkedTransport answers with an SSE body that arrives in chunks.
type chunkedTransport struct{ chunks []string }

func (t chunkedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	return &http.Response{StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: &chunkedBody{chunks: append([]string(nil), t.chunks...)},
		Request: req}, nil
}

// The read hook is called before each read of the body, so the deltas
// between two of its calls are those of one read: here two reads of two
// deltas and one of one, then the end.
func TestReadHookMarksEachReadsDeltas(t *testing.T) {
	ev := func(s string) string {
		return `data: {"choices":[{"index":0,"delta":{"content":"` + s + `"}}]}` + "\n\n"
	}
	c := &Client{HTTP: &http.Client{Transport: chunkedTransport{chunks: []string{
		ev("a") + ev("b"), ev("c") + ev("d"), ev("e"), `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"}}}}
	var log []string
	ctx := WithReadHook(context.Background(), func() { log = append(log, "|") })
	res := c.Do(ctx, Endpoint{Provider: "openai", BaseURL: "http://upstream.invalid/v1", Key: testKey},
		Request{Target: Target{Provider: "openai", Model: "m"}, Prompt: "hi"}, func(s string) { log = append(log, s) })
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	got := strings.Join(log, "")
	// Reads may come back empty or be retried by the readers in between;
	// what matters: no hook call splits a read's deltas, and one comes
	// between reads.
	if strings.Contains(got, "a|b") || strings.Contains(got, "c|d") || !strings.Contains(got, "b|") || !strings.Contains(got, "d|") || !strings.HasPrefix(got, "|") {
		t.Errorf("deltas and hook calls: %q, want ab, cd and e each between hook calls", got)
	}
	if strings.Count(got, "|") > 8 {
		t.Errorf("%d hook calls for 4 reads", strings.Count(got, "|"))
	}
}
