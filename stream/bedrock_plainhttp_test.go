package stream

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// countingTransport counts the requests that reach the network and fails
// them.
type countingTransport struct{ n atomic.Int32 }

func (c *countingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	c.n.Add(1)
	return nil, errors.New("no network in this test")
}

// TestBedrockKeyNotSentOverPlainHTTP: a Bedrock API key goes to an
// http:// endpoint only on loopback; to any other host nothing is sent and
// the error says why. SigV4 (no key) still goes.
func TestBedrockKeyNotSentOverPlainHTTP(t *testing.T) {
	req := Request{Target: Target{Provider: "bedrock", Model: "us-east-1/anthropic.claude-haiku-5-5-v1:0"}, Prompt: "hi"}
	for _, base := range []string{"http://bedrock.example.com", "http://10.1.2.3:8787/bedrock", "http://[fe80::1]:80", "http://localhost.example.com"} {
		tr := &countingTransport{}
		c := &Client{HTTP: &http.Client{Transport: tr}}
		res := c.Do(context.Background(), Endpoint{Provider: "bedrock", BaseURL: base, Key: "ABSK-not-real-0123456789abcdef"}, req, nil)
		if !errors.Is(res.Err, ErrKeyOverPlainHTTP) || tr.n.Load() != 0 {
			t.Errorf("%s: err %v, %d requests sent; want ErrKeyOverPlainHTTP and none", base, res.Err, tr.n.Load())
		}
		if res.Err != nil && (strings.Contains(res.Err.Error(), "ABSK") || !strings.Contains(res.Err.Error(), "https://")) {
			t.Errorf("%s: the error leaks the key or names no fix: %v", base, res.Err)
		}
	}
	for _, base := range []string{"https://bedrock.example.com", "http://bedrock.example.com"} {
		tr := &countingTransport{}
		c := &Client{HTTP: &http.Client{Transport: tr}}
		ep := Endpoint{Provider: "bedrock", BaseURL: base, Key: "ABSK-not-real-0123456789abcdef"}
		if strings.HasPrefix(base, "http://") {
			ep.Key, ep.AWS = "", NewAWSAuth("AKIDEXAMPLE", "secret-example", "")
		}
		res := c.Do(context.Background(), ep, req, nil)
		if errors.Is(res.Err, ErrKeyOverPlainHTTP) || tr.n.Load() == 0 {
			t.Errorf("%s: err %v, %d requests; want it sent", base, res.Err, tr.n.Load())
		}
	}
	// Loopback: the key is sent as a bearer token.
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		w.WriteHeader(500)
	}))
	defer srv.Close()
	for _, base := range []string{srv.URL, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)} {
		got.Store("")
		res := (&Client{}).Do(context.Background(), Endpoint{Provider: "bedrock", BaseURL: base, Key: "ABSK-not-real-0123456789abcdef"}, req, nil)
		if errors.Is(res.Err, ErrKeyOverPlainHTTP) || got.Load() != "Bearer ABSK-not-real-0123456789abcdef" {
			t.Errorf("%s: err %v, Authorization %q", base, res.Err, got.Load())
		}
	}
}
