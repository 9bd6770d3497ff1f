package sim

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/limitscope/limitscope/internal/sanitize"
	"github.com/limitscope/limitscope/stream"
)

// The simulated AWS credentials: the only ones the bedrock provider's
// SigV4 check accepts. They are not secrets. A Bedrock API key (bearer
// token) is FakeKey.
const (
	FakeAWSAccessKeyID     = sanitize.SimulatorAWSKeyID
	FakeAWSSecretAccessKey = "sim-aws-secret-not-a-secret"
	// FakeAWSSessionToken is accepted too (temporary credentials); it may
	// also be left out.
	FakeAWSSessionToken = "sim-aws-session-token-not-a-secret"
	// FakeAWSRegion is the Region the banner prints (any Region signs).
	FakeAWSRegion = "us-east-1"
)

// FakeAWSAuth returns the simulated credentials as a stream credential
// source, for an endpoint that signs with SigV4.
func FakeAWSAuth() *stream.AWSAuth {
	return stream.NewAWSAuth(FakeAWSAccessKeyID, FakeAWSSecretAccessKey, "")
}

// bedrockDialect is Amazon Bedrock's Converse and ConverseStream (POST
// /bedrock/{region}/model/{modelId}/converse-stream, or .../converse for a
// plain JSON answer; wire-formats-2.md, section 4). The Region segment is
// optional (a client pointed at /bedrock signs for its own Region).
//
// Auth, checked as the service does: Authorization: Bearer FakeKey (a
// Bedrock API key), or a SigV4 AWS4-HMAC-SHA256 signature, verified by
// signing the request again with the AWS SDK's own signer and the simulated
// credentials (FakeAWSAccessKeyID, FakeAWSSecretAccessKey, optionally
// FakeAWSSessionToken): a wrong key id is UnrecognizedClientException, a
// wrong service or Region in the scope, a wrong body hash or a wrong
// signature InvalidSignatureException, none at all
// MissingAuthenticationTokenException, all 403. The signature's time is not
// checked against the clock.
//
// Answers: a binary application/vnd.amazon.eventstream stream (framed by
// the AWS SDK's eventstream encoder, both CRCs valid): messageStart,
// contentBlockDelta per piece, contentBlockStop, messageStop (end_turn, or
// max_tokens), metadata (usage, latency); request id in x-amzn-RequestId.
// HTTP errors are restJson1: x-amzn-ErrorType "Name:http://internal.amazon.com/coral/com.amazon.bedrock/",
// body {"message"}. Faults:
//   - rate_limit, slow_down: 429 ThrottlingException "Too many tokens, please
//     wait before trying again." ("Too many requests" for a requests limit),
//     with x-amz-retry-after in milliseconds (code "retry_after": Retry-After
//     in seconds instead);
//   - daily_quota: 429 ThrottlingException "Too many tokens per day, please
//     wait before trying again.", until the simulated day rolls over;
//   - spend_cap: 400 ServiceQuotaExceededException;
//   - overload, failover-demo: 503 ServiceUnavailableException (code "529":
//     a 529; code "model_not_ready": 429 ModelNotReadyException);
//   - server_error: 500 InternalServerException;
//   - context_length: 400 ValidationException "Input is too long for
//     requested model.";
//   - mid_stream, after some deltas, an exception message: "" a
//     modelStreamErrorException, "overloaded" the same with
//     originalStatusCode 529, "throttling" a throttlingException,
//     "service_unavailable", "validation", "internal" those exceptions,
//     "error" an error message (:error-code);
//   - cut: the stream stops after whole messages, without messageStop and
//     metadata (code "frame": inside a message; "reset", "clean" as for SSE).
type bedrockDialect struct{}

// bedrockRegionRE is an AWS Region name.
var bedrockRegionRE = regexp.MustCompile(`^[a-z]{2}(?:-gov|-iso[a-z]?)?-[a-z]+-[0-9]{1,2}$`)

// bedrockPath splits a path below /bedrock: the optional Region, the model
// id and the operation.
func bedrockPath(sub string) (region, model, op string, ok bool) {
	rest := strings.TrimPrefix(sub, "/")
	if r, after, found := strings.Cut(rest, "/"); found && bedrockRegionRE.MatchString(r) {
		region, rest = r, after
	}
	rest, found := strings.CutPrefix(rest, "model/")
	if !found {
		return "", "", "", false
	}
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return "", "", "", false
	}
	model, op = rest[:i], rest[i+1:]
	if op != "converse" && op != "converse-stream" {
		return "", "", "", false
	}
	return region, model, op, true
}

// awsError is a restJson1 error: the status, x-amzn-ErrorType and
// {"message"}.
func awsError(status int, name, message string) reply {
	r := jsonReply(status, mustJSON(obj{"message", message}))
	r.header.Set("x-amzn-ErrorType", name+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	return r
}

func (bedrockDialect) route(_ *provider, r *http.Request, sub string, req *simRequest) (reply, bool) {
	_, model, op, ok := bedrockPath(sub)
	if !ok || r.Method != http.MethodPost {
		return awsError(404, "UnknownOperationException", "The requested operation is not recognized by the service."), false
	}
	req.model, req.stream = model, op == "converse-stream"
	return reply{}, true
}

// sigV4Auth is a parsed AWS4-HMAC-SHA256 Authorization header.
type sigV4Auth struct {
	keyID, date, region, service string
	signedHeaders                []string
	signature                    string
}

func parseSigV4(h string) (sigV4Auth, bool) {
	var a sigV4Auth
	rest, ok := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
	if !ok {
		return a, false
	}
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			f := strings.Split(v, "/")
			if len(f) != 5 || f[4] != "aws4_request" {
				return a, false
			}
			a.keyID, a.date, a.region, a.service = f[0], f[1], f[2], f[3]
		case "SignedHeaders":
			a.signedHeaders = strings.Split(v, ";")
		case "Signature":
			a.signature = v
		}
	}
	return a, a.keyID != "" && a.signature != "" && len(a.signedHeaders) > 0
}

// auth checks a Bedrock API key or a SigV4 signature (see bedrockDialect).
// To verify a signature it reads the body, and puts it back for parse.
func (bedrockDialect) auth(p *provider, r *http.Request, _ string) (reply, bool) {
	authz := r.Header.Get("Authorization")
	if k, given := bearer(r); given && k != "" && !strings.HasPrefix(authz, "AWS4-") {
		if k != FakeKey {
			// [unsourced] the text of a bad Bedrock API key's 403.
			return awsError(403, "AccessDeniedException", "Authentication failed: Please make sure your API Key is valid."), false
		}
		return reply{}, true
	}
	if authz == "" {
		return awsError(403, "MissingAuthenticationTokenException", "Missing Authentication Token"), false
	}
	sig, ok := parseSigV4(authz)
	if !ok {
		return awsError(403, "IncompleteSignatureException", "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters."), false
	}
	if sig.keyID != FakeAWSAccessKeyID {
		return awsError(403, "UnrecognizedClientException", "The security token included in the request is invalid."), false
	}
	if tok := r.Header.Get("X-Amz-Security-Token"); tok != "" && tok != FakeAWSSessionToken {
		return awsError(403, "UnrecognizedClientException", "The security token included in the request is invalid."), false
	}
	if sig.service != p.sigV4Service {
		return awsError(403, "InvalidSignatureException", "Credential should be scoped to correct service: '"+p.sigV4Service+"'. "), false
	}
	region, _, _, _ := bedrockPath(strings.TrimPrefix(r.URL.Path, p.prefix))
	if region != "" && sig.region != region || !bedrockRegionRE.MatchString(sig.region) {
		return awsError(403, "InvalidSignatureException", "Credential should be scoped to a valid region. "), false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	if err != nil {
		return awsError(400, "ValidationException", "The request body could not be read."), false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !validSigV4(r, sig, body) {
		return awsError(403, "InvalidSignatureException", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."), false
	}
	return reply{}, true
}

// validSigV4 signs a copy of r (its signed headers only, at its X-Amz-Date)
// again with the simulated credentials, by the AWS SDK's signer, and
// compares the signatures.
func validSigV4(r *http.Request, sig sigV4Auth, body []byte) bool {
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || at.Format("20060102") != sig.date {
		return false
	}
	if !slices.Contains(sig.signedHeaders, "host") {
		// An HTTP/2 client (the AWS SDK for JavaScript) signs :authority
		// in place of host, which the Go signer cannot reproduce.
		want := sigV4Signature(r, sig, body, FakeAWSSecretAccessKey)
		return subtle.ConstantTimeCompare([]byte(want), []byte(sig.signature)) == 1
	}
	u := *r.URL
	u.Host, u.Scheme = r.Host, "http"
	cp := &http.Request{Method: r.Method, URL: &u, Host: r.Host, Header: http.Header{}}
	for _, name := range sig.signedHeaders {
		switch name {
		case "host":
		case "content-length":
			cp.ContentLength = r.ContentLength
		default:
			if vs := r.Header.Values(name); len(vs) > 0 {
				cp.Header[http.CanonicalHeaderKey(name)] = vs
			}
		}
	}
	creds := aws.Credentials{AccessKeyID: FakeAWSAccessKeyID, SecretAccessKey: FakeAWSSecretAccessKey}
	if r.Header.Get("X-Amz-Security-Token") != "" {
		creds.SessionToken = FakeAWSSessionToken
	}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, cp, hexSHA256(body), sig.service, sig.region, at); err != nil {
		return false
	}
	want, ok := parseSigV4(cp.Header.Get("Authorization"))
	return ok && strings.Join(want.signedHeaders, ";") == strings.Join(sig.signedHeaders, ";") &&
		subtle.ConstantTimeCompare([]byte(want.signature), []byte(sig.signature)) == 1
}

// sigV4Signature computes a request's AWS4-HMAC-SHA256 signature over the
// headers it names (SigV4's canonical request: the path escaped once more,
// the query sorted, each signed header's trimmed values, the body's hash),
// with the host, or HTTP/2's :authority, taken from r.Host.
func sigV4Signature(r *http.Request, sig sigV4Auth, body []byte, secret string) string {
	var c strings.Builder
	c.WriteString(r.Method + "\n" + sigV4Escape(r.URL.EscapedPath(), false) + "\n")
	q := r.URL.Query()
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var pairs []string
	for _, k := range keys {
		vs := slices.Clone(q[k])
		sort.Strings(vs)
		for _, v := range vs {
			pairs = append(pairs, sigV4Escape(k, true)+"="+sigV4Escape(v, true))
		}
	}
	c.WriteString(strings.Join(pairs, "&") + "\n")
	for _, name := range sig.signedHeaders {
		var vs []string
		switch name {
		case "host", ":authority":
			vs = []string{r.Host}
		case "content-length":
			vs = []string{strconv.FormatInt(r.ContentLength, 10)}
		default:
			vs = r.Header.Values(name)
		}
		for i, v := range vs {
			vs[i] = strings.Join(strings.Fields(v), " ")
		}
		c.WriteString(name + ":" + strings.Join(vs, ",") + "\n")
	}
	c.WriteString("\n" + strings.Join(sig.signedHeaders, ";") + "\n" + hexSHA256(body))
	scope := sig.date + "/" + sig.region + "/" + sig.service + "/aws4_request"
	toSign := "AWS4-HMAC-SHA256\n" + r.Header.Get("X-Amz-Date") + "\n" + scope + "\n" + hexSHA256([]byte(c.String()))
	key := []byte("AWS4" + secret)
	for _, part := range []string{sig.date, sig.region, sig.service, "aws4_request"} {
		key = hmacSHA256(key, part)
	}
	return hex.EncodeToString(hmacSHA256(key, toSign))
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// sigV4Escape percent-encodes all but the unreserved characters (and "/"
// unless sep).
func sigV4Escape(s string, sep bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch >= 'A' && ch <= 'Z' || ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '.' || ch == '_' || ch == '~' || (ch == '/' && !sep) {
			b.WriteByte(ch)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", ch)
	}
	return b.String()
}

func hexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func validationError(msg string) reply { return awsError(400, "ValidationException", msg) }

func (bedrockDialect) parse(_ *provider, body []byte, _ *http.Request, req *simRequest, _ string) (reply, bool) {
	type block struct {
		Text *string `json:"text"`
	}
	var in struct {
		Messages []struct {
			Role    string  `json:"role"`
			Content []block `json:"content"`
		} `json:"messages"`
		System          []block `json:"system"`
		InferenceConfig *struct {
			MaxTokens *int `json:"maxTokens"`
		} `json:"inferenceConfig"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return validationError("Malformed input request, please reformat your input and try again."), false
	}
	if in.Messages == nil {
		return validationError("1 validation error detected: Value null at 'messages' failed to satisfy constraint: Member must not be null"), false
	}
	if len(in.Messages) == 0 {
		return validationError("A conversation must start with a user message. Try again with a conversation that starts with a user message."), false
	}
	if in.Messages[0].Role != "user" {
		return validationError("A conversation must start with a user message. Try again with a conversation that starts with a user message."), false
	}
	if ic := in.InferenceConfig; ic != nil && ic.MaxTokens != nil {
		if *ic.MaxTokens < 1 {
			return validationError(fmt.Sprintf("1 validation error detected: Value '%d' at 'inferenceConfig.maxTokens' failed to satisfy constraint: Member must have value greater than or equal to 1", *ic.MaxTokens)), false
		}
		req.maxTokens = *ic.MaxTokens
	}
	var b strings.Builder
	req.inputTokens = 3
	for _, s := range in.System {
		if s.Text != nil {
			b.WriteString(*s.Text)
			b.WriteByte('\n')
			req.inputTokens += tokensOf(*s.Text)
		}
	}
	for _, m := range in.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return validationError(fmt.Sprintf("1 validation error detected: Value '%s' at 'messages.1.member.role' failed to satisfy constraint: Member must satisfy enum value set: [user, assistant]", m.Role)), false
		}
		for _, c := range m.Content {
			if c.Text != nil {
				b.WriteString(*c.Text)
				req.inputTokens += tokensOf(*c.Text)
			}
		}
		b.WriteByte('\n')
		req.inputTokens += 4
	}
	req.prompt = b.String()
	return reply{}, true
}

func bedrockStop(finish string) string {
	if finish == "length" {
		return "max_tokens"
	}
	return "end_turn"
}

func (a *answerPlan) bedrockUsage() obj {
	return obj{"inputTokens", a.req.inputTokens, "outputTokens", a.out, "totalTokens", a.req.inputTokens + a.out}
}

func (bedrockDialect) answer(a *answerPlan) (string, any) {
	return "application/json", obj{"output", obj{"message", obj{"role", "assistant", "content", []any{obj{"text", a.text}}}},
		"stopReason", bedrockStop(a.finish), "usage", a.bedrockUsage(), "metrics", obj{"latencyMs", 420}}
}

// esOut writes event-stream messages, each flushed.
type esOut struct {
	o   *sseOut
	enc *eventstream.Encoder
}

func (e *esOut) frame(headers eventstream.Headers, payload []byte) []byte {
	var b bytes.Buffer
	if err := e.enc.Encode(&b, eventstream.Message{Headers: headers, Payload: payload}); err != nil {
		return nil
	}
	return b.Bytes()
}

func (e *esOut) write(b []byte) { e.o.raw(string(b)) }

// eventFrame is one event message: :event-type, :content-type and
// :message-type event.
func (e *esOut) eventFrame(typ string, v any) []byte {
	var h eventstream.Headers
	h.Set(":event-type", eventstream.StringValue(typ))
	h.Set(":content-type", eventstream.StringValue("application/json"))
	h.Set(":message-type", eventstream.StringValue("event"))
	return e.frame(h, mustJSON(v))
}

func (e *esOut) event(typ string, v any) { e.write(e.eventFrame(typ, v)) }

func (e *esOut) exception(typ string, v any) {
	var h eventstream.Headers
	h.Set(":exception-type", eventstream.StringValue(typ))
	h.Set(":content-type", eventstream.StringValue("application/json"))
	h.Set(":message-type", eventstream.StringValue("exception"))
	e.write(e.frame(h, mustJSON(v)))
}

func (bedrockDialect) stream(s *Server, ctx context.Context, o *sseOut, a *answerPlan) {
	w := &esOut{o: o, enc: eventstream.NewEncoder()}
	o.start("application/vnd.amazon.eventstream")
	if !s.queue(ctx, o, a.pace) {
		return
	}
	w.event("messageStart", obj{"role", "assistant"})
	if !a.pace.sleep(ctx, s.closed, a.pace.firstToken) {
		return
	}
	idx := 0 // the text block's index: 1 after a reasoning block
	if len(a.thinking) > 0 {
		// Claude's extended thinking on Bedrock: a reasoningContent block
		// (ReasoningContentBlockDelta: text, then its signature) before
		// the text block.
		if !s.think(ctx, o, a, func(p string) {
			w.event("contentBlockDelta", obj{"delta", obj{"reasoningContent", obj{"text", p}}, "contentBlockIndex", 0})
		}) {
			return
		}
		w.event("contentBlockDelta", obj{"delta", obj{"reasoningContent", obj{"signature", a.thinkingSignature()}}, "contentBlockIndex", 0})
		w.event("contentBlockStop", obj{"contentBlockIndex", 0})
		idx = 1
	}
	pieces, _ := a.upToBreak(a.pieces)
	if !s.paced(ctx, o, a, pieces, func(p string) {
		w.event("contentBlockDelta", obj{"delta", obj{"text", p}, "contentBlockIndex", idx})
	}) {
		return
	}
	if a.d.kind == FaultCut && a.d.code == "frame" {
		// Half of the next message, then the connection ends.
		f := w.eventFrame("contentBlockStop", obj{"contentBlockIndex", idx})
		w.write(f[:len(f)/2])
		o.cut(false)
		return
	}
	if s.broke(ctx, o, a) {
		if a.d.kind == FaultMidStream {
			bedrockMidStream(w, a)
		}
		return
	}
	w.event("contentBlockStop", obj{"contentBlockIndex", idx})
	w.event("messageStop", obj{"stopReason", bedrockStop(a.finish)})
	w.event("metadata", a.bedrockMetadata())
}

// bedrockMidStream writes the exception (or error message) a mid_stream
// fault breaks the stream with, as its code picks (see bedrockDialect).
func bedrockMidStream(w *esOut, a *answerPlan) {
	switch a.d.code {
	case "throttling":
		w.exception("throttlingException", obj{"message", "Too many tokens, please wait before trying again."})
	case "service_unavailable":
		w.exception("serviceUnavailableException", obj{"message", "Bedrock is unable to process your request."})
	case "validation":
		w.exception("validationException", obj{"message", "The model returned the following errors: invalid request"})
	case "internal":
		w.exception("internalServerException", obj{"message", "The system encountered an unexpected error during processing. Try your request again."})
	case "overloaded":
		w.exception("modelStreamErrorException", obj{"message", "The model is overloaded.", "originalStatusCode", 529, "originalMessage", "Overloaded"})
	case "error":
		var h eventstream.Headers
		h.Set(":error-code", eventstream.StringValue("InternalFailure"))
		h.Set(":error-message", eventstream.StringValue("An internal error occurred."))
		h.Set(":message-type", eventstream.StringValue("error"))
		w.write(w.frame(h, nil))
	default:
		w.exception("modelStreamErrorException", obj{"message", "The system encountered an unexpected error during processing. Try your request again.",
			"originalStatusCode", 500, "originalMessage", "Internal server error"})
	}
}

func (bedrockDialect) errorReply(e errorInfo) reply {
	switch e.kind {
	case FaultRateLimit, FaultSlowDown:
		e = e.withDefaults()
		msg := "Too many tokens, please wait before trying again."
		if e.unit() == "requests" {
			msg = "Too many requests, please wait before trying again."
		}
		r := awsError(429, "ThrottlingException", msg)
		if e.code == "retry_after" {
			return withRetryAfter(r, e.retryAfter)
		}
		r.header.Set("x-amz-retry-after", fmt.Sprint(max(1, e.retryAfter.Milliseconds())))
		return r
	case FaultDailyQuota:
		return awsError(429, "ThrottlingException", "Too many tokens per day, please wait before trying again.")
	case FaultSpendCap:
		return awsError(400, "ServiceQuotaExceededException", "Your request exceeds the service quota for your account. You can view your quotas at Viewing service quotas. You can resubmit your request later.")
	case FaultOverload, FaultFailoverDemo, FaultFlexCapacity:
		switch e.code {
		case "529":
			r := jsonReply(529, mustJSON(obj{"message", "Overloaded"}))
			return r
		case "model_not_ready":
			return awsError(429, "ModelNotReadyException", "Model is not ready for inference. Wait and try your request again.")
		}
		return awsError(503, "ServiceUnavailableException", "Bedrock is unable to process your request.")
	case FaultContextLength:
		return validationError("Input is too long for requested model.")
	case FaultRequestTooLarge:
		return bedrockDialect{}.tooLarge(e)
	}
	if st := e.serverStatus(); st != 500 {
		return awsError(st, "InternalServerException", "The server encountered an internal error while processing the request.")
	}
	return awsError(500, "InternalServerException", "The server encountered an internal error while processing the request.")
}

func (bedrockDialect) midStreamAsHTTP(e errorInfo) reply {
	switch e.code {
	case "throttling":
		return awsError(429, "ThrottlingException", "Too many tokens, please wait before trying again.")
	case "service_unavailable":
		return awsError(503, "ServiceUnavailableException", "Bedrock is unable to process your request.")
	case "validation":
		return validationError("The model returned the following errors: invalid request")
	case "internal", "error":
		return awsError(500, "InternalServerException", "The server encountered an internal error while processing the request.")
	case "overloaded":
		return jsonReply(424, mustJSON(obj{"__type", "ModelErrorException", "message", "The model is overloaded.", "originalStatusCode", 529, "resourceName", e.model}))
	}
	return jsonReply(424, mustJSON(obj{"__type", "ModelErrorException", "message", "The model encountered an error.", "originalStatusCode", 500, "resourceName", e.model}))
}

func (bedrockDialect) tooLarge(_ errorInfo) reply {
	return validationError("Input is too long for requested model.")
}

// limitHeaders: Bedrock sends no rate-limit headers.
func (bedrockDialect) limitHeaders(*provider, limitView, http.Header) {}

// uuidID is a request id shaped like AWS's (a UUID).
func uuidID(r *rand.Rand) string {
	h := randChars(r, hexDigits, 32)
	return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:]
}

// bedrockMetadata is the stream's metadata event: usage, metrics and, for
// a request that asked for a tier, the serviceTier that served it.
func (a *answerPlan) bedrockMetadata() obj {
	m := obj{"usage", a.bedrockUsage(), "metrics", obj{"latencyMs", 420}}
	if a.req.tier != "" {
		m = append(m, "serviceTier", obj{"type", a.servedOr(a.req.tier)})
	}
	return m
}
