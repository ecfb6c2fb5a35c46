// Package tracing exports one OpenTelemetry span per tool call to an OTLP
// collector, following the OpenTelemetry GenAI and MCP semantic
// conventions (gen_ai.operation.name execute_tool, gen_ai.tool.name,
// mcp.method.name, error.type) with toolgate's own attributes
// (toolgate.error.code, toolgate.reason, ...) and its check decisions as
// span events.
//
// A span is built from the call's finished sink.Event and the caller's W3C
// traceparent, which makes it the span's parent: its start is the call's
// arrival and its end the end of its answer. It never holds argument
// values, only the paths of violations (the same rule as the event).
//
// Export never makes a call wait: a finished span goes to a bounded queue
// (Config.QueueSize) in front of the OpenTelemetry SDK's batch span
// processor, and a span that finds the queue full, or whose export
// failed, is dropped and counted (toolgate_tracing_spans_dropped_total).
package tracing

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/sink"
)

// Options are the exporter's collaborators and the names it reports.
type Options struct {
	// Logger receives export failures, at most one line a minute. Default:
	// discard.
	Logger *slog.Logger
	// Sidecar is the spans' service.instance.id. Default "".
	Sidecar string
	// Version is the spans' service.version. Default "".
	Version string
}

// Exporter builds and exports the spans. Its methods are safe for
// concurrent use.
type Exporter struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	log    *slog.Logger

	pending                atomic.Int64 // spans queued or being exported
	max                    int64        // Config.QueueSize
	exported, full, failed atomic.Uint64
	lastWarn               atomic.Int64 // unix seconds of the last failure logged
	lastErr                atomic.Pointer[string]
}

// Stats are the exporter's counters since it started.
type Stats struct {
	// Exported counts spans the collector accepted.
	Exported uint64 `json:"exported"`
	// DroppedQueueFull counts spans dropped because the queue was full.
	DroppedQueueFull uint64 `json:"dropped_queue_full"`
	// DroppedExportFailed counts spans whose export failed (collector
	// away, refused, timed out).
	DroppedExportFailed uint64 `json:"dropped_export_failed"`
	// Pending counts spans queued or being exported.
	Pending int64 `json:"pending"`
	// LastError is the last export failure, "" when none.
	LastError string `json:"last_error,omitempty"`
}

// New starts an exporter for a validated, enabled configuration. Nothing is
// sent until a span is.
func New(c Config, o Options) (*Exporter, error) {
	if !c.Enabled() || c.url == nil {
		return nil, errors.New("tracing: configuration not enabled or not validated")
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Exporter{log: log, max: int64(c.QueueSize)}
	opts := []otlptracehttp.Option{
		otlptracehttp.WithEndpoint(c.url.Host),
		otlptracehttp.WithURLPath(c.url.Path),
		otlptracehttp.WithTimeout(c.Timeout),
		otlptracehttp.WithHeaders(c.headers),
		// Never through an HTTP_PROXY: that may be toolgate itself.
		otlptracehttp.WithProxy(func(*http.Request) (*url.URL, error) { return nil, nil }),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 250 * time.Millisecond,
			MaxInterval: c.Timeout / 2, MaxElapsedTime: c.Timeout}),
	}
	if c.url.Scheme == "http" {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	if c.Protocol == "http/json" {
		opts = append(opts, otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON))
	}
	client, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	bsp := sdktrace.NewBatchSpanProcessor(&counting{next: client, e: e},
		sdktrace.WithMaxQueueSize(c.QueueSize), sdktrace.WithMaxExportBatchSize(c.BatchSize),
		sdktrace.WithBatchTimeout(c.BatchTimeout), sdktrace.WithExportTimeout(c.Timeout))
	attrs := []attribute.KeyValue{attribute.String("service.name", c.ServiceName)}
	if o.Sidecar != "" {
		attrs = append(attrs, attribute.String("service.instance.id", o.Sidecar))
	}
	if o.Version != "" {
		attrs = append(attrs, attribute.String("service.version", o.Version))
	}
	e.tp = sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(&gate{next: bsp, e: e}),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.ratio))),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
		sdktrace.WithIDGenerator(idGenerator{}),
	)
	e.tracer = e.tp.Tracer("github.com/toolgate/toolgate")
	// The SDK reports export errors through otel's global handler, which
	// logs each one; the exporter counts and logs them itself.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	return e, nil
}

// Shutdown exports what is queued, within ctx, and stops the exporter.
// Spans traced afterwards are dropped.
func (e *Exporter) Shutdown(ctx context.Context) error {
	return e.tp.Shutdown(ctx)
}

// Stats returns the counters.
func (e *Exporter) Stats() Stats {
	s := Stats{Exported: e.exported.Load(), DroppedQueueFull: e.full.Load(),
		DroppedExportFailed: e.failed.Load(), Pending: e.pending.Load()}
	if p := e.lastErr.Load(); p != nil {
		s.LastError = *p
	}
	return s
}

// TraceCall builds the span of one finished call and queues it. f says
// what the event does not: the caller's W3C trace context (the request's
// traceparent header, or an MCP request's params._meta.traceparent; ""
// when it sent none), which tool the call names when it is known, the
// server's JSON-RPC error. ev is only read, and not kept.
func (e *Exporter) TraceCall(ev *sink.Event, f sink.SpanFacts) {
	ctx := context.Background()
	if f.Traceparent != "" {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": f.Traceparent})
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		// A root span: its trace id is the event's, so the trace and the
		// event (trace_id) name each other.
		ctx = context.WithValue(ctx, rootTraceKey{}, ev.TraceID)
	}
	start := ev.Time
	_, span := e.tracer.Start(ctx, spanName(ev, &f), trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindClient))
	if !span.IsRecording() {
		return // sampled out: nothing more is built
	}
	end := start.Add(time.Duration(ev.TotalUS) * time.Microsecond)
	span.SetAttributes(attributes(ev, &f)...)
	addDecisions(span, ev, end)
	if failed(ev, &f) {
		span.SetStatus(codesError, statusDescription(ev, &f))
	}
	span.End(trace.WithTimestamp(end))
}

// gate is the bounded queue in front of the batch span processor: a span
// that finds Config.QueueSize spans queued or being exported is dropped
// and counted, so the batch processor never drops one unseen and never
// blocks.
type gate struct {
	next sdktrace.SpanProcessor
	e    *Exporter
}

func (g *gate) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (g *gate) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	if g.e.pending.Add(1) > g.e.max {
		g.e.pending.Add(-1)
		g.e.full.Add(1)
		g.e.warn("the span queue is full (tracing.queue_size); spans are dropped")
		return
	}
	g.next.OnEnd(s)
}

func (g *gate) Shutdown(ctx context.Context) error   { return g.next.Shutdown(ctx) }
func (g *gate) ForceFlush(ctx context.Context) error { return g.next.ForceFlush(ctx) }

// counting is the exporter behind the batch processor: it counts what the
// collector took and what was lost.
type counting struct {
	next sdktrace.SpanExporter
	e    *Exporter
}

func (c *counting) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.next.ExportSpans(ctx, spans)
	c.e.pending.Add(-int64(len(spans)))
	if err != nil {
		c.e.failed.Add(uint64(len(spans)))
		msg := err.Error()
		c.e.lastErr.Store(&msg)
		c.e.warn("exporting spans failed; they are dropped", "spans", len(spans), "err", err)
		return err
	}
	c.e.exported.Add(uint64(len(spans)))
	return nil
}

func (c *counting) Shutdown(ctx context.Context) error { return c.next.Shutdown(ctx) }

// warn logs at most one line a minute.
func (e *Exporter) warn(msg string, args ...any) {
	now := time.Now().Unix()
	last := e.lastWarn.Load()
	if now-last < 60 || !e.lastWarn.CompareAndSwap(last, now) {
		return
	}
	e.log.Warn("tracing: "+msg, args...)
}

// rootTraceKey carries, in a root span's context, the trace id it takes.
type rootTraceKey struct{}

// idGenerator gives a root span the event's trace id (from the context)
// and every span a random span id.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	if s, ok := ctx.Value(rootTraceKey{}).(string); ok && len(s) == 2*len(tid) {
		if _, err := hex.Decode(tid[:], []byte(s)); err != nil {
			tid = trace.TraceID{}
		}
	}
	for !tid.IsValid() {
		putUint64(tid[:8], rand.Uint64())
		putUint64(tid[8:], rand.Uint64())
	}
	return tid, newSpanID()
}

func (idGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		putUint64(sid[:], rand.Uint64())
	}
	return sid
}

func putUint64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (56 - 8*i))
	}
}

// Describe and Collect make the exporter a prometheus.Collector:
// toolgate_tracing_spans_exported_total,
// toolgate_tracing_spans_dropped_total{reason="queue_full"|"export_failed"}
// and toolgate_tracing_spans_pending.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	ch <- descExported
	ch <- descDropped
	ch <- descPending
}

// Collect sends the current values of the exporter's metrics.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	s := e.Stats()
	ch <- prometheus.MustNewConstMetric(descExported, prometheus.CounterValue, float64(s.Exported))
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(s.DroppedQueueFull), "queue_full")
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(s.DroppedExportFailed), "export_failed")
	ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(s.Pending))
}

var (
	descExported = prometheus.NewDesc("toolgate_tracing_spans_exported_total",
		"Spans the OTLP collector accepted.", nil, nil)
	descDropped = prometheus.NewDesc("toolgate_tracing_spans_dropped_total",
		"Spans dropped: the queue was full, or their export failed.", []string{"reason"}, nil)
	descPending = prometheus.NewDesc("toolgate_tracing_spans_pending",
		"Spans queued or being exported.", nil, nil)
)

var _ prometheus.Collector = (*Exporter)(nil)
