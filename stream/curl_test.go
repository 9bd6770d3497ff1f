package stream

import (
	"strings"
	"testing"
)

func TestCurlNeverCarriesTheKey(t *testing.T) {
	for _, p := range []string{"openai", "anthropic", "gemini", "groq"} {
		ep := Endpoint{Provider: p, BaseURL: "http://127.0.0.1:9/" + p, Key: Secret("sk-CURLCANARY-0123456789")}
		req := Request{Target: Target{Provider: p, Model: "m-1"}, Prompt: "it's \"quoted\"", MaxTokens: 16}
		info, _ := Provider(p)
		cmd, err := Curl(ep, req, "$"+info.KeyEnv[0])
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(cmd, "CURLCANARY") {
			t.Fatalf("%s: the key is in the curl command:\n%s", p, cmd)
		}
		if !strings.Contains(cmd, "$"+info.KeyEnv[0]) || !strings.Contains(cmd, `it'\''s`) || !strings.HasPrefix(cmd, "curl -N 'http://127.0.0.1:9/") {
			t.Errorf("%s: unexpected command:\n%s", p, cmd)
		}
	}
}
