package sim

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
)

// Every entry of README.md's "Known differences" list names the check
// below that shows it is still true, and every check has its entry.
func TestKnownDifferences(t *testing.T) {
	checks := map[string]func(t *testing.T){
		"per-provider-limits": func(t *testing.T) {
			// Two models on one provider share one requests limit.
			f := scenarioFile(t, "[openai]\nrpm = 1\n")
			_, ts, _ := newTestSim(t, Options{ScenarioFile: f})
			mustDo(t, ts, request(t, ts.URL, "openai", true))
			other := request(t, ts.URL, "openai", true)
			other.Body = io.NopCloser(strings.NewReader(`{"model":"gpt-5.4","messages":[{"role":"user","content":"hi"}]}`))
			other.ContentLength = -1
			if r := mustDo(t, ts, other); r.status != 429 {
				t.Errorf("another model: %d, want the shared limit's 429", r.status)
			}
		},
		"unsourced-bodies": func(t *testing.T) {
			// The guessed bodies are the ones written in the README.
			s, ts, _ := newTestSim(t, Options{})
			for _, c := range []struct{ provider, kind, want string }{
				{"deepseek", FaultRateLimit, "Rate Limit Reached"},
				{"deepseek", FaultOverload, "Server Overloaded"},
				{"mistral", FaultSpendCap, "Insufficient credits"},
				{"groq", FaultOverload, "Service Unavailable"},
				{"groq", FaultSpendCap, "organization_spend_limit_exceeded"},
				{"openai", FaultSlowDown, "slow_down"},
			} {
				s.ClearFaults("")
				if err := s.Inject(Fault{Provider: c.provider, Kind: c.kind}); err != nil {
					t.Fatal(err)
				}
				if r := mustDo(t, ts, request(t, ts.URL, c.provider, false)); !strings.Contains(string(r.body), c.want) {
					t.Errorf("%s %s: %s", c.provider, c.kind, r.body)
				}
			}
		},
		"text-only": func(t *testing.T) {
			// Tools and sampling parameters are accepted and ignored: a text answer.
			_, ts, _ := newTestSim(t, Options{})
			req := request(t, ts.URL, "openai", false)
			req.Body = io.NopCloser(strings.NewReader(`{"model":"gpt-5.4-mini","n":3,"temperature":2,"tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"hi"}]}`))
			req.ContentLength = -1
			r := mustDo(t, ts, req)
			if r.status != 200 || strings.Contains(string(r.body), "tool_calls") || strings.Count(string(r.body), `"index":`) != 1 {
				t.Errorf("%d %s", r.status, r.body)
			}
		},
		"estimated-tokens": func(t *testing.T) {
			// Usage counts about four characters a token, not a tokenizer's count.
			_, ts, _ := newTestSim(t, Options{})
			b := jsonOf(t, mustDo(t, ts, request(t, ts.URL, "openai", false)).body)
			text := path(b, "choices").([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
			if got, _ := path(b, "usage.completion_tokens").(float64); int(got) != tokensOf(text) {
				t.Errorf("completion_tokens %v for %d characters", got, len(text))
			}
		},
		"account-wide-hold": func(t *testing.T) {
			// A 429 holds the whole provider (one simulated account), every model.
			s, ts, _ := newTestSim(t, Options{})
			if err := s.Inject(Fault{Provider: "anthropic", Kind: FaultRateLimit, RetryAfter: 10e9}); err != nil {
				t.Fatal(err)
			}
			mustDo(t, ts, request(t, ts.URL, "anthropic", false))
			other := request(t, ts.URL, "anthropic", false)
			other.Body = io.NopCloser(strings.NewReader(`{"model":"claude-haiku-4-5","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`))
			other.ContentLength = -1
			if r := mustDo(t, ts, other); r.status != 429 {
				t.Errorf("another model during the hold: %d", r.status)
			}
		},
		"plain-http": func(t *testing.T) {
			// Plain HTTP on loopback: no TLS.
			r, err := Start(t.Context(), "", Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if !strings.HasPrefix(r.URL, "http://127.0.0.1:") {
				t.Errorf("url %s", r.URL)
			}
		},
		"fixed-catalogue": func(t *testing.T) {
			// One fixed catalogue: no per-key access, no deprecations; the
			// not-found answers append the simulator's hint.
			s, err := New(Options{})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/openai/v1/chat/completions", strings.NewReader(`{"model":"gpt-4.1-nano","messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Authorization", "Bearer "+AccountKey("other"))
			s.ServeHTTP(rec, req)
			if rec.Code != 404 || !strings.Contains(rec.Body.String(), "limitscope sim:") {
				t.Errorf("a real model outside the catalogue: %d %s", rec.Code, rec.Body)
			}
		},
		"one-page-lists": func(t *testing.T) {
			// The models lists are one page: limit and page tokens are ignored.
			s, err := New(Options{})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/anthropic/v1/models?limit=1", nil)
			req.Header.Set("x-api-key", FakeKey)
			req.Header.Set("anthropic-version", "2023-06-01")
			s.ServeHTTP(rec, req)
			if n := strings.Count(rec.Body.String(), `"type":"model"`); rec.Code != 200 || n != len(catalogue["anthropic"]) || !strings.Contains(rec.Body.String(), `"has_more":false`) {
				t.Errorf("limit=1: %d, %d models", rec.Code, n)
			}
		},
		"bedrock-runtime-only": func(t *testing.T) {
			// Bedrock: the runtime's Converse and ConverseStream only; no
			// CountTokens, and no ListFoundationModels (the control plane).
			s, err := New(Options{})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/bedrock/model/"+bedrockModel+"/count-tokens", strings.NewReader("{}"))
			req.Header.Set("Authorization", "Bearer "+FakeKey)
			s.ServeHTTP(rec, req)
			if rec.Code != 404 || rec.Header().Get("x-amzn-ErrorType") == "" {
				t.Errorf("count-tokens: %d %v", rec.Code, rec.Header())
			}
		},
		"cut-resets-stream": func(t *testing.T) {
			// Over HTTP/2 a cut resets the stream (RST_STREAM): there is no
			// connection of the request's own to close, so "reset" and a
			// plain cut look alike.
			r, err := Start(t.Context(), "", Options{TokensPerSecond: 1e9})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := r.Server.Inject(Fault{Provider: "openai", Kind: FaultCut}); err != nil {
				t.Fatal(err)
			}
			var protos []string
			req, _ := http.NewRequest(http.MethodPost, r.BaseURL("openai")+"/chat/completions", strings.NewReader(`{"model":"gpt-5.4-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Authorization", "Bearer "+FakeKey)
			resp, err := h2cClient(&protos).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			_, err = io.ReadAll(resp.Body)
			if err == nil || !strings.Contains(err.Error(), "stream error") || resp.ProtoMajor != 2 {
				t.Errorf("%s cut: %v", resp.Proto, err)
			}
		},
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Known differences from the real APIs")
	if !ok {
		t.Fatal("README.md has no known-differences section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	tag := regexp.MustCompile("\\(checked: `([a-z-]+)`\\)")
	seen := map[string]bool{}
	for _, entry := range strings.Split(section, "\n- ")[1:] {
		m := tag.FindStringSubmatch(entry)
		if m == nil || checks[m[1]] == nil {
			t.Errorf("entry without a known check: %.80q", entry)
			continue
		}
		seen[m[1]] = true
		t.Run(m[1], checks[m[1]])
	}
	for name := range checks {
		if !seen[name] {
			t.Errorf("check %s has no README entry", name)
		}
	}
}
