package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// keyPaths lists every key path in a decoded JSON value ("error.details.0.@type").
func keyPaths(v any, prefix string, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out[p] = true
			keyPaths(e, p, out)
		}
	case []any:
		for i, e := range x {
			keyPaths(e, fmt.Sprintf("%s.%d", prefix, i), out)
		}
	}
}

func pathsOf(t *testing.T, b []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	m := map[string]bool{}
	keyPaths(v, "", m)
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/fixtures/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The error bodies have the fixtures' shape (the same key paths) and, where
// the fixture is the documented text, the same values.
func TestErrorBodiesMatchFixtures(t *testing.T) {
	cases := []struct {
		provider string
		fault    Fault
		fixture  string
		status   int
		same     []string // dotted paths whose values must equal the fixture's
		exact    bool     // the whole body equals the fixture (bar request_id)
	}{
		{"openai", Fault{Kind: FaultSpendCap}, "openai/error-insufficient-quota.json", 429, nil, true},
		{"openai", Fault{Kind: FaultRequestTooLarge}, "openai/error-429-request-too-large-tpm.json", 429, []string{"error.type", "error.code", "error.param"}, false},
		{"anthropic", Fault{Kind: FaultSpendCap}, "anthropic/error-429-enforced-spend-limit.json", 429, []string{"type", "error.type", "error.details.error_code"}, false},
		{"anthropic", Fault{Kind: FaultRateLimit}, "anthropic/error-429-rate-limit-recorded.json", 429, []string{"type", "error.type"}, false},
		{"anthropic", Fault{Kind: FaultOverload}, "anthropic/error-529-overloaded.json", 529, []string{"type", "error.type", "error.message"}, false},
		{"anthropic", Fault{Kind: FaultSpendCap, Code: "usage_limit"}, "anthropic/error-400-spend-limit-thirdparty.json", 400, []string{"type", "error.type"}, false},
		{"gemini", Fault{Kind: FaultDailyQuota}, "gemini/error-429-quota-perday.json", 429, []string{"error.code", "error.status", "error.details.0.@type", "error.details.0.violations.0.quotaId", "error.details.2.@type", "error.details.2.retryDelay"}, false},
		{"gemini", Fault{Kind: FaultSpendCap}, "gemini/error-402-prepay-depleted.json", 402, nil, true},
		{"gemini", Fault{Kind: FaultOverload}, "gemini/error-503-unavailable.json", 503, nil, true},
		{"deepseek", Fault{Kind: FaultSpendCap}, "deepseek/error-402-insufficient-balance.json", 402, nil, true},
		{"groq", Fault{Kind: FaultRateLimit}, "groq/error-429-tpm.json", 429, []string{"error.code"}, false},
		{"mistral", Fault{Kind: FaultRateLimit}, "mistral/error-429-rate-limited.json", 429, nil, true},
		{"xai", Fault{Kind: FaultSpendCap}, "xai/error-403-credits-exhausted.json", 403, []string{"code"}, false},
	}
	s, _, _ := newTestSim(t, Options{})
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			s.ClearFaults("") // each case on its own: faults are state now
			f := c.fault
			f.Provider = c.provider
			if err := s.Inject(f); err != nil {
				t.Fatal(err)
			}
			r := call(t, s, c.provider, true)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			want := fixture(t, c.fixture)
			if got, exp := pathsOf(t, r.body), pathsOf(t, want); !reflect.DeepEqual(got, exp) {
				t.Errorf("key paths differ\n got %v\nwant %v", got, exp)
			}
			var gv, wv map[string]any
			_ = json.Unmarshal(r.body, &gv)
			_ = json.Unmarshal(want, &wv)
			if c.exact {
				delete(gv, "request_id")
				delete(wv, "request_id")
				if !reflect.DeepEqual(gv, wv) {
					t.Errorf("body differs from the fixture\n got %s\nwant %s", r.body, want)
				}
			}
			for _, p := range c.same {
				if g, w := pathIdx(gv, p), pathIdx(wv, p); !reflect.DeepEqual(g, w) {
					t.Errorf("%s = %v, want %v", p, g, w)
				}
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("content-type %q", ct)
			}
		})
	}
}

// pathIdx is path with numeric steps into arrays.
func pathIdx(v any, p string) any {
	for _, k := range strings.Split(p, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			var i int
			if _, err := fmt.Sscan(k, &i); err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// sseEvents splits an SSE body into (event name, data) pairs, comments dropped.
func sseEvents(body string) [][2]string {
	var out [][2]string
	var name, data string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if name != "" || data != "" {
				out = append(out, [2]string{name, data})
			}
			name, data = "", ""
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
	return out
}

// The streams follow the fixtures' framing, event order and field names.
func TestStreamsMatchFixtures(t *testing.T) {
	s, _, _ := newTestSim(t, Options{})

	t.Run("anthropic", func(t *testing.T) {
		r := call(t, s, "anthropic", true)
		got, want := sseEvents(string(r.body)), sseEvents(string(fixture(t, "anthropic/messages-stream-recorded.sse")))
		names := func(evs [][2]string) string {
			var n []string
			for _, e := range evs {
				if len(n) == 0 || n[len(n)-1] != e[0] {
					n = append(n, e[0])
				}
			}
			return strings.Join(n, " ")
		}
		if names(got) != names(want) {
			t.Errorf("event order\n got %s\nwant %s", names(got), names(want))
		}
		for i, e := range got {
			var v map[string]any
			if err := json.Unmarshal([]byte(e[1]), &v); err != nil || v["type"] != e[0] {
				t.Errorf("event %d: data type %v does not match event %q", i, v["type"], e[0])
			}
		}
		if !reflect.DeepEqual(pathsOf(t, []byte(got[0][1])), pathsOf(t, []byte(want[0][1]))) {
			t.Errorf("message_start fields differ:\n got %s\nwant %s", got[0][1], want[0][1])
		}
		if ct := r.header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
			t.Errorf("content-type %q", ct)
		}
		if !strings.HasPrefix(r.header.Get("request-id"), "req_011C") {
			t.Errorf("request-id %q", r.header.Get("request-id"))
		}
	})

	t.Run("openai", func(t *testing.T) {
		r := call(t, s, "openai", true)
		got := sseEvents(string(r.body))
		want := sseEvents(string(fixture(t, "openai/chat-stream-wire-constructed.sse")))
		if got[len(got)-1][1] != "[DONE]" || got[len(got)-1][0] != "" {
			t.Errorf("last event %q, want data: [DONE]", got[len(got)-1])
		}
		// Fixture chunks carry no usage key; ours add "usage": null (include_usage).
		for _, i := range []int{0, 1} {
			g := pathsOf(t, []byte(got[i][1]))
			w := append(pathsOf(t, []byte(want[i][1])), "usage")
			sort.Strings(w)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("chunk %d fields\n got %v\nwant %v", i, g, w)
			}
		}
		usage := got[len(got)-2][1]
		var u map[string]any
		_ = json.Unmarshal([]byte(usage), &u)
		if ch, _ := u["choices"].([]any); ch == nil || len(ch) != 0 || path(u, "usage.completion_tokens") == nil {
			t.Errorf("usage chunk %s, want empty choices and usage", usage)
		}
	})

	t.Run("gemini", func(t *testing.T) {
		r := call(t, s, "gemini", true)
		got := sseEvents(string(r.body))
		want := sseEvents(string(fixture(t, "gemini/stream-recorded-text.sse")))
		drop := func(ps []string) []string {
			var out []string
			for _, p := range ps {
				if !strings.Contains(p, "TokensDetails") && !strings.HasSuffix(p, ".index") {
					out = append(out, p)
				}
			}
			return out
		}
		last := got[len(got)-1]
		if g, w := drop(pathsOf(t, []byte(last[1]))), drop(pathsOf(t, []byte(want[len(want)-1][1]))); !reflect.DeepEqual(g, w) {
			t.Errorf("final chunk fields\n got %v\nwant %v", g, w)
		}
		if g, w := drop(pathsOf(t, []byte(got[0][1]))), drop(pathsOf(t, []byte(want[0][1]))); !reflect.DeepEqual(g, w) {
			t.Errorf("first chunk fields\n got %v\nwant %v", g, w)
		}
		for _, e := range got {
			if e[0] != "" {
				t.Errorf("gemini sent an event name %q", e[0])
			}
		}
		if strings.Contains(string(r.body), "[DONE]") {
			t.Error("gemini sent [DONE]")
		}
	})
}

// The rate-limit headers have the fixtures' names and value formats.
func TestHeadersMatchFixtures(t *testing.T) {
	s, _, _ := newTestSim(t, Options{})
	names := func(file string) []string {
		var out []string
		for _, line := range strings.Split(string(fixture(t, file)), "\n") {
			k, _, ok := strings.Cut(line, ":")
			if ok && (strings.HasPrefix(k, "x-ratelimit-") && !strings.Contains(k, "project") || strings.HasPrefix(k, "anthropic-ratelimit-")) {
				out = append(out, k)
			}
		}
		sort.Strings(out)
		return out
	}
	for _, c := range []struct{ provider, file, prefix string }{
		{"openai", "openai/ratelimit-headers-doc.txt", "X-Ratelimit-"},
		{"groq", "groq/ratelimit-headers-doc.txt", "X-Ratelimit-"},
		{"anthropic", "anthropic/ratelimit-headers-recorded-200.txt", "Anthropic-Ratelimit-"},
	} {
		r := call(t, s, c.provider, true)
		var got []string
		for k := range r.header {
			if strings.HasPrefix(k, c.prefix) {
				got = append(got, strings.ToLower(k))
			}
		}
		sort.Strings(got)
		if want := names(c.file); !reflect.DeepEqual(got, want) {
			t.Errorf("%s headers\n got %v\nwant %v", c.provider, got, want)
		}
		for k, v := range r.header {
			lk := strings.ToLower(k)
			switch {
			case strings.HasSuffix(lk, "-reset") && c.provider == "anthropic":
				if _, err := time.Parse(time.RFC3339, v[0]); err != nil {
					t.Errorf("%s %q: %v", k, v[0], err)
				}
			case strings.Contains(lk, "-reset-"):
				if _, err := time.ParseDuration(v[0]); err != nil {
					t.Errorf("%s %q: %v", k, v[0], err)
				}
			}
		}
	}
}
