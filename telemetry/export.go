package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/limitscope/limitscope/internal/sanitize"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// The metric names (OpenTelemetry GenAI semantic conventions where they
// apply). Under Prometheus naming rules they read
// gen_ai_client_operation_duration_seconds, gen_ai_client_token_usage,
// limitscope_call_duration_seconds, limitscope_call_attempts,
// limitscope_wait_duration_seconds, limitscope_ratelimit_remaining,
// limitscope_ratelimit_limit and limitscope_telemetry_dropped_total.
const (
	MetricOperationDuration = "gen_ai.client.operation.duration"
	MetricTokenUsage        = "gen_ai.client.token.usage"
	MetricCallDuration      = "limitscope.call.duration"
	MetricCallAttempts      = "limitscope.call.attempts"
	MetricWaitDuration      = "limitscope.wait.duration"
	MetricRateLimitLeft     = "limitscope.ratelimit.remaining"
	MetricRateLimit         = "limitscope.ratelimit.limit"
	MetricDropped           = "limitscope.telemetry.dropped"
)

// The limitscope.* attribute keys.
const (
	KeyCallID       = attribute.Key("limitscope.call.id")
	KeyOutcome      = attribute.Key("limitscope.outcome")
	KeyChain        = attribute.Key("limitscope.chain")
	KeyServedBy     = attribute.Key("limitscope.served_by")
	KeyRoute        = attribute.Key("limitscope.route")
	KeyAttempt      = attribute.Key("limitscope.attempt")
	KeyTarget       = attribute.Key("limitscope.target")
	KeyProvider     = attribute.Key("limitscope.provider") // limitscope's own name (openai:responses, gemini, ...)
	KeyClass        = attribute.Key("limitscope.class")
	KeyDecision     = attribute.Key("limitscope.decision")
	KeyCode         = attribute.Key("limitscope.error.code")
	KeyMessage      = attribute.Key("limitscope.error.message")
	KeyQuotaID      = attribute.Key("limitscope.quota_id")
	KeyRequestID    = attribute.Key("limitscope.request_id")
	KeyMidStream    = attribute.Key("limitscope.mid_stream")
	KeyTTFT         = attribute.Key("limitscope.ttft_ms")
	KeyDelaySource  = attribute.Key("limitscope.delay_source")
	KeyRetryAfter   = attribute.Key("limitscope.retry_after_ms")
	KeyWaited       = attribute.Key("limitscope.waited_ms")
	KeyWaitPlanned  = attribute.Key("limitscope.wait_planned_ms")
	KeyPaced        = attribute.Key("limitscope.paced_ms")
	KeyByUser       = attribute.Key("limitscope.by_user")
	KeyFrom         = attribute.Key("limitscope.failover.from")
	KeyTo           = attribute.Key("limitscope.failover.to")
	KeyReason       = attribute.Key("limitscope.reason")
	KeyCooldownHit  = attribute.Key("limitscope.cooldown_hit")
	KeyCooldownTill = attribute.Key("limitscope.cooldown.until")
	KeyAction       = attribute.Key("limitscope.action_required")
	KeyWindow       = attribute.Key("limitscope.ratelimit.window")
)

// The span event names.
const (
	EventWait     = "limitscope.wait"     // after an attempt: the wait before the next
	EventPacing   = "limitscope.pacing"   // before an attempt: pacing from a limits snapshot
	EventFailover = "limitscope.failover" // the call moved to its next target
	EventSkip     = "limitscope.skip"     // a target left without a request
	EventCooldown = "limitscope.cooldown" // a quota stop recorded a cooldown
)

type instruments struct {
	opDuration, callDuration, waits metric.Float64Histogram
	tokens, attempts                metric.Int64Histogram
}

// windowValue is a window's latest figures from a response's headers.
type windowValue struct {
	remaining, limit       int64
	hasRemaining, hasLimit bool
}

// gauges holds every target's latest rate-limit figures, which the
// rate-limit gauges observe when metrics are collected: a call stores its
// figures (a lock and four stores) instead of recording a measurement per
// window, and the gauges still read the latest value of each window.
type gauges struct {
	mu      sync.Mutex
	targets []*targetInfo // those with a window seen, up to maxSets
}

// store keeps l's windows as ti's latest figures.
func (g *gauges) store(ti *targetInfo, l *stream.Limits) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !ti.gauged {
		if len(g.targets) >= maxSets {
			return
		}
		ti.gauged = true
		g.targets = append(g.targets, ti)
	}
	for wi, w := range [len(windowNames)]*stream.Window{l.Requests, l.Tokens, l.InputTokens, l.OutputTokens} {
		if w == nil {
			continue
		}
		v := &ti.latest[wi]
		if w.HasRemaining {
			v.remaining, v.hasRemaining = w.Remaining, true
		}
		if w.HasLimit {
			v.limit, v.hasLimit = w.Limit, true
		}
	}
}

// observe reports every window's latest figures to the two gauges.
func (g *gauges) observe(remaining, limit metric.Int64Observable) metric.Callback {
	return func(_ context.Context, o metric.Observer) error {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, ti := range g.targets {
			for wi := range ti.latest {
				v := &ti.latest[wi]
				if v.hasRemaining {
					o.ObserveInt64(remaining, v.remaining, ti.windowObs[wi])
				}
				if v.hasLimit {
					o.ObserveInt64(limit, v.limit, ti.windowObs[wi])
				}
			}
		}
		return nil
	}
}

// The GenAI conventions' advised buckets.
var (
	durationBounds = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	tokenBounds    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	attemptBounds  = []float64{1, 2, 3, 4, 5, 6, 8, 10, 15, 20}
)

func newInstruments(m metric.Meter, t *Telemetry) (instruments, error) {
	var in instruments
	var errs [9]error
	in.opDuration, errs[0] = m.Float64Histogram(MetricOperationDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of each request to a provider (one attempt)."), metric.WithExplicitBucketBoundaries(durationBounds...))
	in.tokens, errs[1] = m.Int64Histogram(MetricTokenUsage, metric.WithUnit("{token}"),
		metric.WithDescription("Tokens used by each answered call, by gen_ai.token.type."), metric.WithExplicitBucketBoundaries(tokenBounds...))
	in.callDuration, errs[2] = m.Float64Histogram(MetricCallDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of each call, its retries, waits and failovers included."), metric.WithExplicitBucketBoundaries(durationBounds...))
	in.attempts, errs[3] = m.Int64Histogram(MetricCallAttempts, metric.WithUnit("{attempt}"),
		metric.WithDescription("HTTP requests each call made."), metric.WithExplicitBucketBoundaries(attemptBounds...))
	in.waits, errs[4] = m.Float64Histogram(MetricWaitDuration, metric.WithUnit("s"),
		metric.WithDescription("Each wait taken, by its source (retry-after, backoff, reset, pacing, ...)."), metric.WithExplicitBucketBoundaries(durationBounds...))
	remaining, err := m.Int64ObservableGauge(MetricRateLimitLeft, metric.WithUnit("{unit}"),
		metric.WithDescription("Rate limit left in each window, from the latest response's headers."))
	errs[5] = err
	limit, err := m.Int64ObservableGauge(MetricRateLimit, metric.WithUnit("{unit}"),
		metric.WithDescription("Rate limit of each window, from the latest response's headers."))
	errs[6] = err
	if errs[5] == nil && errs[6] == nil {
		_, errs[8] = m.RegisterCallback(t.gauges.observe(remaining, limit), remaining, limit)
	}
	_, errs[7] = m.Int64ObservableCounter(MetricDropped, metric.WithUnit("{call}"),
		metric.WithDescription("Calls whose telemetry was dropped because the export queue was full."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(t.dropped.Load()))
			return nil
		}))
	for _, err := range errs {
		if err != nil {
			return in, fmt.Errorf("telemetry: instruments: %w", err)
		}
	}
	return in, nil
}

// ProviderName is the gen_ai.provider.name of a limitscope provider: the
// conventions' well-known value where there is one, else its own name.
func ProviderName(provider string) string {
	base, _, _ := strings.Cut(provider, stream.VariantSep)
	base, _, _ = strings.Cut(base, "@")
	switch base {
	case "gemini":
		return "gcp.gemini"
	case "mistral":
		return "mistral_ai"
	case "xai":
		return "x_ai"
	case "bedrock":
		return "aws.bedrock"
	case "azure":
		return "azure.ai.openai"
	case "vertex":
		return "gcp.vertex_ai"
	}
	return base
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// export builds one ended call into its trace and metrics.
func (t *Telemetry) export(j job) {
	ctx := context.Background()
	res := j.res
	primary := stream.Target{}
	if len(j.call.Chain) > 0 {
		primary = j.call.Chain[0]
	}
	if t.tracer != nil {
		t.trace(ctx, j.call, res, primary)
	}
	if t.mp != nil {
		t.record(ctx, res)
	}
}

// targetInfo is what export repeats for every span and measurement of one
// target, built once: its strings, its attributes and its metric attribute
// sets. Only the worker uses it.
type targetInfo struct {
	spanName  string             // "chat <model>"
	str       string             // provider[@account]/model
	genProv   attribute.KeyValue // gen_ai.provider.name
	reqModel  attribute.KeyValue // gen_ai.request.model
	respModel attribute.KeyValue // gen_ai.response.model
	provider  attribute.KeyValue // limitscope.provider
	target    attribute.KeyValue // limitscope.target
	servedBy  attribute.KeyValue // limitscope.served_by
	opOK      recordOpts
	opServed  recordOpts // an ok attempt of the target that served the call
	// Its rate-limit windows: the gauges' attribute sets and latest figures
	// (under gauges.mu).
	windowObs [len(windowNames)]metric.ObserveOption
	latest    [len(windowNames)]windowValue
	gauged    bool
	tokens    [2]recordOpts // input, output, as the target that served
}

// windowNames are the limitscope.ratelimit.window values, in stream.Limits'
// order.
var windowNames = [...]string{"requests", "tokens", "input_tokens", "output_tokens"}

// info is tg's targetInfo, kept for the next call (up to maxSets targets).
func (t *Telemetry) info(tg stream.Target) *targetInfo {
	if ti := t.targets[tg]; ti != nil {
		return ti
	}
	ti := &targetInfo{
		spanName:  "chat " + tg.Model,
		str:       tg.String(),
		genProv:   semconv.GenAIProviderNameKey.String(ProviderName(tg.Provider)),
		reqModel:  semconv.GenAIRequestModel(tg.Model),
		respModel: semconv.GenAIResponseModel(tg.Model),
		provider:  KeyProvider.String(tg.Provider),
	}
	ti.servedBy, ti.target = KeyServedBy.String(ti.str), KeyTarget.String(ti.str)
	ti.opOK = t.attrs(semconv.GenAIOperationNameChat, ti.genProv, ti.reqModel)
	ti.opServed = t.attrs(semconv.GenAIOperationNameChat, ti.genProv, ti.reqModel, ti.respModel)
	for i, w := range windowNames {
		ti.windowObs[i] = metric.WithAttributeSet(attribute.NewSet(ti.genProv, ti.reqModel, ti.provider, KeyWindow.String(w)))
	}
	ti.tokens[0] = t.attrs(semconv.GenAIOperationNameChat, ti.genProv, ti.respModel, semconv.GenAITokenTypeInput)
	ti.tokens[1] = t.attrs(semconv.GenAIOperationNameChat, ti.genProv, ti.respModel, semconv.GenAITokenTypeOutput)
	if len(t.targets) < maxSets {
		t.targets[tg] = ti
	}
	return ti
}

// chainKey identifies a chain of up to four targets.
type chainKey [4]stream.Target

// chainAttr is the limitscope.chain attribute of chain, kept for the next
// call (up to maxSets chains of up to four targets).
func (t *Telemetry) chainAttr(chain []stream.Target) attribute.KeyValue {
	var k chainKey
	cacheable := len(chain) <= len(k)
	if cacheable {
		copy(k[:], chain)
		if kv, ok := t.chains[k]; ok {
			return kv
		}
	}
	strs := make([]string, len(chain))
	for i, tg := range chain {
		strs[i] = t.info(tg).str
	}
	kv := KeyChain.StringSlice(strs)
	if cacheable && len(t.chains) < maxSets {
		t.chains[k] = kv
	}
	return kv
}

// spanAttrs hands out the worker's attribute buffer, emptied; putAttrs
// takes it back. A span copies its attributes, so one buffer serves them
// all.
func (t *Telemetry) spanAttrs() []attribute.KeyValue { return t.scratch[:0] }

func (t *Telemetry) putAttrs(a []attribute.KeyValue) {
	clear(a) // keep no prompt or answer text alive
	t.scratch = a[:0]
}

// startOpts are a span's start options, in the worker's reused slice.
func (t *Telemetry) startOpts(at time.Time, kind trace.SpanKind) []trace.SpanStartOption {
	t.opts = append(t.opts[:0], trace.WithTimestamp(at), trace.WithSpanKind(kind))
	return t.opts
}

func (t *Telemetry) trace(ctx context.Context, c retry.Call, res *retry.Result, primary stream.Target) {
	pi := t.info(primary)
	var si *targetInfo
	if res.ServedBy != nil {
		si = t.info(*res.ServedBy)
	}
	attrs := t.spanAttrs()
	prov := pi.genProv
	if si != nil {
		prov = si.genProv
	}
	attrs = append(attrs,
		semconv.GenAIOperationNameChat, prov, pi.reqModel,
		KeyCallID.String(res.CallID), KeyOutcome.String(string(res.Outcome)),
		t.chainAttr(c.Chain),
	)
	if c.MaxTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(c.MaxTokens))
	}
	if c.Route != "" {
		attrs = append(attrs, KeyRoute.String(sanitize.Printable(c.Route)))
	}
	if si != nil {
		attrs = append(attrs, si.respModel, si.servedBy)
	}
	if res.Usage != nil {
		attrs = append(attrs, semconv.GenAIUsageInputTokens(res.Usage.InputTokens), semconv.GenAIUsageOutputTokens(res.Usage.OutputTokens))
	}
	if res.FinishReason != "" {
		attrs = append(attrs, semconv.GenAIResponseFinishReasons(res.FinishReason))
	}
	if res.Err != nil && res.Outcome != retry.OutcomeOK {
		attrs = append(attrs, semconv.ErrorTypeKey.String(string(res.Err.Class)))
	}
	if res.CooldownHit {
		attrs = append(attrs, KeyCooldownHit.Bool(true))
	}
	if res.ActionRequired != "" {
		attrs = append(attrs, KeyAction.String(sanitize.Printable(res.ActionRequired)))
	}
	if t.content {
		attrs = append(attrs, contentAttrs(c, res)...)
	}
	// The call's span is the GenAI inference span: the conventions have it
	// cover the logical operation, its retries included, as a client span.
	// Attributes set after Start, not as a start option: the option would
	// copy them once more.
	ctx, root := t.tracer.Start(ctx, pi.spanName, t.startOpts(res.Started, trace.SpanKindClient)...)
	root.SetAttributes(attrs...)
	t.putAttrs(attrs)
	ended := func(a *retry.Attempt) time.Time { return a.StartedAt.Add(a.Duration) }
	for i := range res.Attempts {
		t.attemptSpan(ctx, &res.Attempts[i])
	}
	for _, m := range res.Moves {
		at := res.Started
		if m.Attempt > 0 && m.Attempt <= len(res.Attempts) {
			at = ended(&res.Attempts[m.Attempt-1])
		}
		ea := []attribute.KeyValue{KeyFrom.String(t.info(m.From).str), KeyTo.String(t.info(m.To).str),
			KeyReason.String(sanitize.Printable(m.Reason)), KeyAttempt.Int(m.Attempt)}
		if m.ByUser {
			ea = append(ea, KeyByUser.Bool(true))
		}
		if m.Cause != nil {
			ea = append(ea, semconv.ErrorTypeKey.String(string(m.Cause.Class)))
			if m.Cause.Code != "" {
				ea = append(ea, KeyCode.String(sanitize.Printable(m.Cause.Code)))
			}
		}
		root.AddEvent(EventFailover, trace.WithTimestamp(at), trace.WithAttributes(ea...))
	}
	for _, s := range res.Skips {
		root.AddEvent(EventSkip, trace.WithTimestamp(res.Started), trace.WithAttributes(KeyTarget.String(t.info(s.Target).str),
			KeyWaitPlanned.Int64(ms(s.Wait)), KeyReason.String(sanitize.Printable(s.Reason))))
	}
	if res.Outcome != retry.OutcomeOK {
		msg := string(res.Outcome)
		if res.Err != nil {
			msg += ": " + string(res.Err.Class)
		}
		root.SetStatus(codes.Error, msg)
	}
	end := res.Ended
	if end.IsZero() {
		end = time.Now()
	}
	root.End(trace.WithTimestamp(end))
	t.spansEnded.Add(1)
}

// attemptSpan is one HTTP request of the call, a child of the call's span.
// It names its provider and model but not gen_ai.operation.name: the call's
// span is the one inference (the conventions' span covers the retries), and
// an attempt that carried the operation would be counted as another one by
// a backend that reads GenAI spans.
func (t *Telemetry) attemptSpan(ctx context.Context, a *retry.Attempt) {
	ti := t.info(a.Target)
	attrs := t.spanAttrs()
	attrs = append(attrs,
		ti.genProv, ti.reqModel, ti.target,
		KeyAttempt.Int(a.N),
		KeyClass.String(string(a.Class)), KeyDecision.String(string(a.Decision)),
	)
	ok := a.Class == stream.ClassOK
	if !ok {
		attrs = append(attrs, semconv.ErrorTypeKey.String(string(a.Class)))
	}
	if a.Status > 0 {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(a.Status))
	}
	if a.Code != "" {
		attrs = append(attrs, KeyCode.String(sanitize.Printable(a.Code)))
	}
	if a.Message != "" && !ok {
		attrs = append(attrs, KeyMessage.String(sanitize.Truncate(sanitize.Printable(a.Message), 512)))
	}
	if a.QuotaID != "" {
		attrs = append(attrs, KeyQuotaID.String(sanitize.Printable(a.QuotaID)))
	}
	if a.RequestID != "" {
		attrs = append(attrs, KeyRequestID.String(sanitize.Printable(a.RequestID)))
	}
	if a.MidStream {
		attrs = append(attrs, KeyMidStream.Bool(true))
	}
	if a.TTFT > 0 {
		attrs = append(attrs, KeyTTFT.Int64(ms(a.TTFT)))
	}
	if a.DelaySource != "" {
		attrs = append(attrs, KeyDelaySource.String(string(a.DelaySource)))
	}
	if a.RetryAfter != nil {
		attrs = append(attrs, KeyRetryAfter.Int64(ms(*a.RetryAfter)))
	}
	if a.Waited > 0 || a.WaitPlanned > 0 {
		attrs = append(attrs, KeyWaited.Int64(ms(a.Waited)), KeyWaitPlanned.Int64(ms(a.WaitPlanned)))
	}
	if a.Paced > 0 {
		attrs = append(attrs, KeyPaced.Int64(ms(a.Paced)))
	}
	if a.FailedOverByUser {
		attrs = append(attrs, KeyByUser.Bool(true))
	}
	_, sp := t.tracer.Start(ctx, ti.spanName, t.startOpts(a.StartedAt, trace.SpanKindClient)...)
	sp.SetAttributes(attrs...)
	t.putAttrs(attrs)
	if a.Paced > 0 {
		sp.AddEvent(EventPacing, trace.WithTimestamp(a.StartedAt.Add(-a.Paced)), trace.WithAttributes(
			KeyDelaySource.String(string(stream.SourceReset)), KeyWaited.Int64(ms(a.Paced))))
	}
	end := a.StartedAt.Add(a.Duration)
	if a.Waited > 0 || a.WaitPlanned > 0 {
		ea := []attribute.KeyValue{KeyDelaySource.String(string(a.DelaySource)), KeyWaited.Int64(ms(a.Waited)), KeyWaitPlanned.Int64(ms(a.WaitPlanned))}
		if a.RetryAfter != nil {
			ea = append(ea, KeyRetryAfter.Int64(ms(*a.RetryAfter)))
		}
		sp.AddEvent(EventWait, trace.WithTimestamp(end), trace.WithAttributes(ea...))
	}
	if a.Cooldown != nil {
		ea := []attribute.KeyValue{KeyReason.String(sanitize.Printable(a.Cooldown.Code))}
		if !a.Cooldown.Until.IsZero() {
			ea = append(ea, KeyCooldownTill.String(a.Cooldown.Until.UTC().Format(time.RFC3339)))
		}
		sp.AddEvent(EventCooldown, trace.WithTimestamp(end), trace.WithAttributes(ea...))
	}
	if !ok {
		sp.SetStatus(codes.Error, string(a.Class))
	}
	sp.End(trace.WithTimestamp(end))
	t.spansEnded.Add(1)
}

// contentAttrs are the prompt and answer, in the GenAI conventions' message
// shape, for an explicit opt-in only.
func contentAttrs(c retry.Call, res *retry.Result) []attribute.KeyValue {
	type part struct {
		Type    string `json:"type"`
		Content string `json:"content"`
	}
	type msg struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	}
	var in []msg
	if len(c.Messages) > 0 {
		for _, m := range c.Messages {
			in = append(in, msg{Role: m.Role, Parts: []part{{Type: "text", Content: m.Content}}})
		}
	} else if c.Prompt != "" {
		in = append(in, msg{Role: "user", Parts: []part{{Type: "text", Content: c.Prompt}}})
	}
	var out []attribute.KeyValue
	if b, err := json.Marshal(in); err == nil && len(in) > 0 {
		out = append(out, semconv.GenAIInputMessagesKey.String(string(b)))
	}
	if c.System != "" {
		if b, err := json.Marshal([]part{{Type: "text", Content: c.System}}); err == nil {
			out = append(out, semconv.GenAISystemInstructionsKey.String(string(b)))
		}
	}
	if res.Text != "" {
		ans := []msg{{Role: "assistant", Parts: []part{{Type: "text", Content: res.Text}}}}
		if b, err := json.Marshal(ans); err == nil {
			out = append(out, semconv.GenAIOutputMessagesKey.String(string(b)))
		}
	}
	return out
}

// maxSets bounds the attribute sets kept for reuse (the cardinality of
// providers, models, classes and windows seen).
const maxSets = 4096

// recordOpts is one Record's options: an attribute set, in a slice of its
// own so that passing it allocates nothing.
type recordOpts []metric.RecordOption

// attrs is the record options of the attribute set kvs (all string
// valued), built once and reused: sorting a set for every measurement is
// most of recording's cost. Only the worker calls it.
func (t *Telemetry) attrs(kvs ...attribute.KeyValue) recordOpts {
	var k setKey // an array of the keys and values: no allocation to look up
	if len(kvs) > len(k)/2 {
		return recordOpts{metric.WithAttributeSet(attribute.NewSet(slices.Clone(kvs)...))}
	}
	for i, kv := range kvs {
		k[2*i], k[2*i+1] = string(kv.Key), kv.Value.AsString()
	}
	if o, ok := t.sets[k]; ok {
		return o
	}
	// A copy: kvs itself does not escape, so a call that finds its set
	// allocates nothing.
	o := recordOpts{metric.WithAttributeSet(attribute.NewSet(slices.Clone(kvs)...))}
	if len(t.sets) < maxSets {
		t.sets[k] = o
	}
	return o
}

// setKey identifies a set of up to five string attributes.
type setKey [10]string

// record adds one ended call to the metrics.
func (t *Telemetry) record(ctx context.Context, res *retry.Result) {
	in := t.inst
	for i := range res.Attempts {
		a := &res.Attempts[i]
		ti := t.info(a.Target)
		var opt recordOpts
		switch {
		case a.Class != stream.ClassOK:
			opt = t.attrs(semconv.GenAIOperationNameChat, ti.genProv, ti.reqModel, semconv.ErrorTypeKey.String(string(a.Class)))
		case res.ServedBy != nil && *res.ServedBy == a.Target:
			opt = ti.opServed
		case res.ServedBy != nil && res.ServedBy.Provider == a.Target.Provider:
			opt = t.attrs(semconv.GenAIOperationNameChat, ti.genProv, ti.reqModel, semconv.GenAIResponseModel(res.ServedBy.Model))
		default:
			opt = ti.opOK
		}
		in.opDuration.Record(ctx, a.Duration.Seconds(), opt...)
		if a.Waited > 0 {
			src := string(a.DelaySource)
			if src == "" {
				src = "none"
			}
			in.waits.Record(ctx, a.Waited.Seconds(), t.attrs(ti.genProv, KeyDelaySource.String(src))...)
		}
		if a.Paced > 0 {
			in.waits.Record(ctx, a.Paced.Seconds(), t.attrs(ti.genProv, KeyDelaySource.String("pacing"))...)
		}
		if l := a.Limits; !l.Empty() {
			t.gauges.store(ti, l)
		}
	}
	oo := t.attrs(KeyOutcome.String(string(res.Outcome)))
	in.attempts.Record(ctx, int64(len(res.Attempts)), oo...)
	if !res.Ended.IsZero() {
		in.callDuration.Record(ctx, res.Ended.Sub(res.Started).Seconds(), oo...)
	}
	if res.Usage != nil && res.ServedBy != nil {
		si := t.info(*res.ServedBy)
		in.tokens.Record(ctx, int64(res.Usage.InputTokens), si.tokens[0]...)
		in.tokens.Record(ctx, int64(res.Usage.OutputTokens), si.tokens[1]...)
	}
}
