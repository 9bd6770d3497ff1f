package proxy

import (
	"reflect"
	"testing"
)

// openAIBodies are Chat Completions requests: the SDKs' common shape and
// every way it can part from it (escapes, repeated or other-case names,
// nulls, other types, invalid UTF-8, fields parseOpenAIFast does not read).
var openAIBodies = []string{
	`{"model":"openai/gpt-5.4-mini","max_tokens":40,"stream":true,"messages":[{"role":"user","content":"Say hello"}]}`,
	` {"model":"m","stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":7,"max_tokens":9,"messages":[{"role":"system","content":"be brief"},{"role":"developer","content":"x"},{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]} `,
	`{"model":"m","messages":[{"role":"user","content":"say \"hi\"\n\u00e9"}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url"}]}]}`,
	`{"model":"m","messages":[{"role":"user","content":null}]}`,
	`{"model":"m","messages":[{"role":"user"}]}`,
	`{"model":"m","messages":[{"role":"user","content":5}]}`,
	`{"model":"m","messages":[{"role":"tool","content":"x"}]}`,
	`{"model":"m","messages":[{"role":"wizard","content":"x"}]}`,
	`{"model":"m","messages":[{"role":"system","content":"only"}]}`,
	`{"model":"m","messages":[{"Role":"user","content":"x"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"x","name":"bob"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"x","tool_calls":[]}]}`,
	`{"model":"m","messages":[{"role":"user","content":"x","role":"assistant"}]}`,
	`{"model":"m","model":"n","messages":[{"role":"user","content":"x"}]}`,
	`{"Model":"m","messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m\u0031","messages":[{"role":"user","content":"x"}]}`,
	`{"model":"","messages":[{"role":"user","content":"x"}]}`,
	`{"model":null,"messages":[{"role":"user","content":"x"}]}`,
	`{"model":5,"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","messages":[]}`,
	`{"model":"m","messages":null}`,
	`{"model":"m","messages":[null]}`,
	`{"model":"m","messages":{}}`,
	`{"model":"m"}`,
	`{"model":"m","stream":null,"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","stream":"true","messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","stream":false,"stream_options":null,"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","stream_options":{"include_usage":false,"x":1},"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","stream_options":{"Include_Usage":true},"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","stream_options":{"include_usage":1},"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","stream_options":[],"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","max_tokens":-3,"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","max_tokens":4.0,"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","max_tokens":4e1,"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","max_tokens":99999999999999999999,"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","max_tokens":null,"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","max_tokens":"5","messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","temperature":0.2,"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","tools":[],"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","user":"u","messages":[{"role":"user","content":"x"}]}`,
	"{\"model\":\"m\xff\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
	"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}",
	`{"model":"m","messages":[{"role":"user","content":"x"}]}x`,
	`{"model":"m","messages":[{"role":"user","content":"x"}]`,
	`null`, `[]`, `"x"`, ``, `{}`,
}

// sameOpenAIParse: whatever parseOpenAIFast reads, parseOpenAIMap reads
// the same, without an error.
func sameOpenAIParse(t *testing.T, body string) {
	t.Helper()
	fast, ok := parseOpenAIFast([]byte(body))
	if !ok {
		return
	}
	slow, e := parseOpenAIMap([]byte(body))
	if e != nil || !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%q:\nfast %+v\nmap  %+v (%v)", body, fast, slow, e)
	}
}

func TestParseOpenAIFastMatches(t *testing.T) {
	took := 0
	for _, b := range openAIBodies {
		sameOpenAIParse(t, b)
		if _, ok := parseOpenAIFast([]byte(b)); ok {
			took++
		}
	}
	// It reads the common shapes (else it only costs time).
	for _, b := range openAIBodies[:4] {
		if _, ok := parseOpenAIFast([]byte(b)); !ok {
			t.Errorf("parseOpenAIFast refused %s", b)
		}
	}
	if took > 12 {
		t.Errorf("parseOpenAIFast read %d of the bodies; most are for parseOpenAIMap", took)
	}
}

// FuzzParseOpenAIFast: any body parseOpenAIFast reads, parseOpenAIMap
// reads the same.
func FuzzParseOpenAIFast(f *testing.F) {
	for _, b := range openAIBodies {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body string) { sameOpenAIParse(t, body) })
}
