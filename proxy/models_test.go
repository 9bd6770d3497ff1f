package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/limitscope/limitscope/stream"
)

// A model the provider does not know: its own 404 (status, code, message)
// explained in one line, with the models the proxy serves on that
// provider as suggestions; one request upstream, not retried.
func TestUnknownModelExplained(t *testing.T) {
	clearEnv(t)
	var hits atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(404)
		_, _ = io.WriteString(w, `{"error":{"message":"The model `+"`gpt-9`"+` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`)
	}))
	t.Cleanup(up.Close)
	cfg := &Config{Models: []stream.Target{{Provider: "openai", Model: "gpt-5.4"}}}
	h, err := New(Options{Token: testToken, Config: cfg, Available: func(p string) bool { return p == "openai" },
		Engine: eng(stream.Router{Client: &stream.Client{HTTP: newTestClient(t)},
			Endpoints: map[string]stream.Endpoint{"openai": {Provider: "openai", BaseURL: up.URL + "/v1", Key: "sk-test-0123456789"}}})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	for _, path := range []string{"/v1/chat/completions", "/v1/responses"} {
		body := `{"model":"openai/gpt-9","messages":[{"role":"user","content":"hi"}]}`
		if path == "/v1/responses" {
			body = `{"model":"openai/gpt-9","input":"hi"}`
		}
		r, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := newTestClient(t).Do(r)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got := reply{status: resp.StatusCode, header: resp.Header, body: b}
		checkFinalError(t, got, 404)
		msg, _ := dig(got.json(t), "error", "message").(string)
		want := "limitscope: openai does not know the model \"gpt-9\" (its 404 model_not_found: The model `gpt-9` does not exist or you do not have access to it.); models this proxy serves on openai: openai/gpt-5.4, openai/gpt-5.4-mini"
		if msg != want || dig(got.json(t), "error", "code") != "model_not_found" {
			t.Errorf("%s: message %q\nwant %q", path, msg, want)
		}
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("upstream saw %d requests, want 2 (one per call)", n)
	}
}
