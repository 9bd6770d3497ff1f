// Package telemetry exports limitscope's calls to OpenTelemetry and
// Prometheus: a trace per call with a span per attempt (waits, pacing and
// failovers as span events), following the OpenTelemetry GenAI semantic
// conventions where they apply and a limitscope.* namespace for the rest,
// and metrics (operation duration, token usage, attempts per call, waits,
// rate-limit remaining per window).
//
// Export is off unless the standard OTEL_EXPORTER_OTLP_ENDPOINT (or a
// per-signal OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / _METRICS_ENDPOINT) is set;
// the other standard OTEL_* variables (headers, timeout, compression,
// certificates, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER=none) are
// honoured by the OpenTelemetry Go SDK. Only OTLP over HTTP (protobuf) is
// spoken. Prompt and answer text are exported only when
// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.
//
// A call never waits on telemetry: its events are handed over on a bounded
// queue and built into spans and metrics off the call's goroutine; when the
// queue is full (a collector that cannot keep up or cannot be reached) they
// are dropped and counted (Stats).
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
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
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
)

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
}

// Telemetry is one command's export. A nil *Telemetry exports nothing and
// every method is safe on it.
type Telemetry struct {
	tp      *sdktrace.TracerProvider // nil: no traces
	mp      *sdkmetric.MeterProvider // nil: no metrics
	tracer  trace.Tracer
	inst    instruments
	content bool
	prom    http.Handler
	stderr  io.Writer
	// The worker's alone: what export builds once and reuses.
	sets    map[setKey]recordOpts           // metric attribute sets
	targets map[stream.Target]*targetInfo   // per target: strings, attributes, sets
	chains  map[chainKey]attribute.KeyValue // limitscope.chain per chain
	scratch []attribute.KeyValue            // a span's attributes, before the span copies them
	opts    []trace.SpanStartOption         // a span's start options
	gauges  gauges                          // the rate-limit gauges' latest figures

	jobs chan job
	quit chan struct{}
	kick chan struct{} // Flush: drain now
	done chan struct{}
	once sync.Once

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

// job is one ended call, as the engine reported it.
type job struct {
	call    retry.Call
	res     *retry.Result
	barrier chan struct{} // Flush's: closed when reached
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
		stderr:  o.Stderr,
		quit:    make(chan struct{}),
		kick:    make(chan struct{}, 1),
		sets:    map[setKey]recordOpts{},
		targets: map[stream.Target]*targetInfo{},
		chains:  map[chainKey]attribute.KeyValue{},
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
	for _, name := range []string{EnvHeaders, EnvTracesHeaders, EnvMetricsHeaders} {
		if (tracesURL != "" || metricsURL != "") && !headersWellFormed(getenv(name)) {
			fmt.Fprintf(t.stderr, "limitscope: telemetry: %s has a malformed entry (want key=value,...; values %%-encoded); it is not sent\n", name)
		}
	}
	if p := strings.TrimSpace(getenv(EnvProtocol)); (tracesURL != "" || metricsURL != "") && p != "" && p != "http/protobuf" {
		fmt.Fprintf(t.stderr, "limitscope: telemetry: %s=%s is not supported; exporting OTLP over HTTP (protobuf)\n", EnvProtocol, p)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("limitscope"), semconv.ServiceVersion(o.Version),
			attribute.String("limitscope.command", o.Command)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
		resource.WithTelemetrySDK())
	if err != nil && res == nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}

	if tracesURL != "" {
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(tracesURL)}
		if o.HTTPClient != nil {
			opts = append(opts, otlptracehttp.WithHTTPClient(o.HTTPClient))
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: traces exporter: %w", err)
		}
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithResource(res),
			sdktrace.WithBatcher(&countingSpans{SpanExporter: exp, t: t}, sdktrace.WithMaxQueueSize(8192)))
		t.tracer = t.tp.Tracer("github.com/limitscope/limitscope/telemetry")
	}

	var readers []sdkmetric.Option
	if metricsURL != "" {
		opts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpointURL(metricsURL)}
		if o.HTTPClient != nil {
			opts = append(opts, otlpmetrichttp.WithHTTPClient(o.HTTPClient))
		}
		exp, err := otlpmetrichttp.New(ctx, opts...)
		if err != nil {
			t.shutdown(ctx)
			return nil, fmt.Errorf("telemetry: metrics exporter: %w", err)
		}
		readers = append(readers, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(&countingMetrics{Exporter: exp, t: t})))
	}
	if o.Prometheus {
		reg := prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
		if err != nil {
			t.shutdown(ctx)
			return nil, fmt.Errorf("telemetry: prometheus: %w", err)
		}
		readers = append(readers, sdkmetric.WithReader(exp))
		t.prom = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	if len(readers) > 0 {
		t.mp = sdkmetric.NewMeterProvider(append(readers, sdkmetric.WithResource(res))...)
		m := t.mp.Meter("github.com/limitscope/limitscope/telemetry")
		if t.inst, err = newInstruments(m, t); err == nil {
			err = registerQueued(m, t)
		}
		if err != nil {
			t.shutdown(ctx)
			return nil, err
		}
	}
	n := o.QueueSize
	if n <= 0 {
		n = DefaultQueueSize
	}
	t.jobs = make(chan job, n)
	go t.work()
	return t, nil
}

// Sink wraps next so that call c is exported when it ends. The wrapper
// only hands the call's end over (a channel send that never blocks); the
// spans and metrics are built elsewhere.
func (t *Telemetry) Sink(c retry.Call, next func(retry.Event)) func(retry.Event) {
	if t == nil {
		return next
	}
	c.Control = nil // not read here; nothing kept that steers a call
	return func(ev retry.Event) {
		if ev.Kind == retry.EventCallEnd && ev.Result != nil {
			t.queued.Add(1)
			select {
			case t.jobs <- job{call: c, res: ev.Result}:
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

// drainEvery is how often the worker takes what was handed over: calls
// never wake it (a buffered send wakes no one), so export costs no
// goroutine switch per call.
const drainEvery = 250 * time.Millisecond

// work builds the handed-over calls into spans and metrics, in batches
// (every drainEvery, or at once for Flush), until Close, then drains what
// is left.
func (t *Telemetry) work() {
	defer close(t.done)
	tick := time.NewTicker(drainEvery)
	defer tick.Stop()
	drain := func() {
		for {
			select {
			case j := <-t.jobs:
				if j.barrier != nil {
					close(j.barrier)
					continue
				}
				t.export(j)
			default:
				return
			}
		}
	}
	for {
		select {
		case <-tick.C:
			drain()
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
