package stream

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fixedNow is the fake clock of the classification tests: a Sunday
// afternoon in November, after the end of US daylight saving time.
var fixedNow = time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC)

type classCase struct {
	name     string
	provider string
	status   int
	hdr      []string
	body     string
	class    Class
	code     string
	ms       bool
	scope    Scope
	reset    time.Time
	quotaID  string
	noRetry  bool
}

func errorHandler(status int, body string, hdr ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

func oaErr(typ, code, msg string) string {
	return `{"error":{"message":"` + msg + `","type":"` + typ + `","param":null,"code":"` + code + `"}}`
}

func antErr(typ, msg string) string {
	return `{"type":"error","error":{"type":"` + typ + `","message":"` + msg + `"},"request_id":"req_body"}`
}

func gemErr(code int, status, msg string) string {
	return `{"error":{"code":` + strconv.Itoa(code) + `,"message":"` + msg + `","status":"` + status + `"}}`
}

// The classes table of the engine issue, row by row (first match wins).
func classCases(t *testing.T) []classCase {
	fx := func(p string) string { return string(fixture(t, p)) }
	pacificMidnight := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	return []classCase{
		// quota
		{name: "openai insufficient_quota", provider: "openai", status: 429, body: fx("openai/error-insufficient-quota.json"), class: ClassQuota, code: "insufficient_quota", scope: ScopeAccount},
		{name: "openai credit_balance_exhausted beats x-should-retry true", provider: "openai", status: 429, hdr: []string{"x-should-retry", "true", "retry-after", "3"}, body: oaErr("insufficient_quota", "credit_balance_exhausted", "no credits"), class: ClassQuota, code: "credit_balance_exhausted", scope: ScopeAccount},
		{name: "openai organization_spend_limit_exceeded", provider: "openai", status: 429, body: oaErr("insufficient_quota", "organization_spend_limit_exceeded", "x"), class: ClassQuota, code: "organization_spend_limit_exceeded", scope: ScopeAccount},
		{name: "openai project_spend_limit_exceeded", provider: "openai", status: 429, body: oaErr("insufficient_quota", "project_spend_limit_exceeded", "x"), class: ClassQuota, code: "project_spend_limit_exceeded", scope: ScopeAccount},
		{name: "openai organization_usage_limit_exceeded", provider: "openai", status: 429, body: oaErr("insufficient_quota", "organization_usage_limit_exceeded", "x"), class: ClassQuota, code: "organization_usage_limit_exceeded", scope: ScopeAccount},
		{name: "anthropic enforced spend limit with date", provider: "anthropic", status: 429, body: fx("anthropic/error-429-enforced-spend-limit.json"), class: ClassQuota, code: "enforced_spend_limit_reached", scope: ScopeAccount, reset: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)},
		{name: "anthropic enforced spend limit without date", provider: "anthropic", status: 429, body: `{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your API usage limits.","details":{"error_code":"enforced_spend_limit_reached"}}}`, class: ClassQuota, code: "enforced_spend_limit_reached", scope: ScopeAccount, reset: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		{name: "anthropic 400 specified API usage limits", provider: "anthropic", status: 400, body: fx("anthropic/error-400-spend-limit-thirdparty.json"), class: ClassQuota, code: "invalid_request_error", scope: ScopeAccount, reset: time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)},
		{name: "anthropic 400 workspace API usage limits", provider: "anthropic", status: 400, body: antErr("invalid_request_error", "You have reached your specified workspace API usage limits. You will regain access on 2026-12-01 at 00:00 UTC."), class: ClassQuota, code: "invalid_request_error", scope: ScopeAccount, reset: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		{name: "anthropic 400 credit balance too low", provider: "anthropic", status: 400, body: antErr("invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."), class: ClassQuota, code: "invalid_request_error", scope: ScopeAccount},
		{name: "anthropic 402 billing_error", provider: "anthropic", status: 402, body: antErr("billing_error", "There is an issue with your billing."), class: ClassQuota, code: "billing_error", scope: ScopeAccount},
		{name: "gemini 402 prepay depleted", provider: "gemini", status: 402, body: fx("gemini/error-402-prepay-depleted.json"), class: ClassQuota, code: "RESOURCE_EXHAUSTED", scope: ScopeAccount},
		{name: "deepseek 402 insufficient balance", provider: "deepseek", status: 402, body: fx("deepseek/error-402-insufficient-balance.json"), class: ClassQuota, code: "invalid_request_error", scope: ScopeAccount},
		{name: "gemini per-day quota despite RetryInfo seconds", provider: "gemini", status: 429, body: fx("gemini/error-429-quota-perday.json"), class: ClassQuota, code: "RESOURCE_EXHAUSTED", scope: ScopeTarget, quotaID: "GenerateRequestsPerDayPerProjectPerModel-FreeTier", reset: pacificMidnight},
		{name: "groq tokens per day", provider: "groq", status: 429, body: oaErr("tokens", "rate_limit_exceeded", "Rate limit reached for model `llama-3.3-70b-versatile` in organization `org_x` on tokens per day (TPD): Limit 100000, Used 97050, Requested 3619. Please try again in 9m38.016s."), class: ClassQuota, code: "rate_limit_exceeded", scope: ScopeTarget, reset: fixedNow.Add(9*time.Minute + 38016*time.Millisecond)},
		{name: "groq requests per day", provider: "groq", status: 429, body: oaErr("requests", "rate_limit_exceeded", "Rate limit reached for model `m` on requests per day (RPD): Limit 1000, Used 1000, Requested 1. Please try again in 1m26.4s."), class: ClassQuota, code: "rate_limit_exceeded", scope: ScopeTarget, reset: fixedNow.Add(86400 * time.Millisecond)},
		{name: "xai credits 403", provider: "xai", status: 403, body: fx("xai/error-403-credits-exhausted.json"), class: ClassQuota, code: "permission-denied", scope: ScopeAccount},
		{name: "xai credits 429", provider: "xai", status: 429, body: `{"code":"Some resource has been exhausted","error":"Your team t has either used all available credits or reached its monthly spending limit. To continue making API requests, please purchase more credits or raise your spending limit."}`, class: ClassQuota, code: "Some resource has been exhausted", scope: ScopeAccount},

		// caller, model-specific
		{name: "openai context_length_exceeded", provider: "openai", status: 400, body: oaErr("invalid_request_error", "context_length_exceeded", "This model's maximum context length is 128000 tokens."), class: ClassCaller, code: "context_length_exceeded", ms: true},
		{name: "openai request too large", provider: "openai", status: 429, body: fx("openai/error-429-request-too-large-tpm.json"), class: ClassCaller, code: "rate_limit_exceeded", ms: true},
		{name: "gemini 400 input context too long", provider: "gemini", status: 400, body: gemErr(400, "INVALID_ARGUMENT", "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."), class: ClassCaller, code: "INVALID_ARGUMENT", ms: true},
		{name: "gemini 500 input context too long", provider: "gemini", status: 500, body: gemErr(500, "INTERNAL", "Your input context is too long."), class: ClassCaller, code: "INTERNAL", ms: true},
		{name: "anthropic prompt is too long", provider: "anthropic", status: 400, body: antErr("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"), class: ClassCaller, code: "invalid_request_error", ms: true},

		// caller
		{name: "400 other", provider: "openai", status: 400, body: oaErr("invalid_request_error", "", "Unrecognized request argument"), class: ClassCaller, code: "invalid_request_error"},
		{name: "401", provider: "openai", status: 401, body: oaErr("invalid_request_error", "invalid_api_key", "Incorrect API key provided"), class: ClassCaller, code: "invalid_api_key"},
		{name: "403", provider: "anthropic", status: 403, body: antErr("permission_error", "no"), class: ClassCaller, code: "permission_error"},
		{name: "404 anthropic doc", provider: "anthropic", status: 404, body: fx("anthropic/error-not-found-doc.json"), class: ClassCaller, code: "not_found_error"},
		{name: "404 mistral doc shape", provider: "mistral", status: 404, body: fx("mistral/error-doc-shape.json"), class: ClassCaller, code: "unknown_model"},
		{name: "413", provider: "anthropic", status: 413, body: antErr("request_too_large", "too big"), class: ClassCaller, code: "request_too_large"},
		{name: "422 mistral detail message", provider: "mistral", status: 422, body: `{"object":"error","message":{"detail":[{"type":"extra_forbidden","loc":["body","x"],"msg":"Extra inputs are not permitted"}]},"type":"invalid_request_error","param":null,"code":null}`, class: ClassCaller, code: "invalid_request_error"},
		{name: "gemini 504 DEADLINE_EXCEEDED", provider: "gemini", status: 504, body: gemErr(504, "DEADLINE_EXCEEDED", "Deadline expired before operation could complete."), class: ClassCaller, code: "DEADLINE_EXCEEDED"},

		// rate_limit
		{name: "openai plain 429", provider: "openai", status: 429, body: oaErr("tokens", "rate_limit_exceeded", "Rate limit reached for gpt-4.1 in organization org-x on tokens per min (TPM): Limit 30000, Used 18928, Requested 11159. Please try again in 174ms."), class: ClassRateLimit, code: "rate_limit_exceeded"},
		{name: "openai slow_down", provider: "openai", status: 429, body: oaErr("rate_limit_error", "slow_down", "Your traffic grew too quickly."), class: ClassRateLimit, code: "slow_down"},
		{name: "anthropic 429 recorded", provider: "anthropic", status: 429, hdr: []string{"x-should-retry", "true"}, body: fx("anthropic/error-429-rate-limit-recorded.json"), class: ClassRateLimit, code: "rate_limit_error"},
		{name: "gemini per-minute", provider: "gemini", status: 429, body: `{"error":{"code":429,"message":"You exceeded your current quota. Please retry in 44.097740004s.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"44s"}]}}`, class: ClassRateLimit, code: "RESOURCE_EXHAUSTED", quotaID: "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"},
		{name: "groq tpm", provider: "groq", status: 429, body: fx("groq/error-429-tpm.json"), class: ClassRateLimit, code: "rate_limit_exceeded"},
		{name: "mistral rate_limited", provider: "mistral", status: 429, body: fx("mistral/error-429-rate-limited.json"), class: ClassRateLimit, code: "1300"},
		{name: "mistral legacy", provider: "mistral", status: 429, body: fx("mistral/error-429-legacy.json"), class: ClassRateLimit},
		{name: "deepseek 429", provider: "deepseek", status: 429, body: oaErr("rate_limit_error", "", "Rate Limit Reached"), class: ClassRateLimit, code: "rate_limit_error"},
		{name: "xai 429 tokens", provider: "xai", status: 429, body: `{"code":"Some resource has been exhausted","error":"Too many tokens for team t and model grok-4-0709. Your team's rate limit is — Tokens per Minute (actual/limit): 65605/16000."}`, class: ClassRateLimit, code: "Some resource has been exhausted"},

		// overload
		{name: "openai 503 server_is_overloaded", provider: "openai", status: 503, body: oaErr("service_unavailable_error", "server_is_overloaded", "Our servers are currently overloaded."), class: ClassOverload, code: "server_is_overloaded"},
		{name: "gemini 503 unavailable", provider: "gemini", status: 503, body: fx("gemini/error-503-unavailable.json"), class: ClassOverload, code: "UNAVAILABLE"},
		{name: "anthropic 529", provider: "anthropic", status: 529, body: fx("anthropic/error-529-overloaded.json"), class: ClassOverload, code: "overloaded_error"},
		// Groq documents 498 capacity_exceeded for short flex capacity, not
		// its body: the body here is assumed.
		{name: "groq 498", provider: "groq", status: 498, body: oaErr("capacity_exceeded", "capacity_exceeded", "Flex tier capacity exceeded"), class: ClassFlexCapacity, code: "capacity_exceeded"},

		// server
		{name: "500", provider: "openai", status: 500, body: oaErr("server_error", "", "boom"), class: ClassServer, code: "server_error"},
		{name: "502 html", provider: "openai", status: 502, body: "<html>bad gateway</html>", class: ClassServer},
		{name: "504 anthropic timeout_error", provider: "anthropic", status: 504, body: antErr("timeout_error", "timed out"), class: ClassServer, code: "timeout_error"},
		{name: "408", provider: "openai", status: 408, body: "", class: ClassServer},
		{name: "409", provider: "anthropic", status: 409, body: antErr("conflict_error", "conflict"), class: ClassServer, code: "conflict_error"},

		// x-should-retry: false forbids a retry whatever the class
		{name: "x-should-retry false", provider: "openai", status: 500, hdr: []string{"x-should-retry", "false"}, body: oaErr("server_error", "", "boom"), class: ClassServer, code: "server_error", noRetry: true},
	}
}

func TestClassesTable(t *testing.T) {
	for _, tc := range classCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			c, ep := serve(t, tc.provider, errorHandler(tc.status, tc.body, tc.hdr...))
			c.Now = func() time.Time { return fixedNow }
			res, _ := doReq(c, ep, "m")
			checkClass(t, tc, res)
			// The parser alone agrees with the round trip.
			h := http.Header{}
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				h.Set(tc.hdr[i], tc.hdr[i+1])
			}
			e := ParseError(tc.provider, tc.status, h, []byte(tc.body), fixedNow)
			checkClass(t, tc, Result{Status: tc.status, Err: e})
		})
	}
}

func checkClass(t *testing.T, tc classCase, res Result) {
	t.Helper()
	e := res.Err
	if e == nil {
		t.Fatalf("no error; want %s", tc.class)
	}
	if e.Class != tc.class || e.ModelSpecific != tc.ms || e.Code != tc.code || e.Scope != tc.scope ||
		e.NoRetry != tc.noRetry || e.Status != tc.status || e.MidStream {
		t.Errorf("got class=%s ms=%v code=%q scope=%q noRetry=%v status=%d mid=%v; want class=%s ms=%v code=%q scope=%q noRetry=%v status=%d",
			e.Class, e.ModelSpecific, e.Code, e.Scope, e.NoRetry, e.Status, e.MidStream, tc.class, tc.ms, tc.code, tc.scope, tc.noRetry, tc.status)
	}
	if !e.ResetAt.Equal(tc.reset) {
		t.Errorf("ResetAt = %v, want %v", e.ResetAt, tc.reset)
	}
	if tc.quotaID != "" && e.QuotaID != tc.quotaID {
		t.Errorf("QuotaID = %q, want %q", e.QuotaID, tc.quotaID)
	}
	if res.Class() != tc.class {
		t.Errorf("Result.Class() = %s", res.Class())
	}
}

func TestMidStreamClasses(t *testing.T) {
	for _, tc := range []struct {
		name, provider, body string
		class                Class
		code                 string
		text                 string
	}{
		{"anthropic overloaded event", "anthropic", "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-x\",\"usage\":{\"input_tokens\":3}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"partial\"}}\n\n" + string(fixture(t, "anthropic/stream-error-overloaded.sse")), ClassOverload, "overloaded_error", "partial"},
		{"anthropic rate limit event", "anthropic", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow\"}}\n\n", ClassRateLimit, "rate_limit_error", ""},
		{"openai error chunk fixture", "openai", string(fixture(t, "openai/stream-error-chunk-sdk-fixture.sse")), ClassServer, "", ""},
		{"openai overloaded chunk after text", "openai", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\ndata: {\"error\":{\"type\":\"service_unavailable_error\",\"code\":\"server_is_overloaded\",\"message\":\"Our servers are currently overloaded.\"}}\n\n", ClassOverload, "server_is_overloaded", "Hel"},
		{"openai named error event", "openai", "event: error\ndata: {\"message\":\"boom\"}\n\n", ClassServer, "", ""},
		{"gemini bare error fixture", "gemini", string(fixture(t, "gemini/stream-midstream-error-sdk-fixture.txt")), ClassServer, "INTERNAL", "test"},
		{"gemini UNAVAILABLE on a data line", "gemini", "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}]}\n\ndata: {\"error\":{\"code\":503,\"message\":\"The model is overloaded.\",\"status\":\"UNAVAILABLE\"}}\n\n", ClassOverload, "UNAVAILABLE", "a"},
		{"gemini bare pretty-printed error after data", "gemini", "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"b\"}]}}]}\n\n{\n  \"error\": {\n    \"code\": 503,\n    \"message\": \"brace } in \\\"text\\\"\",\n    \"status\": \"UNAVAILABLE\"\n  }\n}\n", ClassOverload, "UNAVAILABLE", "b"},
		{"gemini bare per-day quota", "gemini", "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"c\"}]}}]}\r\n\r\n" + string(fixture(t, "gemini/error-429-quota-perday.json")), ClassQuota, "RESOURCE_EXHAUSTED", "c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ep := serve(t, tc.provider, sseHandler([]byte(tc.body)))
			res, deltas := doReq(c, ep, "m")
			if res.Err == nil {
				t.Fatalf("no error; text %q", res.Text)
			}
			e := res.Err
			if e.Class != tc.class || e.Code != tc.code || !e.MidStream || e.Status != 200 || res.Status != 200 {
				t.Errorf("got %s code=%q mid=%v status=%d; want %s %q mid-stream 200", e.Class, e.Code, e.MidStream, e.Status, tc.class, tc.code)
			}
			if res.Text != tc.text || strings.Join(deltas, "") != tc.text {
				t.Errorf("partial text %q (deltas %q), want %q", res.Text, deltas, tc.text)
			}
		})
	}
}
