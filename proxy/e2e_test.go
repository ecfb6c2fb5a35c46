package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/internal/demotools"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink"
)

// env is a sidecar in front of the demo upstream, with its events going to
// a real NDJSON file, and the two kinds of legacy client.
type env struct {
	up      *demotools.Server
	srv     *proxy.Server
	queue   *sink.Queue
	events  string
	viaHTTP *http.Client // configured only with a proxy URL
	direct  *http.Client // no proxy: for base URLs and direct calls
	reverse string       // the reverse listener's base URL
}

// baseConfig has one tool of each argument source over the demo upstream.
// UPSTREAM is replaced by the demo upstream's URL, UPHOSTPORT by its
// host:port. The tools' host, 127.0.0.1, is opened (hosts: pass) so that
// unmatched calls to the demo upstream pass; hostsPass is that line.
const baseConfig = `
listen:
  forward: 127.0.0.1:0
  reverse:
    - listen: 127.0.0.1:0
      upstream: UPSTREAM
max_body_bytes: 2048
` + hostsPass + `
tools:
  - name: pubmed_search
    match: {host: 127.0.0.1, method: GET, path: /esearch}
    schema_file: schemas/pubmed_search.json
  - name: structure_lookup
    match: {host: 127.0.0.1, method: GET, path: "/v1/structure/{uniprot_id}"}
    schema_file: schemas/structure_lookup.json
    rules:
      - {status: 200, json_field: error, code: upstream, reason: error_in_body}
  - name: drug_targets
    match: {host: 127.0.0.1, method: POST, path: /v1/targets/search}
    schema_file: schemas/drug_targets.json
    rules:
      - {status: 403, body_contains: rateLimitExceeded, code: rate_limit, reason: quota_exhausted}
  - name: docs_edit
    match: {host: 127.0.0.1, method: POST, path: "/v1/documents/{doc_id}:batchUpdate"}
    schema_file: schemas/docs_edit.json
  - name: notes_create
    match: {host: 127.0.0.1, method: POST, path: /v1/notes}
    args: [form]
    schema_file: schemas/notes_create.json
  - name: fault_status
    match: {host: 127.0.0.1, method: GET, path: "/faults/status/{code}"}
    schema: {type: object, properties: {code: {type: integer}}, required: [code]}
  - name: fault_slow
    match: {host: 127.0.0.1, method: GET, path: /faults/slow}
    timeout: 200ms
  - name: fault_misc
    match: {host: 127.0.0.1, method: GET, path: "/faults/{kind}"}
    rules:
      - {status: 200, json_field: error, code: upstream, reason: error_in_body}
  - name: echo_json
    match: {host: 127.0.0.1, method: POST, path: /echo}
    schema: {type: object, properties: {q: {type: string}, n: {type: integer}}}
`

// hostsPass opens the tools' host in baseConfig.
const hostsPass = "hosts: [{host: 127.0.0.1, unmatched: pass}]\n"

// withInjection returns cfg with its pubmed_search tool bound to hostport
// and injecting X-Api-Key (an injected header goes only to the tool's own
// origin, so the tool names its port), over plain HTTP when overHTTP.
func withInjection(cfg, hostport string, overHTTP bool) string {
	tool := "  - name: pubmed_search\n    match: {host: \"" + hostport + "\", method: GET, path: /esearch}\n    inject_headers: {X-Api-Key: injected-key}\n"
	if overHTTP {
		tool += "    inject_over_http: true\n"
	}
	out := strings.Replace(cfg, "  - name: pubmed_search\n    match: {host: 127.0.0.1, method: GET, path: /esearch}\n", tool, 1)
	if out == cfg {
		panic("withInjection: pubmed_search not found")
	}
	return out
}

func newEnv(t testing.TB, cfgYAML string) *env {
	t.Helper()
	return newEnvWith(t, cfgYAML, nil, nil)
}

// newEnvWith is newEnv with policy checkers per tool and the headers
// policies may see.
func newEnvWith(t testing.TB, cfgYAML string, checkers map[string]proxy.Checker, policyHeaders []string) *env {
	t.Helper()
	return newEnvTo(t, cfgYAML, checkers, policyHeaders, nil, 10*time.Millisecond)
}

// newEnvTo is newEnvWith with the events going to dest instead of an
// NDJSON file (readEvents then reads nothing), and the queue flushing every
// flush (tests use 10ms to read events at once; benchmarks the default).
func newEnvTo(t testing.TB, cfgYAML string, checkers map[string]proxy.Checker, policyHeaders []string, dest sink.Writer, flush time.Duration) *env {
	t.Helper()
	up, err := demotools.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	cfgYAML = strings.ReplaceAll(cfgYAML, "UPSTREAM", up.URL())
	cfgYAML = strings.ReplaceAll(cfgYAML, "UPHOSTPORT", up.Addr())
	snap := proxy.Snapshot{Version: "v-test", PolicyVersion: "p-test", Checkers: checkers, PolicyHeaders: policyHeaders}
	srv, q, events := serveConfig(t, cfgYAML, schemaDir(t), snap, dest, flush)
	proxyURL := &url.URL{Scheme: "http", Host: srv.Addr("forward", 0)}
	e := &env{
		up: up, srv: srv, queue: q, events: events,
		viaHTTP: &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}, Timeout: 10 * time.Second},
		direct:  &http.Client{Timeout: 10 * time.Second},
	}
	if a := srv.Addr("reverse", 0); a != "" {
		e.reverse = "http://" + a
	}
	return e
}

// serveConfig decodes cfgYAML (known fields only), validates it with dir
// for relative files, and serves it as snap's config on real listeners,
// its events going through a queue flushing every flush to w, or to a new
// NDJSON file whose path it returns when w is nil. Everything stops when
// the test ends.
func serveConfig(t testing.TB, cfgYAML, dir string, snap proxy.Snapshot, w sink.Writer, flush time.Duration) (*proxy.Server, *sink.Queue, string) {
	t.Helper()
	return serveQueued(t, cfgYAML, dir, snap, w, sink.QueueConfig{FlushInterval: flush})
}

// serveQueued is serveConfig with the event queue configured by qcfg.
func serveQueued(t testing.TB, cfgYAML, dir string, snap proxy.Snapshot, w sink.Writer, qcfg sink.QueueConfig) (*proxy.Server, *sink.Queue, string) {
	t.Helper()
	var cfg proxy.Config
	dec := yaml.NewDecoder(strings.NewReader(cfgYAML))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("decode config: %v", err)
	}
	if err := cfg.Validate(dir); err != nil {
		t.Fatalf("validate config: %v", err)
	}
	var events string
	if w == nil {
		events = filepath.Join(t.TempDir(), "events.ndjson")
		f, err := sink.OpenFile(sink.FileConfig{Path: events})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() }) // after the queue's close below: cleanups run last first
		w = f
	}
	q, err := sink.NewQueue(w, qcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap.Config = &cfg
	srv, err := proxy.New(snap, proxy.Options{Recorder: q, Sidecar: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
		q.Close(ctx)
	})
	return srv, q, events
}

// schemaDir is the demo's schema folder, shared with `toolgate demo`.
func schemaDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.Abs("../internal/demo")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// readEvents flushes the queue and reads every event written so far.
func (e *env) readEvents(t *testing.T) []sink.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.queue.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if e.events == "" {
		return nil // the events went to another Writer
	}
	f, err := os.Open(e.events)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := sink.ReadEvents(f)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// waitEvents waits until n events were written (answers that stream finish
// their event when the body ends, just after the client has read it).
func (e *env) waitEvents(t *testing.T, n int) []sink.Event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		evs := e.readEvents(t)
		if len(evs) >= n || time.Now().After(deadline) {
			return evs
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type answer struct {
	status int
	header http.Header
	body   []byte
	err    error // reading the body
	env    *bucketing.Envelope
}

// do sends one call the way a legacy client would and reads the answer.
func do(t *testing.T, c *http.Client, method, u, ctype, body string, hdr map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	a.body, a.err = io.ReadAll(resp.Body)
	if resp.Header.Get("Content-Type") == "application/json" {
		var env bucketing.Envelope
		if json.Unmarshal(a.body, &env) == nil && (env.Data != nil || env.Error != nil || env.OK) {
			a.env = &env
		}
	}
	return a
}

var wantEnvelope = map[string]string{proxy.HeaderEnvelope: "1"}

// TestBucketingThroughProxy drives every row of the status table and every
// transport failure through the forward listener, asking for the envelope.
func TestBucketingThroughProxy(t *testing.T) {
	e := newEnv(t, baseConfig)
	tests := []struct {
		name       string
		path       string
		wantStatus int
		wantCode   bucketing.Code
		wantReason string
		wantClass  bucketing.Class
		wantRetry  int64 // retry_after_ms; -1 for none
		wantUpStat int   // error.upstream.status; 0 for no upstream member
	}{
		{name: "200 ok", path: "/faults/status/200", wantStatus: 200, wantRetry: -1},
		{name: "400 string body", path: "/faults/status/400", wantStatus: 400, wantCode: "validation", wantReason: "status_4xx", wantClass: "user", wantRetry: -1, wantUpStat: 400},
		{name: "401", path: "/faults/status/401", wantStatus: 401, wantCode: "auth", wantReason: "status_401", wantClass: "terminal", wantRetry: -1, wantUpStat: 401},
		{name: "403", path: "/faults/status/403", wantStatus: 403, wantCode: "auth", wantReason: "status_403", wantClass: "user", wantRetry: -1, wantUpStat: 403},
		{name: "404", path: "/faults/status/404", wantStatus: 404, wantCode: "validation", wantReason: "status_4xx", wantClass: "user", wantRetry: -1, wantUpStat: 404},
		{name: "429 retry-after", path: "/faults/status/429", wantStatus: 429, wantCode: "rate_limit", wantReason: "status_429", wantClass: "transient", wantRetry: 2000, wantUpStat: 429},
		{name: "500", path: "/faults/status/500", wantStatus: 500, wantCode: "upstream", wantReason: "status_5xx", wantClass: "transient", wantRetry: -1, wantUpStat: 500},
		{name: "503 retry-after", path: "/faults/status/503", wantStatus: 503, wantCode: "upstream", wantReason: "status_5xx", wantClass: "transient", wantRetry: 2000, wantUpStat: 503},
		{name: "timeout", path: "/faults/slow?ms=3000", wantStatus: 504, wantCode: "upstream", wantReason: "timeout", wantClass: "transient", wantRetry: -1},
		{name: "reset mid-body", path: "/faults/reset", wantStatus: 502, wantCode: "upstream", wantReason: "truncated", wantClass: "transient", wantRetry: -1, wantUpStat: 200},
		{name: "closed before answer", path: "/faults/close", wantStatus: 502, wantCode: "upstream", wantReason: "connect", wantClass: "transient", wantRetry: -1},
		{name: "error hidden in 200", path: "/faults/hidden-error", wantStatus: 502, wantCode: "upstream", wantReason: "error_in_body", wantClass: "transient", wantRetry: -1, wantUpStat: 200},
		{name: "403 quota is a rate limit", path: "", wantStatus: 403, wantCode: "rate_limit", wantReason: "quota_exhausted", wantClass: "transient", wantRetry: -1, wantUpStat: 403},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var a answer
			if tc.path == "" {
				a = do(t, e.viaHTTP, "POST", e.up.URL()+"/v1/targets/search", "application/json", `{"query":"quota"}`, wantEnvelope)
			} else {
				a = do(t, e.viaHTTP, "GET", e.up.URL()+tc.path, "", "", wantEnvelope)
			}
			if a.status != tc.wantStatus {
				t.Errorf("status = %d, want %d (body %s)", a.status, tc.wantStatus, a.body)
			}
			if a.env == nil {
				t.Fatalf("no envelope in %q", a.body)
			}
			if tc.wantCode == "" {
				if !a.env.OK || a.env.Error != nil {
					t.Errorf("envelope = %s, want ok", a.body)
				}
				return
			}
			er := a.env.Error
			if a.env.OK || er == nil {
				t.Fatalf("envelope = %s, want an error", a.body)
			}
			if er.Code != tc.wantCode || er.Reason != tc.wantReason || er.Class != tc.wantClass {
				t.Errorf("error = %s/%s/%s, want %s/%s/%s", er.Code, er.Reason, er.Class, tc.wantCode, tc.wantReason, tc.wantClass)
			}
			if got := a.header.Get(proxy.HeaderErrorCode); got != string(tc.wantCode) {
				t.Errorf("%s = %q, want %q", proxy.HeaderErrorCode, got, tc.wantCode)
			}
			if er.Retryable != (tc.wantClass == "transient") {
				t.Errorf("retryable = %v for class %s", er.Retryable, er.Class)
			}
			switch {
			case tc.wantRetry < 0 && er.RetryAfterMS != nil:
				t.Errorf("retry_after_ms = %d, want none", *er.RetryAfterMS)
			case tc.wantRetry >= 0 && (er.RetryAfterMS == nil || *er.RetryAfterMS != tc.wantRetry):
				t.Errorf("retry_after_ms = %v, want %d", er.RetryAfterMS, tc.wantRetry)
			}
			switch {
			case tc.wantUpStat == 0 && er.Upstream != nil:
				t.Errorf("upstream = %+v, want none", er.Upstream)
			case tc.wantUpStat != 0 && (er.Upstream == nil || er.Upstream.Status != tc.wantUpStat):
				t.Errorf("upstream = %+v, want status %d", er.Upstream, tc.wantUpStat)
			}
			if !strings.Contains(er.Detail, "failed") {
				t.Errorf("detail %q does not read as a sentence about the failure", er.Detail)
			}
		})
	}
	evs := e.waitEvents(t, len(tests))
	if len(evs) != len(tests) {
		t.Fatalf("%d events for %d calls", len(evs), len(tests))
	}
	for _, ev := range evs {
		if ev.Refused {
			t.Errorf("event %s/%s marked refused; these calls all went upstream", ev.Tool, ev.Reason)
		}
	}
}

// TestRefusalsNeverReachUpstream sends every kind of bad argument and checks
// the answer, the event, and that upstream saw nothing.
func TestRefusalsNeverReachUpstream(t *testing.T) {
	e := newEnv(t, baseConfig)
	const js = "application/json"
	tests := []struct {
		name       string
		method     string
		path       string
		ctype      string
		body       string
		route      string // the demo route that must see no hit
		wantReason string
		wantPaths  []string
		wantDetail string
	}{
		{name: "unknown top-level argument", method: "GET", path: "/esearch?term=x&retmx=5", route: "GET /esearch",
			wantReason: "unknown_field", wantPaths: []string{"/retmx"}, wantDetail: "Tool 'pubmed_search' got unknown argument 'retmx'; expected one of: pmid, retmax, term"},
		{name: "typo inside an object inside an array", method: "POST", path: "/v1/documents/d1:batchUpdate", ctype: js,
			body: `{"requests":[{"insertText":{"txt":"Hello","index":1}}]}`, route: "POST /v1/documents/{doc_id}:batchUpdate",
			wantReason: "unknown_field", wantPaths: []string{"/requests/0/insertText/text", "/requests/0/insertText/txt"},
			wantDetail: "Tool 'docs_edit' got unknown argument 'requests[0].insertText.txt'; expected one of: index, text"},
		{name: "missing required", method: "POST", path: "/v1/targets/search", ctype: js, body: `{"organism":"human"}`, route: "POST /v1/targets/search",
			wantReason: "missing_field", wantPaths: []string{"/query"}, wantDetail: "Tool 'drug_targets' is missing required argument 'query'"},
		{name: "wrong type", method: "POST", path: "/v1/targets/search", ctype: js, body: `{"query":"EGFR","limit":"ten"}`, route: "POST /v1/targets/search",
			wantReason: "wrong_type", wantPaths: []string{"/limit"}, wantDetail: "Tool 'drug_targets' got limit=string, expected integer"},
		{name: "query string not a number", method: "GET", path: "/esearch?term=x&retmax=many", route: "GET /esearch",
			wantReason: "wrong_type", wantPaths: []string{"/retmax"}, wantDetail: "got retmax=string, expected integer"},
		{name: "query number out of bounds", method: "GET", path: "/esearch?term=x&retmax=500", route: "GET /esearch",
			wantReason: "schema", wantPaths: []string{"/retmax"}, wantDetail: "retmax"},
		{name: "path variable fails pattern", method: "GET", path: "/v1/structure/not-an-id", route: "GET /v1/structure/{uniprot_id}",
			wantReason: "schema", wantPaths: []string{"/uniprot_id"}, wantDetail: "uniprot_id"},
		{name: "typo in nested object", method: "POST", path: "/v1/targets/search", ctype: js, body: `{"query":"EGFR","filters":{"phase":2}}`, route: "POST /v1/targets/search",
			wantReason: "unknown_field", wantPaths: []string{"/filters/phase"}, wantDetail: "filters.phase"},
		{name: "malformed JSON", method: "POST", path: "/v1/targets/search", ctype: js, body: `{"query": "EGFR",`, route: "POST /v1/targets/search",
			wantReason: "malformed_body", wantPaths: nil, wantDetail: "not valid JSON"},
		{name: "JSON that is not an object", method: "POST", path: "/v1/targets/search", ctype: js, body: `["EGFR"]`, route: "POST /v1/targets/search",
			wantReason: "malformed_body", wantPaths: []string{""}, wantDetail: "expects a JSON object"},
		{name: "body over the limit", method: "POST", path: "/v1/targets/search", ctype: js, body: `{"query":"` + strings.Repeat("x", 4096) + `"}`, route: "POST /v1/targets/search",
			wantReason: "body_too_large", wantPaths: nil, wantDetail: "larger than the 2048-byte limit"},
		{name: "form field typo", method: "POST", path: "/v1/notes", ctype: "application/x-www-form-urlencoded", body: "titel=x", route: "POST /v1/notes",
			wantReason: "unknown_field", wantPaths: []string{"/titel", "/title"}, wantDetail: "Tool 'notes_create' got unknown argument 'titel'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := e.up.Hits(tc.route)
			// Refusals come back in the envelope even to a legacy caller.
			a := do(t, e.viaHTTP, tc.method, e.up.URL()+tc.path, tc.ctype, tc.body, nil)
			if a.status != http.StatusUnprocessableEntity {
				t.Errorf("status = %d, want 422; body %s", a.status, a.body)
			}
			if got := a.header.Get(proxy.HeaderErrorCode); got != "validation" {
				t.Errorf("%s = %q, want validation", proxy.HeaderErrorCode, got)
			}
			if a.env == nil || a.env.Error == nil {
				t.Fatalf("no error envelope: %s", a.body)
			}
			er := a.env.Error
			if er.Code != "validation" || er.Class != "user" || er.Retryable {
				t.Errorf("error = %s/%s retryable=%v, want validation/user, not retryable", er.Code, er.Class, er.Retryable)
			}
			if tc.wantReason != "" && er.Reason != tc.wantReason {
				t.Errorf("reason = %q, want %q", er.Reason, tc.wantReason)
			}
			var paths []string
			for _, v := range er.Violations {
				paths = append(paths, v.Path)
			}
			if strings.Join(paths, ",") != strings.Join(tc.wantPaths, ",") {
				t.Errorf("violation paths = %q, want %q", paths, tc.wantPaths)
			}
			if !strings.Contains(er.Detail, tc.wantDetail) {
				t.Errorf("detail = %q, want it to contain %q", er.Detail, tc.wantDetail)
			}
			if after := e.up.Hits(tc.route); after != before {
				t.Errorf("upstream %s got %d hits; a refused call must never arrive", tc.route, after-before)
			}
		})
	}
	evs := e.readEvents(t)
	if len(evs) != len(tests) {
		t.Fatalf("%d events for %d calls", len(evs), len(tests))
	}
	for i, ev := range evs {
		if !ev.Refused || ev.OK || ev.ErrorCode != "validation" || ev.UpstreamStatus != 0 || ev.UpstreamUS != 0 {
			t.Errorf("event %d = %+v, want a refused validation event with no upstream", i, ev)
		}
		if ev.Envelope {
			t.Errorf("event %d says the envelope was taken, but the caller did not ask", i)
		}
	}
	if e.up.TotalHits() != 0 {
		t.Errorf("upstream saw %d requests in total, want 0", e.up.TotalHits())
	}
}

// TestSecretValuesStayOut checks a rejected value appears in no answer and
// no event. (Argument names do appear: naming an unknown argument is the
// point of the refusal.)
func TestSecretValuesStayOut(t *testing.T) {
	e := newEnv(t, baseConfig)
	const secret = "sk-live-SECRET-4242"
	calls := []struct{ method, path, ctype, body string }{
		{"GET", "/esearch?term=x&retmax=" + secret, "", ""},
		{"POST", "/v1/targets/search", "application/json", `{"query":"x","organism":"` + secret + `"}`},
		{"POST", "/v1/targets/search", "application/json", `{"query":"x","filters":{"phase_min":"` + secret + `"}}`},
		{"POST", "/v1/targets/search", "application/json", `{"query":"x","limit":"` + secret + `"}`},
		{"GET", "/v1/structure/" + secret, "", ""},
	}
	for _, c := range calls {
		a := do(t, e.viaHTTP, c.method, e.up.URL()+c.path, c.ctype, c.body, wantEnvelope)
		if a.status != 422 {
			t.Errorf("%s %s: status %d, want 422", c.method, c.path, a.status)
		}
		if bytes.Contains(a.body, []byte(secret)) {
			t.Errorf("%s %s: answer holds the rejected value: %s", c.method, c.path, a.body)
		}
	}
	if evs := e.readEvents(t); len(evs) != len(calls) {
		t.Fatalf("%d events for %d calls", len(evs), len(calls))
	}
	raw, err := os.ReadFile(e.events)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(secret)) {
		t.Errorf("events file holds the rejected value")
	}
}

// TestLegacyBytesUnchanged checks a caller that never asked for the envelope
// gets exactly what upstream would have sent it directly.
func TestLegacyBytesUnchanged(t *testing.T) {
	e := newEnv(t, baseConfig)
	paths := []string{
		"/esearch?term=crispr&retmax=5&pmid=1&pmid=2",
		"/v1/structure/P69905",
		"/faults/status/503",
		"/faults/status/400",
		"/faults/hidden-error",
		"/faults/binary",
		"/faults/text",
		"/echo?unmatched=yes",
	}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			direct := do(t, e.direct, "GET", e.up.URL()+p, "", "", nil)
			via := do(t, e.viaHTTP, "GET", e.up.URL()+p, "", "", nil)
			rev := do(t, e.direct, "GET", e.reverse+p, "", "", nil)
			for name, a := range map[string]answer{"forward": via, "reverse": rev} {
				if a.status != direct.status {
					t.Errorf("%s: status %d, direct %d", name, a.status, direct.status)
				}
				if p == "/echo?unmatched=yes" {
					continue // echo reflects the connection's own headers
				}
				if !bytes.Equal(a.body, direct.body) {
					t.Errorf("%s: body differs from direct:\n got %q\nwant %q", name, a.body, direct.body)
				}
				if a.header.Get("Content-Type") != direct.header.Get("Content-Type") {
					t.Errorf("%s: content-type %q, direct %q", name, a.header.Get("Content-Type"), direct.header.Get("Content-Type"))
				}
				if a.header.Get(proxy.HeaderErrorCode) != "" {
					t.Errorf("%s: a raw answer carries %s", name, proxy.HeaderErrorCode)
				}
			}
		})
	}
	// Each path ran once through each listener: two events per path, and the
	// hidden error is recorded as a failure even though the caller got a 200.
	evs := e.waitEvents(t, 2*len(paths))
	if len(evs) != 2*len(paths) {
		t.Fatalf("%d events for %d proxied calls", len(evs), 2*len(paths))
	}
	var hidden, legacy int
	for _, ev := range evs {
		if !ev.Envelope {
			legacy++
		}
		if ev.Reason == "error_in_body" && ev.ErrorCode == "upstream" && ev.UpstreamStatus == 200 {
			hidden++
		}
	}
	if legacy != len(evs) {
		t.Errorf("%d of %d events say the envelope was taken", len(evs)-legacy, len(evs))
	}
	if hidden != 2 {
		t.Errorf("%d hidden-error events, want 2", hidden)
	}
}

// TestLegacyCutShort checks a legacy caller sees an answer cut short as cut
// short, on both listeners, and the event says truncated.
func TestLegacyCutShort(t *testing.T) {
	e := newEnv(t, baseConfig)
	for name, c := range map[string]struct {
		client *http.Client
		base   string
	}{"forward": {e.viaHTTP, e.up.URL()}, "reverse": {e.direct, e.reverse}} {
		resp, err := c.client.Get(c.base + "/faults/reset")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || err == nil {
			t.Errorf("%s: status %d, read error %v; want 200 then an error", name, resp.StatusCode, err)
		}
	}
	evs := e.waitEvents(t, 2)
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2", len(evs))
	}
	for _, ev := range evs {
		if ev.ErrorCode != "upstream" || ev.Reason != "truncated" {
			t.Errorf("event %s = %s/%s, want upstream/truncated", ev.Listener, ev.ErrorCode, ev.Reason)
		}
	}
}

// TestValidCallsForwarded checks coercion, injection and enveloped data.
func TestValidCallsForwarded(t *testing.T) {
	e := newEnv(t, withInjection(baseConfig, "UPHOSTPORT", true))
	a := do(t, e.viaHTTP, "GET", e.up.URL()+"/esearch?term=crispr&retmax=5&pmid=7", "", "", wantEnvelope)
	if a.status != 200 || a.env == nil || !a.env.OK {
		t.Fatalf("esearch: %d %s", a.status, a.body)
	}
	last := e.up.LastRequest()
	if got := last.Header.Get("X-Api-Key"); got != "injected-key" {
		t.Errorf("injected header = %q, want injected-key", got)
	}
	if last.Header.Get(proxy.HeaderEnvelope) != "" {
		t.Errorf("the envelope request header leaked upstream")
	}
	if last.RawQuery != "term=crispr&retmax=5&pmid=7" {
		t.Errorf("upstream query = %q; toolgate must forward the query as sent", last.RawQuery)
	}
	var data struct {
		ESearchResult struct{ Term string } `json:"esearchresult"`
	}
	if err := json.Unmarshal(a.env.Data, &data); err != nil || data.ESearchResult.Term != "crispr" {
		t.Errorf("data = %s (%v), want upstream's JSON", a.env.Data, err)
	}

	body := `{"q": "kinase",  "n": 3}`
	a = do(t, e.viaHTTP, "POST", e.up.URL()+"/echo", "application/json", body, nil)
	if a.status != 200 {
		t.Fatalf("echo: %d %s", a.status, a.body)
	}
	if got := string(e.up.LastRequest().Body); got != body {
		t.Errorf("upstream got body %q, want the caller's bytes %q", got, body)
	}

	a = do(t, e.viaHTTP, "GET", e.up.URL()+"/faults/text", "", "", wantEnvelope)
	if a.env == nil || string(a.env.Data) != `"pong\n"` {
		t.Errorf("text answer enveloped as %s, want a JSON string", a.body)
	}
	a = do(t, e.viaHTTP, "GET", e.up.URL()+"/faults/binary", "", "", wantEnvelope)
	if a.env != nil || len(a.body) != 4096 || a.header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("binary answer: type %q, %d bytes; want it untouched", a.header.Get("Content-Type"), len(a.body))
	}
	a = do(t, e.viaHTTP, "POST", e.up.URL()+"/v1/notes", "application/x-www-form-urlencoded", "title=Plan&tags=a&tags=b", wantEnvelope)
	if a.status != 201 || a.env == nil || !a.env.OK {
		t.Errorf("form call: %d %s", a.status, a.body)
	}
	a = do(t, e.viaHTTP, "GET", e.up.URL()+"/esearch?term=x", "", "",
		map[string]string{"Accept": "application/json, " + bucketing.EnvelopeMediaType})
	if a.env == nil || !a.env.OK {
		t.Errorf("Accept negotiation: %s", a.body)
	}
	if got := e.up.LastRequest().Header.Get("Accept"); got != "application/json" {
		t.Errorf("upstream Accept = %q, want the envelope media type removed", got)
	}

	evs := e.waitEvents(t, 6)
	want := []struct {
		tool     string
		envelope bool
	}{{"pubmed_search", true}, {"echo_json", false}, {"fault_misc", true}, {"fault_misc", false}, {"notes_create", true}, {"pubmed_search", true}}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d", len(evs), len(want))
	}
	for i, w := range want {
		ev := evs[i]
		if ev.Tool != w.tool || ev.Envelope != w.envelope || !ev.OK || ev.ErrorCode != "" {
			t.Errorf("event %d = tool %s envelope %v ok %v code %q; want %s envelope %v ok", i, ev.Tool, ev.Envelope, ev.OK, ev.ErrorCode, w.tool, w.envelope)
		}
		if ev.TraceID == "" || ev.EventID == "" || ev.ConfigVersion != "v-test" || ev.Sidecar != "test" {
			t.Errorf("event %d lacks ids or versions: %+v", i, ev)
		}
	}
}

// TestUnmatched checks pass (forwarded, recorded) and deny (refused as
// policy, never forwarded), for plain calls and CONNECT. The tools' host
// is closed unless hosts opens it: baseConfig opens it (pass), and the
// deny config does not.
func TestUnmatched(t *testing.T) {
	pass := newEnv(t, baseConfig)
	a := do(t, pass.viaHTTP, "GET", pass.up.URL()+"/echo?x=1", "", "", nil)
	if a.status != 200 {
		t.Errorf("pass: status %d", a.status)
	}
	deny := newEnv(t, strings.Replace(baseConfig, hostsPass, "", 1)+"\nunmatched: deny\n")
	a = do(t, deny.viaHTTP, "GET", deny.up.URL()+"/echo?x=1", "", "", nil)
	if a.status != 403 || a.env == nil || a.env.Error == nil || a.env.Error.Reason != "not_allowlisted" || a.env.Error.Code != "policy" {
		t.Errorf("deny: %d %s", a.status, a.body)
	}
	if deny.up.TotalHits() != 0 {
		t.Errorf("denied call reached upstream")
	}
	// A matched tool still works under deny.
	a = do(t, deny.viaHTTP, "GET", deny.up.URL()+"/esearch?term=x", "", "", nil)
	if a.status != 200 {
		t.Errorf("matched tool under deny: %d", a.status)
	}
	// CONNECT to localhost, another name of the tools' host 127.0.0.1: it
	// would carry the tools' calls past their checks, so without a CA it
	// is refused under pass and deny alike (mitm_test.go has the tunnel).
	for _, e := range []*env{pass, deny} {
		c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: e.srv.Addr("forward", 0)})}}
		_, port, _ := strings.Cut(e.up.Addr(), ":")
		_, err := c.Get("https://localhost:" + port + "/esearch?term=x")
		if err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("CONNECT localhost: %v, want it refused", err)
		}
	}
	pevs, devs := pass.readEvents(t), deny.readEvents(t)
	if len(pevs) != 2 || pevs[0].Tool != "" || !pevs[0].OK || pevs[1].Listener != "connect" || pevs[1].Reason != proxy.ReasonNotIntercepted {
		t.Errorf("pass events = %+v", pevs)
	}
	if len(devs) != 3 || devs[0].ErrorCode != "policy" || !devs[0].Refused || devs[2].Listener != "connect" || devs[2].ErrorCode != "policy" {
		t.Errorf("deny events = %+v", devs)
	}
}

// TestConcurrentCallsOneEventEach runs a mix of valid, refused, failing and
// unmatched calls from many goroutines at once and counts exactly one event
// per call, with the right code for each kind.
func TestConcurrentCallsOneEventEach(t *testing.T) {
	e := newEnv(t, baseConfig)
	kinds := []struct {
		method, path, ctype, body string
		wantCode                  string
	}{
		{"GET", "/esearch?term=x&retmax=3", "", "", ""},
		{"GET", "/esearch?term=x&retmx=3", "", "", "validation"},
		{"POST", "/v1/targets/search", "application/json", `{"query":"EGFR"}`, ""},
		{"POST", "/v1/targets/search", "application/json", `{"query":"EGFR","filters":{"phase":1}}`, "validation"},
		{"GET", "/faults/status/503", "", "", "upstream"},
		{"GET", "/faults/status/429", "", "", "rate_limit"},
		{"GET", "/echo?unmatched=1", "", "", ""},
	}
	const workers, perWorker = 8, 35
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func(w int) {
			for i := 0; i < perWorker; i++ {
				k := kinds[(w+i)%len(kinds)]
				req, _ := http.NewRequest(k.method, e.up.URL()+k.path, strings.NewReader(k.body))
				if k.ctype != "" {
					req.Header.Set("Content-Type", k.ctype)
				}
				req.Header.Set("X-Toolgate-Session", k.wantCode)
				resp, err := e.viaHTTP.Do(req)
				if err != nil {
					errc <- err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			errc <- nil
		}(w)
	}
	for w := 0; w < workers; w++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	evs := e.waitEvents(t, workers*perWorker)
	if len(evs) != workers*perWorker {
		t.Fatalf("%d events for %d calls", len(evs), workers*perWorker)
	}
	ids := map[string]bool{}
	for _, ev := range evs {
		if ids[ev.EventID] {
			t.Errorf("event id %s recorded twice", ev.EventID)
		}
		ids[ev.EventID] = true
		// The session header carried the code each call should get.
		if ev.ErrorCode != ev.Session {
			t.Errorf("call expecting %q recorded as %q (%s)", ev.Session, ev.ErrorCode, ev.Reason)
		}
	}
}

// TestCallerGoneIsNotAFailure checks a caller that gives up before upstream
// answers leaves an event with no error code and reason client_closed.
func TestCallerGoneIsNotAFailure(t *testing.T) {
	e := newEnv(t, baseConfig)
	// The caller gives up once its request has reached upstream, which
	// answers only when the caller is gone: no timing to lose on a loaded
	// machine.
	arrived := make(chan struct{})
	var once sync.Once
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(arrived) })
		<-r.Context().Done()
	}))
	defer up.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-arrived; cancel() }()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, up.URL+"/slow", nil)
	if _, err := e.viaHTTP.Do(req); err == nil {
		t.Fatal("the call should have timed out on the caller's side")
	}
	evs := e.waitEvents(t, 1)
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1", len(evs))
	}
	if ev := evs[0]; ev.OK || ev.ErrorCode != "" || ev.Reason != "client_closed" {
		t.Errorf("event = ok %v code %q reason %q, want not ok, no code, client_closed", ev.OK, ev.ErrorCode, ev.Reason)
	}
}
