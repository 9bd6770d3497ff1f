package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/limitscope/limitscope/stream"
)

// streamReady skips the round trips while stream.Client.Do is a stub.
func streamReady(t *testing.T, r stream.Result) {
	t.Helper()
	if r.Err != nil && r.Err.Message == "not implemented" {
		t.Skip("stream.Client.Do is not implemented yet")
	}
}

// Every failure the simulator can produce, through the stream package, into
// the class the engine expects (the engine issue's table).
func TestRoundTripClasses(t *testing.T) {
	type want struct {
		status    int
		class     stream.Class
		model     bool // model-specific caller error
		code      string
		source    stream.DelaySource
		delay     time.Duration
		midStream bool
		scope     stream.Scope
		quotaID   string
	}
	cases := []struct {
		provider string
		fault    Fault
		want     want
	}{
		// OpenAI
		{"openai", Fault{Kind: FaultRateLimit, RetryAfter: 20 * time.Second}, want{status: 429, class: stream.ClassRateLimit, code: "rate_limit_exceeded", source: stream.SourceRetryAfter, delay: 20 * time.Second}},
		{"openai", Fault{Kind: FaultSlowDown, RetryAfter: 3 * time.Second}, want{status: 429, class: stream.ClassRateLimit, code: "slow_down", source: stream.SourceRetryAfter, delay: 3 * time.Second}},
		{"openai", Fault{Kind: FaultSpendCap}, want{status: 429, class: stream.ClassQuota, code: "insufficient_quota", scope: stream.ScopeAccount}},
		{"openai", Fault{Kind: FaultSpendCap, Code: "credit_balance_exhausted"}, want{status: 429, class: stream.ClassQuota, code: "credit_balance_exhausted", scope: stream.ScopeAccount}},
		{"openai", Fault{Kind: FaultSpendCap, Code: "organization_spend_limit_exceeded"}, want{status: 429, class: stream.ClassQuota, code: "organization_spend_limit_exceeded", scope: stream.ScopeAccount}},
		{"openai", Fault{Kind: FaultSpendCap, Code: "project_spend_limit_exceeded"}, want{status: 429, class: stream.ClassQuota, code: "project_spend_limit_exceeded", scope: stream.ScopeAccount}},
		{"openai", Fault{Kind: FaultSpendCap, Code: "organization_usage_limit_exceeded"}, want{status: 429, class: stream.ClassQuota, code: "organization_usage_limit_exceeded", scope: stream.ScopeAccount}},
		{"openai", Fault{Kind: FaultOverload}, want{status: 503, class: stream.ClassOverload, code: "server_is_overloaded"}},
		{"openai", Fault{Kind: FaultServerError}, want{status: 500, class: stream.ClassServer}},
		{"openai", Fault{Kind: FaultServerError, Code: "502"}, want{status: 502, class: stream.ClassServer}},
		{"openai", Fault{Kind: FaultMidStream}, want{status: 200, class: stream.ClassOverload, code: "server_is_overloaded", midStream: true}},
		{"openai", Fault{Kind: FaultCut}, want{status: 200, class: stream.ClassConnection, midStream: true}},
		{"openai", Fault{Kind: FaultReset}, want{status: 0, class: stream.ClassConnection}},
		{"openai", Fault{Kind: FaultContextLength}, want{status: 400, class: stream.ClassCaller, model: true, code: "context_length_exceeded"}},
		{"openai", Fault{Kind: FaultRequestTooLarge}, want{status: 429, class: stream.ClassCaller, model: true, code: "rate_limit_exceeded"}},
		// Anthropic
		{"anthropic", Fault{Kind: FaultRateLimit, RetryAfter: 20 * time.Second}, want{status: 429, class: stream.ClassRateLimit, code: "rate_limit_error", source: stream.SourceRetryAfter, delay: 20 * time.Second}},
		{"anthropic", Fault{Kind: FaultSlowDown, RetryAfter: 4 * time.Second}, want{status: 429, class: stream.ClassRateLimit, source: stream.SourceRetryAfter, delay: 4 * time.Second}},
		{"anthropic", Fault{Kind: FaultSpendCap}, want{status: 429, class: stream.ClassQuota, code: "enforced_spend_limit_reached", scope: stream.ScopeAccount}},
		{"anthropic", Fault{Kind: FaultSpendCap, Code: "usage_limit"}, want{status: 400, class: stream.ClassQuota, scope: stream.ScopeAccount}},
		{"anthropic", Fault{Kind: FaultSpendCap, Code: "workspace_usage_limit"}, want{status: 400, class: stream.ClassQuota, scope: stream.ScopeAccount}},
		{"anthropic", Fault{Kind: FaultSpendCap, Code: "credit_balance"}, want{status: 400, class: stream.ClassQuota, scope: stream.ScopeAccount}},
		{"anthropic", Fault{Kind: FaultSpendCap, Code: "billing_error"}, want{status: 402, class: stream.ClassQuota, code: "billing_error", scope: stream.ScopeAccount}},
		{"anthropic", Fault{Kind: FaultOverload}, want{status: 529, class: stream.ClassOverload, code: "overloaded_error"}},
		{"anthropic", Fault{Kind: FaultServerError}, want{status: 500, class: stream.ClassServer, code: "api_error"}},
		{"anthropic", Fault{Kind: FaultServerError, Code: "504"}, want{status: 504, class: stream.ClassServer, code: "timeout_error"}},
		{"anthropic", Fault{Kind: FaultMidStream}, want{status: 200, class: stream.ClassOverload, code: "overloaded_error", midStream: true}},
		{"anthropic", Fault{Kind: FaultMidStream, Code: "api_error"}, want{status: 200, class: stream.ClassServer, code: "api_error", midStream: true}},
		{"anthropic", Fault{Kind: FaultCut}, want{status: 200, class: stream.ClassConnection, midStream: true}},
		{"anthropic", Fault{Kind: FaultContextLength}, want{status: 400, class: stream.ClassCaller, model: true}},
		{"anthropic", Fault{Kind: FaultRequestTooLarge}, want{status: 413, class: stream.ClassCaller}},
		// Gemini
		{"gemini", Fault{Kind: FaultRateLimit, RetryAfter: 44 * time.Second}, want{status: 429, class: stream.ClassRateLimit, code: "RESOURCE_EXHAUSTED", source: stream.SourceRetryInfo, delay: 44 * time.Second, quotaID: "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}},
		{"gemini", Fault{Kind: FaultDailyQuota}, want{status: 429, class: stream.ClassQuota, code: "RESOURCE_EXHAUSTED", scope: stream.ScopeTarget, source: stream.SourceRetryInfo, quotaID: "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}},
		{"gemini", Fault{Kind: FaultSpendCap}, want{status: 402, class: stream.ClassQuota, code: "RESOURCE_EXHAUSTED", scope: stream.ScopeAccount}},
		{"gemini", Fault{Kind: FaultOverload}, want{status: 503, class: stream.ClassOverload, code: "UNAVAILABLE"}},
		{"gemini", Fault{Kind: FaultServerError}, want{status: 500, class: stream.ClassServer, code: "INTERNAL"}},
		{"gemini", Fault{Kind: FaultServerError, Code: "504"}, want{status: 504, class: stream.ClassCaller, code: "DEADLINE_EXCEEDED"}},
		{"gemini", Fault{Kind: FaultMidStream}, want{status: 200, class: stream.ClassOverload, code: "UNAVAILABLE", midStream: true}},
		{"gemini", Fault{Kind: FaultMidStream, Code: "bare"}, want{status: 200, class: stream.ClassOverload, code: "UNAVAILABLE", midStream: true}},
		{"gemini", Fault{Kind: FaultMidStream, Code: "internal"}, want{status: 200, class: stream.ClassServer, code: "INTERNAL", midStream: true}},
		{"gemini", Fault{Kind: FaultCut}, want{status: 200, class: stream.ClassConnection, midStream: true}},
		{"gemini", Fault{Kind: FaultContextLength}, want{status: 400, class: stream.ClassCaller, model: true}},
		// Groq
		{"groq", Fault{Kind: FaultRateLimit, RetryAfter: 7 * time.Second}, want{status: 429, class: stream.ClassRateLimit, code: "rate_limit_exceeded", source: stream.SourceRetryAfter, delay: 7 * time.Second}},
		{"groq", Fault{Kind: FaultDailyQuota}, want{status: 429, class: stream.ClassQuota, code: "rate_limit_exceeded", scope: stream.ScopeTarget, source: stream.SourceRetryAfter}},
		{"groq", Fault{Kind: FaultDailyQuota, Code: "tpd"}, want{status: 429, class: stream.ClassQuota, code: "rate_limit_exceeded", scope: stream.ScopeTarget, source: stream.SourceRetryAfter}},
		{"groq", Fault{Kind: FaultOverload}, want{status: 503, class: stream.ClassOverload}},
		{"groq", Fault{Kind: FaultSpendCap}, want{status: 400, class: stream.ClassQuota, code: "organization_spend_limit_exceeded", scope: stream.ScopeAccount}},
		{"openai", Fault{Kind: FaultDailyQuota}, want{status: 429, class: stream.ClassQuota, code: "rate_limit_exceeded", scope: stream.ScopeTarget, source: stream.SourceRetryAfter}},
		{"groq", Fault{Kind: FaultOverload, Code: "503"}, want{status: 503, class: stream.ClassOverload}},
		{"groq", Fault{Kind: FaultRequestTooLarge}, want{status: 413, class: stream.ClassCaller, model: true}},
		{"groq", Fault{Kind: FaultMidStream}, want{status: 200, class: stream.ClassOverload, midStream: true}},
		// DeepSeek
		{"deepseek", Fault{Kind: FaultSpendCap}, want{status: 402, class: stream.ClassQuota, scope: stream.ScopeAccount}},
		{"deepseek", Fault{Kind: FaultRateLimit}, want{status: 429, class: stream.ClassRateLimit}},
		{"deepseek", Fault{Kind: FaultOverload}, want{status: 503, class: stream.ClassOverload}},
		{"deepseek", Fault{Kind: FaultContextLength}, want{status: 400, class: stream.ClassCaller, model: true, code: "context_length_exceeded"}},
		// Mistral
		{"mistral", Fault{Kind: FaultRateLimit}, want{status: 429, class: stream.ClassRateLimit}},
		{"mistral", Fault{Kind: FaultSpendCap}, want{status: 402, class: stream.ClassQuota, scope: stream.ScopeAccount}},
		{"mistral", Fault{Kind: FaultOverload}, want{status: 503, class: stream.ClassOverload}},
		{"mistral", Fault{Kind: FaultServerError}, want{status: 500, class: stream.ClassServer}},
		{"mistral", Fault{Kind: FaultMidStream}, want{status: 200, class: stream.ClassOverload, midStream: true}},
		// xAI
		{"xai", Fault{Kind: FaultSpendCap}, want{status: 403, class: stream.ClassQuota, scope: stream.ScopeAccount}},
		{"xai", Fault{Kind: FaultSpendCap, Code: "429"}, want{status: 429, class: stream.ClassQuota, scope: stream.ScopeAccount}},
		{"xai", Fault{Kind: FaultRateLimit}, want{status: 429, class: stream.ClassRateLimit}},
		{"xai", Fault{Kind: FaultOverload}, want{status: 503, class: stream.ClassOverload}},
	}
	s, ts, _ := newTestSim(t, Options{})
	for _, c := range cases {
		name := c.provider + "/" + c.fault.Kind
		if c.fault.Code != "" {
			name += "/" + c.fault.Code
		}
		t.Run(name, func(t *testing.T) {
			s.ClearFaults("") // each case on its own: faults are state now
			f := c.fault
			f.Provider = c.provider
			if err := s.Inject(f); err != nil {
				t.Fatal(err)
			}
			r := send(t, ts, c.provider, modelFor(c.provider), stream.Options{})
			streamReady(t, r)
			if r.Err == nil {
				t.Fatalf("got success %q, want %s", r.Text, c.want.class)
			}
			e := r.Err
			if e.Class != c.want.class || e.Status != c.want.status {
				t.Fatalf("class %s status %d, want %s %d (%v)", e.Class, e.Status, c.want.class, c.want.status, e)
			}
			if e.ModelSpecific != c.want.model {
				t.Errorf("model-specific %v, want %v", e.ModelSpecific, c.want.model)
			}
			if c.want.code != "" && e.Code != c.want.code {
				t.Errorf("code %q, want %q", e.Code, c.want.code)
			}
			if e.DelaySource != c.want.source {
				t.Errorf("delay source %q, want %q (delay %v)", e.DelaySource, c.want.source, e.Delay)
			}
			if c.want.delay != 0 && e.Delay != c.want.delay {
				t.Errorf("delay %v, want %v", e.Delay, c.want.delay)
			}
			if e.MidStream != c.want.midStream {
				t.Errorf("mid-stream %v, want %v", e.MidStream, c.want.midStream)
			}
			if c.want.scope != "" && e.Scope != c.want.scope {
				t.Errorf("scope %q, want %q", e.Scope, c.want.scope)
			}
			if c.want.quotaID != "" && e.QuotaID != c.want.quotaID {
				t.Errorf("quota id %q, want %q", e.QuotaID, c.want.quotaID)
			}
			if e.Status != 0 && e.RequestID == "" && c.provider != "gemini" {
				t.Errorf("no request id")
			}
			if c.want.midStream && r.Text == "" && c.fault.Kind != FaultReset {
				t.Errorf("no partial text before the mid-stream failure")
			}
			if strings.Contains(e.Error(), FakeKey) {
				t.Errorf("the key leaked into the error: %v", e)
			}
		})
	}
}

// A hang and a stall end in the client's timeouts.
func TestRoundTripTimeouts(t *testing.T) {
	s, ts, _ := newTestSim(t, Options{})
	opt := stream.Options{HeaderTimeout: 100 * time.Millisecond, StallTimeout: 100 * time.Millisecond, FirstTokenTimeout: 5 * time.Second}
	if err := s.Inject(Fault{Provider: "openai", Kind: FaultHang}); err != nil {
		t.Fatal(err)
	}
	r := send(t, ts, "openai", "gpt-5.4-mini", opt)
	streamReady(t, r)
	if r.Class() != stream.ClassTimeout || r.Status != 0 {
		t.Fatalf("hang: %s status %d (%v), want timeout with no response", r.Class(), r.Status, r.Err)
	}
	if err := s.Inject(Fault{Provider: "anthropic", Kind: FaultHang, Code: "stall"}); err != nil {
		t.Fatal(err)
	}
	// The stall must be the only timeout that can fire: a loaded machine may
	// take longer than 100ms to send the headers.
	opt.HeaderTimeout = 10 * time.Second
	r = send(t, ts, "anthropic", "claude-sonnet-4-5", opt)
	if r.Class() != stream.ClassTimeout || r.Status != 200 || r.Text == "" {
		t.Fatalf("stall: %s status %d text %q (%v), want a timeout after some text", r.Class(), r.Status, r.Text, r.Err)
	}
}

// A clean answer from every provider: text, usage, finish, limits.
func TestRoundTripSuccess(t *testing.T) {
	_, ts, _ := newTestSim(t, Options{Seed: 7})
	_, ts2, _ := newTestSim(t, Options{Seed: 8})
	for _, p := range providerNames {
		t.Run(p, func(t *testing.T) {
			r := send(t, ts, p, modelFor(p), stream.Options{})
			streamReady(t, r)
			if r.Err != nil {
				t.Fatalf("error: %v", r.Err)
			}
			again := send(t, ts, p, modelFor(p), stream.Options{})
			if again.Text != r.Text || r.Text == "" {
				t.Errorf("same seed and prompt, different text:\n%q\n%q", r.Text, again.Text)
			}
			if other := send(t, ts2, p, modelFor(p), stream.Options{}); other.Text == r.Text {
				t.Errorf("another seed gave the same text %q", r.Text)
			}
			if r.Usage == nil || r.Usage.OutputTokens != tokensOf(r.Text) || r.Usage.InputTokens == 0 {
				t.Errorf("usage %+v, want output %d and some input", r.Usage, tokensOf(r.Text))
			}
			truncated := r.Usage != nil && r.Usage.OutputTokens == 64
			wantFinish := map[string][2]string{"anthropic": {"end_turn", "max_tokens"}, "gemini": {"STOP", "MAX_TOKENS"}, "bedrock": {"end_turn", "max_tokens"}}[p]
			if wantFinish[0] == "" {
				wantFinish = [2]string{"stop", "length"}
			}
			if truncated && r.FinishReason != wantFinish[1] || !truncated && r.FinishReason != wantFinish[0] {
				t.Errorf("finish %q (truncated %v)", r.FinishReason, truncated)
			}
			if r.Model != modelFor(p) && p != "bedrock" { // Bedrock's stream names no model
				t.Errorf("served model %q, want %q", r.Model, modelFor(p))
			}
			switch p {
			case "openai":
				if r.Limits == nil || r.Limits.Requests == nil || r.Limits.Requests.Limit != 500 || r.Limits.Requests.Remaining != 499 {
					t.Errorf("limits %+v", r.Limits)
				}
			case "groq":
				if r.Limits == nil || r.Limits.Requests == nil || !r.Limits.Requests.PerDay || r.Limits.Requests.Limit != 14400 {
					t.Errorf("groq requests window %+v, want per day 14400", r.Limits)
				}
			case "anthropic":
				if r.Limits == nil || r.Limits.InputTokens == nil || !r.Limits.InputTokens.Rounded || r.Limits.Requests == nil || r.Limits.Requests.Remaining != 49 {
					t.Errorf("anthropic limits %+v", r.Limits)
				}
			case "gemini":
				if !r.Limits.Empty() {
					t.Errorf("gemini sent limits %+v, want none", r.Limits)
				}
			}
		})
	}
}

// A wrong key is the provider's auth error, a caller class, and never echoed.
func TestRoundTripAuth(t *testing.T) {
	_, ts, _ := newTestSim(t, Options{})
	for _, p := range providerNames {
		c := &stream.Client{}
		ep := stream.Endpoint{Provider: p, BaseURL: BaseURL(ts.URL, p), Key: "sk-wrong-key-123"}
		r := c.Do(t.Context(), ep, stream.Request{Target: stream.Target{Provider: p, Model: modelFor(p)}, Prompt: "hi"}, nil)
		streamReady(t, r)
		if r.Class() != stream.ClassCaller {
			t.Errorf("%s: class %s (%v), want caller", p, r.Class(), r.Err)
		}
		if r.Err != nil && strings.Contains(r.Err.Error()+r.Err.Snippet, "sk-wrong") {
			t.Errorf("%s: the key was echoed: %v", p, r.Err)
		}
	}
}
