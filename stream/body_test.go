package stream

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"testing"
	"time"
)

// bodyCases are request bodies of every shape the dialects build, with
// strings that need escaping (HTML characters, controls, invalid UTF-8,
// U+2028) and numbers of every kind.
func bodyCases() []map[string]any {
	t, p := 0.7, 1e-7
	strs := []string{"", "hi", "Say hello", "a<b>&c", "line\nnext\ttab\r\b\f\x01", "quote\" back\\ slash/", "é ü 日本 🙂", "bad \xff utf8", "sep \u2028 \u2029", "del\x7f"}
	var out []map[string]any
	for _, s := range strs {
		out = append(out,
			map[string]any{"model": s, "messages": []map[string]string{{"role": "system", "content": s}, {"role": "user", "content": s}},
				"stream": true, "stream_options": map[string]any{"include_usage": true}, "max_tokens": 40},
			map[string]any{"model": s, "max_completion_tokens": math.MaxInt32, "temperature": t, "top_p": p, "stop": []string{s, "x"},
				"messages": []map[string]string(nil), "stream": false},
			map[string]any{"contents": []map[string]any{{"role": "user", "parts": []map[string]string{{"text": s}}}},
				"generationConfig":  map[string]any{"maxOutputTokens": 1024, "temperature": 1.0, "topP": 1e21, "stopSequences": []string{}},
				"systemInstruction": map[string]any{"parts": []map[string]string{{"text": s}}}},
			map[string]any{"input": []any{map[string]any{"type": "message", "content": s}, s, 3, nil, false},
				"reasoning": nil, s: s, "n": -1, "f": 3.0, "g": math.Copysign(0, -1), "h": 1e-6, "i": 123456789.0},
		)
	}
	return out
}

// appendBody writes what json.Marshal writes, byte for byte.
func TestAppendBodyMatchesMarshal(t *testing.T) {
	for _, c := range bodyCases() {
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := appendBody(nil, c); err != nil || string(got) != string(want) {
			t.Errorf("%v\n got %s\nwant %s", err, got, want)
		}
	}
}

// FuzzAppendBody: any strings and numbers in a body's shape encode as
// json.Marshal encodes them.
func FuzzAppendBody(f *testing.F) {
	f.Add("m", "hi", 40, 0.5, true)
	f.Add("a<b>&\u2028", "bad \xff\n\"\\", -1, 1e21, false)
	f.Fuzz(func(t *testing.T, model, content string, n int, x float64, b bool) {
		body := map[string]any{"model": model, content: n, "messages": []map[string]string{{"role": content, model: content}},
			"stream": b, "opts": map[string]any{"t": x, "s": []string{model, content}}, "list": []any{x, n, b, nil, content}}
		want, err := json.Marshal(body)
		got, gotErr := appendBody(nil, body)
		if (err != nil) != (gotErr != nil) {
			t.Fatalf("json.Marshal: %v; appendBody: %v", err, gotErr)
		}
		if err == nil && string(got) != string(want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}

// BenchmarkBuildRequest builds a proxied call's request: a Chat
// Completions body of one user turn.
func BenchmarkBuildRequest(b *testing.B) {
	info, _ := lookupProvider("openai")
	ep := Endpoint{Provider: "openai", BaseURL: "http://127.0.0.1:1/openai/v1", Key: Secret("k")}
	req := Request{Target: Target{Provider: "openai", Model: "gpt-5.4-mini"}, Prompt: "Say hello", MaxTokens: 40}
	ctx, now := context.Background(), time.Now()
	b.ReportAllocs()
	for b.Loop() {
		hr, err := buildRequestAt(ctx, &info, ep, req, now)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, hr.Body)
	}
}
