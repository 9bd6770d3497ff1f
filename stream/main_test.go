package stream

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testKey is the key every test sends; no output may ever contain it.
const testKey = "sk-test-SECRET-0123456789abcdef"

func clearEnv(t *testing.T) {
	t.Helper()
	for _, v := range AllEnvVars() {
		t.Setenv(v, "")
	}
}

func fixture(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fixtures", filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serve starts an httptest server and returns a Client whose HTTP client
// is closed with the test, and the endpoint of provider on it.
func serve(t *testing.T, provider string, h http.HandlerFunc) (*Client, Endpoint) {
	t.Helper()
	clearEnv(t)
	srv := httptest.NewServer(h)
	hc := srv.Client()
	t.Cleanup(func() {
		hc.CloseIdleConnections()
		srv.Close()
	})
	hc.CheckRedirect = checkRedirect
	base := srv.URL
	switch provider {
	case "openai", "groq", "mistral", "xai":
		base += "/v1"
	}
	return &Client{HTTP: hc, Now: time.Now}, Endpoint{Provider: provider, BaseURL: base, Key: testKey}
}

// sseHandler answers 200 text/event-stream with body, flushing it.
func sseHandler(body []byte, hdr ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.WriteHeader(200)
		_, _ = w.Write(body)
	}
}

func doReq(c *Client, ep Endpoint, model string) (Result, []string) {
	var deltas []string
	res := c.Do(context.Background(), ep, Request{Target: Target{Provider: ep.Provider, Model: model}, Prompt: "hi", MaxTokens: 64},
		func(s string) { deltas = append(deltas, s) })
	return res, deltas
}
