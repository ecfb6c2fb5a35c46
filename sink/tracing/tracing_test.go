package tracing_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/toolgate/toolgate/internal/otlptest"
	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/tracing"
)

func ratio(r float64) *float64 { return &r }

func TestConfigValidate(t *testing.T) {
	t.Setenv("TOOLGATE_TEST_OTLP_TOKEN", "s3cret")
	tests := []struct {
		name      string
		cfg       tracing.Config
		wantField string // "" when valid
		wantMsg   string
		check     func(t *testing.T, c tracing.Config)
	}{
		{name: "zero is off", cfg: tracing.Config{}, check: func(t *testing.T, c tracing.Config) {
			if c.Enabled() {
				t.Error("zero config is enabled")
			}
		}},
		{name: "settings without an endpoint", cfg: tracing.Config{QueueSize: 5}, wantField: "endpoint", wantMsg: "is required"},
		{name: "defaults", cfg: tracing.Config{Endpoint: "http://127.0.0.1:4318"}, check: func(t *testing.T, c tracing.Config) {
			if c.Protocol != tracing.DefaultProtocol || c.Timeout != tracing.DefaultTimeout || c.QueueSize != tracing.DefaultQueueSize ||
				c.BatchSize != tracing.DefaultBatchSize || c.BatchTimeout != tracing.DefaultBatchTimeout || c.ServiceName != tracing.DefaultServiceName {
				t.Errorf("defaults not applied: %+v", c)
			}
		}},
		{name: "batch defaults to a small queue", cfg: tracing.Config{Endpoint: "http://localhost:4318", QueueSize: 10}, check: func(t *testing.T, c tracing.Config) {
			if c.BatchSize != 10 {
				t.Errorf("batch_size = %d, want 10", c.BatchSize)
			}
		}},
		{name: "not a URL", cfg: tracing.Config{Endpoint: "127.0.0.1:4318"}, wantField: "endpoint", wantMsg: "http:// or https://"},
		{name: "credentials in the URL", cfg: tracing.Config{Endpoint: "https://u:p@collector.example:4318"}, wantField: "endpoint", wantMsg: "no credentials"},
		{name: "plain http to a remote host", cfg: tracing.Config{Endpoint: "http://collector.example:4318"}, wantField: "endpoint", wantMsg: "allow_insecure"},
		{name: "plain http to a remote host allowed", cfg: tracing.Config{Endpoint: "http://collector.example:4318", AllowInsecure: true}},
		{name: "grpc", cfg: tracing.Config{Endpoint: "https://c.example", Protocol: "grpc"}, wantField: "protocol", wantMsg: "not supported"},
		{name: "unknown protocol", cfg: tracing.Config{Endpoint: "https://c.example", Protocol: "thrift"}, wantField: "protocol"},
		{name: "ratio above 1", cfg: tracing.Config{Endpoint: "https://c.example", SampleRatio: ratio(1.5)}, wantField: "sample_ratio"},
		{name: "ratio 0", cfg: tracing.Config{Endpoint: "https://c.example", SampleRatio: ratio(0)}},
		{name: "negative timeout", cfg: tracing.Config{Endpoint: "https://c.example", Timeout: -time.Second}, wantField: "timeout"},
		{name: "huge queue", cfg: tracing.Config{Endpoint: "https://c.example", QueueSize: tracing.MaxQueueSize + 1}, wantField: "queue_size"},
		{name: "batch over queue", cfg: tracing.Config{Endpoint: "https://c.example", QueueSize: 4, BatchSize: 5}, wantField: "batch_size"},
		{name: "bad header name", cfg: tracing.Config{Endpoint: "https://c.example", Headers: map[string]string{"a b": "x"}}, wantField: "headers"},
		{name: "unset variable", cfg: tracing.Config{Endpoint: "https://c.example", Headers: map[string]string{"Authorization": "Bearer ${TOOLGATE_TEST_UNSET_VAR}"}},
			wantField: "headers.Authorization", wantMsg: "TOOLGATE_TEST_UNSET_VAR"},
		{name: "set variable", cfg: tracing.Config{Endpoint: "https://c.example", Headers: map[string]string{"Authorization": "Bearer ${TOOLGATE_TEST_OTLP_TOKEN}"}},
			check: func(t *testing.T, c tracing.Config) {
				if s := c.String(); strings.Contains(s, "s3cret") {
					t.Errorf("String() shows a header value: %s", s)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.cfg
			err := c.Validate()
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if tt.check != nil {
					tt.check(t, c)
				}
				return
			}
			fe, ok := err.(*section.Error)
			if !ok {
				t.Fatalf("Validate = %v, want a *section.Error at %s", err, tt.wantField)
			}
			if fe.FieldPath() != tt.wantField || !strings.Contains(fe.Message(), tt.wantMsg) {
				t.Errorf("Validate = %q at %q, want %q at %q", fe.Message(), fe.FieldPath(), tt.wantMsg, tt.wantField)
			}
		})
	}
}

// start returns an exporter sending to endpoint.
func start(t *testing.T, c tracing.Config) *tracing.Exporter {
	t.Helper()
	if c.BatchTimeout == 0 {
		c.BatchTimeout = 20 * time.Millisecond
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	e, err := tracing.New(c, tracing.Options{Sidecar: "unit"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Shutdown(context.Background()) })
	return e
}

func event(tool, traceID string) *sink.Event {
	return &sink.Event{EventID: "ev-" + tool, Time: time.Now().UTC(), Listener: "forward", Tool: tool, TraceID: traceID,
		Method: "GET", Host: "api.example:8443", PathTemplate: "/search", UpstreamStatus: 200, OK: true, TotalUS: 1500, UpstreamUS: 1000}
}

// known is the facts of a call of a configured tool, with the caller's
// traceparent.
func known(tool, traceparent string) sink.SpanFacts {
	return sink.SpanFacts{Traceparent: traceparent, KnownTool: tool}
}

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
)

// TestParentage: a call with a sampled caller span is its child; a call
// without one is a root whose trace id is the event's; a call whose
// caller is not sampled gets no span; ratio 0 traces only sampled
// callers.
func TestParentage(t *testing.T) {
	for _, proto := range []string{"http/protobuf", "http/json"} {
		t.Run(proto, func(t *testing.T) {
			rcv := otlptest.Start(t)
			e := start(t, tracing.Config{Endpoint: rcv.URL(), Protocol: proto, SampleRatio: ratio(0)})
			root := start(t, tracing.Config{Endpoint: rcv.URL(), Protocol: proto})

			e.TraceCall(event("child", callerTrace), known("child", "00-"+callerTrace+"-"+callerSpan+"-01"))
			e.TraceCall(event("unsampled", callerTrace), known("unsampled", "00-"+callerTrace+"-"+callerSpan+"-00"))
			e.TraceCall(event("ratio0", "11111111111111111111111111111111"), known("ratio0", ""))
			rootTrace := "22222222222222222222222222222222"
			root.TraceCall(event("root", rootTrace), known("root", ""))
			root.TraceCall(event("badparent", rootTrace), known("badparent", "00-"+rootTrace+"-0000000000000000-01"))
			for _, x := range []*tracing.Exporter{e, root} {
				if err := x.Shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			byName := map[string]otlptest.Span{}
			for _, s := range rcv.Spans() {
				byName[s.Name] = s
			}
			if len(byName) != 3 {
				t.Fatalf("got spans %v, want child, root and badparent", names(rcv.Spans()))
			}
			c := byName["execute_tool child"]
			if c.TraceID != callerTrace || c.ParentSpanID != callerSpan {
				t.Errorf("child: trace %s parent %s, want %s %s", c.TraceID, c.ParentSpanID, callerTrace, callerSpan)
			}
			for _, n := range []string{"execute_tool root", "execute_tool badparent"} {
				r := byName[n]
				if r.TraceID != rootTrace || r.ParentSpanID != "" {
					t.Errorf("%s: trace %s parent %q, want %s and no parent", n, r.TraceID, r.ParentSpanID, rootTrace)
				}
			}
			if c.Kind != tracepb.Span_SPAN_KIND_CLIENT || c.End.Sub(c.Start) != 1500*time.Microsecond {
				t.Errorf("child: kind %v duration %s, want client, 1.5ms", c.Kind, c.End.Sub(c.Start))
			}
			if c.Resource["service.name"] != "toolgate" || c.Resource["service.instance.id"] != "unit" {
				t.Errorf("resource = %v", c.Resource)
			}
			want := map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "child", "server.address": "api.example",
				"server.port": int64(8443), "http.response.status_code": int64(200), "url.template": "/search", "toolgate.event_id": "ev-child"}
			for k, v := range want {
				if c.Attrs[k] != v {
					t.Errorf("child %s = %v, want %v", k, c.Attrs[k], v)
				}
			}
			if st := e.Stats(); st.Exported != 1 || st.Pending != 0 {
				t.Errorf("stats = %+v, want 1 exported, none pending", st)
			}
		})
	}
}

func names(ss []otlptest.Span) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

// TestCollectorAway: with no collector listening, TraceCall still returns
// at once, and the spans it cannot keep are counted as dropped: first the
// queue fills while an export waits, then the export fails.
func TestCollectorAway(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	e := start(t, tracing.Config{Endpoint: "http://" + addr, QueueSize: 8, Timeout: 300 * time.Millisecond})
	const n = 200
	began := time.Now()
	for i := range n {
		ev := event("t", "33333333333333333333333333333333")
		ev.EventID = string(rune('a' + i%26))
		e.TraceCall(ev, known(ev.Tool, ""))
	}
	// 200 spans built and queued (or dropped) never wait on the network;
	// the bound is generous for a loaded machine and far below one export
	// timeout per span (60s).
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("%d TraceCall took %s with the collector away", n, d)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := e.Stats()
		if st.DroppedQueueFull > 0 && st.DroppedExportFailed > 0 && st.Pending == 0 {
			if st.DroppedQueueFull+st.DroppedExportFailed != n || st.Exported != 0 {
				t.Errorf("stats = %+v, want all %d dropped", st, n)
			}
			if st.LastError == "" {
				t.Error("no last error recorded")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats = %+v, want drops of both kinds", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRefusedCollector: a collector that answers 400 loses the spans it
// was sent, counted as export failures.
func TestRefusedCollector(t *testing.T) {
	rcv := otlptest.Start(t)
	rcv.Refuse(400)
	e := start(t, tracing.Config{Endpoint: rcv.URL()})
	e.TraceCall(event("t", "44444444444444444444444444444444"), known("t", ""))
	e.Shutdown(context.Background())
	if st := e.Stats(); st.DroppedExportFailed != 1 || st.Exported != 0 {
		t.Errorf("stats = %+v, want 1 export failure", st)
	}
}

// TestDecisionEvents: a refusal, a dry-run denial and a policy that failed
// open are span events; the detail sentence and the dry-run messages (a
// policy's words, which may quote an argument) are not exported.
func TestDecisionEvents(t *testing.T) {
	rcv := otlptest.Start(t)
	e := start(t, tracing.Config{Endpoint: rcv.URL()})
	ev := event("t", "55555555555555555555555555555555")
	ev.OK, ev.Refused, ev.UpstreamStatus, ev.UpstreamUS = false, true, 0, 0
	ev.ErrorCode, ev.ErrorClass, ev.Reason = "policy", "policy", "policy_denied"
	ev.Detail = "Tool 't' refused: amount VALUE-IN-DETAIL too large"
	ev.ViolationPaths = []string{"/amount"}
	ev.DryRunDenied, ev.DryRunViolations = true, []string{"would deny VALUE-IN-DRYRUN"}
	ev.PolicyError = "slow: policy_timeout"
	e.TraceCall(ev, known(ev.Tool, ""))
	e.Shutdown(context.Background())
	spans := rcv.Spans()
	if len(spans) != 1 {
		t.Fatalf("got %d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.StatusCode != tracepb.Status_STATUS_CODE_ERROR || s.StatusMsg != "policy: policy_denied" {
		t.Errorf("status %v %q, want error \"policy: policy_denied\"", s.StatusCode, s.StatusMsg)
	}
	if s.Attrs["error.type"] != "policy_denied" || s.Attrs["toolgate.error.code"] != "policy" || s.Attrs["toolgate.refused"] != true {
		t.Errorf("attributes = %v", s.Attrs)
	}
	got := map[string]map[string]any{}
	for _, ev := range s.Events {
		if ev.Name != "toolgate.decision" {
			t.Errorf("event %q, want toolgate.decision", ev.Name)
		}
		got[ev.Attrs["toolgate.decision"].(string)] = ev.Attrs
	}
	if d := got["deny"]; d["toolgate.step"] != "policy" || d["toolgate.reason"] != "policy_denied" || d["toolgate.violation_count"] != int64(1) {
		t.Errorf("deny event = %v", d)
	}
	if d := got["dry_run_deny"]; d["toolgate.violation_count"] != int64(1) {
		t.Errorf("dry_run_deny event = %v", d)
	}
	if d := got["failed_open"]; d["toolgate.policy_error"] != "slow: policy_timeout" {
		t.Errorf("failed_open event = %v", d)
	}
	for _, raw := range rcv.Raw() {
		if strings.Contains(string(raw), "VALUE-IN") {
			t.Errorf("an export holds a detail or dry-run message: %q", raw)
		}
	}
}

// BenchmarkTraceCall is the request path's cost of one span: building it
// from an event (sampled, parented) and queueing it. Export runs off the
// caller's goroutine, to a loopback collector that discards what it gets.
func BenchmarkTraceCall(b *testing.B) {
	for _, mode := range []string{"sampled", "unsampled"} {
		b.Run(mode, func(b *testing.B) {
			col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/x-protobuf")
			}))
			defer col.Close()
			c := tracing.Config{Endpoint: col.URL, QueueSize: tracing.MaxQueueSize, BatchSize: 512}
			if err := c.Validate(); err != nil {
				b.Fatal(err)
			}
			e, err := tracing.New(c, tracing.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Shutdown(context.Background())
			ev := event("bench", callerTrace)
			ev.ViolationPaths = []string{"/a"}
			tp := "00-" + callerTrace + "-" + callerSpan + "-01"
			if mode == "unsampled" {
				tp = tp[:len(tp)-1] + "0"
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				e.TraceCall(ev, known(ev.Tool, tp))
			}
		})
	}
}
