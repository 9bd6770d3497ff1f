package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// esMessage encodes one event-stream message with the AWS SDK's encoder.
func esMessage(t testing.TB, kind, name, payload string) []byte {
	t.Helper()
	var h eventstream.Headers
	switch kind {
	case "event":
		h.Set(":event-type", eventstream.StringValue(name))
		h.Set(":content-type", eventstream.StringValue("application/json"))
	case "exception":
		h.Set(":exception-type", eventstream.StringValue(name))
		h.Set(":content-type", eventstream.StringValue("application/json"))
	case "error":
		h.Set(":error-code", eventstream.StringValue(name))
		h.Set(":error-message", eventstream.StringValue(payload))
		payload = ""
	}
	h.Set(":message-type", eventstream.StringValue(kind))
	var b bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&b, eventstream.Message{Headers: h, Payload: []byte(payload)}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// esHandler answers 200 application/vnd.amazon.eventstream with body.
func esHandler(body []byte, hdr ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		w.Header().Set("X-Amzn-Requestid", "0e6f3e4a-1111-4222-a333-444455556666")
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.WriteHeader(200)
		_, _ = w.Write(body)
	}
}

// TestBedrockFixtures: the constructed wire fixtures decode to their
// documented text, stop reason and usage, and the exception after 200 to a
// mid-stream rate limit after the two deltas; the request id is read from
// x-amzn-RequestId.
func TestBedrockFixtures(t *testing.T) {
	c, ep := serve(t, "bedrock", esHandler(fixture(t, "bedrock/conversestream-text-constructed.eventstream")))
	res, deltas := doReq(c, ep, "anthropic.claude-opus-4-6-v1")
	if res.Err != nil || len(deltas) != 12 || res.FinishReason != "end_turn" || res.Usage == nil ||
		res.Usage.InputTokens != 22 || res.Usage.OutputTokens != 55 || res.RequestID != "0e6f3e4a-1111-4222-a333-444455556666" {
		t.Fatalf("%+v (%d deltas)", res, len(deltas))
	}
	var want strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(fixture(t, "bedrock/conversestream-text-recorded.jsonl"))), "\n") {
		var ev struct {
			ContentBlockDelta *struct {
				Delta struct{ Text string } `json:"delta"`
			} `json:"contentBlockDelta"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.ContentBlockDelta != nil {
			want.WriteString(ev.ContentBlockDelta.Delta.Text)
		}
	}
	if res.Text != want.String() {
		t.Errorf("text %q, want the recording's %q", res.Text, want.String())
	}

	c, ep = serve(t, "bedrock", esHandler(fixture(t, "bedrock/conversestream-throttling-exception-constructed.eventstream")))
	res, deltas = doReq(c, ep, "m")
	if e := res.Err; e == nil || e.Class != ClassRateLimit || !e.MidStream || e.Code != "ThrottlingException" || e.Status != 200 ||
		e.Message != "Too many tokens, please wait before trying again." || len(deltas) != 2 || e.RequestID == "" {
		t.Fatalf("%+v %+v (%d deltas)", res, res.Err, len(deltas))
	}
}

// TestBedrockErrorFixtures: the HTTP error bodies, with the headers the
// captures show, parse to their class.
func TestBedrockErrorFixtures(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		file, errType string
		status        int
		hdr           http.Header
		class         Class
		code          string
		scope         Scope
		delay         time.Duration
	}{
		{"error-429-throttling-tokens.json", "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/", 429,
			http.Header{"X-Amz-Retry-After": {"1500"}}, ClassRateLimit, "ThrottlingException", "", 1500 * time.Millisecond},
		{"error-429-throttling-tokens.json", "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/", 429,
			http.Header{"Retry-After": {"7"}}, ClassRateLimit, "ThrottlingException", "", 7 * time.Second},
		{"error-429-throttling-tokens-per-day.json", "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/", 429,
			nil, ClassQuota, "ThrottlingException", ScopeTarget, 0},
		{"error-429-model-not-ready-sdk-snapshot.json", "", 429, nil, ClassOverload, "ModelNotReadyException", "", 0},
		{"error-424-model-error-sdk-snapshot.json", "", 424, nil, ClassServer, "ModelErrorException", "", 0},
	} {
		h := http.Header{"X-Amzn-Requestid": {"ca47a5ce-e260-4824-aa0e-2e62669d5d6e"}}
		if tc.errType != "" {
			h.Set("X-Amzn-Errortype", tc.errType)
		}
		for k, v := range tc.hdr {
			h[k] = v
		}
		e := ParseError("bedrock", tc.status, h, fixture(t, "bedrock/"+tc.file), now)
		if e.Class != tc.class || e.Code != tc.code || e.Scope != tc.scope || e.Delay != tc.delay || e.RequestID != "ca47a5ce-e260-4824-aa0e-2e62669d5d6e" {
			t.Errorf("%s %v: %+v, want %s %s scope %q delay %s", tc.file, tc.hdr, e, tc.class, tc.code, tc.scope, tc.delay)
		}
	}
	// 529 (as the Bedrock error page documents it) and a ModelStreamError
	// whose model was overloaded are overloads; AccessDenied the caller's.
	for _, tc := range []struct {
		status        int
		errType, body string
		class         Class
	}{
		{529, "", `{"message":"Overloaded"}`, ClassOverload},
		{424, "ModelErrorException", `{"message":"overloaded","originalStatusCode":529}`, ClassOverload},
		{503, "ServiceUnavailableException", `{"message":"Bedrock is unable to process your request."}`, ClassOverload},
		{403, "AccessDeniedException", `{"Message":"User is not authorized to perform: bedrock:InvokeModelWithResponseStream"}`, ClassCaller},
		{400, "ServiceQuotaExceededException", `{"message":"Your request exceeds the service quota for your account."}`, ClassQuota},
		{400, "ValidationException", `{"message":"Input is too long for requested model."}`, ClassCaller},
	} {
		h := http.Header{}
		if tc.errType != "" {
			h.Set("X-Amzn-Errortype", tc.errType)
		}
		e := ParseError("bedrock", tc.status, h, []byte(tc.body), now)
		if e.Class != tc.class || e.Message == "" || e.ModelSpecific != (tc.errType == "ValidationException") {
			t.Errorf("%d %s: %+v, want %s", tc.status, tc.errType, e, tc.class)
		}
	}
}

// TestBedrockStreamEnds: a stream is complete only at metadata after
// messageStop; ended anywhere before (even cleanly, which the AWS SDK takes
// for success) it is cut; a CRC error is a server error; an exception in
// either spelling and an error message are errors inside the stream.
func TestBedrockStreamEnds(t *testing.T) {
	start := esMessage(t, "event", "messageStart", `{"role":"assistant"}`)
	delta := esMessage(t, "event", "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hi"}}`)
	stop := esMessage(t, "event", "messageStop", `{"stopReason":"max_tokens"}`)
	meta := esMessage(t, "event", "metadata", `{"usage":{"inputTokens":3,"outputTokens":1,"totalTokens":4}}`)
	cat := func(ms ...[]byte) []byte { return bytes.Join(ms, nil) }
	bad := cat(start, delta)
	bad[len(bad)-1] ^= 0xff
	for _, tc := range []struct {
		name  string
		body  []byte
		class Class
		code  string
	}{
		{"complete", cat(start, delta, stop, meta), ClassOK, ""},
		{"metadata without messageStop", cat(start, delta, meta), ClassConnection, ""},
		{"messageStop without metadata", cat(start, delta, stop), ClassConnection, ""},
		{"cut inside a message", cat(start, delta, stop, meta[:len(meta)-7]), ClassConnection, ""},
		{"cut inside the prelude", cat(start, delta[:5]), ClassConnection, ""},
		{"a bad CRC", bad, ClassServer, ""},
		{"lowerCamel exception", cat(start, delta, esMessage(t, "exception", "serviceUnavailableException", `{"message":"x"}`)), ClassOverload, "ServiceUnavailableException"},
		{"UpperCamel exception", cat(start, delta, esMessage(t, "exception", "ValidationException", `{"message":"x"}`)), ClassCaller, "ValidationException"},
		{"model stream error, overloaded", cat(start, delta, esMessage(t, "exception", "modelStreamErrorException", `{"message":"x","originalStatusCode":529}`)), ClassOverload, "ModelStreamErrorException"},
		{"model stream error", cat(start, delta, esMessage(t, "exception", "modelStreamErrorException", `{"message":"x","originalStatusCode":500}`)), ClassServer, "ModelStreamErrorException"},
		{"daily throttle in the stream", cat(start, esMessage(t, "exception", "throttlingException", `{"message":"Too many tokens per day, please wait before trying again."}`)), ClassQuota, "ThrottlingException"},
		{"error message", cat(start, delta, esMessage(t, "error", "InternalFailure", "An internal error occurred.")), ClassServer, "InternalFailure"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ep := serve(t, "bedrock", esHandler(tc.body))
			res, _ := doReq(c, ep, "us-west-2/m")
			if res.Class() != tc.class || res.Err != nil && res.Err.Code != tc.code {
				t.Fatalf("%+v %+v, want %s %q", res, res.Err, tc.class, tc.code)
			}
			if tc.class == ClassOK && (res.Text != "Hi" || res.FinishReason != "max_tokens" || res.Usage.OutputTokens != 1) {
				t.Errorf("%+v", res)
			}
		})
	}
	// A message longer than MaxEventSize is refused before it is read.
	big := esMessage(t, "event", "contentBlockDelta", `{"delta":{"text":"`+strings.Repeat("a", 4096)+`"}}`)
	c, ep := serve(t, "bedrock", esHandler(cat(start, big)))
	c.Options.MaxEventSize = 1024
	if res, _ := doReq(c, ep, "m"); res.Err == nil || !res.Err.Oversize {
		t.Fatalf("oversize: %+v", res.Err)
	}
}

// TestBedrockRequest: the Region comes from the model's first segment
// (else the endpoint's default), fills the base URL and scopes the SigV4
// signature; a Bedrock API key is a bearer token and no signature.
func TestBedrockRequest(t *testing.T) {
	for _, tc := range []struct{ model, def, region, id string }{
		{"us-west-2/anthropic.claude-haiku-5-5-v1:0", "", "us-west-2", "anthropic.claude-haiku-5-5-v1:0"},
		{"anthropic.claude-haiku-5-5-v1:0", "eu-west-1", "eu-west-1", "anthropic.claude-haiku-5-5-v1:0"},
		{"anthropic.claude-haiku-5-5-v1:0", "", "us-east-1", "anthropic.claude-haiku-5-5-v1:0"},
		{"us-gov-west-1/m", "", "us-gov-west-1", "m"},
		{"us.anthropic.claude/x", "", "us-east-1", "us.anthropic.claude/x"},
	} {
		if r, id := BedrockModel(tc.model, tc.def); r != tc.region || id != tc.id {
			t.Errorf("%q: %q %q", tc.model, r, id)
		}
	}
	req := Request{Target: Target{Provider: "bedrock", Model: "ap-south-1/anthropic.claude-haiku-5-5-v1:0"}, Prompt: "hi", System: "be brief"}
	hr, err := BuildRequest(t.Context(), Endpoint{Provider: "bedrock", AWS: NewAWSAuth("AKIDEXAMPLE", "secret-example", "token-example")}, req)
	if err != nil {
		t.Fatal(err)
	}
	body := string(mustRead(t, hr.Body))
	auth := hr.Header.Get("Authorization")
	if hr.URL.Host != "bedrock-runtime.ap-south-1.amazonaws.com" || hr.URL.Path != "/model/anthropic.claude-haiku-5-5-v1:0/converse-stream" ||
		!strings.Contains(auth, "/ap-south-1/bedrock/aws4_request") || hr.Header.Get("X-Amz-Security-Token") != "token-example" ||
		hr.Header.Get("Accept") != "application/vnd.amazon.eventstream" ||
		!strings.Contains(body, `"system":[{"text":"be brief"}]`) || !strings.Contains(body, `"messages":[{"content":[{"text":"hi"}],"role":"user"}]`) {
		t.Fatalf("%s %v\n%s", hr.URL, hr.Header, body)
	}
	hr, err = BuildRequest(t.Context(), Endpoint{Provider: "bedrock", Key: "ABSK-example", AWS: NewAWSAuth("AKIDEXAMPLE", "secret-example", "")}, req)
	if err != nil || hr.Header.Get("Authorization") != "Bearer ABSK-example" || hr.Header.Get("X-Amz-Date") != "" {
		t.Fatalf("bearer: %v %v", err, hr.Header)
	}
	if s := fmt.Sprintf("%v %+v %#v", Endpoint{AWS: NewAWSAuth("AKIDEXAMPLE", "secret-example", "tok")}, NewAWSAuth("AKIDEXAMPLE", "secret-example", "tok"), NewAWSAuth("AKIDEXAMPLE", "secret-example", "tok")); strings.Contains(s, "secret-example") || strings.Contains(s, "AKIDEXAMPLE") {
		t.Errorf("credentials print: %s", s)
	}
	if b, _ := json.Marshal(Endpoint{AWS: NewAWSAuth("AKIDEXAMPLE", "secret-example", "tok")}); bytes.Contains(b, []byte("secret-example")) {
		t.Errorf("credentials marshal: %s", b)
	}
}

// TestBedrockResolve: a Bedrock API key wins; else AWS credentials in the
// environment (or a profile) take the SDK's chain; else the missing-key
// error names both; the default Region is AWS_REGION.
func TestBedrockResolve(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	ep, err := Resolve("bedrock", env("AWS_BEARER_TOKEN_BEDROCK", "ABSK-x", "AWS_REGION", "eu-west-3"))
	if err != nil || ep.Key != "ABSK-x" || ep.AWS != nil || ep.Region != "eu-west-3" {
		t.Errorf("bearer: %+v %v", ep, err)
	}
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_PROFILE"} {
		ep, err = Resolve("bedrock", env(v, "x", "AWS_DEFAULT_REGION", "ca-central-1"))
		if err != nil || ep.Key != "" || ep.AWS == nil || ep.Region != "ca-central-1" {
			t.Errorf("%s: %+v %v", v, ep, err)
		}
	}
	_, err = Resolve("bedrock", env("HOME", t.TempDir()))
	if err == nil || !strings.Contains(err.Error(), "AWS_BEARER_TOKEN_BEDROCK (or AWS_ACCESS_KEY_ID or AWS_PROFILE)") {
		t.Errorf("missing: %v", err)
	}
}

// TestBedrockNoCredentialInOutput: a server that echoes every credential
// it was sent (the bearer token, the SigV4 key id, the session token, and
// even the secret) in headers, messages, exceptions and text: none reaches
// the Result.
func TestBedrockNoCredentialInOutput(t *testing.T) {
	const keyID, secret, token = "AKIACANARY0123456789", "canary-secret-0123456789abcdef", "canary-session-token-0123456789"
	echo := func(status int, stream bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			k := r.Header.Get("Authorization") + " " + r.Header.Get("X-Amz-Security-Token")
			if strings.HasPrefix(k, "AWS4-") {
				k += " " + secret // never on the wire; scrubbed all the same
			}
			q, _ := json.Marshal("you sent " + k)
			w.Header().Set("X-Amzn-Requestid", "req-"+k)
			if !stream {
				w.Header().Set("X-Amzn-Errortype", "ThrottlingException:"+k)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				fmt.Fprintf(w, `{"message":%s}`, q)
				return
			}
			esHandler(bytes.Join([][]byte{
				esMessage(t, "event", "contentBlockDelta", `{"delta":{"text":`+string(q)+`}}`),
				esMessage(t, "exception", "throttlingException", `{"message":`+string(q)+`}`),
			}, nil), "X-Amzn-Requestid", "req-"+k)(w, r)
		}
	}
	for _, tc := range []struct {
		name   string
		status int
		stream bool
		bearer bool
	}{{"429 sigv4", 429, false, false}, {"429 bearer", 429, false, true}, {"exception sigv4", 200, true, false}, {"exception bearer", 200, true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			c, ep := serve(t, "bedrock", echo(tc.status, tc.stream))
			ep.Key = ""
			ep.AWS = NewAWSAuth(keyID, secret, token)
			if tc.bearer {
				ep.Key = testKey
			}
			res, deltas := doReq(c, ep, "m")
			if res.Err == nil {
				t.Fatal("no error")
			}
			out := strings.Join([]string{fmt.Sprintf("%+v", res), fmt.Sprintf("%+v", *res.Err), res.Err.Error(), strings.Join(deltas, "")}, "\n")
			if b, err := json.Marshal(res); err == nil {
				out += string(b)
			}
			for _, s := range []string{keyID, secret, token, testKey} {
				if strings.Contains(out, s) {
					t.Errorf("%q leaked:\n%s", s, out)
				}
			}
			if !strings.Contains(out, redacted) {
				t.Errorf("nothing redacted: the echo did not arrive?\n%s", out)
			}
		})
	}
}

// FuzzBedrockFrames feeds arbitrary bytes to the event-stream framing and
// the dialect's decoder: no panic, and a success only with the end signal.
func FuzzBedrockFrames(f *testing.F) {
	f.Add(fixture(f, "bedrock/conversestream-text-constructed.eventstream"))
	f.Add(fixture(f, "bedrock/conversestream-throttling-exception-constructed.eventstream"))
	f.Add(esMessage(f, "error", "X", "y"))
	f.Add([]byte{0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		res := decodeBytes("bedrock", "application/vnd.amazon.eventstream", "", body)
		if res.Err == nil && !bytes.Contains(body, []byte("metadata")) {
			t.Fatalf("success without metadata: %+v", res)
		}
		if res.Err != nil && res.Err.Class == "" {
			t.Fatalf("an error without a class: %+v", res.Err)
		}
		for typ, data := range map[string]string{"exception:" + string(body): string(body), "contentBlockDelta": string(body), "error:x": string(body)} {
			(&bedrockDecoder{}).handle(typ, data)
		}
		var b ErrorBody
		bedrockErrorBody(http.Header{"X-Amzn-Errortype": {string(body)}}, body, &b)
		_ = bedrockCode(string(body))
	})
}

// TestBedrockCurl: copied as curl, a SigV4 endpoint is curl's own signing
// with the AWS variables as references, a Bedrock API key a bearer
// reference; neither carries a credential or a signature.
func TestBedrockCurl(t *testing.T) {
	req := Request{Target: Target{Provider: "bedrock", Model: "eu-west-1/anthropic.claude-haiku-5-5-v1:0"}, Prompt: "hi"}
	cmd, err := Curl(Endpoint{Provider: "bedrock", AWS: NewAWSAuth("AKIDEXAMPLE", "secret-example", "tok-example")}, req, "$AWS_BEARER_TOKEN_BEDROCK")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"https://bedrock-runtime.eu-west-1.amazonaws.com/model/anthropic.claude-haiku-5-5-v1:0/converse-stream",
		"--aws-sigv4 'aws:amz:eu-west-1:bedrock'", `--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"`, `${AWS_SESSION_TOKEN:+-H "X-Amz-Security-Token: $AWS_SESSION_TOKEN"}`} {
		if !strings.Contains(cmd, want) {
			t.Errorf("no %s in\n%s", want, cmd)
		}
	}
	for _, bad := range []string{"AKIDEXAMPLE", "secret-example", "tok-example", "Signature=", "Bearer"} {
		if strings.Contains(cmd, bad) {
			t.Errorf("%s in\n%s", bad, cmd)
		}
	}
	cmd, err = Curl(Endpoint{Provider: "bedrock", Key: "ABSK-secret-key"}, req, "$AWS_BEARER_TOKEN_BEDROCK")
	if err != nil || !strings.Contains(cmd, `"Authorization: Bearer $AWS_BEARER_TOKEN_BEDROCK"`) || strings.Contains(cmd, "ABSK-secret") || strings.Contains(cmd, "aws-sigv4") {
		t.Errorf("bearer: %v\n%s", err, cmd)
	}
}
