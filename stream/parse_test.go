package stream

import (
	"context"
	"crypto/tls"
	"github.com/limitscope/limitscope/internal/sanitize"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestParseErrorBodyShapes(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       ErrorBody
	}{
		{"xai flat", `{"code":"permission-denied","error":"no credits"}`, ErrorBody{Found: true, Code: "permission-denied", Message: "no credits"}},
		{"mistral object message", `{"object":"error","message":{"detail":[{"msg":"Extra inputs"}]},"type":"invalid_request_error","code":null}`,
			ErrorBody{Found: true, Type: "invalid_request_error", Message: `{"detail":[{"msg":"Extra inputs"}]}`}},
		{"mistral numeric-string code", `{"object":"error","message":"Rate limit exceeded","type":"rate_limited","param":null,"code":"1300"}`, ErrorBody{Found: true, Type: "rate_limited", Code: "1300", Message: "Rate limit exceeded"}},
		{"fastapi detail", `{"detail":"Not Found"}`, ErrorBody{Found: true, Message: "Not Found"}},
		{"leading blank lines (DeepSeek keep-alive)", "\n\n\n" + `{"error":{"message":"Insufficient Balance","type":"unknown_error","code":"invalid_request_error"}}`, ErrorBody{Found: true, Type: "unknown_error", Code: "invalid_request_error", Message: "Insufficient Balance"}},
		{"anthropic details", `{"type":"error","error":{"type":"rate_limit_error","message":"m","details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"req_1"}`,
			ErrorBody{Found: true, Type: "rate_limit_error", Message: "m", DetailCode: "enforced_spend_limit_reached", RequestID: "req_1"}},
		{"gemini details in any order", `{"error":{"code":429,"message":"m","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.539477544s"},{"@type":"type.googleapis.com/google.rpc.Help"},{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"A-PerMinute"},{"quotaId":"B-PerDay"}]}]}}`,
			ErrorBody{Found: true, NumCode: 429, Status: "RESOURCE_EXHAUSTED", Message: "m", QuotaIDs: []string{"A-PerMinute", "B-PerDay"}, RetryDelay: 539477544 * time.Nanosecond, HasRetryDelay: true}},
		{"not an error", `{"choices":[]}`, ErrorBody{}},
		{"not json", `<html>`, ErrorBody{}},
		{"null error", `{"error":null}`, ErrorBody{}},
		{"array", `[{"error":{"code":500}}]`, ErrorBody{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseErrorBody([]byte(tc.body))
			if got.Found != tc.want.Found || got.Code != tc.want.Code || got.NumCode != tc.want.NumCode || got.Type != tc.want.Type ||
				got.Status != tc.want.Status || got.DetailCode != tc.want.DetailCode || got.Message != tc.want.Message ||
				strings.Join(got.QuotaIDs, ",") != strings.Join(tc.want.QuotaIDs, ",") || got.RetryDelay != tc.want.RetryDelay ||
				got.HasRetryDelay != tc.want.HasRetryDelay || got.RequestID != tc.want.RequestID {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestQuotaResets(t *testing.T) {
	for _, tc := range []struct{ now, want time.Time }{
		{time.Date(2026, 7, 10, 6, 59, 0, 0, time.UTC), time.Date(2026, 7, 10, 7, 0, 0, 0, time.UTC)}, // PDT, 23:59 the day before
		{time.Date(2026, 7, 10, 7, 0, 0, 0, time.UTC), time.Date(2026, 7, 11, 7, 0, 0, 0, time.UTC)},  // PDT, exactly midnight
		{time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC), time.Date(2026, 1, 16, 8, 0, 0, 0, time.UTC)}, // PST
		{time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC), time.Date(2026, 3, 9, 7, 0, 0, 0, time.UTC)},    // the day DST starts
		{time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC), time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC)}, // the day DST ends
	} {
		if got := NextPacificMidnight(tc.now); !got.Equal(tc.want) {
			t.Errorf("NextPacificMidnight(%v) = %v, want %v", tc.now, got, tc.want)
		}
		loc := pacificFallback(tc.now)
		y, m, d := tc.now.In(loc).Date()
		if got := time.Date(y, m, d+1, 0, 0, 0, 0, loc).UTC(); !got.Equal(tc.want) && tc.now.Month() != 3 && tc.now.Month() != 11 {
			t.Errorf("fallback zone: %v, want %v", got, tc.want)
		}
	}
	if got := FirstOfNextMonthUTC(time.Date(2026, 12, 31, 23, 0, 0, 0, time.FixedZone("x", 5*3600))); !got.Equal(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("FirstOfNextMonthUTC = %v", got)
	}
}

func TestRedaction(t *testing.T) {
	for in, want := range map[string]string{
		"GET https://generativelanguage.googleapis.com/v1beta/models/x?key=AIzaSy123&alt=sse": "GET https://generativelanguage.googleapis.com/v1beta/models/x?key=[redacted]&alt=sse",
		`Post "http://h/?alt=sse&api_key=abc": EOF`:                                           `Post "http://h/?alt=sse&api_key=[redacted]": EOF`,
		"no url here":         "no url here",
		"https://x/?monkey=1": "https://x/?monkey=1",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q", in, got)
		}
	}
	r := newRedactor(testKey)
	if got := r.text("a " + testKey + " b"); got != "a [redacted] b" {
		t.Errorf("%q", got)
	}
	if got := newRedactor("ab").text("tab cab"); got != "tab cab" {
		t.Errorf("a too-short key mangled text: %q", got)
	}
	// The whole escape sequence goes, not just its ESC (the old per-character
	// filter left "[2J" behind), and the cut result fits in max bytes.
	if got := sanitize.Truncate("ok\x1b[2Jbad\x00\xffend\n", 100); got != "okbad\uFFFDend\n" {
		t.Errorf("sanitize: %q", got)
	}
	if got := sanitize.Truncate(strings.Repeat("é", 10), 7); got != "éé…" {
		t.Errorf("sanitize cut: %q", got)
	}
}

func TestGeminiBareReader(t *testing.T) {
	for in, want := range map[string]string{
		"data: {}\n\n":                        "data: {}\n\n",
		"{\"error\":{}}":                      "\ndata: {\"error\":{}}\n\n",
		"{\"a\":\n \"}\"}\r\ndata: x\r\n\r\n": "\ndata: {\"a\":\ndata:  \"}\"}\n\ndata: x\r\n\r\n",
		"data: {\"x\":1}\n{\"error\":1}\n":    "data: {\"x\":1}\n\ndata: {\"error\":1}\n\n",
		"{\"s\":\"\\\"{\"}\r{}":               "\ndata: {\"s\":\"\\\"{\"}\n\n\ndata: {}\n\n",
	} {
		out := new(strings.Builder)
		buf := make([]byte, 3)
		g := newGeminiBareReader(iotestHalf{strings.NewReader(in)})
		for {
			n, err := g.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				break
			}
		}
		if out.String() != want {
			t.Errorf("%q\n got %q\nwant %q", in, out.String(), want)
		}
	}
}

func TestDNSAndTLSFailures(t *testing.T) {
	clearEnv(t)
	dnsFail := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: "api.openai.com", IsNotFound: true}}
	}}}
	res := (&Client{HTTP: dnsFail}).Do(context.Background(), Endpoint{Provider: "openai", Key: testKey}, Request{Target: Target{Provider: "openai", Model: "m"}}, nil)
	if res.Err == nil || res.Err.Class != ClassConnection || res.Status != 0 || !strings.Contains(res.Err.Message, "no such host") {
		t.Fatalf("DNS: %+v", res.Err)
	}

	srv := httptest.NewTLSServer(sseHandler([]byte(oaText + oaFinish)))
	defer srv.Close()
	untrusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}}
	defer untrusting.CloseIdleConnections()
	res = (&Client{HTTP: untrusting}).Do(context.Background(), Endpoint{Provider: "openai", BaseURL: srv.URL + "/v1", Key: testKey}, Request{Target: Target{Provider: "openai", Model: "m"}}, nil)
	if res.Err == nil || res.Err.Class != ClassConnection || res.Status != 0 || !strings.Contains(res.Err.Message, "certificate") {
		t.Fatalf("TLS: %+v", res.Err)
	}
	// The same server, trusted, works: the failure was the certificate.
	trusting := srv.Client()
	defer trusting.CloseIdleConnections()
	res = (&Client{HTTP: trusting}).Do(context.Background(), Endpoint{Provider: "openai", BaseURL: srv.URL + "/v1", Key: testKey}, Request{Target: Target{Provider: "openai", Model: "m"}}, nil)
	if res.Err != nil {
		t.Fatalf("trusted TLS: %+v", res.Err)
	}
}

func TestDefaultHTTPClient(t *testing.T) {
	c, ep := serve(t, "openai", sseHandler([]byte(oaText+oaFinish)))
	c.HTTP = nil
	defer CloseIdleConnections()
	if res, _ := doReq(c, ep, "m"); res.Err != nil || res.Text != "Hi" {
		t.Fatalf("%+v", res.Err)
	}
	if defaultHTTP().Timeout != 0 || defaultHTTP().CheckRedirect == nil {
		t.Error("the default client has an overall timeout or follows any redirect")
	}
}
