package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"
	"google.golang.org/genai/interactions/models/apierrors"
	ixm "google.golang.org/genai/interactions/models/interactions"
	"google.golang.org/genai/interactions/models/operations"
	ixretry "google.golang.org/genai/interactions/retry"
)

// google.golang.org/genai's Interactions client (the Go SDK's own,
// Speakeasy-generated, Api-Revision 2026-05-20) against the simulated
// Interactions API: it reads the text, usage and completion of a stream
// and a plain answer; it sees each HTTP error with its status and code
// after the requests its retry rules give (408/409/429/5xx retried; a
// quota_exceeded 429 is retried too, and keeps failing until the day
// ends); in-stream failures come as the SDK yields them (the error event
// and a failed status update are events, not errors), and a stream without
// data: [DONE] ends with its "ended before the sentinel" error.
func TestInteractionsSDKOracle(t *testing.T) {
	cases := []struct {
		name     string
		fault    Fault
		stream   bool
		status   int    // 0: no *apierrors error; > 0 its HTTP status
		code     string // the HTTP error's code, or the yielded error event's
		failed   bool   // a status update with status failed was yielded
		cut      bool   // the stream ended with an error (no [DONE])
		done     bool   // interaction.completed was read
		requests int64
	}{
		{name: "streamed", stream: true, done: true, requests: 1},
		{name: "plain", requests: 1},
		{name: "rate limit then served", fault: Fault{Kind: FaultRateLimit, RetryAfter: 300 * time.Millisecond}, stream: true, done: true, requests: 2},
		{name: "too_many_requests persists", fault: Fault{Kind: FaultRateLimit, Code: "too_many_requests", RetryAfter: 10 * time.Millisecond, Count: 9}, stream: true, status: 429, code: "too_many_requests", requests: 5},
		{name: "daily quota_exceeded persists", fault: Fault{Kind: FaultDailyQuota}, stream: true, status: 429, code: "quota_exceeded", requests: 5},
		{name: "payment_required", fault: Fault{Kind: FaultSpendCap}, stream: true, status: 402, code: "payment_required", requests: 1},
		{name: "billing failed_precondition", fault: Fault{Kind: FaultSpendCap, Code: "billing"}, stream: true, status: 400, code: "failed_precondition", requests: 1},
		{name: "overload once", fault: Fault{Kind: FaultOverload}, stream: true, done: true, requests: 2},
		{name: "error event after 200", fault: Fault{Kind: FaultMidStream}, stream: true, code: "service_unavailable", cut: true, requests: 1},
		{name: "in-stream quota_exceeded", fault: Fault{Kind: FaultMidStream, Code: "quota"}, stream: true, code: "quota_exceeded", cut: true, requests: 1},
		{name: "the streaming example's error event", fault: Fault{Kind: FaultMidStream, Code: "gateway_timeout"}, stream: true, code: "gateway_timeout", cut: true, requests: 1},
		{name: "status update failed", fault: Fault{Kind: FaultMidStream, Code: "failed"}, stream: true, failed: true, cut: true, requests: 1},
		{name: "cut", fault: Fault{Kind: FaultCut}, stream: true, cut: true, requests: 1},
		{name: "cut cleanly", fault: Fault{Kind: FaultCut, Code: "clean"}, stream: true, cut: true, requests: 1},
	}
	fast := operations.WithRetries(ixretry.Config{Strategy: "attempt-count-backoff",
		Backoff:               &ixretry.BackoffStrategy{InitialInterval: 5, MaxInterval: 20, Exponent: 2, MaxElapsedTime: 5000},
		RetryConnectionErrors: true, MaxRetries: func(i int) *int { return &i }(4)})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, url, count := sdkSim(t)
			if c.fault.Kind != "" {
				f := c.fault
				f.Provider = "gemini:interactions" // the variant names its provider
				if err := s.Inject(f); err != nil {
					t.Fatal(err)
				}
			}
			ctx := sdkCtx(t)
			client, err := genai.NewClient(ctx, &genai.ClientConfig{Backend: genai.BackendGeminiAPI, APIKey: FakeKey,
				HTTPOptions: genai.HTTPOptions{BaseURL: url + "/gemini"}})
			if err != nil {
				t.Fatal(err)
			}
			input := ixm.NewInteractionsInput("hello there")
			body := operations.NewCreateInteractionRequestBody(ixm.CreateModelInteraction{
				Model: ixm.Model("gemini-3.8-flash"), Input: &input, Stream: &c.stream})
			opts := []operations.Option{}
			if c.status > 0 && c.requests > 1 || c.name == "overload once" {
				opts = append(opts, fast)
			}
			res, err := client.Interactions.Create(ctx, operations.CreateInteractionRequest{Body: body}, opts...)
			var (
				text, code   string
				failed, done bool
				usage        *ixm.Usage
				streamErr    error
			)
			if err == nil && c.stream {
				st := res.InteractionSSEStreamEvent
				if st == nil {
					t.Fatalf("no stream: %+v", res)
				}
				for st.Next() {
					ev := st.Value().GetData()
					switch {
					case ev.StepDelta != nil && ev.StepDelta.Delta.TextDelta != nil:
						text += ev.StepDelta.Delta.TextDelta.Text
					case ev.ErrorEvent != nil && ev.ErrorEvent.Error != nil:
						code = *ev.ErrorEvent.Error.Code
					case ev.InteractionStatusUpdate != nil && ev.InteractionStatusUpdate.Status == "failed":
						failed = true
					case ev.InteractionCompletedEvent != nil:
						done, usage = true, ev.InteractionCompletedEvent.Interaction.Usage
					case ev.IsUnknown():
						t.Fatalf("an event the SDK does not know: %s", st.RawValue())
					}
				}
				streamErr = st.Err()
			} else if err == nil {
				it := res.Interaction
				if it == nil || len(it.Steps) == 0 || it.Usage == nil {
					t.Fatalf("plain answer %+v", it)
				}
				text, usage = it.Steps[0].ModelOutputStep.Content[0].TextContent.Text, it.Usage
			}
			switch {
			case c.status > 0:
				var ce *apierrors.CreateInteractionClientError
				if !errors.As(err, &ce) || ce.HTTPMeta.Response.StatusCode != c.status || ce.Error_.Code == nil || *ce.Error_.Code != c.code {
					t.Fatalf("error %v, want a client error %d %s", err, c.status, c.code)
				}
			case err != nil:
				t.Fatalf("create: %v", err)
			default:
				if code != c.code || failed != c.failed || done != c.done || (streamErr != nil) != c.cut {
					t.Fatalf("code %q failed %v done %v stream error %v", code, failed, done, streamErr)
				}
				if (done || !c.stream) && (!strings.Contains(text, "gemini-3.8-flash") || usage == nil || *usage.TotalInputTokens == 0 || *usage.TotalOutputTokens == 0) {
					t.Fatalf("text %q usage %+v", text, usage)
				}
			}
			if n := count(); n != c.requests {
				t.Errorf("%d requests, want %d", n, c.requests)
			}
		})
	}
}

// ixFrames reads an SSE body as (event name, data) pairs.
func ixFrames(t *testing.T, r io.Reader) [][2]string {
	t.Helper()
	var out [][2]string
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
			continue
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, [2]string{event, d})
			event = ""
		}
	}
	return out
}

// The simulated streams have the recorded streams' events, in their order,
// with their fields, in both schemas (the legacy one when asked with
// Api-Revision 2026-05-07), each event's data naming it in event_type, and
// end with data: [DONE] (what the SDKs stop on). The recordings' thought
// step (the model's reasoning, which the simulator does not model) is left
// out of the comparison.
func TestInteractionsWireMatchesTheRecordings(t *testing.T) {
	_, url, _ := sdkSim(t)
	for _, c := range []struct{ revision, fixture string }{
		{"", "interactions-stream-recorded-steps.sse"},
		{"2026-05-20", "interactions-stream-recorded-steps.sse"},
		{interactionsLegacyRevision, "interactions-stream-recorded-legacy.sse"},
	} {
		t.Run(c.fixture+" "+c.revision, func(t *testing.T) {
			var want [][2]string
			for _, fr := range ixFrames(t, bytes.NewReader(fixture(t, "gemini/"+c.fixture))) {
				if strings.Contains(fr[1], `"thought`) || strings.Contains(fr[1], `{"index":0,"event_type"`) {
					continue // the thought step
				}
				if n := len(want); n > 0 && fr[0] == want[n-1][0] && strings.HasSuffix(fr[0], ".delta") {
					continue // consecutive deltas as one
				}
				want = append(want, fr)
			}
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/gemini/v1beta/interactions?key="+FakeKey,
				strings.NewReader(`{"model":"gemini-2.5-flash","input":"How are you?","stream":true}`))
			if c.revision != "" {
				req.Header.Set("Api-Revision", c.revision)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			got := ixFrames(t, resp.Body)
			if n := len(got); n == 0 || got[n-1] != [2]string{"", "[DONE]"} {
				t.Fatalf("no [DONE] at the end: %v", got)
			}
			got = got[:len(got)-1]
			var deltas [][2]string // consecutive deltas as one
			for _, fr := range got {
				if n := len(deltas); n > 0 && fr[0] == deltas[n-1][0] && strings.HasSuffix(fr[0], ".delta") {
					continue
				}
				deltas = append(deltas, fr)
			}
			if len(deltas) != len(want) {
				t.Fatalf("events %v\nwant %v", names(deltas), names(want))
			}
			for i := range want {
				var ev struct {
					Type string `json:"event_type"`
				}
				_ = json.Unmarshal([]byte(deltas[i][1]), &ev)
				if deltas[i][0] != want[i][0] || ev.Type != want[i][0] {
					t.Fatalf("event %d: %q (event_type %q), want %q", i, deltas[i][0], ev.Type, want[i][0])
				}
				// Index values differ (no thought step before the text).
				g, w := pathsOf(t, []byte(deltas[i][1])), pathsOf(t, []byte(want[i][1]))
				if !slices.Equal(g, w) {
					t.Errorf("%s fields\n%v\nwant\n%v", want[i][0], g, w)
				}
			}
		})
	}
}

func names(frames [][2]string) []string {
	var out []string
	for _, f := range frames {
		out = append(out, f[0])
	}
	return out
}

// The Interactions API is the gemini account's: a quota stop armed on
// gemini refuses it too, in its own envelope; the key is checked in both
// documented places; /v1/interactions is served as /v1beta/interactions.
func TestInteractionsSharesTheGeminiAccount(t *testing.T) {
	s, url, _ := sdkSim(t)
	post := func(path, key, body string) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("x-goog-api-key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const ok = `{"model":"gemini-3.8-flash","input":"hi"}`
	if st, b := post("/gemini/v1/interactions", FakeKey, ok); st != 200 || !strings.Contains(b, `"object":"interaction"`) {
		t.Fatalf("%d %s", st, b)
	}
	if st, b := post("/gemini/v1beta/interactions", "", ok); st != 401 || !strings.Contains(b, `"code":"authentication"`) {
		t.Fatalf("%d %s", st, b)
	}
	if st, b := post("/gemini/v1beta/interactions", FakeKey, `{"input":"hi"}`); st != 400 || !strings.Contains(b, `"code":"invalid_request"`) {
		t.Fatalf("%d %s", st, b)
	}
	if err := s.Inject(Fault{Provider: "gemini", Kind: FaultDailyQuota}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if st, b := post("/gemini/v1beta/interactions", FakeKey, ok); st != 429 || !strings.Contains(b, `"code":"quota_exceeded"`) {
			t.Fatalf("%d %s", st, b)
		}
	}
	// generateContent meets the same stop in its own shape.
	if st, b := post("/gemini/v1beta/models/gemini-3.8-flash:generateContent", FakeKey, `{"contents":[{"parts":[{"text":"hi"}]}]}`); st != 429 || !strings.Contains(b, "PerDay") {
		t.Fatalf("%d %s", st, b)
	}
	if BaseURL(url, "gemini:interactions") != BaseURL(url, "gemini") {
		t.Fatal(BaseURL(url, "gemini:interactions"))
	}
}

// FuzzInteractionsRequest: any body to the Interactions endpoint gets a
// status, never a panic; a 200 stream ends with its completed event and
// [DONE].
func FuzzInteractionsRequest(f *testing.F) {
	f.Add(`{"model":"m","input":"hi","stream":true}`)
	f.Add(`{"model":"m","input":[{"type":"user_input","content":[{"type":"text","text":"x"}]}],"generation_config":{"max_output_tokens":3},"stream":true}`)
	f.Add(`{"model":"m","input":{"type":"text","text":"x"},"system_instruction":null}`)
	f.Add(`{"model":"m","input":7}`)
	s, err := New(Options{TokensPerSecond: 1e12})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req, _ := http.NewRequest(http.MethodPost, "http://sim.test/gemini/v1beta/interactions", strings.NewReader(body))
		req.Header.Set("x-goog-api-key", FakeKey)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code == 0 {
			t.Fatal("no status")
		}
		if rec.Code == 200 && strings.Contains(rec.Header().Get("Content-Type"), "event-stream") &&
			(!strings.Contains(rec.Body.String(), "event: interaction.completed") || !strings.HasSuffix(rec.Body.String(), "data: [DONE]\n\n")) {
			t.Fatalf("a stream without its end:\n%s", rec.Body)
		}
	})
}
