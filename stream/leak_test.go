package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
)

// Every way a hostile or echoing server (or a key pasted into a base URL)
// could carry the key into limitscope's output.
func TestNoKeyInAnyOutput(t *testing.T) {
	urlWithKey := "https://generativelanguage.googleapis.com/v1beta?key=" + testKey
	echo := func(status int, ct, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			// The server repeats whatever credential it was sent.
			k := r.Header.Get("X-Api-Key") + r.Header.Get("X-Goog-Api-Key") + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			w.Header().Set("Content-Type", ct)
			w.Header().Set("X-Request-Id", "req-"+k)
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(strings.ReplaceAll(body, "KEY", k)))
		}
	}
	cases := []struct {
		name, provider string
		h              http.HandlerFunc
	}{
		{"401 message", "openai", echo(401, "application/json", `{"error":{"message":"Incorrect API key provided: KEY. See `+urlWithKey+`","type":"invalid_request_error","code":"KEY"}}`)},
		{"429 anthropic", "anthropic", echo(429, "application/json", `{"type":"error","error":{"type":"rate_limit_error","message":"key KEY"},"request_id":"KEY"}`)},
		{"gemini quota id", "gemini", echo(429, "application/json", `{"error":{"code":429,"message":"KEY","status":"KEY","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"KEYPerDay"}]}]}}`)},
		{"html snippet", "openai", echo(200, "text/html", `<html>your key is KEY</html>`)},
		{"unparseable error body", "openai", echo(500, "text/plain", `KEY`)},
		{"stream text", "openai", echo(200, "text/event-stream", "data: {\"model\":\"KEY\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"the key is KEY\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"KEY\"}]}\n\n")},
		{"mid-stream error", "anthropic", echo(200, "text/event-stream", "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"KEY\"}}\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"KEY\",\"message\":\"KEY `+urlWithKey+`\"}}\n\n")},
		{"not SSE", "gemini", echo(200, "text/event-stream", "KEY KEY KEY\n")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, ep := serve(t, tc.provider, tc.h)
			res, deltas := doReq(c, ep, "m")
			checkNoKey(t, res, deltas)
		})
	}
	t.Run("key pasted in the base URL, no server", func(t *testing.T) {
		clearEnv(t)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		hc := NewHTTPClient()
		defer hc.CloseIdleConnections()
		res := (&Client{HTTP: hc}).Do(context.Background(),
			Endpoint{Provider: "gemini", BaseURL: "http://" + addr + "/?key=" + testKey, Key: testKey},
			Request{Target: Target{Provider: "gemini", Model: "g"}}, nil)
		if res.Err == nil || res.Err.Class != ClassConnection {
			t.Fatalf("%+v", res.Err)
		}
		checkNoKey(t, res, nil)
	})
}

func checkNoKey(t *testing.T, res Result, deltas []string) {
	t.Helper()
	var out []string
	out = append(out, fmt.Sprintf("%+v", res), fmt.Sprintf("%#v", res), strings.Join(deltas, ""))
	if b, err := json.Marshal(res); err == nil {
		out = append(out, string(b))
	}
	if e := res.Err; e != nil {
		out = append(out, e.Error(), fmt.Sprintf("%+v", *e), e.Snippet, e.Message, e.Code, e.QuotaID, e.RequestID)
		if e.Err != nil {
			out = append(out, e.Err.Error())
		}
	} else {
		t.Log("no error")
	}
	for _, s := range out {
		if strings.Contains(s, testKey) {
			t.Fatalf("the key leaked: %q", s)
		}
	}
	if !strings.Contains(strings.Join(out, " "), redacted) {
		t.Errorf("nothing was redacted; did the echo reach the output? %q", out[0])
	}
}
