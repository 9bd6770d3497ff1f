package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/limitscope/limitscope/internal/sanitize"
	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// The metric names. By default the GenAI ones are semantic-conventions
// v1.41.0's; with OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental
// they are semantic-conventions-genai v0.1.0's (the Latest* names) and the
// v1.41.0 ones are not emitted. Under Prometheus naming rules they read
// gen_ai_client_operation_duration_seconds,
// gen_ai_client_operation_time_to_first_chunk_seconds,
// gen_ai_client_operation_time_per_output_chunk_seconds,
// gen_ai_client_token_usage, http_client_request_duration_seconds,
// limitscope_call_duration_seconds, limitscope_call_attempts,
// limitscope_wait_duration_seconds, limitscope_ratelimit_requests_remaining,
// limitscope_ratelimit_requests_limit, limitscope_ratelimit_tokens_remaining,
// limitscope_ratelimit_tokens_limit, limitscope_proxy_calls_in_flight,
// limitscope_proxy_calls_queued and limitscope_telemetry_dropped_total.
const (
	MetricOperationDuration  = "gen_ai.client.operation.duration"              // one point per inference (a target of a call, its retries included)
	MetricTimeToFirstChunk   = "gen_ai.client.operation.time_to_first_chunk"   // per streamed inference that received a chunk
	MetricTimePerOutputChunk = "gen_ai.client.operation.time_per_output_chunk" // per chunk after the first
	MetricTokenUsage         = "gen_ai.client.token.usage"                     // per answered inference and token type
	MetricHTTPDuration       = "http.client.request.duration"                  // one point per HTTP request (attempt)
	MetricCallDuration       = "limitscope.call.duration"
	MetricCallAttempts       = "limitscope.call.attempts"
	MetricWaitDuration       = "limitscope.wait.duration"
	MetricRequestsRemaining  = "limitscope.ratelimit.requests.remaining"
	MetricRequestsLimit      = "limitscope.ratelimit.requests.limit"
	MetricTokensRemaining    = "limitscope.ratelimit.tokens.remaining"
	MetricTokensLimit        = "limitscope.ratelimit.tokens.limit"
	MetricProxyInFlight      = "limitscope.proxy.calls.in_flight"
	MetricProxyQueued        = "limitscope.proxy.calls.queued"
	MetricProxyHeldWaiting   = "limitscope.proxy.answers.waiting"
	MetricDropped            = "limitscope.telemetry.dropped"

	LatestInferenceDuration   = "gen_ai.client.inference.duration"
	LatestTimeToFirstChunk    = "gen_ai.client.inference.time_to_first_chunk"
	LatestTimePerOutputChunk  = "gen_ai.client.inference.time_per_output_chunk"
	LatestUsageInputTokens    = "gen_ai.client.inference.usage.input_tokens"
	LatestUsageOutputTokens   = "gen_ai.client.inference.usage.output_tokens"
	LatestUsageReasoning      = "gen_ai.client.inference.usage.reasoning.output_tokens"
	LatestOperationInputToks  = "gen_ai.client.inference.operation.input_tokens"
	LatestOperationOutputToks = "gen_ai.client.inference.operation.output_tokens"
)

// SpanCall is the name of a call's span (internal; its children are the
// call's inference spans).
const SpanCall = "limitscope.call"

// The limitscope.* attribute keys.
const (
	KeyCallID    = attribute.Key("limitscope.call.id")
	KeyOutcome   = attribute.Key("limitscope.outcome")
	KeyChain     = attribute.Key("limitscope.chain")
	KeyServedBy  = attribute.Key("limitscope.served_by")
	KeyRoute     = attribute.Key("limitscope.route")
	KeyAttempt   = attribute.Key("limitscope.attempt")
	KeyTarget    = attribute.Key("limitscope.target")
	KeyProvider  = attribute.Key("limitscope.provider") // limitscope's own name (openai:responses, gemini, ...)
	KeyClass     = attribute.Key("limitscope.class")
	KeyDecision  = attribute.Key("limitscope.decision")
	KeyCode      = attribute.Key("limitscope.error.code")
	KeyMessage   = attribute.Key("limitscope.error.message")
	KeyQuotaID   = attribute.Key("limitscope.quota_id")
	KeyRequestID = attribute.Key("limitscope.request_id")
	KeyMidStream = attribute.Key("limitscope.mid_stream")
	KeyTTFT      = attribute.Key("limitscope.ttft_ms")
	// The service tier an attempt asked for, the one its answer named,
	// and whether that was a downgrade of a premium tier.
	KeyTier         = attribute.Key("limitscope.tier")
	KeyServedTier   = attribute.Key("limitscope.tier.served")
	KeyDowngraded   = attribute.Key("limitscope.tier.downgraded")
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
	opDuration, ttfc, tpoc, httpDuration, callDuration, waits metric.Float64Histogram
	tokens, attempts                                          metric.Int64Histogram
	// semantic-conventions-genai's token metrics (latest only; tokens is
	// nil then).
	opIn, opOut                  metric.Int64Histogram
	usageIn, usageOut, reasoning metric.Int64Counter
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

// observe reports every window's latest figures: the requests window to
// the requests gauges, the token windows to the tokens gauges.
func (g *gauges) observe(reqLeft, reqLimit, tokLeft, tokLimit metric.Int64Observable) metric.Callback {
	return func(_ context.Context, o metric.Observer) error {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, ti := range g.targets {
			if ti.other {
				continue // not a model the metrics name (Telemetry.Bound)
			}
			for wi := range ti.latest {
				v := &ti.latest[wi]
				left, limit := tokLeft, tokLimit
				if wi == 0 {
					left, limit = reqLeft, reqLimit
				}
				if v.hasRemaining {
					o.ObserveInt64(left, v.remaining, ti.windowObs[wi])
				}
				if v.hasLimit {
					o.ObserveInt64(limit, v.limit, ti.windowObs[wi])
				}
			}
		}
		return nil
	}
}

// The GenAI conventions' advised buckets (the HTTP conventions' for
// http.client.request.duration).
var (
	durationBounds = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	tokenBounds    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	ttfcBounds     = []float64{0.01, 0.02, 0.04, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0}
	tpocBounds     = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5}
	httpBounds     = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	attemptBounds  = []float64{1, 2, 3, 4, 5, 6, 8, 10, 15, 20}
)

func newInstruments(m metric.Meter, t *Telemetry) (instruments, error) {
	var in instruments
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	f64 := func(name, unit, desc string, bounds []float64) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(bounds...))
		add(err)
		return h
	}
	i64 := func(name, unit, desc string, bounds []float64) metric.Int64Histogram {
		h, err := m.Int64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(bounds...))
		add(err)
		return h
	}
	ctr := func(name, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit("{token}"), metric.WithDescription(desc))
		add(err)
		return c
	}
	opName, ttfcName, tpocName := MetricOperationDuration, MetricTimeToFirstChunk, MetricTimePerOutputChunk
	if t.latest {
		opName, ttfcName, tpocName = LatestInferenceDuration, LatestTimeToFirstChunk, LatestTimePerOutputChunk
	}
	in.opDuration = f64(opName, "s", "GenAI operation duration: one inference on one target, its retries included.", durationBounds)
	in.ttfc = f64(ttfcName, "s", "Time to receive the first chunk of a streamed inference, from when its request was sent.", ttfcBounds)
	in.tpoc = f64(tpocName, "s", "Time per output chunk, for each chunk received after the first one.", tpocBounds)
	in.httpDuration = f64(MetricHTTPDuration, "s", "Duration of each HTTP request to a provider (one attempt).", httpBounds)
	if t.latest {
		in.opIn = i64(LatestOperationInputToks, "{token}", "Input tokens of each answered inference.", tokenBounds)
		in.opOut = i64(LatestOperationOutputToks, "{token}", "Output tokens of each answered inference.", tokenBounds)
		in.usageIn = ctr(LatestUsageInputTokens, "Input tokens used.")
		in.usageOut = ctr(LatestUsageOutputTokens, "Output tokens used.")
		in.reasoning = ctr(LatestUsageReasoning, "Output tokens spent reasoning, where the provider reports them.")
	} else {
		in.tokens = i64(MetricTokenUsage, "{token}", "Tokens used by each answered inference, by gen_ai.token.type.", tokenBounds)
	}
	in.callDuration = f64(MetricCallDuration, "s", "Duration of each call, its retries, waits and failovers included.", durationBounds)
	in.attempts = i64(MetricCallAttempts, "{attempt}", "HTTP requests each call made.", attemptBounds)
	in.waits = f64(MetricWaitDuration, "s", "Each wait taken, by its source (retry-after, backoff, reset, pacing, ...).", durationBounds)
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, err := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		add(err)
		return g
	}
	reqLeft := gauge(MetricRequestsRemaining, "{request}", "Requests left in the rate-limit window, from the latest response's headers.")
	reqLimit := gauge(MetricRequestsLimit, "{request}", "Requests allowed in the rate-limit window, from the latest response's headers.")
	tokLeft := gauge(MetricTokensRemaining, "{token}", "Tokens left in each token rate-limit window, from the latest response's headers.")
	tokLimit := gauge(MetricTokensLimit, "{token}", "Tokens allowed in each token rate-limit window, from the latest response's headers.")
	inFlight := gauge(MetricProxyInFlight, "{call}", "Calls the proxy is serving.")
	queued := gauge(MetricProxyQueued, "{call}", "Calls waiting for a concurrency slot at a target's gate (the proxy's queue).")
	heldWaiting := gauge(MetricProxyHeldWaiting, "{call}", "Non-streamed or buffered answers waiting for room under the proxy's cap on queued answer bytes.")
	if len(slices.DeleteFunc(slices.Clone(errs), func(e error) bool { return e == nil })) == 0 {
		_, err := m.RegisterCallback(t.gauges.observe(reqLeft, reqLimit, tokLeft, tokLimit), reqLeft, reqLimit, tokLeft, tokLimit)
		add(err)
		_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			if f := t.proxyInFlight.Load(); f != nil {
				o.ObserveInt64(inFlight, (*f)())
			}
			n := 0
			if f := t.queuedCalls.Load(); f != nil {
				n = (*f)()
			}
			o.ObserveInt64(queued, int64(n))
			if f := t.proxyHeldWaiting.Load(); f != nil {
				o.ObserveInt64(heldWaiting, (*f)())
			}
			return nil
		}, inFlight, queued, heldWaiting)
		add(err)
	}
	_, err := m.Int64ObservableCounter(MetricDropped, metric.WithUnit("{call}"),
		metric.WithDescription("Calls whose telemetry was dropped because the export queue was full."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(t.dropped.Load()))
			return nil
		}))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return in, fmt.Errorf("telemetry: instruments: %w", err)
	}
	return in, nil
}

// ProviderName is the gen_ai.provider.name of a limitscope provider: the
// provider table's GenAIName where it has one, else its own name.
func ProviderName(provider string) string {
	base, _, _ := strings.Cut(provider, stream.AccountSep)
	if p, ok := stream.Provider(base); ok && p.GenAIName != "" {
		return p.GenAIName
	}
	base, _, _ = strings.Cut(base, stream.VariantSep)
	return base
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// minWait is the shortest wait exported: a pacing "wait" is also the time
// a call took to get its concurrency slot, nanoseconds when no call held
// it, and such a wait is none.
const minWait = time.Millisecond

// export builds one ended call into its trace and metrics.
func (t *Telemetry) export(j job) {
	ctx := context.Background()
	legs := legsOf(j.res.Attempts)
	if t.tracer != nil {
		if j.srv != nil {
			ctx = t.serverContext(j.srv)
		}
		t.trace(ctx, j, legs)
	}
	if t.mp != nil {
		t.record(ctx, j, legs)
	}
}

// leg is the attempts a call made on one target in a row, one GenAI
// inference (its retries included): [first, last] in Result.Attempts.
type leg struct{ first, last int }

// legsOf splits a call's attempts into its inferences: a failover starts
// the next.
func legsOf(atts []retry.Attempt) []leg {
	var out []leg
	for i := range atts {
		if n := len(out); n > 0 && atts[i].Target == atts[out[n-1].last].Target {
			out[n-1].last = i
			continue
		}
		out = append(out, leg{first: i, last: i})
	}
	return out
}

// served reports whether the leg l of res is the inference that answered
// the call (the last one of a call answered).
func served(res *retry.Result, legs []leg, i int) bool {
	return i == len(legs)-1 && res.Outcome == retry.OutcomeOK && res.ServedBy != nil
}

// legError is the error.type of an inference that did not answer ("": it
// did): its last attempt's class, else the call's outcome.
func legError(res *retry.Result, last *retry.Attempt, ok bool) string {
	switch {
	case ok:
		return ""
	case last.Class != stream.ClassOK:
		return string(last.Class)
	case res.Err != nil && res.Err.Class != stream.ClassOK:
		return string(res.Err.Class)
	}
	return string(res.Outcome)
}

// targetInfo is what export repeats for every span and measurement of one
// target, built once: its strings, its attributes and its metric attribute
// sets. Only the worker uses it.
type targetInfo struct {
	spanName string             // "chat <model>"
	str      string             // provider[@account]/model
	genProv  attribute.KeyValue // gen_ai.provider.name
	reqModel attribute.KeyValue // gen_ai.request.model
	provider attribute.KeyValue // limitscope.provider
	target   attribute.KeyValue // limitscope.target
	servedBy attribute.KeyValue // limitscope.served_by
	server   []attribute.KeyValue
	// sampled are an inference span's start attributes (what a sampler
	// sees): the operation, provider, request model and server.
	sampled []attribute.KeyValue
	// httpStart are an HTTP request span's start attributes.
	httpStart []attribute.KeyValue
	// The metrics' gen_ai.request.model (the model, or OtherModel) under
	// the bounds it was decided with; other: it is OtherModel.
	metricModel attribute.KeyValue
	boundsAt    *labelBounds
	other       bool
	// Its rate-limit windows: the gauges' attribute sets and latest figures
	// (under gauges.mu).
	windowObs [len(windowNames)]metric.ObserveOption
	latest    [len(windowNames)]windowValue
	gauged    bool
}

// windowNames are the limitscope.ratelimit.window values, in stream.Limits'
// order.
var windowNames = [...]string{"requests", "tokens", "input_tokens", "output_tokens"}

// serverOf is the server.address and server.port of a base URL (none when
// it does not parse or names no host).
func serverOf(base string) []attribute.KeyValue {
	u, err := url.Parse(base)
	if err != nil || u.Hostname() == "" {
		return nil
	}
	port := 443
	if u.Scheme == "http" {
		port = 80
	}
	if p, err := strconv.Atoi(u.Port()); err == nil {
		port = p
	}
	return []attribute.KeyValue{semconv.ServerAddress(u.Hostname()), semconv.ServerPort(port)}
}

// modelLabel is the metrics' value for provider's model: itself when the
// bounds keep it (without bounds: among the first maxModels seen), else
// OtherModel.
func (t *Telemetry) modelLabel(b *labelBounds, provider, model string) string {
	if b != nil {
		if b.models[provider+"\x00"+model] {
			return model
		}
		return OtherModel
	}
	if t.models[model] {
		return model
	}
	if len(t.models) < maxModels {
		t.models[model] = true
		return model
	}
	return OtherModel
}

// info is tg's targetInfo, kept for the next call (up to maxSets targets).
func (t *Telemetry) info(tg stream.Target) *targetInfo {
	b := t.bounds.Load()
	if ti := t.targets[tg]; ti != nil {
		if ti.boundsAt != b {
			t.bound(ti, tg, b)
		}
		return ti
	}
	ti := &targetInfo{
		spanName: "chat " + tg.Model,
		str:      tg.String(),
		genProv:  semconv.GenAIProviderNameKey.String(ProviderName(tg.Provider)),
		reqModel: semconv.GenAIRequestModel(tg.Model),
		provider: KeyProvider.String(tg.Provider),
	}
	ti.servedBy, ti.target = KeyServedBy.String(ti.str), KeyTarget.String(ti.str)
	if t.baseURL != nil {
		ti.server = serverOf(t.baseURL(tg))
	}
	ti.sampled = append([]attribute.KeyValue{semconv.GenAIOperationNameChat, ti.genProv, ti.reqModel}, ti.server...)
	ti.httpStart = append([]attribute.KeyValue{semconv.HTTPRequestMethodPost}, ti.server...)
	t.bound(ti, tg, b)
	if len(t.targets) < maxSets {
		t.targets[tg] = ti
	}
	return ti
}

// bound sets ti's metric model and gauge attribute sets under b (under
// the gauges' lock: their callback reads them).
func (t *Telemetry) bound(ti *targetInfo, tg stream.Target, b *labelBounds) {
	m := t.modelLabel(b, tg.Provider, tg.Model)
	var obs [len(windowNames)]metric.ObserveOption
	for i, w := range windowNames {
		kvs := append([]attribute.KeyValue{ti.genProv, semconv.GenAIRequestModel(m), ti.provider}, ti.server...)
		if i > 0 {
			kvs = append(kvs, KeyWindow.String(w))
		}
		obs[i] = metric.WithAttributeSet(attribute.NewSet(kvs...))
	}
	t.gauges.mu.Lock()
	defer t.gauges.mu.Unlock()
	ti.boundsAt, ti.other, ti.metricModel = b, m == OtherModel, semconv.GenAIRequestModel(m)
	ti.windowObs = obs
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

// startOpts are a span's start options, in the worker's reused slice:
// start are the attributes a sampler sees.
func (t *Telemetry) startOpts(at time.Time, kind trace.SpanKind, start ...attribute.KeyValue) []trace.SpanStartOption {
	t.opts = append(t.opts[:0], trace.WithTimestamp(at), trace.WithSpanKind(kind))
	if len(start) > 0 {
		t.opts = append(t.opts, trace.WithAttributes(start...))
	}
	return t.opts
}

// trace builds a call's spans: the call's (internal), and under it an
// inference span per target tried, each over its HTTP request spans.
func (t *Telemetry) trace(ctx context.Context, j job, legs []leg) {
	c, res := j.call, j.res
	attrs := t.spanAttrs()
	attrs = append(attrs, KeyOutcome.String(string(res.Outcome)), t.chainAttr(c.Chain))
	if c.MaxTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(c.MaxTokens))
	}
	if res.ServedBy != nil {
		attrs = append(attrs, t.info(*res.ServedBy).servedBy)
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
	start := []attribute.KeyValue{KeyCallID.String(res.CallID)}
	if c.Route != "" {
		start = append(start, KeyRoute.String(sanitize.Printable(c.Route)))
	}
	ctx, root := t.tracer.Start(ctx, SpanCall, t.startOpts(res.Started, trace.SpanKindInternal, start...)...)
	root.SetAttributes(attrs...)
	t.putAttrs(attrs)
	for i, l := range legs {
		t.inferenceSpan(ctx, c, res, res.Attempts[l.first:l.last+1], served(res, legs, i))
	}
	ended := func(a *retry.Attempt) time.Time { return a.StartedAt.Add(a.Duration) }
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

// inferenceSpan is the GenAI inference span of one target of a call: a
// client span over its retries (the conventions' span covers them), with
// the target's provider and model, and the answer's when it answered.
func (t *Telemetry) inferenceSpan(ctx context.Context, c retry.Call, res *retry.Result, atts []retry.Attempt, ok bool) {
	first, last := &atts[0], &atts[len(atts)-1]
	ti := t.info(first.Target)
	start := first.StartedAt
	if first.Paced >= minWait {
		start = start.Add(-first.Paced)
	}
	ctx, sp := t.tracer.Start(ctx, ti.spanName, t.startOpts(start, trace.SpanKindClient, ti.sampled...)...)
	attrs := t.spanAttrs()
	attrs = append(attrs, semconv.GenAIRequestStream(true), ti.target)
	if c.MaxTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(c.MaxTokens))
	}
	if ok {
		attrs = append(attrs, semconv.GenAIResponseModel(res.ServedBy.Model))
		if last.ResponseID != "" {
			attrs = append(attrs, semconv.GenAIResponseID(sanitize.Printable(last.ResponseID)))
		}
		if res.Usage != nil {
			attrs = append(attrs, semconv.GenAIUsageInputTokens(res.Usage.InputTokens), semconv.GenAIUsageOutputTokens(res.Usage.OutputTokens))
		}
		if last.ReasoningTokens > 0 {
			attrs = append(attrs, semconv.GenAIUsageReasoningOutputTokens(last.ReasoningTokens))
		}
		if res.FinishReason != "" {
			attrs = append(attrs, semconv.GenAIResponseFinishReasons(res.FinishReason))
		}
	}
	if last.TTFT > 0 {
		attrs = append(attrs, semconv.GenAIResponseTimeToFirstChunk(last.TTFT.Seconds()))
	}
	errType := legError(res, last, ok)
	if errType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(errType))
	}
	if t.content && (ok || last == &res.Attempts[len(res.Attempts)-1]) {
		attrs = append(attrs, contentAttrs(c, res, ok)...)
	}
	sp.SetAttributes(attrs...)
	t.putAttrs(attrs)
	for i := range atts {
		a := &atts[i]
		if a.Paced >= minWait {
			sp.AddEvent(EventPacing, trace.WithTimestamp(a.StartedAt.Add(-a.Paced)), trace.WithAttributes(
				KeyAttempt.Int(a.N), KeyDelaySource.String(string(stream.SourceReset)), KeyWaited.Int64(ms(a.Paced))))
		}
		t.httpSpan(ctx, ti, a, i)
		if a.Waited >= minWait || a.WaitPlanned >= minWait {
			ea := []attribute.KeyValue{KeyAttempt.Int(a.N), KeyDelaySource.String(string(a.DelaySource)),
				KeyWaited.Int64(ms(a.Waited)), KeyWaitPlanned.Int64(ms(a.WaitPlanned))}
			if a.RetryAfter != nil {
				ea = append(ea, KeyRetryAfter.Int64(ms(*a.RetryAfter)))
			}
			sp.AddEvent(EventWait, trace.WithTimestamp(a.StartedAt.Add(a.Duration)), trace.WithAttributes(ea...))
		}
	}
	if errType != "" {
		sp.SetStatus(codes.Error, errType)
	}
	sp.End(trace.WithTimestamp(last.StartedAt.Add(last.Duration)))
	t.spansEnded.Add(1)
}

// httpError is an HTTP request's error.type under the HTTP conventions:
// its status code when it is an error, else limitscope's class of the
// failure ("" when it succeeded).
func httpError(a *retry.Attempt) string {
	switch {
	case a.Status >= 400:
		return strconv.Itoa(a.Status)
	case a.Class != stream.ClassOK:
		return string(a.Class)
	}
	return ""
}

// httpSpan is one HTTP request of the call (an attempt), a client span
// under its inference, under the HTTP client conventions; resends is the
// requests before it in the same inference.
func (t *Telemetry) httpSpan(ctx context.Context, ti *targetInfo, a *retry.Attempt, resends int) {
	attrs := t.spanAttrs()
	attrs = append(attrs, ti.target, KeyAttempt.Int(a.N),
		KeyClass.String(string(a.Class)), KeyDecision.String(string(a.Decision)))
	if resends > 0 {
		attrs = append(attrs, semconv.HTTPRequestResendCount(resends))
	}
	errType := httpError(a)
	if errType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(errType))
	}
	if a.Status > 0 {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(a.Status))
	}
	if a.Code != "" {
		attrs = append(attrs, KeyCode.String(sanitize.Printable(a.Code)))
	}
	if a.Message != "" && a.Class != stream.ClassOK {
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
	attrs = append(attrs, tierAttrs(a)...)
	if a.DelaySource != "" {
		attrs = append(attrs, KeyDelaySource.String(string(a.DelaySource)))
	}
	if a.RetryAfter != nil {
		attrs = append(attrs, KeyRetryAfter.Int64(ms(*a.RetryAfter)))
	}
	if a.Waited >= minWait || a.WaitPlanned >= minWait {
		attrs = append(attrs, KeyWaited.Int64(ms(a.Waited)), KeyWaitPlanned.Int64(ms(a.WaitPlanned)))
	}
	if a.Paced >= minWait {
		attrs = append(attrs, KeyPaced.Int64(ms(a.Paced)))
	}
	if a.FailedOverByUser {
		attrs = append(attrs, KeyByUser.Bool(true))
	}
	_, sp := t.tracer.Start(ctx, http.MethodPost, t.startOpts(a.StartedAt, trace.SpanKindClient, ti.httpStart...)...)
	sp.SetAttributes(attrs...)
	t.putAttrs(attrs)
	end := a.StartedAt.Add(a.Duration)
	if a.Cooldown != nil {
		ea := []attribute.KeyValue{KeyReason.String(sanitize.Printable(a.Cooldown.Code))}
		if !a.Cooldown.Until.IsZero() {
			ea = append(ea, KeyCooldownTill.String(a.Cooldown.Until.UTC().Format(time.RFC3339)))
		}
		sp.AddEvent(EventCooldown, trace.WithTimestamp(end), trace.WithAttributes(ea...))
	}
	if errType != "" {
		sp.SetStatus(codes.Error, errType)
	}
	sp.End(trace.WithTimestamp(end))
	t.spansEnded.Add(1)
}

// contentAttrs are the prompt and answer, in the GenAI conventions' message
// shape, for an explicit opt-in only.
func contentAttrs(c retry.Call, res *retry.Result, answered bool) []attribute.KeyValue {
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
	if answered && res.Text != "" {
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

// add is o as a counter's options.
func (o recordOpts) add() []metric.AddOption {
	out := make([]metric.AddOption, 0, len(o))
	for _, r := range o {
		if mo, ok := r.(metric.MeasurementOption); ok {
			out = append(out, mo)
		}
	}
	return out
}

// attrs is the record options of the attribute set kvs, built once and
// reused: sorting a set for every measurement is most of recording's
// cost. Only the worker calls it.
func (t *Telemetry) attrs(kvs ...attribute.KeyValue) recordOpts {
	var k setKey // an array of the keys and values: no allocation to look up
	if len(kvs) > len(k)/2 {
		return recordOpts{metric.WithAttributeSet(attribute.NewSet(slices.Clone(kvs)...))}
	}
	for i, kv := range kvs {
		k[2*i] = string(kv.Key)
		if kv.Value.Type() == attribute.STRING {
			k[2*i+1] = kv.Value.AsString()
		} else {
			k[2*i+1] = kv.Value.String()
		}
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

// setKey identifies a set of up to eight attributes.
type setKey [16]string

// record adds one ended call to the metrics: a point per inference (and
// its chunks and tokens), per HTTP request, per wait, per call.
func (t *Telemetry) record(ctx context.Context, j job, legs []leg) {
	in, res := t.inst, j.res
	var kvs [8]attribute.KeyValue
	for li, l := range legs {
		first, last := &res.Attempts[l.first], &res.Attempts[l.last]
		ti := t.info(first.Target)
		ok := served(res, legs, li)
		a := append(kvs[:0], semconv.GenAIOperationNameChat, ti.genProv, ti.metricModel)
		a = append(a, ti.server...)
		if ok {
			a = append(a, semconv.GenAIResponseModel(t.modelLabel(t.bounds.Load(), res.ServedBy.Provider, res.ServedBy.Model)))
		}
		if e := legError(res, last, ok); e != "" {
			a = append(a, semconv.ErrorTypeKey.String(e))
		}
		opt := t.attrs(a...)
		start := first.StartedAt
		if first.Paced >= minWait {
			start = start.Add(-first.Paced)
		}
		in.opDuration.Record(ctx, last.StartedAt.Add(last.Duration).Sub(start).Seconds(), opt...)
		if last.TTFT > 0 {
			in.ttfc.Record(ctx, last.TTFT.Seconds(), opt...)
		}
		if !ok {
			continue
		}
		for _, g := range j.chunks {
			in.tpoc.Record(ctx, g.Seconds(), opt...)
		}
		if res.Usage == nil {
			continue
		}
		if t.latest {
			in.opIn.Record(ctx, int64(res.Usage.InputTokens), opt...)
			in.opOut.Record(ctx, int64(res.Usage.OutputTokens), opt...)
			in.usageIn.Add(ctx, int64(res.Usage.InputTokens), opt.add()...)
			in.usageOut.Add(ctx, int64(res.Usage.OutputTokens), opt.add()...)
			if last.ReasoningTokens > 0 {
				in.reasoning.Add(ctx, int64(last.ReasoningTokens), opt.add()...)
			}
			continue
		}
		in.tokens.Record(ctx, int64(res.Usage.InputTokens), t.attrs(append(a, semconv.GenAITokenTypeInput)...)...)
		in.tokens.Record(ctx, int64(res.Usage.OutputTokens), t.attrs(append(a, semconv.GenAITokenTypeOutput)...)...)
	}
	for i := range res.Attempts {
		at := &res.Attempts[i]
		ti := t.info(at.Target)
		a := append(kvs[:0], ti.httpStart...)
		if at.Status > 0 {
			a = append(a, semconv.HTTPResponseStatusCode(at.Status))
		}
		if e := httpError(at); e != "" {
			a = append(a, semconv.ErrorTypeKey.String(e))
		}
		in.httpDuration.Record(ctx, at.Duration.Seconds(), t.attrs(a...)...)
		if at.Waited >= minWait {
			src := string(at.DelaySource)
			if src == "" {
				src = "none"
			}
			in.waits.Record(ctx, at.Waited.Seconds(), t.attrs(ti.genProv, KeyDelaySource.String(src))...)
		}
		if at.Paced >= minWait {
			in.waits.Record(ctx, at.Paced.Seconds(), t.attrs(ti.genProv, KeyDelaySource.String("pacing"))...)
		}
		if l := at.Limits; !l.Empty() && !ti.other {
			t.gauges.store(ti, l)
		}
	}
	oo := t.attrs(KeyOutcome.String(string(res.Outcome)))
	in.attempts.Record(ctx, int64(len(res.Attempts)), oo...)
	if !res.Ended.IsZero() {
		in.callDuration.Record(ctx, res.Ended.Sub(res.Started).Seconds(), oo...)
	}
}

// tierAttrs are an attempt's service-tier attributes: the tier asked, the
// one served, a downgrade (none when no tier was asked or named).
func tierAttrs(a *retry.Attempt) []attribute.KeyValue {
	var out []attribute.KeyValue
	if a.Target.Tier != "" {
		out = append(out, KeyTier.String(a.Target.Tier))
	}
	if a.ServedTier != "" {
		out = append(out, KeyServedTier.String(sanitize.Printable(a.ServedTier)))
	}
	if a.Downgraded {
		out = append(out, KeyDowngraded.Bool(true))
	}
	return out
}
