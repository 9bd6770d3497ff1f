package stream

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRequestShapes(t *testing.T) {
	type seen struct {
		path, query string
		hdr         http.Header
		body        map[string]any
	}
	for _, tc := range []struct {
		provider, model, path string
		auth                  [2]string
		check                 func(t *testing.T, s seen)
	}{
		{"openai", "gpt-5.4-mini", "/v1/chat/completions", [2]string{"Authorization", "Bearer " + testKey}, func(t *testing.T, s seen) {
			if s.body["max_completion_tokens"] != float64(64) || s.body["max_tokens"] != nil {
				t.Errorf("openai token cap: %v", s.body)
			}
			if so, _ := s.body["stream_options"].(map[string]any); so["include_usage"] != true {
				t.Errorf("stream_options: %v", s.body)
			}
		}},
		{"groq", "llama-3.3-70b", "/v1/chat/completions", [2]string{"Authorization", "Bearer " + testKey}, func(t *testing.T, s seen) {
			if s.body["max_tokens"] != float64(64) || s.body["max_completion_tokens"] != nil || s.body["stream_options"] == nil {
				t.Errorf("groq body: %v", s.body)
			}
		}},
		{"mistral", "mistral-small", "/v1/chat/completions", [2]string{"Authorization", "Bearer " + testKey}, func(t *testing.T, s seen) {
			if s.body["max_tokens"] != float64(64) || s.body["stream_options"] != nil {
				t.Errorf("mistral body (no stream_options: Mistral answers 422): %v", s.body)
			}
		}},
		{"anthropic", "claude-sonnet-4-5", "/v1/messages", [2]string{"X-Api-Key", testKey}, func(t *testing.T, s seen) {
			if s.hdr.Get("Anthropic-Version") != "2023-06-01" || s.body["max_tokens"] != float64(64) || s.body["stream"] != true {
				t.Errorf("anthropic: %v %v", s.hdr, s.body)
			}
			if s.hdr.Get("Authorization") != "" {
				t.Error("anthropic sent a bearer token")
			}
		}},
		{"gemini", "gemini-2.5-flash", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", [2]string{"X-Goog-Api-Key", testKey}, func(t *testing.T, s seen) {
			if s.query != "alt=sse" {
				t.Errorf("gemini query %q (the key never goes in the URL)", s.query)
			}
			gc, _ := s.body["generationConfig"].(map[string]any)
			if gc["maxOutputTokens"] != float64(64) || s.body["contents"] == nil {
				t.Errorf("gemini body: %v", s.body)
			}
		}},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			var s seen
			c, ep := serve(t, tc.provider, func(w http.ResponseWriter, r *http.Request) {
				s.path, s.query, s.hdr = r.URL.Path, r.URL.RawQuery, r.Header.Clone()
				b, _ := io.ReadAll(r.Body)
				_ = json.Unmarshal(b, &s.body)
				w.WriteHeader(404)
			})
			doReq(c, ep, tc.model)
			if s.path != tc.path {
				t.Errorf("path %q, want %q", s.path, tc.path)
			}
			if got := s.hdr.Get(tc.auth[0]); got != tc.auth[1] {
				t.Errorf("%s = %q", tc.auth[0], got)
			}
			if tc.provider != "gemini" {
				if s.body["model"] != tc.model || s.body["stream"] != true {
					t.Errorf("body %v", s.body)
				}
				msgs, _ := s.body["messages"].([]any)
				if len(msgs) != 1 || msgs[0].(map[string]any)["content"] != "hi" || msgs[0].(map[string]any)["role"] != "user" {
					t.Errorf("messages %v", s.body["messages"])
				}
			}
			if s.hdr.Get("Accept") != "text/event-stream" || s.hdr.Get("Content-Type") != "application/json" {
				t.Errorf("headers %v", s.hdr)
			}
			tc.check(t, s)
		})
	}
}

func TestDialectsComplete(t *testing.T) {
	for _, tc := range []struct {
		provider, fx, text, finish, model string
		usage                             *Usage
	}{
		{"openai", "openai/chat-stream-wire-constructed.sse", "Hello", "stop", "gpt-4o-mini", nil},
		{"anthropic", "anthropic/messages-stream-recorded.sse", "[12345,67890]", "end_turn", "claude-sonnet-4-5-20250929", &Usage{135, 10}},
		{"anthropic", "anthropic/messages-stream-doc-basic.sse", "Hello!", "end_turn", "claude-3-7-sonnet-20250219", &Usage{25, 15}},
		{"gemini", "gemini/stream-recorded-text.sse", "", "STOP", "gemini-2.0-flash", &Usage{6, 377}},
	} {
		t.Run(tc.fx, func(t *testing.T) {
			c, ep := serve(t, tc.provider, sseHandler(fixture(t, tc.fx)))
			res, deltas := doReq(c, ep, "m")
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if tc.text != "" && res.Text != tc.text {
				t.Errorf("text %q", res.Text)
			}
			if res.Text != strings.Join(deltas, "") || len(deltas) < 1 {
				t.Errorf("deltas %q vs text %q", deltas, res.Text)
			}
			if res.FinishReason != tc.finish || res.Model != tc.model || res.Status != 200 {
				t.Errorf("finish %q model %q status %d", res.FinishReason, res.Model, res.Status)
			}
			if (tc.usage == nil) != (res.Usage == nil) || tc.usage != nil && *tc.usage != *res.Usage {
				t.Errorf("usage %+v", res.Usage)
			}
			if res.TTFT <= 0 {
				t.Errorf("TTFT %v", res.TTFT)
			}
		})
	}
}

const oaText = "data: {\"model\":\"gpt-x-2026\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"finish_reason\":null}],\"usage\":null}\n\n"
const oaFinish = "data: {\"model\":\"gpt-x-2026\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n"
const oaUsage = "data: {\"model\":\"gpt-x-2026\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,\"total_tokens\":11}}\n\n"

func TestOpenAIUsageChunkAfterFinish(t *testing.T) {
	c, ep := serve(t, "openai", sseHandler([]byte(": keep-alive\n\n"+oaText+oaFinish+oaUsage+"data: [DONE]\n\n")))
	res, _ := doReq(c, ep, "m")
	if res.Err != nil || res.Usage == nil || *res.Usage != (Usage{9, 2}) || res.Text != "Hi" || res.FinishReason != "stop" || res.Model != "gpt-x-2026" {
		t.Fatalf("%+v usage %+v", res, res.Usage)
	}
	// A missing usage chunk is no error; EOF after finish_reason is an end.
	c, ep = serve(t, "openai", sseHandler([]byte(oaText+oaFinish)))
	res, _ = doReq(c, ep, "m")
	if res.Err != nil || res.Usage != nil || res.Text != "Hi" {
		t.Fatalf("%+v", res)
	}
}

func TestCutStreams(t *testing.T) {
	for _, tc := range []struct{ provider, body, text string }{
		{"openai", oaText, "Hi"},
		{"openai", oaText + "data: [DONE]\n\n", "Hi"}, // [DONE] without a finish_reason
		{"anthropic", "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"c\"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\n\n", "Hel"},
		{"gemini", "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"The\"}]}}]}\n\ndata: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\" sky\"}]},\"finishRea", "The"},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			c, ep := serve(t, tc.provider, sseHandler([]byte(tc.body)))
			res, _ := doReq(c, ep, "m")
			if res.Err == nil || res.Err.Class != ClassConnection || !res.Err.MidStream || res.Err.Status != 200 {
				t.Fatalf("cut stream: %+v", res.Err)
			}
			if res.Text != tc.text {
				t.Errorf("partial %q", res.Text)
			}
		})
	}
}

// hijack answers 200 text/event-stream, writes prefix raw and resets the
// connection (SO_LINGER 0) so the client sees an abrupt end.
func hijack(prefix string, headers bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		if headers {
			fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n%s", prefix)
		}
		_ = buf.Flush()
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = conn.Close()
	}
}

func TestConnectionFaults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		h      http.HandlerFunc
		status int
		mid    bool
		text   string
	}{
		{"reset before headers", hijack("", false), 0, false, ""},
		{"reset after headers", hijack("", true), 200, true, ""},
		{"reset mid-event", hijack(strings.TrimSuffix(oaText, "\n\n")+oaText[:30], true), 200, true, ""},
		{"reset after an event", hijack(oaText+oaText[:30], true), 200, true, "Hi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ep := serve(t, "openai", tc.h)
			res, _ := doReq(c, ep, "m")
			if res.Err == nil || res.Err.Class != ClassConnection || res.Status != tc.status || res.Err.MidStream != tc.mid || res.Text != tc.text {
				t.Fatalf("status %d text %q err %+v", res.Status, res.Text, res.Err)
			}
		})
	}
	// Nothing listening.
	clearEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	res := (&Client{HTTP: hc}).Do(context.Background(), Endpoint{Provider: "openai", BaseURL: "http://" + addr + "/v1", Key: testKey},
		Request{Target: Target{Provider: "openai", Model: "m"}, Prompt: "x"}, nil)
	if res.Err == nil || res.Err.Class != ClassConnection || res.Status != 0 || res.Err.MidStream {
		t.Fatalf("refused: %+v", res.Err)
	}
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

func TestNonStreamAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, provider, ct, enc string
		body                    []byte
		class                   Class
		code                    string
		snippet                 string // must appear in Error.Snippet
		msg                     string // must appear in Error.Message
	}{
		{"html 200", "openai", "text/html", "", []byte("<html><title>Login to Wi-Fi</title></html>"), ClassServer, "", "Login to Wi-Fi", "HTML"},
		{"html 200 without content type", "anthropic", "", "", []byte("\n  <!DOCTYPE html><p>captive</p>"), ClassServer, "", "captive", "HTML"},
		{"json error 200", "openai", "application/json", "", fixture(t, "openai/error-insufficient-quota.json"), ClassQuota, "insufficient_quota", "You exceeded", ""},
		{"json overloaded 200", "anthropic", "application/json", "", fixture(t, "anthropic/error-529-overloaded.json"), ClassOverload, "overloaded_error", "Overloaded", ""},
		{"json non-error 200", "openai", "application/json", "", []byte(`{"id":"chatcmpl-1","choices":[{"message":{"content":"hi"}}]}`), ClassServer, "", "chatcmpl-1", "JSON"},
		{"gzip that does not decode", "openai", "text/event-stream", "gzip", []byte("\x1f\x8bthis is not gzip at all"), ClassServer, "", `\x1f\x8b`, "gzip"},
		{"gzip cut mid-stream", "openai", "text/event-stream", "gzip", gz([]byte(oaText + oaFinish))[:40], ClassServer, "", `\x1f\x8b`, "gzip"},
		{"unsupported encoding", "openai", "text/event-stream", "br", []byte("xx"), ClassServer, "", "xx", "Content-Encoding"},
		{"binary under text/event-stream", "openai", "text/event-stream", "", []byte("\x00\x01\xff\xfe\x1b[31mred\n\n"), ClassServer, "", `\x00\x01\xff\xfe\x1b[31mred`, "not an SSE stream in the openai format"},
		{"plain text", "anthropic", "text/plain", "", []byte("upstream connect error or disconnect/reset before headers\n"), ClassServer, "", "upstream connect error", "not an SSE stream in the anthropic format"},
		{"empty 200", "openai", "text/event-stream", "", nil, ClassConnection, "", "", "before any event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ep := serve(t, tc.provider, func(w http.ResponseWriter, r *http.Request) {
				if tc.ct != "" {
					w.Header().Set("Content-Type", tc.ct)
				} else {
					w.Header()["Content-Type"] = nil
				}
				if tc.enc != "" {
					w.Header().Set("Content-Encoding", tc.enc)
				}
				w.WriteHeader(200)
				_, _ = w.Write(tc.body)
			})
			res, _ := doReq(c, ep, "m")
			e := res.Err
			if e == nil {
				t.Fatalf("no error, text %q", res.Text)
			}
			if e.Class != tc.class || e.Code != tc.code || e.Status != 200 {
				t.Errorf("class %s code %q status %d; want %s %q", e.Class, e.Code, e.Status, tc.class, tc.code)
			}
			if !strings.Contains(e.Snippet, tc.snippet) || !strings.Contains(e.Message, tc.msg) {
				t.Errorf("snippet %q message %q", e.Snippet, e.Message)
			}
			if strings.ContainsRune(e.Snippet, 0x1b) || strings.ContainsRune(e.Message, 0x1b) {
				t.Error("an escape byte reached the snippet or message")
			}
		})
	}
}

func TestGzipStreamDecodes(t *testing.T) {
	c, ep := serve(t, "openai", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(gz([]byte(oaText + oaFinish + oaUsage + "data: [DONE]\n\n")))
	})
	res, _ := doReq(c, ep, "m")
	if res.Err != nil || res.Text != "Hi" || res.Usage == nil {
		t.Fatalf("%+v", res)
	}
}

func TestInvalidUTF8Text(t *testing.T) {
	body := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok \xff\xfe end\"}}]}\n\n" + oaFinish
	c, ep := serve(t, "openai", sseHandler([]byte(body)))
	res, _ := doReq(c, ep, "m")
	if res.Err != nil || res.Text != "ok \uFFFD\uFFFD end" {
		t.Fatalf("%q %v", res.Text, res.Err)
	}
}

func TestMaxEventSize(t *testing.T) {
	big := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + strings.Repeat("a", 5000) + "\"}}]}\n\n"
	c, ep := serve(t, "openai", sseHandler([]byte(oaText+big+oaFinish)))
	c.Options.MaxEventSize = 4096
	res, _ := doReq(c, ep, "m")
	if res.Err == nil || res.Err.Class != ClassServer || !strings.Contains(res.Err.Message, "MaxEventSize (4096 bytes)") || res.Text != "Hi" {
		t.Fatalf("%q %+v", res.Text, res.Err)
	}
	// The default (1 MiB) takes it.
	c.Options.MaxEventSize = 0
	if res, _ = doReq(c, ep, "m"); res.Err != nil || len(res.Text) != 5002 {
		t.Fatalf("%v", res.Err)
	}
}

func TestMaxBodySize(t *testing.T) {
	body := `{"error":{"message":"` + strings.Repeat("x", 3000) + `","type":"server_error"}}`
	c, ep := serve(t, "openai", errorHandler(500, body))
	c.Options.MaxBodySize = 1000
	res, _ := doReq(c, ep, "m")
	if res.Err == nil || res.Err.Class != ClassServer || !strings.Contains(res.Err.Message, "MaxBodySize (1000 bytes)") || res.Err.Status != 500 {
		t.Fatalf("%+v", res.Err)
	}
	c, ep = serve(t, "openai", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	})
	c.Options.MaxBodySize = 1000
	res, _ = doReq(c, ep, "m")
	if res.Err == nil || res.Err.Class != ClassServer || !strings.Contains(res.Err.Message, "MaxBodySize (1000 bytes)") {
		t.Fatalf("%+v", res.Err)
	}
}

func TestRedirects(t *testing.T) {
	clearEnv(t)
	final := httptest.NewServer(sseHandler([]byte(oaText + oaFinish)))
	defer final.Close()
	hops := 0
	var gotKey string
	same := httptest.NewServer(nil)
	defer same.Close()
	same.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/chat/completions":
			http.Redirect(w, r, "/moved/chat/completions", http.StatusTemporaryRedirect)
		case "/moved/chat/completions":
			gotKey = r.Header.Get("Authorization")
			sseHandler([]byte(oaText+oaFinish))(w, r)
		case "/away/chat/completions":
			http.Redirect(w, r, final.URL+"/v1/chat/completions", http.StatusTemporaryRedirect)
		default: // /loop
			hops++
			http.Redirect(w, r, r.URL.Path, http.StatusTemporaryRedirect)
		}
	})
	hc := NewHTTPClient()
	defer hc.CloseIdleConnections()
	c := &Client{HTTP: hc}
	do := func(base string) Result {
		return c.Do(context.Background(), Endpoint{Provider: "openai", BaseURL: same.URL + base, Key: testKey}, Request{Target: Target{Provider: "openai", Model: "m"}}, nil)
	}
	if res := do("/v1"); res.Err != nil || res.Text != "Hi" || gotKey != "Bearer "+testKey {
		t.Fatalf("same-host redirect: %+v %q", res.Err, gotKey)
	}
	res := do("/away")
	if res.Err == nil || res.Err.Class != ClassCaller || !strings.Contains(res.Err.Message, "another host") {
		t.Fatalf("cross-host redirect followed: %+v", res.Err)
	}
	res = do("/loop")
	if res.Err == nil || res.Err.Class != ClassCaller || hops != MaxRedirects+1 {
		t.Fatalf("redirect loop: %+v after %d hops", res.Err, hops)
	}
}

func TestCancelledBeforeSend(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := (&Client{}).Do(ctx, Endpoint{Provider: "openai", BaseURL: "http://127.0.0.1:1/v1", Key: testKey}, Request{Target: Target{Provider: "openai", Model: "m"}}, nil)
	if res.Err == nil || res.Err.Class != ClassCancelled {
		t.Fatalf("%+v", res.Err)
	}
}

func TestBadEndpoint(t *testing.T) {
	for _, ep := range []Endpoint{
		{Provider: "openai", BaseURL: "ftp://x/v1?key=" + testKey},
		{Provider: "openai", BaseURL: "://nope"},
		{Provider: "nosuch", BaseURL: "http://x"},
	} {
		res := (&Client{}).Do(context.Background(), ep, Request{Target: Target{Provider: "openai", Model: "m"}}, nil)
		if res.Err == nil || res.Err.Class != ClassCaller || res.Status != 0 {
			t.Errorf("%v: %+v", ep.Provider, res.Err)
		}
		if strings.Contains(res.Err.Error(), testKey) {
			t.Errorf("key in %q", res.Err.Error())
		}
	}
}

// doer is retry.Doer's shape (retry imports stream, so it cannot be used here).
type doer interface {
	Do(ctx context.Context, req Request, onText func(string)) Result
	Scope(t Target, s Scope) string
}

var _ doer = Router{}
var _ doer = &Router{}

func TestRouter(t *testing.T) {
	c, ep := serve(t, "anthropic", sseHandler(fixture(t, "anthropic/messages-stream-doc-basic.sse")))
	r := Router{Client: c, Endpoints: map[string]Endpoint{"anthropic": ep}}
	res := r.Do(context.Background(), Request{Target: Target{Provider: "anthropic", Model: "claude"}, Prompt: "x"}, nil)
	if res.Err != nil || res.Text != "Hello!" {
		t.Fatalf("%+v", res)
	}
	res = r.Do(context.Background(), Request{Target: Target{Provider: "gemini", Model: "g"}}, nil)
	if res.Err == nil || res.Err.Class != ClassCaller || !strings.Contains(res.Err.Message, "GOOGLE_API_KEY") {
		t.Fatalf("missing endpoint: %+v", res.Err)
	}
	acc := r.Scope(Target{Provider: "anthropic", Model: "claude"}, ScopeAccount)
	if acc != "account:anthropic:"+Secret(testKey).Fingerprint() || strings.Contains(acc, testKey) {
		t.Errorf("account scope %q", acc)
	}
	if s := r.Scope(Target{Provider: "gemini", Model: "gemini-2.5-flash"}, ScopeTarget); s != "target:gemini/gemini-2.5-flash" {
		t.Errorf("target scope %q", s)
	}
	if s := r.Scope(Target{Provider: "gemini", Model: "x"}, ScopeNone); s != "" {
		t.Errorf("no scope %q", s)
	}
}

func TestMaxStreamSize(t *testing.T) {
	c, ep := serve(t, "openai", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for range 1000 {
			if _, err := w.Write([]byte(oaText)); err != nil {
				return
			}
		}
	})
	c.Options.MaxStreamSize = 10 << 10
	res, _ := doReq(c, ep, "m")
	if res.Err == nil || res.Err.Class != ClassServer || !strings.Contains(res.Err.Message, "MaxStreamSize (10240 bytes)") || len(res.Text) == 0 || len(res.Text) > 10<<10 {
		t.Fatalf("%d bytes of text, %+v", len(res.Text), res.Err)
	}
	// JSON labelled as JSON is judged by its bytes: a mislabelled SSE stream still reads.
	c, ep = serve(t, "openai", sseHandler([]byte(oaText+oaFinish), "Content-Type", "application/json"))
	if res, _ = doReq(c, ep, "m"); res.Err != nil || res.Text != "Hi" {
		t.Fatalf("%+v", res.Err)
	}
}

func TestGroqUsageEnvelope(t *testing.T) {
	body := oaText + "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"x_groq\":{\"id\":\"req_01groq\",\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":1}}}\n\ndata: [DONE]\n\n"
	c, ep := serve(t, "groq", sseHandler([]byte(body)))
	res, _ := doReq(c, ep, "m")
	if res.Err != nil || res.Usage == nil || *res.Usage != (Usage{4, 1}) || res.RequestID != "req_01groq" {
		t.Fatalf("%+v %+v", res, res.Usage)
	}
}

func TestGeminiModelPath(t *testing.T) {
	for model, want := range map[string]string{
		"gemini-2.5-flash":      "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
		"models/gemini-2.5-pro": "/v1beta/models/gemini-2.5-pro:streamGenerateContent",
		"tuned 50%?#x":          "/v1beta/models/tuned%2050%25%3F%23x:streamGenerateContent",
	} {
		var got string
		c, ep := serve(t, "gemini", func(w http.ResponseWriter, r *http.Request) {
			got = r.URL.EscapedPath()
			w.WriteHeader(404)
		})
		doReq(c, ep, model)
		if got != want {
			t.Errorf("%q: path %q, want %q", model, got, want)
		}
	}
}
