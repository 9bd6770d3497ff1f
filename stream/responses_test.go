package stream

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

const respProvider = "openai:responses"

// respEvent is one Responses SSE frame.
func respEvent(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }

const (
	respCreated = `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","model":"gpt-5.4-mini-2026","output":[],"usage":null}}`
	respDelta1  = `{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello"}`
	respDelta2  = `{"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"delta":" world"}`
	respDone    = `{"type":"response.completed","sequence_number":3,"response":{"id":"resp_1","status":"completed","model":"gpt-5.4-mini-2026","usage":{"input_tokens":12,"output_tokens":2,"total_tokens":14}}}`
)

func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		t.Fatal(err)
	}
	return c.String()
}

func respStream(frames ...[2]string) []byte {
	var b strings.Builder
	for _, f := range frames {
		b.WriteString(respEvent(f[0], f[1]))
	}
	return []byte(b.String())
}

var respHead = [][2]string{{"response.created", respCreated}, {"response.output_text.delta", respDelta1}, {"response.output_text.delta", respDelta2}}

func TestParseTargetVariant(t *testing.T) {
	tg, err := ParseTarget("openai:responses/gpt-5.4-mini")
	if err != nil || tg.Provider != respProvider || tg.Model != "gpt-5.4-mini" || tg.String() != "openai:responses/gpt-5.4-mini" {
		t.Fatalf("%+v %v", tg, err)
	}
	if _, err := ParseTarget("openai:nope/gpt-5.4-mini"); err == nil || !strings.Contains(err.Error(), "openai:responses") {
		t.Fatalf("an unknown variant: %v", err)
	}
	// A bare gpt- model stays Chat Completions'.
	if p, ok := ProviderForModel("gpt-5.4-mini"); !ok || p.Name != "openai" {
		t.Fatalf("%+v", p)
	}
	p, _ := Provider(respProvider)
	if p.AccountName() != "openai" || p.KeyEnv[0] != "OPENAI_API_KEY" || p.BaseURLEnv != "OPENAI_BASE_URL" {
		t.Fatalf("%+v", p)
	}
}

func TestResponsesRequest(t *testing.T) {
	temp := 0.5
	hr, err := BuildRequest(t.Context(), Endpoint{Provider: respProvider, BaseURL: "http://x.test/v1", Key: "k"},
		Request{Target: Target{Provider: respProvider, Model: "gpt-5.4-mini"}, Prompt: "hi", MaxTokens: 100, System: "be brief",
			Sampling: Sampling{Temperature: &temp, Stop: []string{"x"}}})
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(mustRead(t, hr.Body), &body); err != nil {
		t.Fatal(err)
	}
	if hr.URL.Path != "/v1/responses" || hr.Header.Get("Authorization") != "Bearer k" {
		t.Fatalf("%s %v", hr.URL, hr.Header)
	}
	in, _ := json.Marshal(body["input"])
	if body["model"] != "gpt-5.4-mini" || body["stream"] != true || body["max_output_tokens"] != 100.0 ||
		body["instructions"] != "be brief" || body["temperature"] != 0.5 || string(in) != `[{"content":"hi","role":"user"}]` {
		t.Fatalf("%v", body)
	}
	for _, k := range []string{"messages", "max_tokens", "max_completion_tokens", "stop", "stream_options"} {
		if _, ok := body[k]; ok {
			t.Fatalf("%s sent: %v", k, body)
		}
	}
	// Below the API's minimum, max_output_tokens is raised to it.
	hr, _ = BuildRequest(t.Context(), Endpoint{Provider: respProvider, BaseURL: "http://x.test/v1"},
		Request{Target: Target{Provider: respProvider, Model: "m"}, Prompt: "hi", MaxTokens: 5})
	if b := string(mustRead(t, hr.Body)); !strings.Contains(b, `"max_output_tokens":16`) {
		t.Fatal(b)
	}
}

func TestResponsesDecode(t *testing.T) {
	docExample := bytes.ReplaceAll(fixture(t, "openai/responses-stream-doc-example.sse"), []byte("...\n"), nil)
	cases := []struct {
		name      string
		body      []byte
		class     Class
		text      string
		finish    string
		usage     *Usage
		code      string
		scope     Scope
		midStream bool
	}{
		{name: "constructed fixture", body: fixture(t, "openai/responses-stream-minimal-constructed.sse"),
			class: ClassOK, text: "Hello world", finish: "completed", usage: &Usage{12, 2}},
		{name: "docs example", body: docExample, class: ClassOK, text: "Hi", finish: "completed", usage: &Usage{37, 11}},
		{name: "data only, then [DONE] never read", body: []byte("data: " + respCreated + "\n\ndata: " + respDelta1 + "\n\ndata: " + respDone + "\n\ndata: [DONE]\n\n"),
			class: ClassOK, text: "Hello", finish: "completed", usage: &Usage{12, 2}},
		{name: "incomplete ends with its reason", body: respStream(append(respHead, [2]string{"response.incomplete",
			`{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":3,"output_tokens":16}}}`})...),
			class: ClassOK, text: "Hello world", finish: "max_output_tokens", usage: &Usage{3, 16}},
		{name: "recorded nested insufficient_quota", body: fixture(t, "openai/responses-stream-insufficient-quota-recorded.sse"),
			class: ClassQuota, code: "insufficient_quota", scope: ScopeAccount, midStream: true},
		{name: "flat error event, rate limit", body: respStream(append(respHead, [2]string{"error",
			`{"type":"error","code":"rate_limit_exceeded","message":"Rate limit reached for gpt-5.4-mini on tokens per min (TPM). Please try again in 1.5s.","param":null,"sequence_number":3}`})...),
			class: ClassRateLimit, text: "Hello world", code: "rate_limit_exceeded", midStream: true},
		{name: "flat error event, requests per day", body: respStream(append(respHead, [2]string{"error",
			`{"type":"error","code":"rate_limit_exceeded","message":"Rate limit reached for gpt-5.4-mini on requests per day (RPD): Limit 200, Used 200.","param":null}`})...),
			class: ClassQuota, text: "Hello world", code: "rate_limit_exceeded", scope: ScopeTarget, midStream: true},
		{name: "spec flat error, unknown code", body: respStream([2]string{"error", compactJSON(t, fixture(t, "openai/responses-error-event.json"))}),
			class: ClassServer, code: "ERR_SOMETHING", midStream: true},
		{name: "response.failed alone", body: respStream(append(respHead, [2]string{"response.failed", compactJSON(t, fixture(t, "openai/responses-failed-event.json"))})...),
			class: ClassServer, text: "Hello world", code: "server_error", midStream: true},
		{name: "response.failed overloaded", body: respStream(append(respHead, [2]string{"response.failed",
			`{"type":"response.failed","response":{"status":"failed","error":{"code":"server_is_overloaded","message":"busy"}}}`})...),
			class: ClassOverload, text: "Hello world", code: "server_is_overloaded", midStream: true},
		{name: "response.failed with a null error", body: respStream([2]string{"response.failed", `{"type":"response.failed","response":{"status":"failed","error":null}}`}),
			class: ClassServer, code: "server_error", midStream: true},
		{name: "cut: clean EOF after deltas", body: respStream(respHead...), class: ClassConnection, text: "Hello world", midStream: true},
		{name: "cut: [DONE] without a terminal event", body: append(respStream(respHead...), "data: [DONE]\n\n"...),
			class: ClassConnection, text: "Hello world", midStream: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := decodeBytes(respProvider, "text/event-stream", "", c.body)
			if res.Class() != c.class || res.Text != c.text || res.FinishReason != c.finish {
				t.Fatalf("class %s text %q finish %q, want %s %q %q (%v)", res.Class(), res.Text, res.FinishReason, c.class, c.text, c.finish, res.Err)
			}
			if c.usage != nil && (res.Usage == nil || *res.Usage != *c.usage) {
				t.Fatalf("usage %+v, want %+v", res.Usage, c.usage)
			}
			if res.Err != nil && (res.Err.Code != c.code || res.Err.Scope != c.scope || res.Err.MidStream != c.midStream) {
				t.Fatalf("error %+v", res.Err)
			}
		})
	}
}

// The terminal event ends the attempt even when the server keeps the
// connection open after it.
func TestResponsesStopsAtTerminalEvent(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	c, ep := serve(t, respProvider, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/responses" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Request-Id", "req_r1")
		w.Header().Set("X-Ratelimit-Limit-Requests", "500")
		w.Header().Set("X-Ratelimit-Remaining-Requests", "499")
		w.Header().Set("X-Ratelimit-Reset-Requests", "120ms")
		w.WriteHeader(200)
		_, _ = w.Write(respStream(append(respHead, [2]string{"response.completed", respDone})...))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	ep.BaseURL += "/v1"
	c.Options.StallTimeout = time.Hour
	res, deltas := doReq(c, ep, "gpt-5.4-mini")
	if res.Err != nil || res.Text != "Hello world" || len(deltas) != 2 || res.RequestID != "req_r1" || res.Model != "gpt-5.4-mini-2026" {
		t.Fatalf("%+v", res)
	}
	if res.Limits == nil || res.Limits.Requests == nil || res.Limits.Requests.Remaining != 499 {
		t.Fatalf("limits %+v", res.Limits)
	}
}

// HTTP errors are Chat Completions': a 429 with retry-after is a rate limit
// with its delay, insufficient_quota a quota stop.
func TestResponsesHTTPErrors(t *testing.T) {
	body := `{"error":{"message":"Rate limit reached for gpt-5.4-mini in organization org-x on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	c, ep := serve(t, respProvider, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "2")
		w.Header().Set("X-Request-Id", "req_429")
		w.WriteHeader(429)
		_, _ = w.Write([]byte(body))
	})
	ep.BaseURL += "/v1"
	res, _ := doReq(c, ep, "gpt-5.4-mini")
	if res.Class() != ClassRateLimit || res.Err.Delay != 2*time.Second || res.Err.DelaySource != SourceRetryAfter || res.Err.RequestID != "req_429" {
		t.Fatalf("%+v", res.Err)
	}
	e := ParseError(respProvider, 429, nil, fixture(t, "openai/error-insufficient-quota.json"), fixedNow)
	if e.Class != ClassQuota || e.Code != "insufficient_quota" || e.Scope != ScopeAccount {
		t.Fatalf("%+v", e)
	}
}

// The variant spends the openai account: a quota stop of one binds the
// other.
func TestResponsesSharesTheAccountScope(t *testing.T) {
	r := Router{Endpoints: map[string]Endpoint{
		"openai":     {Provider: "openai", Key: testKey},
		respProvider: {Provider: respProvider, Key: testKey},
	}}
	a := r.Scope(Target{Provider: "openai", Model: "gpt-5.4-mini"}, ScopeAccount)
	b := r.Scope(Target{Provider: respProvider, Model: "gpt-5.4-mini"}, ScopeAccount)
	if a == "" || a != b {
		t.Fatalf("%q != %q", a, b)
	}
}

// FuzzResponsesDecode: any body through the Responses dialect decodes
// without a panic, succeeds only with a terminal event, and every error has
// a class.
func FuzzResponsesDecode(f *testing.F) {
	for _, p := range []string{"openai/responses-stream-minimal-constructed.sse", "openai/responses-stream-insufficient-quota-recorded.sse",
		"openai/responses-stream-doc-example.sse", "openai/chat-stream-wire-constructed.sse"} {
		f.Add(fixture(f, p))
	}
	f.Add(respStream(append(respHead, [2]string{"response.incomplete", `{"type":"response.incomplete","response":{"incomplete_details":{"reason":7}}}`})...))
	f.Add([]byte("data: {\"type\":\"response.failed\",\"response\":{\"error\":\"x\"}}\n\n"))
	f.Add([]byte("data: {\"type\":\"response.output_text.delta\",\"delta\":\"a\\u0000\"}\n\ndata: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		res := decodeBytes(respProvider, "text/event-stream", "", body)
		if res.Err == nil && res.FinishReason == "" {
			t.Fatalf("success without a terminal event: %+v", res)
		}
		if res.Err != nil && (res.Err.Class == "" || res.Err.Class == ClassOK) {
			t.Fatalf("error without a class: %+v", res.Err)
		}
		if res.Usage != nil && (res.Usage.InputTokens < 0 || res.Usage.OutputTokens < 0) {
			t.Fatalf("usage %+v", res.Usage)
		}
	})
}
