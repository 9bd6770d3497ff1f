// Package telemetry exports limitscope's calls to OpenTelemetry and
// Prometheus: a trace per call (an internal span for the call, a GenAI
// inference span per target it tried, an HTTP client span per request;
// waits, pacing and failovers as span events), following the GenAI
// semantic conventions of semantic-conventions v1.41.0 by default (the
// names of semantic-conventions-genai v0.1.0 with
// OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental) and a
// limitscope.* namespace for the rest, and metrics (inference duration,
// time to first chunk and per chunk, token usage, HTTP request duration,
// attempts per call, waits, rate-limit remaining per window and unit, the
// proxy's calls in flight and queued).
//
// The proxy's requests are SERVER spans that continue a caller's W3C
// traceparent and tracestate (Server); a proxied call's spans are their
// children.
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
