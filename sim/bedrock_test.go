package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/limitscope/limitscope/stream"
)

const bedrockModel = "anthropic.claude-haiku-5-5-v1:0"

// bedrockSDKSim serves a fresh simulator (plain HTTP, or TLS for bearer
// tokens, which the SDK refuses to send in the clear) and records the
// request ids it sent and the requests it saw.
type bedrockSDKSim struct {
	s   *Server
	ts  *httptest.Server
	mu  sync.Mutex
	ids []string
}

func newBedrockSDKSim(t *testing.T, tls bool) *bedrockSDKSim {
	t.Helper()
	s, err := New(Options{TokensPerSecond: 1e9, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	b := &bedrockSDKSim{s: s}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeHTTP(&idRecorder{ResponseWriter: w, b: b}, r)
	})
	if tls {
		b.ts = httptest.NewTLSServer(h)
	} else {
		b.ts = httptest.NewServer(h)
	}
	t.Cleanup(func() {
		s.Close()
		b.ts.Close()
	})
	return b
}

// idRecorder notes each response's request id as its headers go out.
type idRecorder struct {
	http.ResponseWriter
	b *bedrockSDKSim
}

func (w *idRecorder) WriteHeader(code int) {
	w.b.mu.Lock()
	w.b.ids = append(w.b.ids, w.Header().Get("x-amzn-RequestId"))
	w.b.mu.Unlock()
	w.ResponseWriter.WriteHeader(code)
}

func (w *idRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (b *bedrockSDKSim) requests() ([]string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.ids...), len(b.ids)
}

// client is the official bedrockruntime client pointed at the simulator,
// its retries off (so each call is one request), signing with creds.
func (b *bedrockSDKSim) client(creds aws.CredentialsProvider, region string) *bedrockruntime.Client {
	hc := &http.Client{Transport: ownBody{b.ts.Client().Transport}}
	return bedrockruntime.NewFromConfig(aws.Config{Region: region, Credentials: creds, HTTPClient: hc}, func(o *bedrockruntime.Options) {
		o.BaseEndpoint = aws.String(b.ts.URL + "/bedrock/" + region)
		o.Retryer = aws.NopRetryer{}
	})
}

// ownBody hands the transport a copy of each request's body that only it
// closes. The SDK closes the body it passed once the response has begun;
// when the simulator answers at once, net/http's write loop may still be
// about to read the body's end, gets an error, and closes the connection
// under the stream being read ("use of closed network connection", about
// one run in thirty). The bytes sent are the same (the signature covers
// them).
// (The SDK's body is smithy-go's safeWriteToReadCloser: once closed, its
// WriteTo answers io.EOF, which io.Copy reports as an error, in smithy-go
// v1.28.9, the newest.)
type ownBody struct{ next http.RoundTripper }

func (o ownBody) RoundTrip(req *http.Request) (*http.Response, error) {
	req, err := copyBody(req)
	if err != nil {
		return nil, err
	}
	return o.next.RoundTrip(req)
}

// ownBodyClient is ownBody for an aws.HTTPClient, such as the one
// config.LoadDefaultConfig builds from the environment.
type ownBodyClient struct{ next aws.HTTPClient }

func (o ownBodyClient) Do(req *http.Request) (*http.Response, error) {
	req, err := copyBody(req)
	if err != nil {
		return nil, err
	}
	return o.next.Do(req)
}

// copyBody gives req a body of its own, read from (and closing) the one
// it had.
func copyBody(req *http.Request) (*http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	data, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("copy the request body: %w", err)
	}
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(bytes.NewReader(data))
	req.ContentLength = int64(len(data))
	return req, nil
}

func converseInput() *bedrockruntime.ConverseStreamInput {
	return &bedrockruntime.ConverseStreamInput{
		ModelId: aws.String(bedrockModel),
		Messages: []types.Message{{Role: types.ConversationRoleUser,
			Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "hello there"}}}},
		InferenceConfig: &types.InferenceConfiguration{MaxTokens: aws.Int32(256)},
	}
}

// drain reads a ConverseStream to its end: the text, the stop reason, the
// usage, and the stream's error.
func drain(out *bedrockruntime.ConverseStreamOutput) (text, stop string, usage *types.TokenUsage, err error) {
	es := out.GetStream()
	defer es.Close()
	var b strings.Builder
	for ev := range es.Events() {
		switch v := ev.(type) {
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			if d, ok := v.Value.Delta.(*types.ContentBlockDeltaMemberText); ok {
				b.WriteString(d.Value)
			}
		case *types.ConverseStreamOutputMemberMessageStop:
			stop = string(v.Value.StopReason)
		case *types.ConverseStreamOutputMemberMetadata:
			usage = v.Value.Usage
		}
	}
	return b.String(), stop, usage, es.Err()
}

var simCreds = credentials.NewStaticCredentialsProvider(FakeAWSAccessKeyID, FakeAWSSecretAccessKey, "")

// TestBedrockSDKOracle: aws-sdk-go-v2's bedrockruntime ConverseStream
// client, SigV4-signed with the simulated credentials, decodes the
// simulated event stream, and surfaces each simulated exception, before
// the stream (an HTTP error) or inside it (an exception message after
// HTTP 200), as its own typed error carrying the request id the simulator
// sent.
func TestBedrockSDKOracle(t *testing.T) {
	cases := []struct {
		name  string
		fault *Fault
		want  any // a pointer to the typed error errors.As must find; nil: success
		mid   bool
	}{
		{"success", nil, nil, false},
		{"429 ThrottlingException", &Fault{Provider: "bedrock", Kind: FaultRateLimit, RetryAfter: time.Second}, new(*types.ThrottlingException), false},
		{"429 daily ThrottlingException", &Fault{Provider: "bedrock", Kind: FaultDailyQuota}, new(*types.ThrottlingException), false},
		{"503 ServiceUnavailableException", &Fault{Provider: "bedrock", Kind: FaultOverload}, new(*types.ServiceUnavailableException), false},
		{"429 ModelNotReadyException", &Fault{Provider: "bedrock", Kind: FaultOverload, Code: "model_not_ready"}, new(*types.ModelNotReadyException), false},
		{"400 ServiceQuotaExceededException", &Fault{Provider: "bedrock", Kind: FaultSpendCap}, new(*types.ServiceQuotaExceededException), false},
		{"400 ValidationException", &Fault{Provider: "bedrock", Kind: FaultContextLength}, new(*types.ValidationException), false},
		{"500 InternalServerException", &Fault{Provider: "bedrock", Kind: FaultServerError}, new(*types.InternalServerException), false},
		{"in-stream ModelStreamErrorException", &Fault{Provider: "bedrock", Kind: FaultMidStream}, new(*types.ModelStreamErrorException), true},
		{"in-stream overloaded ModelStreamErrorException", &Fault{Provider: "bedrock", Kind: FaultMidStream, Code: "overloaded"}, new(*types.ModelStreamErrorException), true},
		{"in-stream throttlingException", &Fault{Provider: "bedrock", Kind: FaultMidStream, Code: "throttling"}, new(*types.ThrottlingException), true},
		{"in-stream serviceUnavailableException", &Fault{Provider: "bedrock", Kind: FaultMidStream, Code: "service_unavailable"}, new(*types.ServiceUnavailableException), true},
		{"in-stream validationException", &Fault{Provider: "bedrock", Kind: FaultMidStream, Code: "validation"}, new(*types.ValidationException), true},
		{"in-stream internalServerException", &Fault{Provider: "bedrock", Kind: FaultMidStream, Code: "internal"}, new(*types.InternalServerException), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBedrockSDKSim(t, false)
			if tc.fault != nil {
				if err := b.s.Inject(*tc.fault); err != nil {
					t.Fatal(err)
				}
			}
			ctx := sdkCtx(t)
			out, err := b.client(simCreds, "us-west-2").ConverseStream(ctx, converseInput())
			ids, n := b.requests()
			if n != 1 || ids[0] == "" {
				t.Fatalf("%d requests, ids %q; want one, with a request id", n, ids)
			}
			if tc.want == nil || tc.mid {
				if err != nil {
					t.Fatalf("ConverseStream: %v", err)
				}
				if got, _ := awsmiddleware.GetRequestIDMetadata(out.ResultMetadata); got != ids[0] {
					t.Errorf("request id %q, want %q", got, ids[0])
				}
				text, stop, usage, serr := drain(out)
				if tc.want == nil {
					if serr != nil || text == "" || stop != "end_turn" || usage == nil || aws.ToInt32(usage.OutputTokens) != int32(tokensOf(text)) {
						t.Fatalf("err %v, stop %q, usage %+v, text %q", serr, stop, usage, text)
					}
					return
				}
				if text == "" {
					t.Error("no text before the exception")
				}
				err = serr
			}
			if err == nil || !errors.As(err, tc.want) {
				t.Fatalf("error %T %v, want %T", err, err, tc.want)
			}
			if !tc.mid {
				var re *awshttp.ResponseError
				if !errors.As(err, &re) || re.ServiceRequestID() != ids[0] {
					t.Errorf("error %v carries request id %q, want %q", err, func() string {
						if re != nil {
							return re.ServiceRequestID()
						}
						return ""
					}(), ids[0])
				}
			}
		})
	}
}

// TestBedrockSDKBearerToken: the SDK with AWS_BEARER_TOKEN_BEDROCK set
// sends it as a bearer token (over TLS, as it insists); the simulator takes
// FakeKey and answers another token with the typed AccessDeniedException.
func TestBedrockSDKBearerToken(t *testing.T) {
	for _, tc := range []struct {
		token string
		ok    bool
	}{{FakeKey, true}, {"ABSKnot-the-simulated-key", false}} {
		b := newBedrockSDKSim(t, true)
		t.Setenv("AWS_BEARER_TOKEN_BEDROCK", tc.token)
		out, err := b.client(simCreds, "us-east-1").ConverseStream(sdkCtx(t), converseInput())
		if tc.ok {
			if err != nil {
				t.Fatalf("bearer %v", err)
			}
			if text, _, _, serr := drain(out); serr != nil || text == "" {
				t.Fatalf("bearer stream: %v %q", serr, text)
			}
			continue
		}
		var ad *types.AccessDeniedException
		if !errors.As(err, &ad) {
			t.Fatalf("wrong token: %T %v, want AccessDeniedException", err, err)
		}
	}
}

// TestBedrockSigV4Mistakes: a signature made with the wrong secret, for
// the wrong Region or service, or over another body is the service's 403,
// through the stream client as through the SDK; the right one passes.
func TestBedrockSigV4Mistakes(t *testing.T) {
	_, ts, _ := newTestSim(t, Options{Seed: 5})
	do := func(auth *stream.AWSAuth, model string) stream.Result {
		c := &stream.Client{}
		ep := stream.Endpoint{Provider: "bedrock", BaseURL: BaseURL(ts.URL, "bedrock"), AWS: auth}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c.Do(ctx, ep, stream.Request{Target: stream.Target{Provider: "bedrock", Model: model}, Prompt: "hi", MaxTokens: 32}, nil)
	}
	if r := do(FakeAWSAuth(), "eu-central-1/"+bedrockModel); r.Err != nil || r.Text == "" {
		t.Fatalf("the right signature: %v", r.Err)
	}
	if r := do(stream.NewAWSAuth(FakeAWSAccessKeyID, FakeAWSSecretAccessKey, FakeAWSSessionToken), bedrockModel); r.Err != nil {
		t.Fatalf("with a session token: %v", r.Err)
	}
	for _, tc := range []struct {
		name string
		auth *stream.AWSAuth
		code string
	}{
		{"wrong secret", stream.NewAWSAuth(FakeAWSAccessKeyID, "not-the-secret", ""), "InvalidSignatureException"},
		{"unknown key id", stream.NewAWSAuth("AKIAUNKNOWN", FakeAWSSecretAccessKey, ""), "UnrecognizedClientException"},
		{"wrong session token", stream.NewAWSAuth(FakeAWSAccessKeyID, FakeAWSSecretAccessKey, "other-token"), "UnrecognizedClientException"},
		{"no credentials", nil, "MissingAuthenticationTokenException"},
	} {
		r := do(tc.auth, bedrockModel)
		if r.Err == nil || r.Err.Status != 403 || r.Err.Code != tc.code || r.Err.Class != stream.ClassCaller || r.Err.RequestID == "" {
			t.Errorf("%s: %+v, want a 403 %s (caller) with a request id", tc.name, r.Err, tc.code)
		}
		if r.Err != nil && strings.Contains(r.Err.Error(), FakeAWSSecretAccessKey) {
			t.Errorf("%s: the secret in %q", tc.name, r.Err)
		}
	}

	// The signature covers the body, the Region and the service.
	sign := func(body, region, service string) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/bedrock/us-east-1/model/anthropic.claude-haiku-5-5-v1:0/converse-stream", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		creds, _ := simCreds.Retrieve(context.Background())
		sum := sha256Hex(body)
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, sum, service, region, time.Now()); err != nil {
			t.Fatal(err)
		}
		return req
	}
	body := `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`
	for _, tc := range []struct {
		name   string
		req    *http.Request
		status int
	}{
		{"right", sign(body, "us-east-1", "bedrock"), 200},
		{"another Region than the URL's", sign(body, "us-west-2", "bedrock"), 403},
		{"another service", sign(body, "us-east-1", "s3"), 403},
	} {
		resp, err := http.DefaultClient.Do(tc.req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
	}
	tampered := sign(body, "us-east-1", "bedrock")
	other := strings.Replace(body, "hi", "ho", 1)
	tampered.Body = readCloser(other)
	resp, err := http.DefaultClient.Do(tampered)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.HasPrefix(resp.Header.Get("x-amzn-ErrorType"), "InvalidSignatureException") {
		t.Errorf("another body under the signature: %d %s, want 403 InvalidSignatureException", resp.StatusCode, resp.Header.Get("x-amzn-ErrorType"))
	}
}

// TestBedrockStreamClasses: the stream client reads each simulated Bedrock
// failure as its class: a per-minute throttle with its x-amz-retry-after
// (or Retry-After) delay, the daily throttle as a per-day quota of the
// target, overloads, exceptions after HTTP 200 and cuts.
func TestBedrockStreamClasses(t *testing.T) {
	cases := []struct {
		fault   Fault
		class   stream.Class
		code    string
		mid     bool
		delay   time.Duration
		source  stream.DelaySource
		scope   stream.Scope
		partial bool
	}{
		{Fault{Kind: FaultRateLimit, RetryAfter: 1500 * time.Millisecond}, stream.ClassRateLimit, "ThrottlingException", false, 1500 * time.Millisecond, stream.SourceRetryAfterMs, "", false},
		{Fault{Kind: FaultRateLimit, RetryAfter: 3 * time.Second, Code: "retry_after"}, stream.ClassRateLimit, "ThrottlingException", false, 3 * time.Second, stream.SourceRetryAfter, "", false},
		{Fault{Kind: FaultDailyQuota}, stream.ClassQuota, "ThrottlingException", false, 0, "", stream.ScopeTarget, false},
		{Fault{Kind: FaultSpendCap}, stream.ClassQuota, "ServiceQuotaExceededException", false, 0, "", stream.ScopeTarget, false},
		{Fault{Kind: FaultOverload}, stream.ClassOverload, "ServiceUnavailableException", false, 0, "", "", false},
		{Fault{Kind: FaultOverload, Code: "529"}, stream.ClassOverload, "", false, 0, "", "", false},
		{Fault{Kind: FaultOverload, Code: "model_not_ready"}, stream.ClassOverload, "ModelNotReadyException", false, 0, "", "", false},
		{Fault{Kind: FaultContextLength}, stream.ClassCaller, "ValidationException", false, 0, "", "", false},
		{Fault{Kind: FaultServerError}, stream.ClassServer, "InternalServerException", false, 0, "", "", false},
		{Fault{Kind: FaultMidStream}, stream.ClassServer, "ModelStreamErrorException", true, 0, "", "", true},
		{Fault{Kind: FaultMidStream, Code: "overloaded"}, stream.ClassOverload, "ModelStreamErrorException", true, 0, "", "", true},
		{Fault{Kind: FaultMidStream, Code: "throttling"}, stream.ClassRateLimit, "ThrottlingException", true, 0, "", "", true},
		{Fault{Kind: FaultMidStream, Code: "service_unavailable"}, stream.ClassOverload, "ServiceUnavailableException", true, 0, "", "", true},
		{Fault{Kind: FaultMidStream, Code: "validation"}, stream.ClassCaller, "ValidationException", true, 0, "", "", true},
		{Fault{Kind: FaultMidStream, Code: "internal"}, stream.ClassServer, "InternalServerException", true, 0, "", "", true},
		{Fault{Kind: FaultMidStream, Code: "error"}, stream.ClassServer, "InternalFailure", true, 0, "", "", true},
		{Fault{Kind: FaultCut}, stream.ClassConnection, "", true, 0, "", "", true},
		{Fault{Kind: FaultCut, Code: "clean"}, stream.ClassConnection, "", true, 0, "", "", true},
		{Fault{Kind: FaultCut, Code: "frame"}, stream.ClassConnection, "", true, 0, "", "", true},
		{Fault{Kind: FaultCut, Code: "reset"}, stream.ClassConnection, "", true, 0, "", "", true},
	}
	for _, tc := range cases {
		name := tc.fault.Kind + "/" + tc.fault.Code
		t.Run(name, func(t *testing.T) {
			s, ts, _ := newTestSim(t, Options{Seed: 11})
			tc.fault.Provider = "bedrock"
			if err := s.Inject(tc.fault); err != nil {
				t.Fatal(err)
			}
			r := send(t, ts, "bedrock", modelFor("bedrock"), stream.Options{})
			e := r.Err
			if e == nil {
				t.Fatalf("no error; text %q", r.Text)
			}
			if e.Class != tc.class || e.Code != tc.code || e.MidStream != tc.mid || e.Scope != tc.scope {
				t.Errorf("%+v, want class %s code %q mid %v scope %q", e, tc.class, tc.code, tc.mid, tc.scope)
			}
			if e.Delay != tc.delay || e.DelaySource != tc.source {
				t.Errorf("delay %s from %q, want %s from %q", e.Delay, e.DelaySource, tc.delay, tc.source)
			}
			if tc.partial != (r.Text != "") {
				t.Errorf("partial text %q", r.Text)
			}
			if e.RequestID == "" && tc.fault.Code != "reset" {
				t.Error("no request id")
			}
		})
	}
}

func sha256Hex(s string) string { return hexSHA256([]byte(s)) }

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

func readCloser(s string) nopCloser { return nopCloser{bytes.NewReader([]byte(s))} }

// TestBedrockThinkingPhaseSDKOracle: with a thinking phase (--answer
// think), the official bedrockruntime client reads a reasoningContent block
// (its text, then its signature) at index 0 before the text block at
// index 1, as ConverseStream streams Claude's extended thinking.
func TestBedrockThinkingPhaseSDKOracle(t *testing.T) {
	s, err := New(Options{TokensPerSecond: 1e9, Seed: 3, Answer: "think:100t"})
	if err != nil {
		t.Fatal(err)
	}
	b := &bedrockSDKSim{s: s, ts: httptest.NewServer(s)}
	t.Cleanup(func() {
		s.Close()
		b.ts.Close()
	})
	out, err := b.client(simCreds, "us-east-1").ConverseStream(sdkCtx(t), converseInput())
	if err != nil {
		t.Fatal(err)
	}
	es := out.GetStream()
	defer es.Close()
	var reasoning, text strings.Builder
	var signature string
	for ev := range es.Events() {
		v, ok := ev.(*types.ConverseStreamOutputMemberContentBlockDelta)
		if !ok {
			continue
		}
		switch d := v.Value.Delta.(type) {
		case *types.ContentBlockDeltaMemberReasoningContent:
			if text.Len() > 0 || aws.ToInt32(v.Value.ContentBlockIndex) != 0 {
				t.Errorf("reasoning at index %d after %d bytes of text", aws.ToInt32(v.Value.ContentBlockIndex), text.Len())
			}
			switch r := d.Value.(type) {
			case *types.ReasoningContentBlockDeltaMemberText:
				reasoning.WriteString(r.Value)
			case *types.ReasoningContentBlockDeltaMemberSignature:
				signature = r.Value
			}
		case *types.ContentBlockDeltaMemberText:
			if aws.ToInt32(v.Value.ContentBlockIndex) != 1 {
				t.Errorf("text at index %d, want 1 after the reasoning block", aws.ToInt32(v.Value.ContentBlockIndex))
			}
			text.WriteString(d.Value)
		}
	}
	if err := es.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(reasoning.String(), "Let me think") || signature == "" || text.Len() == 0 {
		t.Errorf("reasoning %.40q signature %q text %.40q", reasoning.String(), signature, text.String())
	}
}
