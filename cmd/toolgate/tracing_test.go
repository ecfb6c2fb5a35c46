package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/toolgate/toolgate/internal/otlptest"
)

// tracingConfig has one checked tool (schema and a Rego policy whose deny
// message quotes the argument) and one that meets a rate limit; spans go
// to COLLECTOR.
const tracingConfig = `listen:
  forward: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
events:
  sidecar: traced
  file:
    path: events.ndjson
policies:
  rego:
    - {name: guard, path: guard}
tools:
  - name: search
    match: {host: 127.0.0.1, method: GET, path: /search}
    args: [query]
    schema:
      type: object
      properties:
        term: {type: string, minLength: 1}
      required: [term]
    policies: [guard]
  - name: busy
    match: {host: 127.0.0.1, method: GET, path: /busy}
    args: [query]
tracing:
  endpoint: COLLECTOR
  batch_timeout: 50ms
  QUEUE
`

const guardPolicy = `package toolgate.guard

deny contains msg if {
	startswith(input.arguments.term, "forbidden")
	msg := sprintf("term %s is forbidden", [input.arguments.term])
}
`

// tracedUpstream is a real upstream: /search answers 200, /busy 429 with
// Retry-After; it keeps the traceparent each call arrived with.
type tracedUpstream struct {
	url string
	mu  sync.Mutex
	tps map[string]string // term -> traceparent received
}

func startTracedUpstream(t *testing.T) *tracedUpstream {
	t.Helper()
	u := &tracedUpstream{tps: map[string]string{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.tps[r.URL.Query().Get("term")] = r.Header.Get("Traceparent")
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/busy" {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":"slow down"}`)
			return
		}
		fmt.Fprint(w, `{"hits":[1,2,3]}`)
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	u.url = "http://" + ln.Addr().String()
	return u
}

func (u *tracedUpstream) traceparent(term string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.tps[term]
}

func startTraced(t *testing.T, collector, queue string) (*sidecarRun, runningLine) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "guard"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "guard", "guard.rego"), guardPolicy)
	cfg := strings.NewReplacer("COLLECTOR", collector, "QUEUE", queue).Replace(tracingConfig)
	r := startRun(t, dir, cfg)
	return r, r.running(t)
}

// TestTracingSpans runs `toolgate run` with tracing to a real OTLP
// receiver and makes calls through the forward proxy with a real client:
// an allowed call, a schema refusal, a policy refusal, an upstream 429
// (each with the caller's traceparent), and a call without one. Each call
// gets one span whose parent is the caller's span, whose attributes follow
// the GenAI conventions and toolgate's codes, and whose refusal is a
// decision event; no argument value is in any export; upstream gets the
// caller's traceparent unchanged.
func TestTracingSpans(t *testing.T) {
	t.Parallel()
	rcv := otlptest.Start(t)
	up := startTracedUpstream(t)
	r, l := startTraced(t, rcv.URL(), "")
	c := proxyClient(t, l.Forward)

	type call struct {
		name, path, span string // span: the caller's span id, "" for none
		status           int
	}
	const trace = "0af7651916cd43dd8448eb211c80319c"
	calls := []call{
		{"ok", "/search?term=ARGVAL-ok", "b7ad6b7169203331", 200},
		{"schema", "/search?term=ARGVAL-schema&secret_field=ARGVAL-unknown", "b7ad6b7169203332", 422},
		{"policy", "/search?term=forbidden-ARGVAL-policy", "b7ad6b7169203333", 403},
		{"ratelimit", "/busy?term=ARGVAL-busy", "b7ad6b7169203334", 429},
		{"root", "/search?term=ARGVAL-root", "", 200},
	}
	for _, cl := range calls {
		h := map[string]string{}
		if cl.span != "" {
			h["Traceparent"] = "00-" + trace + "-" + cl.span + "-01"
		}
		if a := do(t, c, "GET", up.url+cl.path, h); a.status != cl.status {
			t.Fatalf("%s: status %d, want %d; body %s", cl.name, a.status, cl.status, a.body)
		}
	}
	spans, err := rcv.WaitSpans(len(calls), 30*time.Second)
	if err != nil {
		t.Fatalf("%v: got %d spans", err, len(spans))
	}
	// The receiver has the spans before the exporter has its answer (and
	// counts them): wait for the count.
	for deadline := time.Now().Add(10 * time.Second); ; {
		metrics := do(t, directClient(t), "GET", "http://"+l.Admin+"/metrics", nil).body
		if strings.Contains(metrics, "toolgate_tracing_spans_exported_total 5") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks toolgate_tracing_spans_exported_total 5:\n%s", grepLines(metrics, "toolgate_tracing"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	var st struct {
		Tracing *struct {
			Exported uint64 `json:"exported"`
			Pending  int64  `json:"pending"`
		} `json:"tracing"`
	}
	if err := json.Unmarshal([]byte(do(t, directClient(t), "GET", "http://"+l.Admin+"/status", nil).body), &st); err != nil || st.Tracing == nil || st.Tracing.Exported != 5 {
		t.Errorf("/status tracing = %+v (%v), want 5 exported", st.Tracing, err)
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("run exited %d; stderr:\n%s", code, r.stderr)
	}
	spans = rcv.Spans()
	if len(spans) != len(calls) {
		t.Fatalf("got %d spans, want one per call (%d): %v", len(spans), len(calls), spanNames(spans))
	}
	byParent := map[string]otlptest.Span{}
	for _, s := range spans {
		byParent[s.ParentSpanID] = s
	}
	events := readEvents(t, filepath.Join(filepath.Dir(r.path), "events.ndjson"))
	eventIDs := map[string]string{} // event id -> trace id
	for _, ev := range events {
		eventIDs[ev.EventID] = ev.TraceID
	}

	type want struct {
		name   string
		attrs  map[string]any
		absent []string
		deny   string // the refusing step's decision event, "" for none
		err    bool
	}
	wants := map[string]want{
		"ok": {name: "execute_tool search", attrs: map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
			"http.response.status_code": int64(200), "url.template": "/search", "toolgate.refused": false, "toolgate.inspected": true,
			"toolgate.listener": "forward", "http.request.method": "GET", "server.address": "127.0.0.1"},
			absent: []string{"error.type", "toolgate.error.code", "mcp.method.name"}},
		"schema": {name: "execute_tool search", err: true, deny: "schema", attrs: map[string]any{"gen_ai.tool.name": "search",
			"error.type": "unknown_field", "toolgate.error.code": "validation", "toolgate.reason": "unknown_field", "toolgate.refused": true},
			absent: []string{"http.response.status_code"}},
		"policy": {name: "execute_tool search", err: true, deny: "policy", attrs: map[string]any{"gen_ai.tool.name": "search",
			"error.type": "policy_denied", "toolgate.error.code": "policy", "toolgate.reason": "policy_denied", "toolgate.refused": true}},
		"ratelimit": {name: "execute_tool busy", err: true, attrs: map[string]any{"gen_ai.tool.name": "busy", "error.type": "status_429",
			"toolgate.error.code": "rate_limit", "toolgate.error.class": "transient", "http.response.status_code": int64(429),
			"toolgate.retry_after_ms": int64(3000), "toolgate.refused": false}},
		"root": {name: "execute_tool search", attrs: map[string]any{"gen_ai.tool.name": "search"}},
	}
	for _, cl := range calls {
		w := wants[cl.name]
		s, ok := byParent[cl.span]
		if !ok {
			t.Errorf("%s: no span whose parent is %q; spans %v", cl.name, cl.span, spanNames(spans))
			continue
		}
		if cl.span != "" && s.TraceID != trace {
			t.Errorf("%s: trace id %s, want the caller's %s", cl.name, s.TraceID, trace)
		}
		id, _ := s.Attrs["toolgate.event_id"].(string)
		if tid, ok := eventIDs[id]; !ok || tid != s.TraceID {
			t.Errorf("%s: toolgate.event_id %q names event with trace %q (found %v), want the span's trace %s", cl.name, id, tid, ok, s.TraceID)
		}
		if s.Name != w.name || s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("%s: span %q kind %v, want %q client", cl.name, s.Name, s.Kind, w.name)
		}
		for k, v := range w.attrs {
			if s.Attrs[k] != v {
				t.Errorf("%s: %s = %#v, want %#v", cl.name, k, s.Attrs[k], v)
			}
		}
		for _, k := range w.absent {
			if v, ok := s.Attrs[k]; ok {
				t.Errorf("%s: %s = %v, want absent", cl.name, k, v)
			}
		}
		if got := s.StatusCode == tracepb.Status_STATUS_CODE_ERROR; got != w.err {
			t.Errorf("%s: status %v, want error %v", cl.name, s.StatusCode, w.err)
		}
		var deny string
		for _, e := range s.Events {
			if e.Name == "toolgate.decision" && e.Attrs["toolgate.decision"] == "deny" {
				deny, _ = e.Attrs["toolgate.step"].(string)
			}
		}
		if deny != w.deny {
			t.Errorf("%s: deny decision event at step %q, want %q (events %v)", cl.name, deny, w.deny, s.Events)
		}
		if s.End.Before(s.Start) || s.End.Sub(s.Start) > 30*time.Second {
			t.Errorf("%s: span from %s to %s", cl.name, s.Start, s.End)
		}
		checkRESTSpan(t, cl.name, s)
	}
	if s := byParent[""]; s.TraceID == "" || s.Resource["service.instance.id"] != "traced" {
		t.Errorf("root span: trace %q resource %v", s.TraceID, s.Resource)
	}
	// The count of violations, never their paths: an unknown argument's
	// path is the caller's key name.
	if a := byParent["b7ad6b7169203332"].Attrs; a["toolgate.violation_count"] != int64(1) || a["toolgate.violation_paths"] != nil {
		t.Errorf("schema refusal: violation count %v paths %v, want 1 and no paths", a["toolgate.violation_count"], a["toolgate.violation_paths"])
	}
	// The caller's traceparent goes upstream as it came.
	if got, want := up.traceparent("ARGVAL-ok"), "00-"+trace+"-b7ad6b7169203331-01"; got != want {
		t.Errorf("upstream got traceparent %q, want the caller's %q", got, want)
	}
	for _, raw := range rcv.Raw() {
		if i := strings.Index(string(raw), "ARGVAL"); i >= 0 {
			t.Errorf("an export holds an argument value: %q", raw[max(0, i-40):min(len(raw), i+40)])
		}
		if strings.Contains(string(raw), "secret_field") {
			t.Errorf("an export holds an argument's key name the caller made up")
		}
	}
}

// TestTracingCollectorAway: with the collector away and a tiny queue,
// every call is still answered at once, and every span is counted as
// dropped (toolgate_tracing_spans_dropped_total).
func TestTracingCollectorAway(t *testing.T) {
	t.Parallel()
	for _, away := range []string{"refused", "hanging"} {
		t.Run(away, func(t *testing.T) {
			t.Parallel()
			testCollectorAway(t, away == "hanging")
		})
	}
}

// testCollectorAway is TestTracingCollectorAway with a collector that
// refuses connections, or (hanging) accepts them and never answers.
func testCollectorAway(t *testing.T, hanging bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	collector := "http://" + ln.Addr().String()
	if hanging {
		var mu sync.Mutex
		var conns []net.Conn
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
		t.Cleanup(func() {
			ln.Close()
			mu.Lock()
			defer mu.Unlock()
			for _, c := range conns {
				c.Close()
			}
		})
	} else {
		ln.Close() // nothing listens there
	}
	up := startTracedUpstream(t)
	r, l := startTraced(t, collector, "queue_size: 2\n  timeout: 1s")
	c := proxyClient(t, l.Forward)
	const n = 40
	began := time.Now()
	for i := range n {
		if a := do(t, c, "GET", up.url+"/search?term=t"+strconv.Itoa(i), map[string]string{
			"Traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}); a.status != 200 {
			t.Fatalf("call %d: status %d; body %s", i, a.status, a.body)
		}
	}
	// A call that waited for an export would wait the export timeout (1s)
	// for every second call: 20s. The bound leaves room for a loaded machine.
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("%d calls took %s with the collector away", n, d)
	}
	// Every span is counted as dropped: the queue was full, or its export
	// failed (the exporter retries within its timeout first).
	drops := regexp.MustCompile(`toolgate_tracing_spans_dropped_total\{reason="(queue_full|export_failed)"\} (\d+)`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		sum, found := 0, 0
		body := do(t, directClient(t), "GET", "http://"+l.Admin+"/metrics", nil).body
		for _, m := range drops.FindAllStringSubmatch(body, -1) {
			v, _ := strconv.Atoi(m[2])
			sum += v
			found++
		}
		if found != 2 {
			t.Fatalf("/metrics lacks the drop counters:\n%s", grepLines(body, "toolgate_tracing"))
		}
		if sum == n {
			break
		}
		if sum > n || time.Now().After(deadline) {
			t.Fatalf("dropped %d spans, want %d:\n%s", sum, n, grepLines(body, "toolgate_tracing"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("run exited %d; stderr:\n%s", code, r.stderr)
	}
}

func spanNames(ss []otlptest.Span) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name+"<"+s.ParentSpanID)
	}
	return out
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestTracingMCP: calls on an MCP route, made by the MCP SDK's client
// through the forward proxy, get MCP client spans: "tools/call NAME" with
// mcp.method.name, jsonrpc.request.id and gen_ai.operation.name
// execute_tool, parented by the tools/call's params._meta.traceparent; a
// result with isError is error.type tool_error; initialize is a span of
// its own without gen_ai.operation.name. No argument value is exported.
func TestTracingMCP(t *testing.T) {
	t.Parallel()
	rcv := otlptest.Start(t)
	s := mcp.NewServer(&mcp.Implementation{Name: "lookup", Version: "1.0.0"}, nil)
	s.AddTool(&mcp.Tool{Name: "lookup", InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"],"additionalProperties":false}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "broken", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "backend down"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)

	dir := t.TempDir()
	cfg := strings.NewReplacer("COLLECTOR", rcv.URL()).Replace(`listen:
  forward: 127.0.0.1:0
admin:
  listen: "off"
events:
  file: {path: events.ndjson}
tools:
  - name: lookup_mcp
    protocol: mcp
    match: {host: 127.0.0.1, path: /mcp}
tracing:
  endpoint: COLLECTOR
  batch_timeout: 50ms
`)
	r := startRun(t, dir, cfg)
	l := r.running(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: up.URL + "/mcp", HTTPClient: proxyClient(t, l.Forward)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const trace = "5bf92f3577b34da6a3ce929d0e0e4736"
	meta := func(span string) mcp.Meta { return mcp.Meta{"traceparent": "00-" + trace + "-" + span + "-01"} }
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Meta: meta("1000000000000001"), Name: "lookup", Arguments: map[string]any{"query": "ARGVAL-mcp"}}); err != nil || res.IsError {
		t.Fatalf("lookup: %v %+v", err, res)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Meta: meta("1000000000000002"), Name: "broken", Arguments: map[string]any{"x": "ARGVAL-broken"}}); err != nil || !res.IsError {
		t.Fatalf("broken: %v %+v", err, res)
	}
	cs.Close()
	if code := r.stop(t); code != 0 {
		t.Fatalf("run exited %d; stderr:\n%s", code, r.stderr)
	}
	byName := map[string]otlptest.Span{}
	for _, s := range rcv.Spans() {
		byName[s.Name] = s
	}
	for _, tc := range []struct {
		name, parent string
		attrs        map[string]any
		err          bool
	}{
		{"tools/call lookup", "1000000000000001", map[string]any{"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool",
			"gen_ai.tool.name": "lookup", "toolgate.mcp.outcome": "ok", "toolgate.inspected": true}, false},
		{"tools/call broken", "1000000000000002", map[string]any{"mcp.method.name": "tools/call", "gen_ai.tool.name": "broken",
			"error.type": "tool_error", "toolgate.mcp.outcome": "tool_error"}, true},
		{"initialize", "", map[string]any{"mcp.method.name": "initialize", "gen_ai.operation.name": nil}, false},
	} {
		s, ok := byName[tc.name]
		if !ok {
			t.Errorf("no span %q; spans %v", tc.name, spanNames(rcv.Spans()))
			continue
		}
		if tc.parent != "" && (s.TraceID != trace || s.ParentSpanID != tc.parent) {
			t.Errorf("%s: trace %s parent %s, want %s %s (from params._meta)", tc.name, s.TraceID, s.ParentSpanID, trace, tc.parent)
		}
		for k, v := range tc.attrs {
			if s.Attrs[k] != v {
				t.Errorf("%s: %s = %#v, want %#v", tc.name, k, s.Attrs[k], v)
			}
		}
		if tc.parent != "" {
			if id, _ := s.Attrs["jsonrpc.request.id"].(string); id == "" {
				t.Errorf("%s: no jsonrpc.request.id", tc.name)
			}
			if v, _ := s.Attrs["mcp.protocol.version"].(string); v == "" {
				t.Errorf("%s: no mcp.protocol.version", tc.name)
			}
		}
		if got := s.StatusCode == tracepb.Status_STATUS_CODE_ERROR; got != tc.err {
			t.Errorf("%s: status %v, want error %v", tc.name, s.StatusCode, tc.err)
		}
	}
	for _, raw := range rcv.Raw() {
		if i := strings.Index(string(raw), "ARGVAL"); i >= 0 {
			t.Errorf("an export holds an argument value: %q", raw[max(0, i-40):min(len(raw), i+40)])
		}
	}
}
