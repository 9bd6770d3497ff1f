package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/limitscope/limitscope/retry"
	"github.com/limitscope/limitscope/stream"
)

// The environment variables read here (the SDK reads the others).
const (
	EnvEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint  = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvMetricsEndpoint = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
	EnvProtocol        = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvHeaders         = "OTEL_EXPORTER_OTLP_HEADERS"
	EnvTracesHeaders   = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	EnvMetricsHeaders  = "OTEL_EXPORTER_OTLP_METRICS_HEADERS"
	EnvSDKDisabled     = "OTEL_SDK_DISABLED"
	EnvTracesExporter  = "OTEL_TRACES_EXPORTER"
	EnvMetricsExporter = "OTEL_METRICS_EXPORTER"
	// EnvCaptureContent is the GenAI instrumentations' opt-in for prompt and
	// answer text ("true" exports them; anything else does not).
	EnvCaptureContent = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
	// EnvSemconvOptIn is the conventions' comma-separated opt-in list; with
	// OptInGenAILatest in it the GenAI names are semantic-conventions-genai
	// v0.1.0's, and v1.41.0's are no longer emitted.
	EnvSemconvOptIn = "OTEL_SEMCONV_STABILITY_OPT_IN"
	// OptInGenAILatest is EnvSemconvOptIn's value for the latest GenAI names.
	OptInGenAILatest = "gen_ai_latest_experimental"
)

// LatestGenAI reports whether getenv opts in to the latest GenAI names
// (EnvSemconvOptIn lists OptInGenAILatest).
func LatestGenAI(getenv func(string) string) bool {
	if getenv == nil {
		return false
	}
	for _, v := range strings.Split(getenv(EnvSemconvOptIn), ",") {
		if strings.TrimSpace(v) == OptInGenAILatest {
			return true
		}
	}
	return false
}

// DefaultQueueSize bounds the calls waiting to be exported.
const DefaultQueueSize = 4096

// closeCap bounds how long Close waits for a collector, whatever its ctx.
const closeCap = 2 * time.Second

// Options configure New.
type Options struct {
	Getenv  func(string) string // the environment (os.Getenv); nil: an empty one
	Version string              // limitscope's version (service.version)
	Command string              // "send", "tui", "proxy" (limitscope.command on the resource)
	// Prometheus also keeps the metrics for a Prometheus scrape
	// (MetricsHandler), with or without OTLP export.
	Prometheus bool
	// QueueSize bounds the calls handed over and not yet exported
	// (0: DefaultQueueSize); past it a call's telemetry is dropped and counted.
	QueueSize int
	// Stderr gets one line at Close when something could not be exported,
	// and a warning for a protocol other than http/protobuf (nil: none).
	Stderr io.Writer
	// HTTPClient, when set, is the OTLP exporters' client (tests).
	HTTPClient *http.Client
	// BaseURL is the base URL a target's requests go to, for server.address
	// and server.port ("" or nil: unknown, not set).
	BaseURL func(stream.Target) string
	// Sampler, when set, is the tracer provider's sampler (tests; the SDK
	// otherwise reads OTEL_TRACES_SAMPLER).
	Sampler sdktrace.Sampler
}

// Telemetry is one command's export. A nil *Telemetry exports nothing and
// every method is safe on it.
type Telemetry struct {
	tp            *sdktrace.TracerProvider // nil: no traces
	mp            *sdkmetric.MeterProvider // nil: no metrics
	tracer        trace.Tracer
	inst          instruments
	content       bool
	latest        bool // semantic-conventions-genai's names (EnvSemconvOptIn)
	baseURL       func(stream.Target) string
	bounds        atomic.Pointer[labelBounds] // the model label values kept (nil: the first maxModels)
	proxyInFlight atomic.Pointer[func() int64]
	// proxyHeldWaiting reads the proxy's held answers waiting for room (ObserveProxyHeldWaiting).
	proxyHeldWaiting atomic.Pointer[func() int64]
	prom             http.Handler
	stderr           io.Writer
	// The worker's alone: what export builds once and reuses.
	sets    map[setKey]recordOpts           // metric attribute sets
	targets map[stream.Target]*targetInfo   // per target: strings, attributes, sets
	chains  map[chainKey]attribute.KeyValue // limitscope.chain per chain
	models  map[string]bool                 // the model label values seen without bounds (up to maxModels)
	scratch []attribute.KeyValue            // a span's attributes, before the span copies them
	opts    []trace.SpanStartOption         // a span's start options
	gauges  gauges                          // the rate-limit gauges' latest figures

	jobs chan job
	quit chan struct{}
	kick chan struct{} // Flush, or a call handed over to a sleeping worker: drain now
	// asleep is set while the worker waits with its ticker stopped (nothing
	// was handed over for two ticks): the next call handed over wakes it.
	asleep atomic.Bool
	done   chan struct{}
	once   sync.Once

	queuedCalls           atomic.Pointer[func() int] // the calls-queued gauge's source (SetQueued)
	queued, dropped       atomic.Uint64
	spansEnded            atomic.Uint64
	spansOK, spansFailed  atomic.Uint64
	metricsOK, metricsBad atomic.Uint64
}

// Stats counts what was exported and what was not.
type Stats struct {
	Calls         uint64 // calls handed over for export
	Dropped       uint64 // calls dropped because the queue was full
	Spans         uint64 // spans ended
	SpansExported uint64 // spans the collector accepted
	SpansFailed   uint64 // spans in exports that failed
	MetricExports uint64 // metric exports the collector accepted
	MetricFailed  uint64 // metric exports that failed
}

// job is one ended call, as the engine reported it, or one served
// request's end.
type job struct {
	call    retry.Call
	res     *retry.Result
	chunks  []time.Duration // the serving attempt's gaps between text chunks (up to maxChunks)
	srv     *serverReq      // the proxy request the call served (nil: none)
	end     *serverEnd      // a served request's end (then call and res are unset)
	barrier chan struct{}   // Flush's: closed when reached
}

// Enabled reports whether OTLP export is asked for by getenv, and the
// traces and metrics endpoints ("" for a signal that is off).
func Enabled(getenv func(string) string) (traces, metrics string) {
	if getenv == nil || strings.EqualFold(strings.TrimSpace(getenv(EnvSDKDisabled)), "true") {
		return "", ""
	}
	url := func(specific, signal string) string {
		if u := strings.TrimSpace(getenv(specific)); u != "" {
			return u
		}
		if u := strings.TrimSpace(getenv(EnvEndpoint)); u != "" {
			return strings.TrimSuffix(u, "/") + "/v1/" + signal
		}
		return ""
	}
	traces, metrics = url(EnvTracesEndpoint, "traces"), url(EnvMetricsEndpoint, "metrics")
	if strings.EqualFold(strings.TrimSpace(getenv(EnvTracesExporter)), "none") {
		traces = ""
	}
	if strings.EqualFold(strings.TrimSpace(getenv(EnvMetricsExporter)), "none") {
		metrics = ""
	}
	return traces, metrics
}

// headersWellFormed reports whether v, an OTEL_EXPORTER_OTLP_HEADERS value,
// parses as the SDK parses it: comma-separated key=value entries, each key
// an HTTP token, each value %-decodable.
func headersWellFormed(v string) bool {
	if strings.TrimSpace(v) == "" {
		return true
	}
	for _, entry := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(entry, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsFunc(k, func(r rune) bool { return !isTokenChar(r) }) {
			return false
		}
		if _, err := url.PathUnescape(val); err != nil {
			return false
		}
	}
	return true
}

// isTokenChar reports whether r may be in an HTTP header name (RFC 9110 tchar).
func isTokenChar(r rune) bool {
	return r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r))
}

// New sets up export as the environment asks. It returns nil (and no
// error) when nothing is to be exported: no OTLP endpoint and no Prometheus.
func New(ctx context.Context, o Options) (*Telemetry, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	tracesURL, metricsURL := Enabled(getenv)
	if tracesURL == "" && metricsURL == "" && !o.Prometheus {
		return nil, nil
	}
	t := &Telemetry{
		content: strings.EqualFold(strings.TrimSpace(getenv(EnvCaptureContent)), "true"),
		latest:  LatestGenAI(getenv),
		baseURL: o.BaseURL,
		stderr:  o.Stderr,
		quit:    make(chan struct{}),
		kick:    make(chan struct{}, 1),
		sets:    map[setKey]recordOpts{},
		targets: map[stream.Target]*targetInfo{},
		chains:  map[chainKey]attribute.KeyValue{},
		models:  map[string]bool{},
		scratch: make([]attribute.KeyValue, 0, 32),
		done:    make(chan struct{}),
	}
	if t.stderr == nil {
		t.stderr = io.Discard
	}
	// The SDK logs what it cannot parse in the OTEL_* variables, a header
	// entry with its value (often a token) included, through OpenTelemetry's
	// process-wide logger (stderr by default): that logger is silenced, and a
	// malformed entry is reported here by variable name only.
	otel.SetLogger(logr.Discard())
	warnEnv(t.stderr, getenv, tracesURL != "" || metricsURL != "")
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("limitscope"), semconv.ServiceVersion(o.Version),
			attribute.String("limitscope.command", o.Command)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
		resource.WithTelemetrySDK())
	if err != nil && res == nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}

	if tracesURL != "" {
		if err := t.startTraces(ctx, o, tracesURL, res); err != nil {
			return nil, err
		}
	}
	if err := t.startMetrics(ctx, o, metricsURL, res); err != nil {
		t.shutdown(ctx)
		return nil, err
	}
	n := o.QueueSize
	if n <= 0 {
		n = DefaultQueueSize
	}
	t.jobs = make(chan job, n)
	go t.work()
	return t, nil
}

// warnEnv reports, by variable name only, the OTEL_* settings export
// cannot honour (exporting: an OTLP endpoint is set): a malformed header
// entry, a protocol other than http/protobuf.
func warnEnv(stderr io.Writer, getenv func(string) string, exporting bool) {
	for _, name := range []string{EnvHeaders, EnvTracesHeaders, EnvMetricsHeaders} {
		if exporting && !headersWellFormed(getenv(name)) {
			fmt.Fprintf(stderr, "limitscope: telemetry: %s has a malformed entry (want key=value,...; values %%-encoded); it is not sent\n", name)
		}
	}
	if p := strings.TrimSpace(getenv(EnvProtocol)); exporting && p != "" && p != "http/protobuf" {
		fmt.Fprintf(stderr, "limitscope: telemetry: %s=%s is not supported; exporting OTLP over HTTP (protobuf)\n", EnvProtocol, p)
	}
}

// startTraces exports spans to url.
func (t *Telemetry) startTraces(ctx context.Context, o Options, url string, res *resource.Resource) error {
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(url)}
	if o.HTTPClient != nil {
		opts = append(opts, otlptracehttp.WithHTTPClient(o.HTTPClient))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return fmt.Errorf("telemetry: traces exporter: %w", err)
	}
	tpo := []sdktrace.TracerProviderOption{sdktrace.WithResource(res),
		sdktrace.WithBatcher(&countingSpans{SpanExporter: exp, t: t}, sdktrace.WithMaxQueueSize(8192))}
	if o.Sampler != nil {
		tpo = append(tpo, sdktrace.WithSampler(o.Sampler))
	}
	t.tp = sdktrace.NewTracerProvider(tpo...)
	t.tracer = t.tp.Tracer("github.com/limitscope/limitscope/telemetry")

	return nil
}

// startMetrics exports metrics to url (none: "") and, with o.Prometheus,
// serves them for scraping; the caller shuts t down on an error.
func (t *Telemetry) startMetrics(ctx context.Context, o Options, url string, res *resource.Resource) error {
	var readers []sdkmetric.Option
	if url != "" {
		opts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpointURL(url)}
		if o.HTTPClient != nil {
			opts = append(opts, otlpmetrichttp.WithHTTPClient(o.HTTPClient))
		}
		exp, err := otlpmetrichttp.New(ctx, opts...)
		if err != nil {
			return fmt.Errorf("telemetry: metrics exporter: %w", err)
		}
		readers = append(readers, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(&countingMetrics{Exporter: exp, t: t})))
	}
	if o.Prometheus {
		reg := prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
		if err != nil {
			return fmt.Errorf("telemetry: prometheus: %w", err)
		}
		readers = append(readers, sdkmetric.WithReader(exp))
		t.prom = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	if len(readers) > 0 {
		t.mp = sdkmetric.NewMeterProvider(append(readers, sdkmetric.WithResource(res))...)
		m := t.mp.Meter("github.com/limitscope/limitscope/telemetry")
		var err error
		if t.inst, err = newInstruments(m, t); err != nil {
			return err
		}
	}
	return nil
}

// maxChunks bounds the gaps between text chunks kept for one call.
const maxChunks = 4096

// Sink wraps next so that call c is exported when it ends. The wrapper
// only notes when text chunks arrive and hands the call's end over (a
// channel send that never blocks); the spans and metrics are built
// elsewhere.
func (t *Telemetry) Sink(c retry.Call, next func(retry.Event)) func(retry.Event) {
	return t.SinkContext(context.Background(), c, next)
}

// SinkContext is Sink for a call made while serving a request whose
// context is ctx: when Server put the request's trace context there, the
// call's spans are children of the request's SERVER span.
func (t *Telemetry) SinkContext(ctx context.Context, c retry.Call, next func(retry.Event)) func(retry.Event) {
	if t == nil {
		return next
	}
	c.Control = nil // not read here; nothing kept that steers a call
	srv, _ := ctx.Value(serverKey{}).(*serverReq)
	var last time.Time
	var chunks []time.Duration
	return func(ev retry.Event) {
		switch ev.Kind {
		case retry.EventAttemptStart:
			last, chunks = time.Time{}, chunks[:0]
		case retry.EventText:
			if !last.IsZero() && len(chunks) < maxChunks {
				chunks = append(chunks, ev.Time.Sub(last))
			}
			last = ev.Time
		case retry.EventCallEnd:
			if ev.Result == nil {
				break
			}
			t.queued.Add(1)
			select {
			case t.jobs <- job{call: c, res: ev.Result, chunks: chunks, srv: srv}:
				chunks = nil // the worker's now
				t.wakeIfAsleep()
			default:
				t.dropped.Add(1)
			}
		}
		if next != nil {
			next(ev)
		}
	}
}

// Flush waits until every call handed over so far has been built into its
// spans and metrics (not until they reach a collector), or ctx ends.
func (t *Telemetry) Flush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	b := make(chan struct{})
	select {
	case t.jobs <- job{barrier: b}:
		select {
		case t.kick <- struct{}{}:
		default: // a drain is already asked for
		}
	case <-t.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("telemetry: flush: %w", ctx.Err())
	}
	select {
	case <-b:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("telemetry: flush: %w", ctx.Err())
	}
}

// MetricsHandler serves the metrics for a Prometheus scrape; nil unless
// Options.Prometheus.
func (t *Telemetry) MetricsHandler() http.Handler {
	if t == nil {
		return nil
	}
	return t.prom
}

// Stats counts what was exported so far.
func (t *Telemetry) Stats() Stats {
	if t == nil {
		return Stats{}
	}
	return Stats{Calls: t.queued.Load(), Dropped: t.dropped.Load(), Spans: t.spansEnded.Load(),
		SpansExported: t.spansOK.Load(), SpansFailed: t.spansFailed.Load(),
		MetricExports: t.metricsOK.Load(), MetricFailed: t.metricsBad.Load()}
}

// Close exports what is queued and stops, waiting at most a few seconds
// for the collector (less when ctx ends sooner). What could not be
// exported is counted in one line on Options.Stderr (never a header value).
func (t *Telemetry) Close(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var err error
	t.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeCap)
		defer cancel()
		close(t.quit)
		select {
		case <-t.done:
		case <-ctx.Done():
		}
		err = t.shutdown(ctx)
		s := t.Stats()
		lostSpans := s.Spans - min(s.Spans, s.SpansExported)
		if t.tp == nil {
			lostSpans = 0
		}
		if s.Dropped > 0 || lostSpans > 0 || s.MetricFailed > 0 {
			fmt.Fprintf(t.stderr, "limitscope: telemetry: not exported (the OTLP collector is unreachable or too slow?): %d spans, %d metric exports; %d of %d calls dropped from a full queue\n",
				lostSpans, s.MetricFailed, s.Dropped, s.Calls)
		}
	})
	return err
}

func (t *Telemetry) shutdown(ctx context.Context) error {
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.Shutdown(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	return nil
}

// wakeIfAsleep wakes a sleeping worker for what was just handed over; a
// ticking one is left alone (no goroutine switch per call).
func (t *Telemetry) wakeIfAsleep() {
	if t.asleep.Load() && t.asleep.CompareAndSwap(true, false) {
		select {
		case t.kick <- struct{}{}:
		default:
		}
	}
}

// drainEvery is how often the worker takes what was handed over while
// calls come: calls never wake a ticking worker (a buffered send wakes no
// one), so export costs no goroutine switch per call.
const drainEvery = 250 * time.Millisecond

// work builds the handed-over calls into spans and metrics, in batches
// (every drainEvery, or at once for Flush), until Close, then drains what
// is left. After two ticks with nothing handed over it stops its ticker
// and sleeps until a call or a Flush wakes it: an idle process (the
// console with nobody typing) is not woken four times a second.
func (t *Telemetry) work() {
	defer close(t.done)
	tick := time.NewTicker(drainEvery)
	defer tick.Stop()
	drain := func() (n int) {
		for {
			select {
			case j := <-t.jobs:
				n++
				switch {
				case j.barrier != nil:
					close(j.barrier)
				case j.end != nil:
					t.endServer(j.end)
				default:
					t.export(j)
				}
			default:
				return n
			}
		}
	}
	idle := 0
	for {
		select {
		case <-tick.C:
			if drain() > 0 {
				idle = 0
				continue
			}
			if idle++; idle < 2 {
				continue
			}
			tick.Stop()
			t.asleep.Store(true)
			// A call handed over before asleep was set saw it unset and
			// did not kick: look once more before sleeping.
			if len(t.jobs) == 0 {
				select {
				case <-t.kick:
				case <-t.quit:
					drain()
					return
				}
			}
			t.asleep.Store(false)
			drain()
			tick.Reset(drainEvery)
			idle = 0
		case <-t.kick:
			drain()
		case <-t.quit:
			drain()
			return
		}
	}
}

// countingSpans counts what the collector took and what it did not, and
// keeps export errors from the SDK's global error handler (which would
// print them over the console).
type countingSpans struct {
	sdktrace.SpanExporter
	t *Telemetry
}

func (c *countingSpans) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := c.SpanExporter.ExportSpans(ctx, spans); err != nil {
		c.t.spansFailed.Add(uint64(len(spans)))
		return nil
	}
	c.t.spansOK.Add(uint64(len(spans)))
	return nil
}

// countingMetrics is countingSpans for metrics.
type countingMetrics struct {
	sdkmetric.Exporter
	t *Telemetry
}

func (c *countingMetrics) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	if err := c.Exporter.Export(ctx, rm); err != nil {
		c.t.metricsBad.Add(1)
		return nil
	}
	c.t.metricsOK.Add(1)
	return nil
}
