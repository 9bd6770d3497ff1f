package stream

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestParseTargetTier(t *testing.T) {
	for _, tc := range []struct {
		in, model, tier, str string
	}{
		{"openai/gpt-5.4-mini+flex", "gpt-5.4-mini", "flex", "openai/gpt-5.4-mini+flex"},
		{"openai@team/gpt-5.4-mini+Priority", "gpt-5.4-mini", "priority", "openai@team/gpt-5.4-mini+priority"},
		{"bedrock/anthropic.claude-haiku-5-5-v1:0+flex", "anthropic.claude-haiku-5-5-v1:0", "flex", "bedrock/anthropic.claude-haiku-5-5-v1:0+flex"},
		{"groq/meta-llama/llama-4+on_demand", "meta-llama/llama-4", "on_demand", "groq/meta-llama/llama-4+on_demand"},
		{"anthropic/claude-haiku-5-5+standard_only", "claude-haiku-5-5", "standard_only", "anthropic/claude-haiku-5-5+standard_only"},
		{"gemini/gemini-3.8-flash", "gemini-3.8-flash", "", "gemini/gemini-3.8-flash"},
	} {
		got, err := ParseTarget(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if got.Model != tc.model || got.Tier != tc.tier || got.String() != tc.str {
			t.Errorf("%s: got model %q tier %q string %q", tc.in, got.Model, got.Tier, got.String())
		}
		back, err := ParseTarget(got.String())
		if err != nil || back != got {
			t.Errorf("%s: String does not parse back: %+v, %v", tc.in, back, err)
		}
	}
	for in, want := range map[string]string{
		"openai/gpt-5.4-mini+turbo":        `openai has no service tier "turbo" (its tiers: auto, default, flex, priority)`,
		"deepseek/deepseek-chat+flex":      "deepseek documents no service tiers",
		"gemini/gemini-3.8-flash+default":  `gemini has no service tier "default"`,
		"anthropic/claude-haiku-5-5+flex":  `anthropic has no service tier "flex"`,
		"openai/gpt-5.4-mini+":             "want provider/model+tier",
		"bedrock/amazon.nova-lite-v1:0+on": `bedrock has no service tier "on"`,
	} {
		if _, err := ParseTarget(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to say %q", in, err, want)
		}
	}
}

// TestTierRequestShapes checks each provider's request carries the tier as
// its documentation spells it, and a target without one sends none.
func TestTierRequestShapes(t *testing.T) {
	for _, tc := range []struct {
		target string
		field  string
		want   string // the member's JSON
	}{
		{"openai/gpt-5.4-mini+flex", "service_tier", `"flex"`},
		{"openai:responses/gpt-5.4-mini+priority", "service_tier", `"priority"`},
		{"anthropic/claude-haiku-5-5+standard_only", "service_tier", `"standard_only"`},
		{"gemini/gemini-3.8-flash+priority", "service_tier", `"priority"`},
		{"gemini:interactions/gemini-3.8-flash+flex", "service_tier", `"flex"`},
		{"groq/llama-3.3-70b-versatile+flex", "service_tier", `"flex"`},
		{"bedrock/us.anthropic.claude-haiku-5-5-v1:0+priority", "serviceTier", `{"type":"priority"}`},
	} {
		tg, err := ParseTarget(tc.target)
		if err != nil {
			t.Fatal(err)
		}
		for _, tier := range []string{tg.Tier, ""} {
			tt := tg
			tt.Tier = tier
			ep := Endpoint{Provider: tt.Provider, BaseURL: "https://example.invalid", Key: "k"}
			hr, err := BuildRequest(context.Background(), ep, Request{Target: tt, Prompt: "hi"})
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(hr.Body)
			var m map[string]json.RawMessage
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatal(err)
			}
			got, ok := m[tc.field]
			switch {
			case tier == "" && ok:
				t.Errorf("%s without a tier sent %s=%s", tc.target, tc.field, got)
			case tier != "" && string(got) != tc.want:
				t.Errorf("%s: %s=%s, want %s", tc.target, tc.field, got, tc.want)
			}
		}
	}
}

// TestServedTierRecorded checks the tier that served an answer is read
// where each provider puts it, and a priority request served lower is a
// downgrade.
func TestServedTierRecorded(t *testing.T) {
	oaChunk := func(tier string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","model":"m","service_tier":"` + tier + `","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"c1","object":"chat.completion.chunk","model":"m","service_tier":"` + tier + `","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
	}
	gem := `data: {"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1}}` + "\n\n"
	for _, tc := range []struct {
		name, provider, tier string
		h                    http.HandlerFunc
		served               string
		downgrade            bool
	}{
		{"openai priority served default", "openai", "priority", sseHandler([]byte(oaChunk("default"))), "default", true},
		{"openai priority served priority", "openai", "priority", sseHandler([]byte(oaChunk("priority"))), "priority", false},
		{"openai auto served default", "openai", "auto", sseHandler([]byte(oaChunk("default"))), "default", false},
		{"anthropic usage.service_tier", "anthropic", "auto", sseHandler(fixture(t, "anthropic/messages-stream-recorded.sse")), "standard", false},
		{"gemini priority over its limit", "gemini", "priority", sseHandler([]byte(gem), "x-gemini-service-tier", "standard"), "standard", true},
		{"gemini priority served", "gemini", "priority", sseHandler([]byte(gem), "x-gemini-service-tier", "priority"), "priority", false},
		{"gemini no header", "gemini", "", sseHandler([]byte(gem)), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ep := serve(t, tc.provider, tc.h)
			tg := Target{Provider: tc.provider, Model: "m", Tier: tc.tier}
			res := c.Do(context.Background(), ep, Request{Target: tg, Prompt: "hi"}, nil)
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if res.ServedTier != tc.served || tg.Downgraded(res.ServedTier) != tc.downgrade {
				t.Errorf("served %q downgrade %v, want %q %v", res.ServedTier, tg.Downgraded(res.ServedTier), tc.served, tc.downgrade)
			}
		})
	}
}

// TestServedTierInEvent checks the served tier is read from any depth
// (Bedrock's metadata serviceTier object too) and never from text.
func TestServedTierInEvent(t *testing.T) {
	for data, want := range map[string]string{
		`{"usage":{"inputTokens":1},"metrics":{"latencyMs":3},"serviceTier":{"type":"flex"}}`: "flex",
		`{"response":{"id":"r","service_tier":"priority"}}`:                                   "priority",
		`{"choices":[{"delta":{"content":"\"service_tier\":\"priority\""}}]}`:                 "",
		`{"service_tier":"<script>"}`:                                                         "",
		`not json "service_tier"`:                                                             "",
		`{"id":"c","service_tier":null,"choices":[]}`:                                         "",
		`{"service_tier" : null,"response":{"service_tier": "flex"}}`:                         "flex",
	} {
		field := "service_tier"
		if strings.Contains(data, "serviceTier") {
			field = "serviceTier"
		}
		if got := servedInEvent(field, data); got != want {
			t.Errorf("%s: got %q, want %q", data, got, want)
		}
	}
}

// TestFlexCapacityClass checks short flex capacity is classed apart from
// a rate limit and an overload, and an invalid tier is the caller's.
func TestFlexCapacityClass(t *testing.T) {
	// OpenAI documents the flex 429 ("Resource Unavailable") but no body:
	// this one is assumed.
	oaFlex := oaErr("server_error", "", "Resource Unavailable")
	oaRate := oaErr("requests", "rate_limit_exceeded", "Rate limit reached for gpt-5.4-mini on requests per min (RPM)")
	// Gemini's flex 503 is its documented UNAVAILABLE body.
	gem503 := string(fixture(t, "gemini/error-503-unavailable.json"))
	// Groq documents 498 capacity_exceeded, not its body: assumed.
	groq498 := `{"error":{"message":"Flex tier capacity exceeded. This is a transient error: please try again later.","type":"invalid_request_error","code":"capacity_exceeded"}}`
	for _, tc := range []struct {
		name, provider, tier string
		status               int
		body                 string
		class                Class
	}{
		{"openai flex 429", "openai", "flex", 429, oaFlex, ClassFlexCapacity},
		{"openai flex 429 that is a rate limit", "openai", "flex", 429, oaRate, ClassRateLimit},
		{"openai default 429", "openai", "", 429, oaFlex, ClassRateLimit},
		{"openai invalid tier", "openai", "flex", 400, oaErr("invalid_request_error", "", "Invalid service_tier argument"), ClassCaller},
		{"gemini flex 503", "gemini", "flex", 503, gem503, ClassFlexCapacity},
		{"gemini standard 503", "gemini", "", 503, gem503, ClassOverload},
		{"gemini flex unsupported", "gemini", "flex", 400, gemErr(400, "INVALID_ARGUMENT", "Flex API is not supported for model m"), ClassCaller},
		{"groq flex 498", "groq", "flex", 498, groq498, ClassFlexCapacity},
		{"groq auto 498", "groq", "auto", 498, groq498, ClassFlexCapacity},
		{"groq 503", "groq", "flex", 503, oaErr("internal_server_error", "", "Service Unavailable"), ClassOverload},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ep := serve(t, tc.provider, errorHandler(tc.status, tc.body))
			res := c.Do(context.Background(), ep, Request{Target: Target{Provider: tc.provider, Model: "m", Tier: tc.tier}, Prompt: "hi"}, nil)
			if res.Err == nil || res.Err.Class != tc.class || res.Err.ModelSpecific {
				t.Fatalf("got %v, want class %s (not model-specific)", res.Err, tc.class)
			}
		})
	}
}

// hangTransport answers nothing until the request's context ends.
type hangTransport struct{}

func (hangTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// TestFlexTimeout checks, on a fake clock, that an attempt at OpenAI's
// flex tier waits the advised 15 minutes for its headers, and one at the
// default tier the usual header timeout.
func TestFlexTimeout(t *testing.T) {
	for _, tc := range []struct {
		tier string
		want time.Duration
	}{{"flex", 15 * time.Minute}, {"", 30 * time.Second}, {"priority", 30 * time.Second}} {
		synctest.Test(t, func(t *testing.T) {
			c := &Client{HTTP: &http.Client{Transport: hangTransport{}}}
			ep := Endpoint{Provider: "openai", BaseURL: "http://sim.invalid/v1", Key: "k"}
			start := time.Now()
			res := c.Do(context.Background(), ep, Request{Target: Target{Provider: "openai", Model: "m", Tier: tc.tier}, Prompt: "hi"}, nil)
			if res.Err == nil || res.Err.Class != ClassTimeout {
				t.Fatalf("tier %q: got %v, want a timeout", tc.tier, res.Err)
			}
			if got := time.Since(start); got != tc.want {
				t.Errorf("tier %q timed out after %v, want %v", tc.tier, got, tc.want)
			}
		})
	}
}

// TestSharedQuotaKey checks Bedrock's priority, default and flex share one
// quota key (and so one pacing gate), reserved and other providers' tiers
// not.
func TestSharedQuotaKey(t *testing.T) {
	base := Target{Provider: "bedrock", Model: "m"}
	for _, tier := range []string{"priority", "default", "flex"} {
		tt := base
		tt.Tier = tier
		if tt.QuotaKey() != base.QuotaKey() {
			t.Errorf("bedrock %s: quota key %q, want %q", tier, tt.QuotaKey(), base.QuotaKey())
		}
	}
	if r := (Target{Provider: "bedrock", Model: "m", Tier: "reserved"}); r.QuotaKey() == base.QuotaKey() {
		t.Errorf("bedrock reserved shares the on-demand quota key")
	}
	if f := (Target{Provider: "openai", Model: "m", Tier: "flex"}); f.QuotaKey() != f.String() {
		t.Errorf("openai flex quota key %q", f.QuotaKey())
	}
}

// TestPriorityWindows checks Anthropic's priority windows are read as
// their own gauges.
func TestPriorityWindows(t *testing.T) {
	h := http.Header{}
	h.Set("anthropic-ratelimit-requests-limit", "50")
	h.Set("anthropic-ratelimit-requests-remaining", "49")
	h.Set("anthropic-priority-input-tokens-limit", "10000")
	h.Set("anthropic-priority-input-tokens-remaining", "9000")
	h.Set("anthropic-priority-output-tokens-limit", "2000")
	h.Set("anthropic-priority-output-tokens-remaining", "1500")
	h.Set("anthropic-priority-output-tokens-reset", "2026-11-29T21:01:00Z")
	l := ParseLimits("anthropic", h, fixedNow)
	if l == nil || l.PriorityInputTokens == nil || l.PriorityOutputTokens == nil {
		t.Fatalf("no priority windows: %+v", l)
	}
	if l.PriorityInputTokens.Remaining != 9000 || l.PriorityOutputTokens.Limit != 2000 || !l.PriorityOutputTokens.Reset.Equal(fixedNow.Add(time.Minute)) {
		t.Errorf("priority windows %+v %+v", *l.PriorityInputTokens, *l.PriorityOutputTokens)
	}
	if l.InputTokens != nil {
		t.Errorf("the priority window was read as the regular one")
	}
	if o := ParseLimits("openai", h, fixedNow); o != nil && o.PriorityInputTokens != nil {
		t.Errorf("openai read anthropic's priority windows")
	}
}

// TestNamesAValue: an event naming the served-tier member as null is not
// decoded (it would be on every token of a stream that names it so).
func TestNamesAValue(t *testing.T) {
	for data, want := range map[string]bool{
		`{"service_tier":"default"}`:                        true,
		`{"service_tier":null,"choices":[]}`:                false,
		`{"service_tier" :  null}`:                          false,
		`{"service_tier":null,"x":{"service_tier":"flex"}}`: true,
		`{"choices":[]}`:                                    false,
		`{"service_tier"`:                                   false,
	} {
		if got := namesAValue(data, `"service_tier"`); got != want {
			t.Errorf("%s: %v, want %v", data, got, want)
		}
	}
}
