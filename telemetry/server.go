package telemetry

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/limitscope/limitscope/stream"
)

// serverKey is the request context's key of its *serverReq.
type serverKey struct{}

// serverReq is one request the proxy served, as Server saw it arrive. It is
// written before the request is served and only read after (by the worker,
// through the jobs channel), but for span, which only the worker touches.
type serverReq struct {
	parent    trace.SpanContext // the caller's (remote), or invalid
	start     time.Time
	method    string
	path      string
	scheme    string
	host      string
	port      int
	userAgent string
	span      trace.Span      // the worker's: started with the first of its calls, or at its end
	ctx       context.Context // the worker's: span's context
}

// serverEnd is how a served request ended.
type serverEnd struct {
	req    *serverReq
	at     time.Time
	status int
}

// traceContext is the W3C trace context propagator (traceparent and
// tracestate), whatever the process-wide propagator is.
var traceContext = propagation.TraceContext{}

// Server wraps the proxy's handler: each POST it serves (a completion
// call) becomes a SERVER span that continues the caller's W3C traceparent
// and tracestate, the parent of the spans of the calls made for it (those
// whose sink was made with SinkContext and the request's context). Like
// the calls' spans, it is built off the request's path: Server only reads
// the headers and hands the request's end over. Other requests (GET
// /v1/models, /metrics) pass through.
func (t *Telemetry) Server(next http.Handler) http.Handler {
	if t == nil || t.tracer == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		sr := &serverReq{
			parent:    trace.SpanContextFromContext(traceContext.Extract(context.Background(), propagation.HeaderCarrier(r.Header))),
			start:     time.Now(),
			method:    r.Method,
			path:      r.URL.Path,
			scheme:    "http",
			userAgent: r.UserAgent(),
		}
		if r.TLS != nil {
			sr.scheme = "https"
		}
		sr.host, sr.port = hostPort(r.Host, sr.scheme)
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), serverKey{}, sr)))
		st := sw.status
		if st == 0 {
			st = http.StatusOK
		}
		select {
		case t.jobs <- job{end: &serverEnd{req: sr, at: time.Now(), status: st}}:
			t.wakeIfAsleep()
		default:
			t.dropped.Add(1)
		}
	})
}

// hostPort splits a Host header into server.address and server.port (the
// scheme's default when it names none).
func hostPort(host, scheme string) (string, int) {
	h, p, err := net.SplitHostPort(host)
	if err != nil {
		h = host
		p = "80"
		if scheme == "https" {
			p = "443"
		}
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

// statusWriter notes the status a handler wrote; it passes Flush and the
// ResponseController's methods on.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush flushes the response when the underlying writer can.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap is for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// serverContext is the context a served request's calls' spans start in:
// its SERVER span's, the span started now (at the request's arrival time)
// if it is not yet. Only the worker calls it.
func (t *Telemetry) serverContext(sr *serverReq) context.Context {
	if sr.span != nil {
		return sr.ctx
	}
	ctx := context.Background()
	if sr.parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sr.parent)
	}
	route := sr.path
	attrs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(sr.method), semconv.HTTPRoute(route),
		semconv.URLPath(sr.path), semconv.URLScheme(sr.scheme)}
	if sr.host != "" {
		attrs = append(attrs, semconv.ServerAddress(sr.host), semconv.ServerPort(sr.port))
	}
	ctx, sp := t.tracer.Start(ctx, sr.method+" "+route, trace.WithTimestamp(sr.start),
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	if sr.userAgent != "" {
		sp.SetAttributes(semconv.UserAgentOriginal(sr.userAgent))
	}
	sr.span, sr.ctx = sp, ctx
	return ctx
}

// endServer ends a served request's SERVER span.
func (t *Telemetry) endServer(e *serverEnd) {
	if t.tracer == nil {
		return
	}
	t.serverContext(e.req)
	sp := e.req.span
	sp.SetAttributes(semconv.HTTPResponseStatusCode(e.status))
	if e.status >= 500 {
		sp.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(e.status)))
		sp.SetStatus(codes.Error, "")
	}
	sp.End(trace.WithTimestamp(e.at))
	t.spansEnded.Add(1)
}

// labelBounds are the model label values the metrics keep: the routes and
// targets the proxy serves. Any other model is counted under OtherModel.
type labelBounds struct {
	models map[string]bool // by provider "\x00" model
}

// OtherModel is the model label value of a model the proxy does not
// serve (Bound), or of models past the first few hundred without bounds.
const OtherModel = "other"

// maxModels bounds the distinct model label values without Bound.
const maxModels = 256

// Bound keeps the metrics' model label values (gen_ai.request.model,
// gen_ai.response.model) to the given targets (the ones the proxy routes
// to, its aliases' chains included): a call to any other model, and an
// upstream answer naming another model, are counted under OtherModel, so
// callers cannot grow the series without bound. Spans keep the real names.
func (t *Telemetry) Bound(targets []stream.Target) {
	if t == nil {
		return
	}
	b := &labelBounds{models: make(map[string]bool, 2*len(targets))}
	for _, tg := range targets {
		b.models[tg.Provider+"\x00"+tg.Model] = true
	}
	t.bounds.Store(b)
}

// SetQueued names what the limitscope.proxy.calls.queued gauge reads: the
// calls waiting for a concurrency slot at a target's gate (the engine's
// pacer's Queued), read whenever metrics are collected; until it is called
// the gauge reads 0. Safe on nil.
func (t *Telemetry) SetQueued(f func() int) {
	if t != nil && f != nil {
		t.queuedCalls.Store(&f)
	}
}

// ObserveProxyHeldWaiting has the limitscope.proxy.answers.waiting gauge
// read waiting (the proxy's held answers waiting for room under its cap on
// queued answer bytes) whenever metrics are collected. Safe on nil.
func (t *Telemetry) ObserveProxyHeldWaiting(waiting func() int64) {
	if t != nil && waiting != nil {
		t.proxyHeldWaiting.Store(&waiting)
	}
}

// ObserveProxyInFlight has the limitscope.proxy.calls.in_flight gauge
// read inFlight (the proxy's calls being served) whenever metrics are
// collected. Safe on nil.
func (t *Telemetry) ObserveProxyInFlight(inFlight func() int64) {
	if t != nil && inFlight != nil {
		t.proxyInFlight.Store(&inFlight)
	}
}
