// Package otlptest is a test OTLP/HTTP trace receiver: a real HTTP
// listener on loopback that decodes export requests with the official
// OTLP protobuf definitions (go.opentelemetry.io/proto/otlp), in protobuf
// or JSON, and keeps the spans for tests to read.
package otlptest

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// maxRequest bounds one export request's body.
const maxRequest = 16 << 20

// Span is one received span, its ids in lower-case hex ("" when absent).
type Span struct {
	Name         string
	TraceID      string
	SpanID       string
	ParentSpanID string
	Kind         tracepb.Span_SpanKind
	Start, End   time.Time
	Attrs        map[string]any // string, bool, int64, float64 or []any
	Events       []Event
	StatusCode   tracepb.Status_StatusCode
	StatusMsg    string
	Resource     map[string]any
}

// Event is one span event.
type Event struct {
	Name  string
	Time  time.Time
	Attrs map[string]any
}

// Receiver is a running OTLP/HTTP receiver.
type Receiver struct {
	ln  net.Listener
	srv *http.Server

	mu       sync.Mutex
	spans    []Span
	raw      [][]byte
	requests int
	// status, when not 0, is the HTTP status every export gets instead
	// of 200 (to play a collector that refuses).
	status atomic.Int32
}

// Start starts a receiver on a free loopback port; the test's cleanup
// stops it.
func Start(t testing.TB) *Receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.export)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(ln)
	t.Cleanup(r.Close)
	return r
}

// URL is the receiver's base URL, such as http://127.0.0.1:4318.
func (r *Receiver) URL() string { return "http://" + r.ln.Addr().String() }

// Addr is the receiver's host:port.
func (r *Receiver) Addr() string { return r.ln.Addr().String() }

// Close stops the receiver; exports then fail to connect.
func (r *Receiver) Close() { r.srv.Close() }

// Refuse makes every later export answer status (0: accept again).
func (r *Receiver) Refuse(status int) { r.status.Store(int32(status)) }

func (r *Receiver) export(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxRequest))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	if s := r.status.Load(); s != 0 {
		http.Error(w, "refused by the test", int(s))
		return
	}
	var msg coltrace.ExportTraceServiceRequest
	isJSON := req.Header.Get("Content-Type") == "application/json"
	if isJSON {
		var fixed []byte
		if fixed, err = hexIDsToBase64(body); err == nil {
			err = protojson.Unmarshal(fixed, &msg)
		}
	} else {
		err = proto.Unmarshal(body, &msg)
	}
	if err != nil {
		http.Error(w, "decode: "+err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range msg.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{
					Name: s.GetName(), TraceID: hexOf(s.GetTraceId()), SpanID: hexOf(s.GetSpanId()),
					ParentSpanID: hexOf(s.GetParentSpanId()), Kind: s.GetKind(),
					Start: time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano())),
					Attrs: attrs(s.GetAttributes()), StatusCode: s.GetStatus().GetCode(), StatusMsg: s.GetStatus().GetMessage(),
					Resource: res,
				}
				for _, e := range s.GetEvents() {
					sp.Events = append(sp.Events, Event{Name: e.GetName(), Time: time.Unix(0, int64(e.GetTimeUnixNano())), Attrs: attrs(e.GetAttributes())})
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.raw = append(r.raw, body)
	r.requests++
	r.mu.Unlock()
	var out []byte
	if isJSON {
		w.Header().Set("Content-Type", "application/json")
		out, _ = protojson.Marshal(&coltrace.ExportTraceServiceResponse{})
	} else {
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ = proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	}
	w.Write(out)
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Raw returns every export request's body as received.
func (r *Receiver) Raw() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.raw...)
}

// Requests counts the export requests received.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// ErrTimeout is WaitSpans' error when fewer spans arrived in time.
var ErrTimeout = errors.New("otlptest: timed out waiting for spans")

// WaitSpans waits until at least n spans have arrived, at most timeout.
func (r *Receiver) WaitSpans(n int, timeout time.Duration) ([]Span, error) {
	deadline := time.Now().Add(timeout)
	for {
		s := r.Spans()
		if len(s) >= n {
			return s, nil
		}
		if time.Now().After(deadline) {
			return s, ErrTimeout
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hexIDsToBase64 rewrites OTLP/JSON's ids (traceId, spanId,
// parentSpanId: hex strings, as the OTLP specification's JSON encoding
// says) as protojson reads bytes fields (base64).
func hexIDsToBase64(body []byte) ([]byte, error) {
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, err
	}
	var walk func(v any) error
	walk = func(v any) error {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if s, ok := e.(string); ok && (k == "traceId" || k == "spanId" || k == "parentSpanId") {
					b, err := hex.DecodeString(s)
					if err != nil {
						return fmt.Errorf("%s %q is not hex: %w", k, s, err)
					}
					x[k] = base64.StdEncoding.EncodeToString(b)
					continue
				}
				if err := walk(e); err != nil {
					return err
				}
			}
		case []any:
			for _, e := range x {
				if err := walk(e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(doc); err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}

func hexOf(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return hex.EncodeToString(b)
}

func attrs(kvs []*common.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *common.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *common.AnyValue_StringValue:
		return x.StringValue
	case *common.AnyValue_BoolValue:
		return x.BoolValue
	case *common.AnyValue_IntValue:
		return x.IntValue
	case *common.AnyValue_DoubleValue:
		return x.DoubleValue
	case *common.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	case *common.AnyValue_BytesValue:
		return x.BytesValue
	}
	return nil
}
