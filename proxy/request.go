package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/limitscope/limitscope/stream"
)

// inbound is a caller's request, read from its dialect into what the retry
// core can send to any provider.
type inbound struct {
	dialect      stream.Dialect // the caller's: DialectOpenAI or DialectAnthropic
	model        string
	system       string
	messages     []stream.Message
	maxTokens    int // 0: not given
	sampling     stream.Sampling
	stream       bool
	includeUsage bool     // OpenAI stream_options.include_usage
	tier         string   // the caller's service_tier ("": none; see tiers.go)
	ignored      []string // fields accepted but not sent on (reported in a header)
}

// lastUser is the last user turn, which names the call in the history.
func (in *inbound) lastUser() string {
	for i := len(in.messages) - 1; i >= 0; i-- {
		if in.messages[i].Role == "user" {
			return in.messages[i].Content
		}
	}
	return ""
}

// refuse is a 400 for what cannot be translated; param names the field.
func refuse(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, class: stream.ClassCaller, param: param,
		code: "unsupported_by_limitscope_proxy", message: "limitscope proxy: " + fmt.Sprintf(format, args...)}
}

func invalid(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, class: stream.ClassCaller, param: param,
		message: fmt.Sprintf(format, args...)}
}

// decodeObject reads a JSON object's fields.
func decodeObject(body []byte) (map[string]json.RawMessage, *apiError) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(bytes.TrimSpace(body), &m); err != nil || m == nil {
		return nil, invalid("", "the request body is not a JSON object")
	}
	return m, nil
}

func isNullJSON(raw json.RawMessage) bool {
	s := string(bytes.TrimSpace(raw))
	return s == "" || s == "null"
}

// field decodes one optional field into v; a present but mistyped field is
// a 400 naming it.
func field(m map[string]json.RawMessage, name string, v any) (bool, *apiError) {
	raw, ok := m[name]
	if !ok || isNullJSON(raw) {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, invalid(name, "%s: %v", name, jsonErr(err))
	}
	return true, nil
}

func jsonErr(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "expected " + te.Type.String() + ", got " + te.Value
	}
	return err.Error()
}

// textContent reads a message content: a string, or a list of parts of
// which only text parts can be translated.
func textContent(raw json.RawMessage, param string, textTypes ...string) (string, *apiError) {
	if isNullJSON(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", invalid(param, "%s: want a string or a list of content parts", param)
	}
	var b strings.Builder
	for i, p := range parts {
		var typ string
		_ = json.Unmarshal(p["type"], &typ)
		ok := false
		for _, t := range textTypes {
			ok = ok || typ == t
		}
		if !ok {
			return "", refuse(fmt.Sprintf("%s[%d].type", param, i),
				"content of type %q cannot be translated between providers; only text is supported", typ)
		}
		var t string
		if err := json.Unmarshal(p["text"], &t); err != nil {
			return "", invalid(fmt.Sprintf("%s[%d].text", param, i), "%s[%d].text: want a string", param, i)
		}
		b.WriteString(t)
	}
	return b.String(), nil
}

// stopList reads a stop field: a string or a list of strings.
func stopList(m map[string]json.RawMessage, name string) ([]string, *apiError) {
	raw, ok := m[name]
	if !ok || isNullJSON(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}, nil
	}
	var l []string
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, invalid(name, "%s: want a string or a list of strings", name)
	}
	return l, nil
}

// The fields of each dialect: what is read, what cannot be translated (a
// 400), and the rest, accepted and reported as ignored.
var (
	openAIRead = map[string]bool{"model": true, "messages": true, "stream": true, "stream_options": true,
		"max_tokens": true, "max_completion_tokens": true, "temperature": true, "top_p": true, "stop": true,
		"n": true, "response_format": true, "logprobs": true, "modalities": true, "parallel_tool_calls": true,
		"service_tier": true}
	openAIRefused = map[string]string{
		"tools": "tools", "tool_choice": "tool choice", "functions": "functions", "function_call": "function calling",
		"top_logprobs": "log probabilities", "audio": "audio output", "prediction": "predicted outputs",
		"web_search_options": "web search",
	}
	anthropicRead = map[string]bool{"model": true, "messages": true, "system": true, "max_tokens": true,
		"stream": true, "temperature": true, "top_p": true, "stop_sequences": true, "tool_choice": true,
		"service_tier": true}
	anthropicRefused = map[string]string{
		"tools": "tools", "thinking": "extended thinking", "mcp_servers": "MCP servers", "container": "containers",
	}
)

// checkFields refuses the untranslatable fields and lists the ignored ones.
func checkFields(m map[string]json.RawMessage, read map[string]bool, refused map[string]string) ([]string, *apiError) {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	var ignored []string
	for _, k := range names {
		if read[k] {
			continue
		}
		if what, ok := refused[k]; ok {
			if isNullJSON(m[k]) || string(bytes.TrimSpace(m[k])) == "[]" {
				continue
			}
			return nil, refuse(k, "%s (%q) cannot be translated between providers and is not supported", what, k)
		}
		ignored = append(ignored, k)
	}
	return ignored, nil
}

// parseOpenAI reads a Chat Completions request.
func parseOpenAI(body []byte) (*inbound, *apiError) {
	if in, ok := parseOpenAIFast(body); ok {
		return in, nil
	}
	return parseOpenAIMap(body)
}

// parseOpenAIMap is parseOpenAI for every request: a map of the members,
// each decoded on its own.
func parseOpenAIMap(body []byte) (*inbound, *apiError) {
	m, e := decodeObject(body)
	if e != nil {
		return nil, e
	}
	in := &inbound{dialect: stream.DialectOpenAI}
	if in.ignored, e = checkFields(m, openAIRead, openAIRefused); e != nil {
		return nil, e
	}
	if _, e = field(m, "model", &in.model); e != nil {
		return nil, e
	}
	if in.model == "" {
		return nil, invalid("model", "you must provide a model parameter")
	}
	if _, e = field(m, "stream", &in.stream); e != nil {
		return nil, e
	}
	var so struct {
		IncludeUsage bool `json:"include_usage"`
	}
	if _, e = field(m, "stream_options", &so); e != nil {
		return nil, e
	}
	in.includeUsage = so.IncludeUsage
	if e = readTier(m, in); e != nil {
		return nil, e
	}
	for _, k := range []string{"max_completion_tokens", "max_tokens"} {
		var n int
		ok, e := field(m, k, &n)
		if e != nil {
			return nil, e
		}
		if ok && n < 1 {
			return nil, invalid(k, "Invalid '%s': integer below minimum value. Expected a value >= 1, but got %d instead.", k, n)
		}
		if ok && in.maxTokens == 0 {
			in.maxTokens = n
		}
	}
	if e = readSampling(m, in, "stop"); e != nil {
		return nil, e
	}
	var n int
	if ok, e := field(m, "n", &n); e != nil {
		return nil, e
	} else if ok && n != 1 {
		return nil, refuse("n", "n=%d: only one choice per request is supported", n)
	}
	var rf struct {
		Type string `json:"type"`
	}
	if _, e = field(m, "response_format", &rf); e != nil {
		return nil, e
	}
	if rf.Type != "" && rf.Type != "text" {
		return nil, refuse("response_format", "response_format %q (structured output) cannot be translated between providers", rf.Type)
	}
	var lp bool
	if _, e = field(m, "logprobs", &lp); e != nil {
		return nil, e
	}
	if lp {
		return nil, refuse("logprobs", "log probabilities cannot be translated between providers")
	}
	var mods []string
	if _, e = field(m, "modalities", &mods); e != nil {
		return nil, e
	}
	for _, x := range mods {
		if x != "text" {
			return nil, refuse("modalities", "output modality %q is not supported; only text", x)
		}
	}

	var msgs []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCalls  json.RawMessage `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
		Audio      json.RawMessage `json:"audio"`
	}
	raw, ok := m["messages"]
	if !ok || isNullJSON(raw) {
		return nil, invalid("messages", "Missing required parameter: 'messages'.")
	}
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return nil, invalid("messages", "messages: want a list of messages")
	}
	if len(msgs) == 0 {
		return nil, invalid("messages", "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	var sys []string
	for i, mg := range msgs {
		p := fmt.Sprintf("messages[%d]", i)
		switch {
		case !isNullJSON(mg.ToolCalls) && string(bytes.TrimSpace(mg.ToolCalls)) != "[]":
			return nil, refuse(p+".tool_calls", "tool calls cannot be translated between providers and are not supported")
		case mg.ToolCallID != "":
			return nil, refuse(p+".tool_call_id", "tool results cannot be translated between providers and are not supported")
		case !isNullJSON(mg.Audio):
			return nil, refuse(p+".audio", "audio cannot be translated between providers and is not supported")
		}
		text, e := textContent(mg.Content, p+".content", "text")
		if e != nil {
			return nil, e
		}
		switch mg.Role {
		case "system", "developer":
			sys = append(sys, text)
		case "user", "assistant":
			in.messages = append(in.messages, stream.Message{Role: mg.Role, Content: text})
		case "tool", "function":
			return nil, refuse(p+".role", "%s messages cannot be translated between providers and are not supported", mg.Role)
		default:
			return nil, invalid(p+".role", "%s.role: %q is not one of system, developer, user, assistant", p, mg.Role)
		}
	}
	if len(in.messages) == 0 {
		return nil, invalid("messages", "messages: at least one user or assistant message is required")
	}
	in.system = strings.Join(sys, "\n\n")
	return in, nil
}

// openAIFast is the common shape of a Chat Completions request, for
// parseOpenAIFast, every member kept raw (any other member is refused:
// fastStrict).
type openAIFast struct {
	Model               jsontext.Value  `json:"model"`
	Messages            []openAIFastMsg `json:"messages"`
	Stream              jsontext.Value  `json:"stream"`
	StreamOptions       jsontext.Value  `json:"stream_options"`
	MaxTokens           jsontext.Value  `json:"max_tokens"`
	MaxCompletionTokens jsontext.Value  `json:"max_completion_tokens"`
}

type openAIFastMsg struct {
	Role    jsontext.Value `json:"role"`
	Content jsontext.Value `json:"content"`
}

type openAIFastOptions struct {
	IncludeUsage jsontext.Value `json:"include_usage"`
}

// fastStrict refuses a member of another name than a field's (names match
// exactly), as encoding/json/v2 already refuses a repeated name and
// invalid UTF-8.
var fastStrict = jsonv2.RejectUnknownMembers(true)

// parseOpenAIFast reads the requests SDKs send most (a model, messages of
// text, stream, stream_options.include_usage, a token cap) in one decoding
// by encoding/json/v2 instead of a map and a decoding per field: about a
// quarter of parseOpenAI's time. It reads only what parseOpenAI reads the
// same way (names matched exactly, no repeated name, valid UTF-8, nothing
// else in the request or its messages, plain strings for the model and
// roles, a positive integer cap): anything else, every error included, is
// false, and parseOpenAIMap decides. FuzzParseOpenAIFast holds it to
// parseOpenAIMap.
func parseOpenAIFast(body []byte) (*inbound, bool) {
	var r openAIFast
	if jsonv2.Unmarshal(bytes.TrimSpace(body), &r, fastStrict) != nil || len(r.Messages) == 0 {
		return nil, false
	}
	in := &inbound{dialect: stream.DialectOpenAI}
	var ok bool
	if in.model, ok = plainJSONString(r.Model); !ok || in.model == "" {
		return nil, false
	}
	if in.stream, ok = jsonBool(r.Stream); !ok {
		return nil, false
	}
	if len(r.StreamOptions) > 0 {
		var so openAIFastOptions
		if jsonv2.Unmarshal(r.StreamOptions, &so, fastStrict) != nil {
			return nil, false
		}
		if in.includeUsage, ok = jsonBool(so.IncludeUsage); !ok {
			return nil, false
		}
	}
	for _, raw := range []jsontext.Value{r.MaxCompletionTokens, r.MaxTokens} {
		if len(raw) == 0 {
			continue
		}
		n, err := strconv.Atoi(string(raw))
		if err != nil || n < 1 || raw[0] == '+' {
			return nil, false
		}
		if in.maxTokens == 0 {
			in.maxTokens = n
		}
	}
	var sys []string
	for _, mg := range r.Messages {
		role, ok := plainJSONString(mg.Role)
		if !ok {
			return nil, false
		}
		text, ok := plainJSONString(mg.Content)
		if !ok {
			var e *apiError
			if text, e = textContent(json.RawMessage(mg.Content), "", "text"); e != nil {
				return nil, false
			}
		}
		switch role {
		case "system", "developer":
			sys = append(sys, text)
		case "user", "assistant":
			in.messages = append(in.messages, stream.Message{Role: role, Content: text})
		default:
			return nil, false
		}
	}
	if len(in.messages) == 0 {
		return nil, false
	}
	in.system = strings.Join(sys, "\n\n")
	return in, true
}

// plainJSONString is a JSON string's text when it has no escapes.
func plainJSONString(raw jsontext.Value) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || bytes.IndexByte(raw, '\\') >= 0 {
		return "", false
	}
	return string(raw[1 : len(raw)-1]), true
}

// jsonBool reads true or false; absent is false.
func jsonBool(raw jsontext.Value) (v, ok bool) {
	switch string(raw) {
	case "":
		return false, true
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// readSampling reads temperature, top_p and the stop field.
func readSampling(m map[string]json.RawMessage, in *inbound, stopField string) *apiError {
	var f float64
	if ok, e := field(m, "temperature", &f); e != nil {
		return e
	} else if ok {
		v := f
		in.sampling.Temperature = &v
	}
	if ok, e := field(m, "top_p", &f); e != nil {
		return e
	} else if ok {
		v := f
		in.sampling.TopP = &v
	}
	stop, e := stopList(m, stopField)
	if e != nil {
		return e
	}
	in.sampling.Stop = stop
	return nil
}

// parseAnthropic reads a Messages request.
func parseAnthropic(body []byte) (*inbound, *apiError) {
	m, e := decodeObject(body)
	if e != nil {
		return nil, e
	}
	in := &inbound{dialect: stream.DialectAnthropic}
	if in.ignored, e = checkFields(m, anthropicRead, anthropicRefused); e != nil {
		return nil, e
	}
	var tc struct {
		Type string `json:"type"`
	}
	if _, e = field(m, "tool_choice", &tc); e != nil {
		return nil, e
	}
	if tc.Type != "" && tc.Type != "none" && tc.Type != "auto" {
		return nil, refuse("tool_choice", "tool_choice %q: tools cannot be translated between providers", tc.Type)
	}
	if _, e = field(m, "model", &in.model); e != nil {
		return nil, e
	}
	if in.model == "" {
		return nil, invalid("model", "model: Field required")
	}
	if e = readTier(m, in); e != nil {
		return nil, e
	}
	ok, e := field(m, "max_tokens", &in.maxTokens)
	if e != nil {
		return nil, e
	}
	if !ok {
		return nil, invalid("max_tokens", "max_tokens: Field required")
	}
	if in.maxTokens < 1 {
		return nil, invalid("max_tokens", "max_tokens: Input should be greater than or equal to 1")
	}
	if _, e = field(m, "stream", &in.stream); e != nil {
		return nil, e
	}
	if e = readSampling(m, in, "stop_sequences"); e != nil {
		return nil, e
	}
	if in.system, e = textContent(m["system"], "system", "text"); e != nil {
		return nil, e
	}
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	raw, ok := m["messages"]
	if !ok || isNullJSON(raw) {
		return nil, invalid("messages", "messages: Field required")
	}
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return nil, invalid("messages", "messages: Input should be a valid list")
	}
	if len(msgs) == 0 {
		return nil, invalid("messages", "messages: at least one message is required")
	}
	for i, mg := range msgs {
		p := fmt.Sprintf("messages.%d", i)
		if mg.Role != "user" && mg.Role != "assistant" {
			return nil, invalid(p+".role", "%s.role: Input should be 'user' or 'assistant'", p)
		}
		text, e := textContent(mg.Content, p+".content", "text")
		if e != nil {
			return nil, e
		}
		in.messages = append(in.messages, stream.Message{Role: mg.Role, Content: text})
	}
	return in, nil
}
