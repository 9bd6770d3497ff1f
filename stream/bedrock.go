package stream

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream/eventstreamapi"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
)

// The Bedrock dialect: Amazon Bedrock's ConverseStream (POST
// {base}/model/{modelId}/converse-stream), picked with the "bedrock" row of
// the provider table (wire-formats-2.md, section 4).
//
// Targets: bedrock/[region/]modelId. A leading path segment shaped like an
// AWS Region ("us-west-2", "eu-central-1", "us-gov-west-1") names the Region
// ("bedrock/us-west-2/anthropic.claude-haiku-5-5-v1:0"); without one the
// Region is AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1
// (Endpoint.Region). Another Region is thus one more entry in a chain. The
// base URL may carry "{region}", replaced by the target's Region (the
// default, https://bedrock-runtime.{region}.amazonaws.com, does; so does
// the simulator's).
//
// Auth: a Bedrock API key (AWS_BEARER_TOKEN_BEDROCK, Endpoint.Key) is sent
// as Authorization: Bearer, as the AWS SDKs do when it is set; otherwise the
// request is signed with SigV4 (signing name "bedrock", the target's Region)
// by the AWS SDK's own signer, with credentials from the SDK's chain
// (config.LoadDefaultConfig: the environment, shared config and credentials
// files and their profiles, SSO, web identity, containers; Endpoint.AWS).
// The SDK is used for signing, credentials and framing only: its retryer is
// never involved (limitscope is the one retry layer). Nothing here logs a
// signature or a credential.
//
// The answer is a binary application/vnd.amazon.eventstream stream, framed
// and checked (prelude and message CRCs) by the AWS SDK's eventstream
// decoder. Event messages (:message-type event) name their member in
// :event-type: contentBlockDelta's delta.text is the text (toolUse and
// reasoningContent deltas are thinking, toolUse progress only); messageStop carries the stop
// reason; metadata the usage. A stream is complete only at metadata after
// messageStop: the SDK itself reports a stream cut anywhere as a clean end
// (wire-formats-2.md 4.3), so EOF before both is a cut (class connection).
//
// Exceptions after HTTP 200 (:message-type exception, :exception-type in
// lowerCamel or UpperCamel, payload {"message"}) and error messages
// (:message-type error, :error-code, :error-message) are errors inside the
// stream. HTTP errors take their code from x-amzn-ErrorType (the part before
// ':'), else the body's __type or code (after '#'), and the message from
// message or Message. Classes (bedrockClassify, ahead of the shared table):
// ThrottlingException is a rate limit, but naming tokens or requests per
// day it is a per-day quota of the target; ServiceQuotaExceededException is
// a quota stop of the target (its model in its Region); ServiceUnavailable,
// ModelNotReady and a 529 are overloads (fail over: another model or
// Region); ModelStreamErrorException and ModelErrorException are server
// errors, or overloads when their originalStatusCode is 529 or 503;
// ModelTimeoutException and InternalServerException server errors;
// ValidationException, AccessDenied, ResourceNotFound and the signing
// errors the caller's. The server's delay is x-amz-retry-after
// (milliseconds) or Retry-After (ServerDelay); the request id is
// x-amzn-RequestId. Bedrock sends no rate-limit headers.
var bedrockDialect = &dialectSpec{
	name:            DialectBedrock,
	request:         bedrockRequest,
	newDecoder:      func() decoder { return &bedrockDecoder{} },
	codeOrder:       func(b ErrorBody) []string { return []string{b.Code, b.Type} },
	endSignal:       "messageStop and metadata",
	requestIDHeader: "X-Amzn-Requestid",
	accept:          "application/vnd.amazon.eventstream",
	frames:          bedrockFrames,
	baseURL:         bedrockBaseURL,
	sign:            bedrockSign,
	errorBody:       bedrockErrorBody,
	classRows:       bedrockClassify,
}

// BedrockDefaultRegion is the Region of a Bedrock target that names none
// when neither AWS_REGION nor AWS_DEFAULT_REGION is set.
const BedrockDefaultRegion = "us-east-1"

// regionRE matches an AWS Region name: us-west-2, eu-central-1,
// ap-southeast-3, us-gov-west-1, cn-north-1.
var regionRE = regexp.MustCompile(`^[a-z]{2}(?:-gov|-iso[a-z]?)?-[a-z]+-[0-9]{1,2}$`)

// BedrockModel splits a Bedrock target's model into its Region and the
// model id: "us-west-2/anthropic.claude-haiku-5-5-v1:0" is Region
// us-west-2; a model without a leading Region segment is in def (else
// BedrockDefaultRegion).
func BedrockModel(model, def string) (region, id string) {
	if r, rest, ok := strings.Cut(model, "/"); ok && regionRE.MatchString(r) && rest != "" {
		return r, rest
	}
	if def == "" {
		def = BedrockDefaultRegion
	}
	return def, model
}

// WithRegion spells a Bedrock model with its Region in front, so that a
// screen shows where it runs: the Region it names, else def (else
// BedrockDefaultRegion).
func WithRegion(model, def string) string {
	region, id := BedrockModel(model, def)
	return region + "/" + id
}

// bedrockBaseURL puts the target's Region into a base URL's "{region}".
func bedrockBaseURL(base string, ep Endpoint, req Request) string {
	region, _ := BedrockModel(req.Target.Model, ep.Region)
	return strings.ReplaceAll(base, "{region}", region)
}

// bedrockRequest builds a ConverseStream body: the conversation as
// messages of text blocks, the system prompt as a system block, the caps
// and sampling in inferenceConfig. A Bedrock API key is a bearer token.
func bedrockRequest(u *url.URL, _ *ProviderInfo, req Request, maxTokens int, key string) (map[string]any, http.Header) {
	_, id := BedrockModel(req.Target.Model, "")
	u.Path += "/model/" + id + "/converse-stream"
	var msgs []map[string]any
	for _, m := range req.turns() {
		msgs = append(msgs, map[string]any{"role": m.Role, "content": []map[string]string{{"text": m.Content}}})
	}
	inf := map[string]any{"maxTokens": maxTokens}
	if req.Sampling.Temperature != nil {
		inf["temperature"] = *req.Sampling.Temperature
	}
	if req.Sampling.TopP != nil {
		inf["topP"] = *req.Sampling.TopP
	}
	if len(req.Sampling.Stop) > 0 {
		inf["stopSequences"] = req.Sampling.Stop
	}
	body := map[string]any{"messages": msgs, "inferenceConfig": inf}
	if req.System != "" {
		body["system"] = []map[string]string{{"text": req.System}}
	}
	h := http.Header{}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	return body, h
}

// bedrockSign signs a request that carries no Bedrock API key with SigV4,
// by the AWS SDK's signer, for the target's Region and the row's signing
// name. Without credentials
// the request goes unsigned (the service's 403 says so).
func bedrockSign(ctx context.Context, hr *http.Request, body []byte, p *ProviderInfo, ep Endpoint, req Request, now time.Time) error {
	if ep.Key != "" {
		if hr.URL.Scheme != "https" && !loopbackHost(hr.URL.Hostname()) {
			return fmt.Errorf("%w: not sending the Bedrock API key in clear text to %s://%s (not a loopback address), as the AWS SDKs refuse to; use an https:// endpoint, or SigV4 credentials (unset %s)",
				ErrKeyOverPlainHTTP, hr.URL.Scheme, hr.URL.Host, firstOr(p.KeyEnv, "the API key"))
		}
		return nil
	}
	if ep.AWS == nil {
		return nil
	}
	creds, err := ep.AWS.retrieve(ctx)
	if err != nil {
		return fmt.Errorf("AWS credentials: %w", err)
	}
	region, _ := BedrockModel(req.Target.Model, ep.Region)
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(ctx, creds, hr, hex.EncodeToString(sum[:]), p.SigV4Service, region, now); err != nil {
		return fmt.Errorf("SigV4 signing: %w", err)
	}
	return nil
}

// ErrKeyOverPlainHTTP is the error of a request refused before it was sent:
// a Bedrock API key would have gone in clear text (http://) to a host that
// is not this machine.
var ErrKeyOverPlainHTTP = errors.New("refusing to send an API key over plain HTTP")

// loopbackHost reports whether host is this machine: "localhost" (or a
// name under it) or a loopback address.
func loopbackHost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.Unmap().IsLoopback()
}

func firstOr(list []string, def string) string {
	if len(list) > 0 {
		return list[0]
	}
	return def
}

// AWSAuth is a Bedrock endpoint's SigV4 credential source: the AWS SDK's
// credential chain, or fixed credentials (the simulator's). It never
// prints, logs or marshals a credential.
type AWSAuth struct {
	once  sync.Once
	p     aws.CredentialsProvider
	err   error
	chain bool
}

// NewAWSAuth returns fixed credentials (a session token may be empty).
func NewAWSAuth(accessKeyID, secretAccessKey, sessionToken string) *AWSAuth {
	a := &AWSAuth{p: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: accessKeyID, SecretAccessKey: secretAccessKey, SessionToken: sessionToken, Source: "limitscope"}, nil
	})}
	a.once.Do(func() {})
	return a
}

// AWSCredentialChain returns the AWS SDK's default credential chain
// (config.LoadDefaultConfig), loaded at the first signing, so that a
// session that never calls Bedrock never reads a profile or asks SSO.
func AWSCredentialChain() *AWSAuth { return &AWSAuth{chain: true} }

func (a *AWSAuth) retrieve(ctx context.Context) (aws.Credentials, error) {
	a.once.Do(func() {
		if !a.chain {
			return
		}
		// The SDK's retryer is not used: only its credentials are.
		cfg, err := config.LoadDefaultConfig(ctx, config.WithRetryMaxAttempts(1))
		if err != nil {
			a.err = err
			return
		}
		a.p = aws.NewCredentialsCache(cfg.Credentials)
	})
	if a.err != nil {
		return aws.Credentials{}, a.err
	}
	if a.p == nil {
		return aws.Credentials{}, errors.New("no AWS credentials")
	}
	return a.p.Retrieve(ctx)
}

// awsSecrets are the AWS credentials a request to ep is signed with (key
// id, secret, session token), for the attempt's redactor; none when it
// sends a Bedrock API key or has no credentials. (The credentials are
// retrieved once and cached, so signing reuses them.)
func (ep Endpoint) awsSecrets(ctx context.Context) []string {
	if ep.Key != "" || ep.AWS == nil {
		return nil
	}
	c, err := ep.AWS.retrieve(ctx)
	if err != nil {
		return nil
	}
	return []string{c.AccessKeyID, c.SecretAccessKey, c.SessionToken}
}

// String returns a fixed placeholder, never a credential.
func (*AWSAuth) String() string { return "[aws credentials]" }

// GoString returns a fixed placeholder, never a credential.
func (*AWSAuth) GoString() string { return "[aws credentials]" }

// MarshalJSON returns a fixed placeholder, never a credential.
func (*AWSAuth) MarshalJSON() ([]byte, error) { return []byte(`"[aws credentials]"`), nil }

// awsCredentialEnv are the variables by which the AWS SDK's chain finds
// credentials other than a Bedrock API key.
var awsCredentialEnv = []string{"AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
	"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"}

// awsOtherEnv are the other AWS variables limitscope reads or must never
// print (tests clear them with AllEnvVars).
var awsOtherEnv = []string{"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
	"AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"}

// resolveAWS fills a Bedrock endpoint that has no API key from the AWS
// environment: the default Region, and the SDK's credential chain when
// something points it at credentials (a variable of awsCredentialEnv, or a
// shared config or credentials file). It reports whether it found any.
func resolveAWS(ep *Endpoint, getenv func(string) string) bool {
	ep.Region = getenv("AWS_REGION")
	if ep.Region == "" {
		ep.Region = getenv("AWS_DEFAULT_REGION")
	}
	if ep.Key != "" {
		return true
	}
	found := false
	for _, v := range awsCredentialEnv {
		if getenv(v) != "" {
			found = true
		}
	}
	if !found {
		files := []string{getenv("AWS_CONFIG_FILE"), getenv("AWS_SHARED_CREDENTIALS_FILE")}
		if home := getenv("HOME"); home != "" {
			files = append(files, filepath.Join(home, ".aws", "config"), filepath.Join(home, ".aws", "credentials"))
		}
		for _, f := range files {
			if st, err := os.Stat(f); f != "" && err == nil && st.Mode().IsRegular() {
				found = true
			}
		}
	}
	if found {
		ep.AWS = AWSCredentialChain()
	}
	return found
}

// bedrockFrames reads the event-stream messages with the AWS SDK's decoder
// (which checks both CRCs), refusing a message longer than maxEvent before
// reading it, and hands each on as a wireEvent: an event as its
// :event-type and JSON payload, an exception as "exception:"+its type and
// payload, an error message as "error:"+its code and its message.
func bedrockFrames(r io.Reader, maxEvent int) iter.Seq2[wireEvent, error] {
	return func(yield func(wireEvent, error) bool) {
		src := &noteErrReader{r: r}
		br := bufio.NewReaderSize(src, 16<<10)
		dec := eventstream.NewDecoder()
		var buf []byte
		for {
			pre, err := br.Peek(8)
			if err != nil {
				if !(errors.Is(err, io.EOF) && len(pre) == 0) {
					yield(wireEvent{}, frameReadErr(err, src.err))
				}
				return
			}
			total, hl := binary.BigEndian.Uint32(pre), binary.BigEndian.Uint32(pre[4:])
			if int64(total) > int64(maxEvent) {
				yield(wireEvent{}, fmt.Errorf("%w: an event-stream message of %d bytes", bufio.ErrTooLong, total))
				return
			}
			if total < 16 || hl > total-16 {
				yield(wireEvent{}, fmt.Errorf("%w: event-stream prelude: length %d, headers %d", errUndecodable, total, hl))
				return
			}
			msg, err := dec.Decode(br, buf[:0])
			if err != nil {
				yield(wireEvent{}, frameReadErr(err, src.err))
				return
			}
			buf = msg.Payload
			if !yield(bedrockEvent(msg), nil) {
				return
			}
		}
	}
}

// noteErrReader keeps the first error its reader returned.
type noteErrReader struct {
	r   io.Reader
	err error
}

func (n *noteErrReader) Read(p []byte) (int, error) {
	c, err := n.r.Read(p)
	if err != nil && n.err == nil {
		n.err = err
	}
	return c, err
}

// frameReadErr says what a failed message read means, by what the body's
// reader said (src): its end inside a message is a cut; its own error (a
// reset, a timeout, a size cap) is that error; with the reader fine, the
// bytes do not decode (CRC, lengths, headers).
func frameReadErr(err, src error) error {
	switch {
	case errors.Is(src, io.EOF), errors.Is(src, io.ErrUnexpectedEOF):
		return io.ErrUnexpectedEOF
	case src != nil:
		return src
	}
	return fmt.Errorf("%w: event-stream: %w", errUndecodable, err)
}

// headerString is a string header's value ("" when absent or another type).
func headerString(h eventstream.Headers, name string) string {
	if v, ok := h.Get(name).(eventstream.StringValue); ok {
		return string(v)
	}
	return ""
}

func bedrockEvent(msg eventstream.Message) wireEvent {
	switch headerString(msg.Headers, eventstreamapi.MessageTypeHeader) {
	case eventstreamapi.EventMessageType:
		return wireEvent{Type: headerString(msg.Headers, eventstreamapi.EventTypeHeader), Data: string(msg.Payload)}
	case eventstreamapi.ExceptionMessageType:
		return wireEvent{Type: "exception:" + headerString(msg.Headers, eventstreamapi.ExceptionTypeHeader), Data: string(msg.Payload)}
	case eventstreamapi.ErrorMessageType:
		return wireEvent{Type: "error:" + headerString(msg.Headers, eventstreamapi.ErrorCodeHeader), Data: headerString(msg.Headers, eventstreamapi.ErrorMessageHeader)}
	}
	return wireEvent{}
}

// bedrockStatus is the HTTP status of each modeled Bedrock exception (the
// service model's), by its lower-cased name.
var bedrockStatus = map[string]int{
	"validationexception":           400,
	"servicequotaexceededexception": 400,
	"accessdeniedexception":         403,
	"resourcenotfoundexception":     404,
	"modeltimeoutexception":         408,
	"modelerrorexception":           424,
	"modelstreamerrorexception":     424,
	"modelnotreadyexception":        429,
	"throttlingexception":           429,
	"internalserverexception":       500,
	"serviceunavailableexception":   503,
}

// bedrockCode is an exception name as the SDKs name its type: the part
// before ':' and after '#', with an upper-case first letter
// ("throttlingException" -> "ThrottlingException").
func bedrockCode(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), ":")
	if i := strings.LastIndexByte(s, '#'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" {
		return ""
	}
	if c := s[0]; c >= 'a' && c <= 'z' {
		s = string(c-'a'+'A') + s[1:]
	}
	return s
}

// bedrockPayload is the part of an event's or exception's payload the
// decoder reads (one json.Unmarshal per message).
type bedrockPayload struct {
	Delta *struct {
		Text             fastText        `json:"text"`
		ToolUse          json.RawMessage `json:"toolUse"`
		ReasoningContent json.RawMessage `json:"reasoningContent"`
	} `json:"delta"`
	StopReason *string `json:"stopReason"`
	Usage      *struct {
		InputTokens  *float64 `json:"inputTokens"`
		OutputTokens *float64 `json:"outputTokens"`
	} `json:"usage"`
	Message            *string  `json:"message"`
	OriginalStatusCode *float64 `json:"originalStatusCode"`
	OriginalMessage    *string  `json:"originalMessage"`
}

// bedrockDecoder reads ConverseStream messages.
type bedrockDecoder struct {
	decoded
	stopped bool // messageStop seen
}

func (d *bedrockDecoder) handle(typ, data string) step {
	if name, ok := strings.CutPrefix(typ, "exception:"); ok {
		var p bedrockPayload
		_ = json.Unmarshal(bytesOf(data), &p)
		return step{err: bedrockException(name, &p, data), recognize: true}
	}
	if code, ok := strings.CutPrefix(typ, "error:"); ok {
		msg := strings.TrimSpace(data)
		if msg == "" {
			msg = "an error message inside the event stream"
		}
		return step{err: &ErrorBody{Found: true, Code: code, Message: msg}, recognize: true}
	}
	if typ == "" {
		return step{}
	}
	s := step{recognize: true}
	var p bedrockPayload
	if json.Unmarshal(bytesOf(data), &p) != nil {
		return s
	}
	switch typ {
	case "contentBlockDelta":
		if dl := p.Delta; dl != nil {
			if t := dl.Text.text(jsonString); t != "" {
				s.text, s.progress = t, true
			} else if !isNull(dl.ReasoningContent) {
				// A reasoning block's text, signature or redacted
				// content: the model is thinking.
				s.progress, s.thinking = true, true
			} else if !isNull(dl.ToolUse) {
				s.progress = true
			}
		}
	case "messageStop":
		d.stopped = true
		d.finish = fastString(p.StopReason)
		if d.finish == "" {
			d.finish = "end_turn"
		}
	case "metadata":
		if u := p.Usage; u != nil {
			in, okIn := fastInt(u.InputTokens)
			out, okOut := fastInt(u.OutputTokens)
			if okIn || okOut {
				d.usage = &Usage{InputTokens: in, OutputTokens: out}
			}
		}
		if d.stopped {
			s.finished, s.done = true, true
		}
	}
	return s
}

// bedrockException is an exception message's error: its code in the SDKs'
// spelling, its message, and as NumCode its modeled status (for a
// ModelStreamError with an originalStatusCode of 529 or 503, that one).
func bedrockException(name string, p *bedrockPayload, data string) *ErrorBody {
	b := &ErrorBody{Found: true, Code: bedrockCode(name), Message: fastString(p.Message)}
	if b.Message == "" {
		b.Message = fastString(p.OriginalMessage)
	}
	if b.Message == "" && strings.TrimSpace(data) != "" && p.Message == nil {
		b.Message = jsonText(json.RawMessage(data))
	}
	b.NumCode = bedrockStatus[strings.ToLower(b.Code)]
	if oc, ok := fastInt(p.OriginalStatusCode); ok && (oc == 529 || oc == 503) {
		b.NumCode = oc
	}
	return b
}

// bedrockErrorBody completes an HTTP error body the restJson1 way: the code
// from x-amzn-ErrorType, else __type or code; the message from message or
// Message; an originalStatusCode of 529 or 503 as NumCode.
func bedrockErrorBody(h http.Header, body []byte, b *ErrorBody) {
	var p struct {
		Type               string   `json:"__type"`
		Code               string   `json:"code"`
		Message            *string  `json:"message"`
		OriginalStatusCode *float64 `json:"originalStatusCode"`
	}
	_ = json.Unmarshal(body, &p)
	code := ""
	if h != nil {
		code = bedrockCode(h.Get("X-Amzn-Errortype"))
	}
	if code == "" {
		code = bedrockCode(p.Type)
	}
	if code == "" && b.Code == "" {
		code = bedrockCode(p.Code)
	}
	if code != "" {
		b.Code, b.Found = code, true
	}
	if b.Message == "" && p.Message != nil {
		b.Message = *p.Message
	}
	if oc, ok := fastInt(p.OriginalStatusCode); ok && (oc == 529 || oc == 503) {
		b.NumCode = oc
	}
}

// bedrockTooLongRE is Bedrock's "Input is too long for requested model."
var bedrockTooLongRE = regexp.MustCompile(`(?i)input is too long`)

// bedrockClassify is the Bedrock rows of the class table, checked before
// the shared ones (see the dialect's comment); false: the shared table
// decides by the status.
func bedrockClassify(_ *dialectSpec, _ int, b ErrorBody) (verdict, bool) {
	switch strings.ToLower(b.Code) {
	case "throttlingexception":
		if perDayMsgRE.MatchString(b.Message) {
			return verdict{class: ClassQuota, scope: ScopeTarget, perDay: true}, true
		}
		return verdict{class: ClassRateLimit}, true
	case "servicequotaexceededexception":
		return verdict{class: ClassQuota, scope: ScopeTarget}, true
	case "serviceunavailableexception", "modelnotreadyexception":
		return verdict{class: ClassOverload}, true
	case "modelstreamerrorexception", "modelerrorexception":
		if b.NumCode == 529 || b.NumCode == 503 {
			return verdict{class: ClassOverload}, true
		}
		return verdict{class: ClassServer}, true
	case "modeltimeoutexception", "internalserverexception", "internalfailure":
		return verdict{class: ClassServer}, true
	case "validationexception":
		if contextTooLongRE.MatchString(b.Message) || bedrockTooLongRE.MatchString(b.Message) {
			return verdict{class: ClassCaller, modelSpecific: true}, true
		}
		return verdict{class: ClassCaller}, true
	case "accessdeniedexception", "resourcenotfoundexception", "unrecognizedclientexception",
		"invalidsignatureexception", "incompletesignature", "missingauthenticationtokenexception",
		"expiredtokenexception", "invalidclienttokenid", "notauthorized", "requestexpired":
		return verdict{class: ClassCaller}, true
	}
	return verdict{}, false
}
