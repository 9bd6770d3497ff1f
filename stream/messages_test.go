package stream

import (
	"context"
	"encoding/json"
	"io"
	"reflect"
	"testing"
)

func TestBuildRequestMessages(t *testing.T) {
	temp := 0.5
	req := Request{
		MaxTokens: 10,
		System:    "be brief",
		Messages: []Message{
			{Role: "user", Content: "hi"},
			{Role: "assistant", Content: "hello"},
			{Role: "user", Content: "a"},
			{Role: "user", Content: "b"},
		},
		Sampling: Sampling{Temperature: &temp, Stop: []string{"END"}},
	}
	cases := []struct {
		provider string
		want     map[string]any
	}{
		{"openai", map[string]any{
			"messages": []any{
				map[string]any{"role": "system", "content": "be brief"},
				map[string]any{"role": "user", "content": "hi"},
				map[string]any{"role": "assistant", "content": "hello"},
				map[string]any{"role": "user", "content": "a\n\nb"},
			},
			"temperature": 0.5, "stop": []any{"END"},
		}},
		{"anthropic", map[string]any{
			"system": "be brief",
			"messages": []any{
				map[string]any{"role": "user", "content": "hi"},
				map[string]any{"role": "assistant", "content": "hello"},
				map[string]any{"role": "user", "content": "a\n\nb"},
			},
			"temperature": 0.5, "stop_sequences": []any{"END"},
		}},
		{"gemini", map[string]any{
			"systemInstruction": map[string]any{"parts": []any{map[string]any{"text": "be brief"}}},
			"contents": []any{
				map[string]any{"role": "user", "parts": []any{map[string]any{"text": "hi"}}},
				map[string]any{"role": "model", "parts": []any{map[string]any{"text": "hello"}}},
				map[string]any{"role": "user", "parts": []any{map[string]any{"text": "a\n\nb"}}},
			},
			"generationConfig": map[string]any{"maxOutputTokens": 10.0, "temperature": 0.5, "stopSequences": []any{"END"}},
		}},
	}
	for _, c := range cases {
		t.Run(c.provider, func(t *testing.T) {
			r := req
			r.Target = Target{Provider: c.provider, Model: "m"}
			hr, err := BuildRequest(context.Background(), Endpoint{Provider: c.provider, BaseURL: "http://127.0.0.1:1"}, r)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(hr.Body)
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			for k, v := range c.want {
				if !reflect.DeepEqual(got[k], v) {
					t.Errorf("%s = %#v, want %#v", k, got[k], v)
				}
			}
		})
	}
}

func TestBuildRequestPromptUnchanged(t *testing.T) {
	hr, err := BuildRequest(context.Background(), Endpoint{Provider: "anthropic", BaseURL: "http://127.0.0.1:1"},
		Request{Target: Target{Provider: "anthropic", Model: "m"}, Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(hr.Body)
	var got map[string]any
	_ = json.Unmarshal(b, &got)
	if _, ok := got["system"]; ok {
		t.Error("system sent without one")
	}
	if _, ok := got["temperature"]; ok {
		t.Error("temperature sent without one")
	}
	want := []any{map[string]any{"role": "user", "content": "hi"}}
	if !reflect.DeepEqual(got["messages"], want) {
		t.Errorf("messages = %#v", got["messages"])
	}
}
