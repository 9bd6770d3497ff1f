package stream

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

const ixProvider = "gemini:interactions"

func ixStream(frames ...[2]string) []byte {
	var b strings.Builder
	for _, f := range frames {
		b.WriteString("event: " + f[0] + "\ndata: " + f[1] + "\n\n")
	}
	return []byte(b.String())
}

var ixHead = [][2]string{
	{"interaction.created", `{"interaction":{"id":"v1_abc","status":"in_progress","object":"interaction","model":"gemini-3.8-flash"},"event_type":"interaction.created"}`},
	{"step.start", `{"index":0,"step":{"type":"model_output"},"event_type":"step.start"}`},
	{"step.delta", `{"index":0,"delta":{"text":"Hello","type":"text"},"event_type":"step.delta"}`},
	{"step.delta", `{"index":0,"delta":{"text":" world","type":"text"},"event_type":"step.delta"}`},
}

func ixErr(code, msg string) [2]string {
	return [2]string{"error", `{"event_type":"error","error":{"code":"` + code + `","message":"` + msg + `"}}`}
}

func TestParseTargetInteractions(t *testing.T) {
	tg, err := ParseTarget("gemini:interactions/gemini-3.8-flash")
	if err != nil || tg.Provider != ixProvider || tg.Model != "gemini-3.8-flash" {
		t.Fatalf("%+v %v", tg, err)
	}
	if p, ok := ProviderForModel("gemini-3.8-flash"); !ok || p.Name != "gemini" {
		t.Fatalf("a bare gemini- model left generateContent: %+v", p)
	}
	p, _ := Provider(ixProvider)
	if p.AccountName() != "gemini" || p.KeyEnv[0] != "GOOGLE_API_KEY" || p.BaseURLEnv != "GOOGLE_GEMINI_BASE_URL" {
		t.Fatalf("%+v", p)
	}
	if _, err := ParseTarget("gemini:nope/x"); err == nil || !strings.Contains(err.Error(), "gemini:interactions") {
		t.Fatalf("an unknown variant: %v", err)
	}
	r := Router{Endpoints: map[string]Endpoint{"gemini": {Provider: "gemini", Key: testKey}, ixProvider: {Provider: ixProvider, Key: testKey}}}
	if a, b := r.Scope(Target{Provider: "gemini", Model: "m"}, ScopeAccount), r.Scope(Target{Provider: ixProvider, Model: "m"}, ScopeAccount); a == "" || a != b {
		t.Fatalf("the variant is not the gemini account: %q != %q", a, b)
	}
}

// The request is the documented REST call: POST /v1beta/interactions, the
// key in x-goog-api-key, stream in the body, the current Api-Revision.
func TestInteractionsRequest(t *testing.T) {
	temp := 0.5
	hr, err := BuildRequest(t.Context(), Endpoint{Provider: ixProvider, BaseURL: "http://x.test", Key: "k"},
		Request{Target: Target{Provider: ixProvider, Model: "gemini-3.8-flash"}, Prompt: "Count to 3.", MaxTokens: 100, System: "be brief",
			Sampling: Sampling{Temperature: &temp, Stop: []string{"x"}}})
	if err != nil {
		t.Fatal(err)
	}
	if hr.URL.Path != "/v1beta/interactions" || hr.URL.RawQuery != "" || hr.Header.Get("X-Goog-Api-Key") != "k" ||
		hr.Header.Get("Api-Revision") != InteractionsRevision || hr.Header.Get("Accept") != "text/event-stream" {
		t.Fatalf("%s %v", hr.URL, hr.Header)
	}
	got := compactJSON(t, mustRead(t, hr.Body))
	want := `{"generation_config":{"max_output_tokens":100,"stop_sequences":["x"],"temperature":0.5},"input":"Count to 3.","model":"gemini-3.8-flash","store":false,"stream":true,"system_instruction":"be brief"}`
	if got != want {
		t.Fatalf("body\n%s\nwant\n%s", got, want)
	}
	hr, _ = BuildRequest(t.Context(), Endpoint{Provider: ixProvider, BaseURL: "http://x.test"},
		Request{Target: Target{Provider: ixProvider, Model: "m"}, Messages: []Message{{Role: "user", Content: "a"}, {Role: "assistant", Content: "b"}, {Role: "user", Content: "c"}}})
	var body map[string]json.RawMessage
	if err := json.Unmarshal(mustRead(t, hr.Body), &body); err != nil {
		t.Fatal(err)
	}
	if in := string(body["input"]); in != `[{"content":[{"text":"a","type":"text"}],"type":"user_input"},{"content":[{"text":"b","type":"text"}],"type":"model_output"},{"content":[{"text":"c","type":"text"}],"type":"user_input"}]` {
		t.Fatal(in)
	}
}

// Both schemas' recorded streams, the completion rule and every in-stream
// failure decode to their documented class.
func TestInteractionsDecode(t *testing.T) {
	steps := fixture(t, "gemini/interactions-stream-recorded-steps.sse")
	legacy := fixture(t, "gemini/interactions-stream-recorded-legacy.sse")
	cut := func(b []byte, final string) []byte { return b[:strings.Index(string(b), "event: "+final)] }
	done := ixStream(append(ixHead, [2]string{"interaction.completed", `{"interaction":{"id":"v1_abc","status":"completed","usage":{"total_input_tokens":3,"total_output_tokens":2}},"event_type":"interaction.completed"}`})...)
	cases := []struct {
		name, text, finish, code string
		body                     []byte
		class                    Class
		usage                    *Usage
		scope                    Scope
		mid                      bool
		reset                    bool
	}{
		{name: "recorded steps schema", body: steps, class: ClassOK, text: "I'm doing great, thank you for asking!\n\nHow are you doing today? And what can I do for you?", finish: "completed", usage: &Usage{7, 26}},
		{name: "recorded legacy schema", body: legacy, class: ClassOK, text: "Hello! I'm doing well, thank you for asking.\n\nAs an AI, I don't have feelings in the way humans do, but I'm fully operational and ready to assist you.\n\nHow can I help you today?", finish: "completed", usage: &Usage{7, 50}},
		{name: "completed then [DONE]", body: append(done, "data: [DONE]\n\n"...), class: ClassOK, text: "Hello world", finish: "completed", usage: &Usage{3, 2}},
		{name: "data lines only (event_type names them)", body: []byte(strings.ReplaceAll(string(done), "event: ", "x-ignored: ")), class: ClassOK, text: "Hello world", finish: "completed"},
		{name: "incomplete is a finish", body: ixStream(append(ixHead, [2]string{"interaction.completed", `{"interaction":{"status":"incomplete"},"event_type":"interaction.completed"}`})...), class: ClassOK, text: "Hello world", finish: "incomplete"},
		{name: "cut: steps stream without interaction.completed", body: cut(steps, "interaction.completed"), class: ClassConnection, text: "I'm doing great, thank you for asking!\n\nHow are you doing today? And what can I do for you?", mid: true},
		{name: "cut: legacy stream without interaction.complete", body: cut(legacy, "interaction.complete"), class: ClassConnection, text: "Hello! I'm doing well, thank you for asking.\n\nAs an AI, I don't have feelings in the way humans do, but I'm fully operational and ready to assist you.\n\nHow can I help you today?", mid: true},
		{name: "cut: [DONE] before completion", body: append(ixStream(ixHead...), "data: [DONE]\n\n"...), class: ClassConnection, text: "Hello world", mid: true},
		{name: "third-party error event (gateway_timeout)", body: ixStream(append(ixHead, [2]string{"error", compactJSON(t, fixture(t, "gemini/interactions-error-event-thirdparty.json"))})...), class: ClassServer, text: "Hello world", code: "gateway_timeout", mid: true},
		{name: "in-stream rate_limit_exceeded", body: ixStream(append(ixHead, ixErr("rate_limit_exceeded", "Rate limit exceeded."))...), class: ClassRateLimit, text: "Hello world", code: "rate_limit_exceeded", mid: true},
		{name: "in-stream too_many_requests", body: ixStream(append(ixHead, ixErr("too_many_requests", "Too many requests."))...), class: ClassRateLimit, text: "Hello world", code: "too_many_requests", mid: true},
		{name: "in-stream quota_exceeded is a per-day quota", body: ixStream(append(ixHead, ixErr("quota_exceeded", "Daily quota exceeded."))...), class: ClassQuota, text: "Hello world", code: "quota_exceeded", scope: ScopeTarget, mid: true, reset: true},
		{name: "in-stream service_unavailable", body: ixStream(append(ixHead, ixErr("service_unavailable", "The model is overloaded."))...), class: ClassOverload, text: "Hello world", code: "service_unavailable", mid: true},
		{name: "in-stream payment_required", body: ixStream(ixErr("payment_required", "Your prepayment credits are depleted.")), class: ClassQuota, code: "payment_required", scope: ScopeAccount, mid: true},
		{name: "in-stream unknown code", body: ixStream(ixErr("something_new", "?")), class: ClassServer, code: "something_new", mid: true},
		{name: "status_update failed", body: ixStream(append(ixHead, [2]string{"interaction.status_update", `{"interaction_id":"v1_abc","status":"failed","event_type":"interaction.status_update"}`})...), class: ClassServer, text: "Hello world", code: "api_error", mid: true},
		{name: "completed with status failed and its errors", body: ixStream(append(ixHead, [2]string{"interaction.completed", `{"interaction":{"status":"failed","errors":[{"code":"service_unavailable","message":"busy"}]},"event_type":"interaction.completed"}`})...), class: ClassOverload, text: "Hello world", code: "service_unavailable", mid: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := decodeBytes(ixProvider, "text/event-stream", "", c.body)
			if res.Class() != c.class || res.Text != c.text || res.FinishReason != c.finish {
				t.Fatalf("class %s text %q finish %q, want %s %q %q (%v)", res.Class(), res.Text, res.FinishReason, c.class, c.text, c.finish, res.Err)
			}
			if c.usage != nil && (res.Usage == nil || *res.Usage != *c.usage) {
				t.Fatalf("usage %+v, want %+v", res.Usage, c.usage)
			}
			if c.class == ClassOK && res.RequestID == "" {
				t.Fatal("the interaction id is not the request id")
			}
			if res.Err != nil && (res.Err.Code != c.code || res.Err.Scope != c.scope || res.Err.MidStream != c.mid || res.Err.ResetAt.IsZero() == c.reset) {
				t.Fatalf("error %+v", res.Err)
			}
		})
	}
	if res := decodeBytes(ixProvider, "text/event-stream", "", steps); res.RequestID != "v1_ChdUR3NIYXVyQkFlYVA2ZGtQajZERThBVRIXVEdzSGF1ckJBZWFQNmRrUGo2REU4QVU" || res.Model != "gemini-2.5-flash" {
		t.Fatalf("request id %q model %q", res.RequestID, res.Model)
	}
}

// HTTP errors: the documented code table, in the API's string-code shape
// and in the generateContent shape.
func TestInteractionsHTTPErrors(t *testing.T) {
	body := func(code, msg string) []byte {
		return []byte(`{"error":{"code":"` + code + `","message":"` + msg + `"}}`)
	}
	cases := []struct {
		status      int
		body        []byte
		class       Class
		scope       Scope
		modelSpec   bool
		perDayReset bool
	}{
		{429, body("rate_limit_exceeded", "Rate limit exceeded."), ClassRateLimit, "", false, false},
		{429, body("too_many_requests", "Too many requests."), ClassRateLimit, "", false, false},
		{429, body("quota_exceeded", "You exceeded your daily quota."), ClassQuota, ScopeTarget, false, true},
		{402, body("payment_required", "Your prepayment credits are depleted."), ClassQuota, ScopeAccount, false, false},
		{400, body("failed_precondition", "Billing is not enabled for this project."), ClassQuota, ScopeAccount, false, false},
		{400, body("failed_precondition", "User location is not supported for the API use."), ClassCaller, "", false, false},
		{400, body("invalid_request", "bad"), ClassCaller, "", false, false},
		{404, body("model_not_found", "no such model"), ClassCaller, "", true, false},
		{401, body("authentication", "API key not valid."), ClassCaller, "", false, false},
		{409, body("aborted", "conflict"), ClassServer, "", false, false},
		{409, body("already_exists", "exists"), ClassCaller, "", false, false},
		{500, body("api_error", "internal"), ClassServer, "", false, false},
		{503, body("service_unavailable", "The model is overloaded."), ClassOverload, "", false, false},
		{504, body("deadline_exceeded", "Deadline expired."), ClassServer, "", false, false},
		{429, fixture(t, "gemini/error-429-quota-perday.json"), ClassQuota, ScopeTarget, false, true},
		{503, fixture(t, "gemini/error-503-unavailable.json"), ClassOverload, "", false, false},
		{402, fixture(t, "gemini/error-402-prepay-depleted.json"), ClassQuota, ScopeAccount, false, false},
	}
	for _, c := range cases {
		e := ParseError(ixProvider, c.status, nil, c.body, fixedNow)
		if e.Class != c.class || e.Scope != c.scope || e.ModelSpecific != c.modelSpec || (e.ResetAt == NextPacificMidnight(fixedNow)) != c.perDayReset {
			t.Errorf("%d %s: %+v", c.status, c.body, e)
		}
	}
	// The server's delay, when sent, is read from the headers.
	c, ep := serve(t, ixProvider, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1beta/interactions" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(429)
		_, _ = w.Write(body("rate_limit_exceeded", "Rate limit exceeded."))
	})
	res, _ := doReq(c, ep, "gemini-3.8-flash")
	if res.Class() != ClassRateLimit || res.Err.Delay != 3*time.Second || res.Err.DelaySource != SourceRetryAfter || res.Err.Code != "rate_limit_exceeded" {
		t.Fatalf("%+v", res.Err)
	}
}

// The completed event ends the attempt even when the connection stays open.
func TestInteractionsStopsAtCompleted(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	c, ep := serve(t, ixProvider, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = w.Write(fixture(t, "gemini/interactions-stream-recorded-steps.sse"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	c.Options.StallTimeout = time.Hour
	res, deltas := doReq(c, ep, "gemini-2.5-flash")
	if res.Err != nil || len(deltas) != 1 || res.FinishReason != "completed" {
		t.Fatalf("%+v", res)
	}
}

// FuzzInteractionsDecode: any body decodes without a panic, succeeds only
// with the completed event, and every error has a class.
func FuzzInteractionsDecode(f *testing.F) {
	for _, p := range []string{"gemini/interactions-stream-recorded-steps.sse", "gemini/interactions-stream-recorded-legacy.sse", "gemini/interactions-error-event-thirdparty.json"} {
		f.Add(fixture(f, p))
	}
	f.Add(ixStream(append(ixHead, ixErr("quota_exceeded", "x"))...))
	f.Add([]byte("data: {\"event_type\":\"interaction.completed\",\"interaction\":{\"status\":7,\"errors\":[1]}}\n\n"))
	f.Add([]byte("event: step.delta\ndata: {\"delta\":{\"type\":\"text\",\"text\":\"a\\u0000\"}}\n\ndata: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		res := decodeBytes(ixProvider, "text/event-stream", "", body)
		if res.Err == nil && res.FinishReason == "" {
			t.Fatalf("success without the completed event: %+v", res)
		}
		if res.Err != nil && (res.Err.Class == "" || res.Err.Class == ClassOK) {
			t.Fatalf("error without a class: %+v", res.Err)
		}
	})
}

// A thought step's deltas are thinking, not text, and the completed
// interaction's total_thought_tokens are the reasoning tokens.
func TestInteractionsThoughts(t *testing.T) {
	body := ixStream(
		[2]string{"interaction.created", `{"interaction":{"id":"v1_abc","status":"in_progress"},"event_type":"interaction.created"}`},
		[2]string{"step.start", `{"index":0,"step":{"type":"thought"},"event_type":"step.start"}`},
		[2]string{"step.delta", `{"index":0,"delta":{"type":"thought_summary","content":{"type":"text","text":"Considering the sky"}},"event_type":"step.delta"}`},
		[2]string{"step.delta", `{"index":0,"delta":{"type":"thought_signature","signature":"Eq=="},"event_type":"step.delta"}`},
		[2]string{"step.start", `{"index":1,"step":{"type":"model_output"},"event_type":"step.start"}`},
		[2]string{"step.delta", `{"index":1,"delta":{"text":"Blue.","type":"text"},"event_type":"step.delta"}`},
		[2]string{"interaction.completed", `{"interaction":{"id":"v1_abc","status":"completed","usage":{"total_input_tokens":3,"total_output_tokens":2,"total_thought_tokens":115}},"event_type":"interaction.completed"}`},
	)
	res := decodeBytes(ixProvider, "text/event-stream", "", body)
	if res.Class() != ClassOK || res.Text != "Blue." || !res.Thinking || res.ReasoningTokens != 115 {
		t.Fatalf("class %s text %q thinking %v reasoning tokens %d (%v)", res.Class(), res.Text, res.Thinking, res.ReasoningTokens, res.Err)
	}
	if res := decodeBytes(ixProvider, "text/event-stream", "", ixStream(append(ixHead, [2]string{"interaction.completed", `{"interaction":{"status":"completed"},"event_type":"interaction.completed"}`})...)); res.Thinking {
		t.Fatal("a text-only interaction was taken for thinking")
	}
}
