package sim

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// openai-go's Responses client, with its default retries, against the
// simulated Responses API: text, usage and completion read right; a 429
// and insufficient_quota reach it with their status and code after the
// requests the docs say (two retries of a 429); in-stream errors come as
// the SDK reads each shape (the nested error event raised, the flat one
// and response.failed yielded).
func TestOpenAIResponsesSDKOracle(t *testing.T) {
	cases := []struct {
		name      string
		fault     Fault
		stream    bool
		maxTokens int64
		status    int    // 0: success; > 0 an *openai.Error; -1 an error after HTTP 200
		code      string // the error's code, or the yielded error event's
		terminal  string // the last lifecycle event seen ("" when none)
		requests  int64
	}{
		{name: "streamed", stream: true, terminal: "response.completed", requests: 1},
		{name: "plain", requests: 1},
		{name: "cut short by max_output_tokens", stream: true, maxTokens: 16, terminal: "response.incomplete", requests: 1},
		{name: "rate limit then served", fault: Fault{Kind: FaultRateLimit, RetryAfter: 300 * time.Millisecond}, stream: true, terminal: "response.completed", requests: 2},
		{name: "rate limit persists", fault: Fault{Kind: FaultRateLimit, RetryAfter: 300 * time.Millisecond, Count: 3}, stream: true, status: 429, code: "rate_limit_exceeded", requests: 3},
		{name: "insufficient_quota", fault: Fault{Kind: FaultSpendCap}, stream: true, status: 429, code: "insufficient_quota", requests: 3},
		{name: "overload once", fault: Fault{Kind: FaultOverload}, stream: true, terminal: "response.completed", requests: 2},
		{name: "nested error event", fault: Fault{Kind: FaultMidStream}, stream: true, status: -1, code: "server_is_overloaded", requests: 1},
		{name: "nested insufficient_quota event", fault: Fault{Kind: FaultMidStream, Code: "insufficient_quota"}, stream: true, status: -1, code: "insufficient_quota", requests: 1},
		{name: "flat error event", fault: Fault{Kind: FaultMidStream, Code: "rate_limit"}, stream: true, code: "rate_limit_exceeded", terminal: "response.failed", requests: 1},
		{name: "response.failed alone", fault: Fault{Kind: FaultMidStream, Code: "server_error"}, stream: true, terminal: "response.failed", requests: 1},
		{name: "cut", fault: Fault{Kind: FaultCut}, stream: true, status: -1, requests: 1},
		// A clean EOF is no error to the SDK: only the missing terminal
		// event tells.
		{name: "cut cleanly", fault: Fault{Kind: FaultCut, Code: "clean"}, stream: true, requests: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, url, count := sdkSim(t)
			if c.fault.Kind != "" {
				f := c.fault
				f.Provider = "openai"
				if err := s.Inject(f); err != nil {
					t.Fatal(err)
				}
			}
			client := openai.NewClient(ooption.WithBaseURL(url+"/openai/v1"), ooption.WithAPIKey(FakeKey))
			params := responses.ResponseNewParams{Model: "gpt-5.4-mini",
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello there")}}
			if c.maxTokens > 0 {
				params.MaxOutputTokens = openai.Int(c.maxTokens)
			}
			ctx := sdkCtx(t)
			var (
				err      error
				text     string
				terminal string
				code     string
				usage    responses.ResponseUsage
			)
			if c.stream {
				st := client.Responses.NewStreaming(ctx, params)
				for st.Next() {
					ev := st.Current()
					switch ev.Type {
					case "response.output_text.delta":
						text += ev.Delta
					case "response.completed", "response.incomplete", "response.failed":
						terminal = ev.Type
						usage = ev.Response.Usage
					case "error":
						code = ev.Code
					}
				}
				err = st.Err()
			} else {
				var res *responses.Response
				res, err = client.Responses.New(ctx, params)
				if err == nil {
					text, usage = res.OutputText(), res.Usage
				}
			}
			switch {
			case c.status == 0:
				if err != nil || terminal != c.terminal || code != c.code {
					t.Fatalf("err %v, terminal %q, code %q", err, terminal, c.code)
				}
				if terminal == "response.completed" || terminal == "response.incomplete" || !c.stream {
					if !strings.Contains(text, "gpt-5.4-mini") && terminal != "response.incomplete" || usage.InputTokens == 0 || usage.OutputTokens == 0 {
						t.Fatalf("text %q usage %+v", text, usage)
					}
				}
				if terminal == "response.incomplete" && usage.OutputTokens != c.maxTokens {
					t.Fatalf("usage %+v, want %d output tokens", usage, c.maxTokens)
				}
			case c.status > 0:
				var ae *openai.Error
				if !errors.As(err, &ae) || ae.StatusCode != c.status || ae.Code != c.code {
					t.Fatalf("error %v, want *openai.Error %d %s", err, c.status, c.code)
				}
			default:
				if err == nil {
					t.Fatalf("a broken stream read as success (%q)", text)
				}
				if c.code != "" && !strings.Contains(err.Error(), c.code) {
					t.Errorf("error %v, want %s", err, c.code)
				}
			}
			if n := count(); n != c.requests {
				t.Errorf("%d requests, want %d", n, c.requests)
			}
		})
	}
}

// The simulated stream has the events, order and fields of the minimal
// stream the reference tested against the SDKs (wire-formats-2.md 2.6),
// with sequence numbers from 0, and no [DONE]; the headers are Chat
// Completions'.
func TestResponsesWire(t *testing.T) {
	_, url, _ := sdkSim(t)
	body := `{"model":"gpt-5.4-mini","input":[{"role":"user","content":"hi"}],"instructions":"be brief","stream":true}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, BaseURL(url, "openai:responses")+"/responses", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+FakeKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	for _, h := range []string{"x-request-id", "x-ratelimit-limit-requests", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-requests"} {
		if resp.Header.Get(h) == "" {
			t.Errorf("no %s", h)
		}
	}
	var types []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var event string
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type string `json:"type"`
			Seq  *int   `json:"sequence_number"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Type != event || ev.Seq == nil || *ev.Seq != len(types) {
			t.Fatalf("event %d: %q %s (%v)", len(types), event, data, err)
		}
		types = append(types, ev.Type)
	}
	var got []string // consecutive deltas as one
	for _, ty := range types {
		if len(got) == 0 || got[len(got)-1] != ty {
			got = append(got, ty)
		}
	}
	want := "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done response.completed"
	if strings.Join(got, " ") != want {
		t.Fatalf("events\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
}

// The request rules: the Responses API's own 400s, and it shares the openai
// account: a quota stop armed on openai refuses Responses requests too.
func TestResponsesRequestRulesAndSharedAccount(t *testing.T) {
	s, url, _ := sdkSim(t)
	post := func(body string) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/openai/v1/responses", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+FakeKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, b := post(`{"model":"gpt-5.4-mini","input":"hi","max_output_tokens":8}`); st != 400 || !strings.Contains(b, "max_output_tokens") {
		t.Fatalf("%d %s", st, b)
	}
	if st, b := post(`{"model":"gpt-5.4-mini"}`); st != 400 || !strings.Contains(b, "'input'") {
		t.Fatalf("%d %s", st, b)
	}
	if st, b := post(`{"model":"gpt-5.4-mini","input":"hi"}`); st != 200 || !strings.Contains(b, `"object":"response"`) || !strings.Contains(b, `"status":"completed"`) {
		t.Fatalf("%d %s", st, b)
	}
	if err := s.Inject(Fault{Provider: "openai", Kind: FaultSpendCap}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if st, b := post(`{"model":"gpt-5.4-mini","input":"hi","stream":true}`); st != 429 || !strings.Contains(b, "insufficient_quota") {
			t.Fatalf("%d %s", st, b)
		}
	}
}

// A fault armed or cleared under the variant's name ("openai:responses",
// as the console's demo menu names its primary) is the openai provider's.
func TestResponsesVariantNamesItsProvider(t *testing.T) {
	s, url, _ := sdkSim(t)
	if BaseURL(url, "openai:responses") != BaseURL(url, "openai") {
		t.Fatal(BaseURL(url, "openai:responses"))
	}
	if _, err := s.Arm(Fault{Provider: "openai:responses", Kind: FaultSpendCap}); err != nil {
		t.Fatal(err)
	}
	if a := s.Armed(); len(a) != 1 || a[0].Provider != "openai" {
		t.Fatalf("%+v", a)
	}
	if n := s.ClearFaults("openai:responses"); n != 1 {
		t.Fatalf("cleared %d", n)
	}
}

// Only a variant the provider table knows names a provider.
func TestUnknownVariantIsUnknown(t *testing.T) {
	s, url, _ := sdkSim(t)
	if BaseURL(url, "openai:nope") != "" {
		t.Fatal(BaseURL(url, "openai:nope"))
	}
	if _, err := s.Arm(Fault{Provider: "openai:nope", Kind: FaultSpendCap}); err == nil {
		t.Fatal("a fault for an unknown variant was armed")
	}
}

// FuzzResponsesRequest: any body to the Responses endpoint gets a status,
// never a panic; a 200 stream ends with its terminal event.
func FuzzResponsesRequest(f *testing.F) {
	f.Add(`{"model":"m","input":"hi","stream":true}`)
	f.Add(`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"x"}]}],"max_output_tokens":16,"stream":true}`)
	f.Add(`{"model":"m","input":{"a":1}}`)
	f.Add(`{"model":"m","input":"x","max_output_tokens":-3,"instructions":null}`)
	s, err := New(Options{TokensPerSecond: 1e12})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req, _ := http.NewRequest(http.MethodPost, "http://sim.test/openai/v1/responses", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+FakeKey)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code == 0 {
			t.Fatal("no status")
		}
		if rec.Code == 200 && strings.Contains(rec.Header().Get("Content-Type"), "event-stream") &&
			!strings.Contains(rec.Body.String(), "event: response.completed") && !strings.Contains(rec.Body.String(), "event: response.incomplete") {
			t.Fatalf("a stream without its terminal event:\n%s", rec.Body)
		}
	})
}
