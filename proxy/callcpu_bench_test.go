package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/limitscope/limitscope/sim"
	"github.com/limitscope/limitscope/stream"
)

// cannedUpstream answers every request with one recorded response.
type cannedUpstream struct {
	header http.Header
	body   []byte
}

func (c *cannedUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Header: c.header.Clone(), Request: r,
		Body: io.NopCloser(bytes.NewReader(c.body)), ContentLength: -1}, nil
}

// discardWriter is a ResponseWriter (and Flusher) that keeps nothing but
// the status and the byte count.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
}
func (w *discardWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += len(b)
	return len(b), nil
}
func (w *discardWriter) Flush() {}

// BenchmarkProxyCallCPU is the CPU of one proxied streaming call in the
// proxy's own code (the handler, the retry core, the stream client and its
// decoding, the caller's encoding), with neither socket nor simulator: the
// upstream answer is one the simulator gave (about 26 tokens), replayed
// from memory, and the caller's side is a writer that discards. One call
// at a time, so ns/op is CPU per call, steadier than the process
// benchmarks on a shared machine; the sockets' system calls are not in it.
//
//	go test -run '^$' -bench ProxyCallCPU -count 6 ./proxy/
func BenchmarkProxyCallCPU(b *testing.B) {
	clearEnv(b)
	scen := filepath.Join(b.TempDir(), "unlimited.ini")
	if err := os.WriteFile(scen, []byte("name = unlimited\n[openai]\nrpm = 0\ntpm = 0\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := sim.Start(ctx, "127.0.0.1:0", sim.Options{ScenarioFile: scen, TokensPerSecond: 1e6})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	hc := newTestClient(b)
	req, _ := http.NewRequest(http.MethodPost, r.BaseURL("openai")+"/chat/completions",
		strings.NewReader(`{"model":"gpt-5.4-mini","max_tokens":40,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Say hello"}]}`))
	req.Header.Set("Authorization", "Bearer "+sim.FakeKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("[DONE]")) {
		b.Fatalf("recording: status %d, %v", resp.StatusCode, err)
	}
	up := &cannedUpstream{header: resp.Header, body: body}
	h, err := New(Options{
		Token: testToken,
		Engine: eng(stream.Router{Client: &stream.Client{HTTP: &http.Client{Transport: up}},
			Endpoints: map[string]stream.Endpoint{"openai": {Provider: "openai", BaseURL: "http://upstream.invalid/v1", Key: sim.FakeKey}}}),
	})
	if err != nil {
		b.Fatal(err)
	}
	in := `{"model":"openai/gpt-5.4-mini","max_tokens":40,"stream":true,"messages":[{"role":"user","content":"Say hello"}]}`
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:4000/v1/chat/completions", strings.NewReader(in))
		r.Header.Set("Authorization", "Bearer "+testToken)
		r.Header.Set("Content-Type", "application/json")
		w := &discardWriter{h: http.Header{}}
		h.ServeHTTP(w, r)
		if w.status != http.StatusOK || w.n < 1000 {
			b.Fatalf("status %d, %d bytes", w.status, w.n)
		}
	}
}
