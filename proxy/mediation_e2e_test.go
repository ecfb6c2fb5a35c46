package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink"
)

// recorder is a real Go upstream that records what its handlers received:
// the raw body, and the arguments Go's own parsers read from it
// (FormValue's merged query and form).
type recorder struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []received
	// header, when set, is added to every answer.
	header http.Header
}

type received struct {
	method, path, query, ctype string
	body                       string
	form                       url.Values
}

// slowUpstream is how long the recorder takes to answer paths under /slow:
// three times limits.body_timeout in limitsConfig.
const slowUpstream = 1500 * time.Millisecond

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		if strings.HasPrefix(r.URL.Path, "/slow") {
			time.Sleep(slowUpstream)
		}
		r.ParseMultipartForm(1 << 20)
		rec.mu.Lock()
		rec.got = append(rec.got, received{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery,
			ctype: r.Header.Get("Content-Type"), body: string(b), form: r.Form})
		for k, vs := range rec.header {
			w.Header()[k] = vs
		}
		rec.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":1}`)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *recorder) take() []received {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	g := rec.got
	rec.got = nil
	return g
}

// gate is a toolgate in front of one upstream, its events in a real NDJSON
// file.
type gate struct {
	srv     *proxy.Server
	queue   *sink.Queue
	events  string
	reverse string // the first reverse listener's base URL
	forward string // the forward listener's address
}

// startGate starts toolgate from cfgYAML (UPSTREAM replaced by upstream).
func startGate(t *testing.T, cfgYAML, upstream string, checkers map[string]proxy.Checker) *gate {
	t.Helper()
	cfgYAML = strings.ReplaceAll(cfgYAML, "UPSTREAM", upstream)
	srv, q, events := serveConfig(t, cfgYAML, t.TempDir(), proxy.Snapshot{Version: "v", PolicyVersion: "p", Checkers: checkers}, nil, 10*time.Millisecond)
	g := &gate{srv: srv, queue: q, events: events, forward: srv.Addr("forward", 0)}
	if a := srv.Addr("reverse", 0); a != "" {
		g.reverse = "http://" + a
	}
	return g
}

// eventsWhere waits (generously) until an event satisfies ok, and returns
// every event so far.
func (g *gate) eventsWhere(t *testing.T, ok func(sink.Event) bool) []sink.Event {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		g.queue.Flush(ctx)
		cancel()
		f, err := os.Open(g.events)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := sink.ReadEvents(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if ok(e) {
				return evs
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no matching event among %d: %+v", len(evs), evs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mediationConfig has a tool checked by a schema, one checked only by a
// policy, tools with explicit sources, and one that checks nothing.
const mediationConfig = `
listen:
  forward: 127.0.0.1:0
  reverse:
    - listen: 127.0.0.1:0
      upstream: UPSTREAM
tools:
  - name: by_schema
    match: {method: POST, path: /schema}
    schema: {type: object, properties: {q: {type: string}, n: {type: integer, maximum: 10}, f: {type: object, properties: {n: {type: integer, maximum: 10}}}}}
  - name: by_policy
    match: {method: POST, path: /policy}
  - name: query_only
    match: {method: POST, path: /query}
    args: [query]
    schema: {type: object, properties: {n: {type: integer, maximum: 10}}}
  - name: form_only
    match: {method: POST, path: /form}
    args: [form]
    schema: {type: object, properties: {n: {type: integer, maximum: 10}}}
  - name: json_only
    match: {method: POST, path: /json}
    args: [json]
    schema: {type: object, properties: {n: {type: integer, maximum: 10}}}
  - name: unchecked
    match: {method: POST, path: /unchecked}
`

// boundPolicy refuses n over 10, and checks nothing else.
const boundPolicy = `package t.bound
deny contains {"msg": "n must be at most 10", "path": "/n"} if input.arguments.n > 10
`

// TestBodyMediation sends bodies of every media type an upstream might
// parse to tools that check their arguments: each call is refused, and
// the upstream's handler received nothing, or it went through and the
// handler received exactly the bytes toolgate checked.
func TestBodyMediation(t *testing.T) {
	up := newRecorder(t)
	pol := compile(t, "bound", boundPolicy)
	checkers := map[string]proxy.Checker{
		"by_policy": policies.NewSet("by_policy", []policies.Bound{{Policy: pol, Mode: policies.ModeEnforce}}, 5*time.Second, false),
	}
	g := startGate(t, mediationConfig, up.srv.URL, checkers)
	const js, form = "application/json", "application/x-www-form-urlencoded"
	tests := []struct {
		name       string
		path       string
		ctype      []string // Content-Type headers (none when empty)
		hdr        map[string]string
		body       string
		chunked    bool // send the body without a Content-Length
		wantStatus int
		wantReason string   // "" for a call that goes through
		wantPaths  []string // violation paths, when given
	}{
		{name: "json passes", path: "/schema", ctype: []string{js}, body: `{"q":"a","n":5}`, wantStatus: 200},
		{name: "json chunked passes", path: "/schema", ctype: []string{js}, body: `{"q":"a","n":5}`, chunked: true, wantStatus: 200},
		{name: "vendor +json passes", path: "/schema", ctype: []string{"application/vnd.x+json; charset=UTF-8"}, body: `{"n":5}`, wantStatus: 200},
		{name: "form passes", path: "/schema", ctype: []string{form}, body: `q=a&n=5`, wantStatus: 200},
		{name: "empty body without a type passes", path: "/schema", body: ``, wantStatus: 200},
		{name: "json over the bound refused", path: "/schema", ctype: []string{js}, body: `{"n":500}`, wantStatus: 422, wantReason: "schema"},
		{name: "malformed parameter", path: "/schema", ctype: []string{"application/json; x"}, body: `{"n":500}`, wantStatus: 415, wantReason: "unsupported_media_type"},
		{name: "text/json", path: "/schema", ctype: []string{"text/json"}, body: `{"n":500}`, wantStatus: 415, wantReason: "unsupported_media_type"},
		{name: "application/x-json", path: "/schema", ctype: []string{"application/x-json"}, body: `{"n":500}`, wantStatus: 415, wantReason: "unsupported_media_type"},
		{name: "text/plain", path: "/schema", ctype: []string{"text/plain"}, body: `{"n":500}`, wantStatus: 415, wantReason: "unsupported_media_type"},
		{name: "no content type", path: "/schema", body: `{"n":500}`, wantStatus: 415, wantReason: "unsupported_media_type"},
		{name: "no content type chunked", path: "/schema", body: `n=500`, chunked: true, wantStatus: 415, wantReason: "unsupported_media_type"},
		{name: "two content types", path: "/schema", ctype: []string{js, form}, body: `{"n":5}`, wantStatus: 415, wantReason: "unsupported_media_type"},
		{name: "json in another charset", path: "/schema", ctype: []string{"application/json; charset=utf-16"}, body: `{"n":500}`, wantStatus: 415, wantReason: "unsupported_media_type"},
		{name: "encoded body", path: "/schema", ctype: []string{js}, hdr: map[string]string{"Content-Encoding": "gzip"}, body: `{"n":5}`, wantStatus: 415, wantReason: "unsupported_media_type"},
		{name: "multipart", path: "/schema", ctype: []string{"multipart/form-data; boundary=XX"},
			body: "--XX\r\nContent-Disposition: form-data; name=\"n\"\r\n\r\n500\r\n--XX--\r\n", wantStatus: 415, wantReason: "unsupported_media_type"},
		{name: "form body that is JSON", path: "/schema", ctype: []string{form}, body: `{"n":500}`, wantStatus: 415, wantReason: "unsupported_media_type"},
		{name: "duplicate json name", path: "/schema", ctype: []string{js}, body: `{"n":500,"n":5}`, wantStatus: 422, wantReason: "duplicate_argument", wantPaths: []string{"/n"}},
		{name: "duplicate json name deep", path: "/schema", ctype: []string{js}, body: `{"f":{"n":500,"n":5}}`, wantStatus: 422, wantReason: "duplicate_argument", wantPaths: []string{"/f/n"}},
		{name: "names equal up to case", path: "/schema", ctype: []string{js}, body: `{"n":5,"N":500}`, wantStatus: 422, wantReason: "duplicate_argument", wantPaths: []string{"/N"}},
		{name: "too deep", path: "/schema", ctype: []string{js}, body: `{"f":` + strings.Repeat(`[`, 70) + strings.Repeat(`]`, 70) + `}`, wantStatus: 422, wantReason: "malformed_body"},
		{name: "query and form name the same argument", path: "/schema?n=500", ctype: []string{form}, body: `n=5`, wantStatus: 422, wantReason: "duplicate_argument"},
		{name: "policy: json passes", path: "/policy", ctype: []string{js}, body: `{"n":5}`, wantStatus: 200},
		{name: "policy: duplicate name", path: "/policy", ctype: []string{js}, body: `{"n":5,"n":500}`, wantStatus: 422, wantReason: "duplicate_argument"},
		{name: "policy: case-folded duplicate", path: "/policy", ctype: []string{js}, body: `{"n":5,"N":500}`, wantStatus: 422, wantReason: "duplicate_argument"},
		{name: "policy: text/plain", path: "/policy", ctype: []string{"text/plain"}, body: `{"n":500}`, wantStatus: 415, wantReason: "unsupported_media_type"},
		{name: "policy: repeated query key is every value", path: "/policy?n=5&n=500", wantStatus: 403, wantReason: "policy_denied"},
		{name: "query only: body refused", path: "/query?n=5", ctype: []string{form}, body: `n=500`, wantStatus: 415, wantReason: "unsupported_media_type"},
		{name: "query only: query passes", path: "/query?n=5", wantStatus: 200},
		{name: "form only: json refused", path: "/form", ctype: []string{js}, body: `{"n":500}`, wantStatus: 415, wantReason: "unsupported_media_type"},
		{name: "form only: query refused", path: "/form?n=500", ctype: []string{form}, body: `n=5`, wantStatus: 422, wantReason: "unknown_field", wantPaths: []string{"/n"}},
		{name: "form only: form passes", path: "/form", ctype: []string{form}, body: `n=5`, wantStatus: 200},
		{name: "json only: form refused", path: "/json", ctype: []string{form}, body: `n=500`, wantStatus: 415, wantReason: "unsupported_media_type"},
		{name: "json only: no content type read as json", path: "/json", body: `{"n":500}`, wantStatus: 422, wantReason: "schema"},
		{name: "json only: text/plain refused", path: "/json", ctype: []string{"text/plain"}, body: `{"n":5}`, wantStatus: 415, wantReason: "unsupported_media_type"},
		{name: "unchecked tool streams any body", path: "/unchecked", ctype: []string{"text/plain"}, body: `anything`, wantStatus: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up.take()
			var body io.Reader = strings.NewReader(tc.body)
			if tc.chunked {
				body = io.MultiReader(strings.NewReader(tc.body)) // unknown length: chunked
			}
			req, err := http.NewRequest(http.MethodPost, g.reverse+tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			for _, ct := range tc.ctype {
				req.Header.Add("Content-Type", ct)
			}
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, tc.wantStatus, b)
			}
			got := up.take()
			if tc.wantReason != "" {
				if len(got) != 0 {
					t.Fatalf("a refused call reached the upstream: %+v", got)
				}
				env := decodeEnvelope(t, b)
				if env.Error.Reason != tc.wantReason {
					t.Fatalf("reason = %s, want %s (%s)", env.Error.Reason, tc.wantReason, env.Error.Detail)
				}
				if strings.Contains(env.Error.Detail, "500") {
					t.Errorf("detail echoes a value: %s", env.Error.Detail)
				}
				if tc.wantPaths != nil {
					var paths []string
					for _, v := range env.Error.Violations {
						paths = append(paths, v.Path)
					}
					if fmt.Sprint(paths) != fmt.Sprint(tc.wantPaths) {
						t.Errorf("violation paths = %q, want %q", paths, tc.wantPaths)
					}
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("upstream received %d calls, want 1", len(got))
			}
			if got[0].body != tc.body {
				t.Errorf("upstream received body %q, want exactly the checked %q", got[0].body, tc.body)
			}
		})
	}
}

func decodeEnvelope(t *testing.T, b []byte) *bucketing.Envelope {
	t.Helper()
	var env bucketing.Envelope
	if err := json.Unmarshal(b, &env); err != nil || env.Error == nil {
		t.Fatalf("not a refusal envelope: %s", b)
	}
	return &env
}

// limitsConfig has small limits, so the tests take little time; the
// bounds they assert are generous, for a loaded machine.
const limitsConfig = `
listen:
  forward: 127.0.0.1:0
  reverse:
    - listen: 127.0.0.1:0
      upstream: UPSTREAM
limits:
  max_conns: 3
  body_timeout: 500ms
  read_header_timeout: 500ms
  max_caller_id_bytes: 16
tools:
  - name: by_schema
    match: {method: POST, path: /schema}
    schema: {type: object, properties: {n: {type: integer}}}
  - name: slow_checked
    match: {method: POST, path: /slow/checked}
    schema: {type: object, properties: {n: {type: integer}}}
`

// slowRequest writes a request's head, then its body one byte every
// interval until the connection fails or stop closes, and returns the raw
// answer toolgate sent (or what it read before the close). The body is
// chunked when length is 0, else it declares length bytes (and never
// sends them all in the time the tests allow).
func slowRequest(t *testing.T, addr, path string, length int, interval time.Duration) (string, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	framing, piece := "Transfer-Encoding: chunked", "1\r\n \r\n"
	if length > 0 {
		framing, piece = fmt.Sprintf("Content-Length: %d", length), " "
	}
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%s\r\n\r\n", path, addr, framing)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := io.WriteString(c, piece); err != nil {
					return
				}
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	b, _ := io.ReadAll(bufio.NewReader(c))
	return string(b), time.Since(start)
}

// TestSlowBodyCutOff sends a chunked body that never ends, one byte every
// 100ms, to a checked tool and to a route that streams: both are cut off
// after limits.body_timeout (not held for as long as the client likes),
// answered and recorded, and the checked tool's upstream saw nothing.
func TestSlowBodyCutOff(t *testing.T) {
	up := newRecorder(t)
	g := startGate(t, limitsConfig, up.srv.URL, nil)
	addr := strings.TrimPrefix(g.reverse, "http://")
	// cutOff sends a slow body to path and wants it cut off with a 408.
	cutOff := func(path string, length int) {
		t.Helper()
		ans, took := slowRequest(t, addr, path, length, 100*time.Millisecond)
		if !strings.HasPrefix(ans, "HTTP/1.1 408") || !strings.Contains(ans, `"reason":"body_timeout"`) {
			t.Fatalf("answer = %q, want a 408 body_timeout envelope", ans)
		}
		if took > 20*time.Second {
			t.Errorf("cut off after %s; the limit is 500ms", took)
		}
	}

	cutOff("/schema", 0)
	if got := up.take(); len(got) != 0 {
		t.Fatalf("the upstream received %+v", got)
	}
	g.eventsWhere(t, func(e sink.Event) bool {
		return e.Tool == "by_schema" && !e.OK && e.Reason == "body_timeout" && e.Refused
	})

	// A call no tool matches streams its body: it is cut off the same way.
	cutOff("/other", 0)
	g.eventsWhere(t, func(e sink.Event) bool {
		return e.Tool == "" && !e.OK && e.Reason == "body_timeout"
	})
	up.take()

	// A small body of a declared length is read before the call goes
	// upstream, matched or not: cut off the same way, refused, and its
	// upstream sees nothing of it.
	cutOff("/other/sized", 64)
	g.eventsWhere(t, func(e sink.Event) bool {
		return e.Tool == "" && e.Refused && e.Reason == "body_timeout"
	})
	// What upstream got is recorded once its body ends, which a streamed
	// one does when toolgate gives up on it: look for a second.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, got := range up.take() {
			if got.path == "/other/sized" {
				t.Fatalf("the upstream received %+v", got)
			}
		}
	}
}

// TestLongCallsOutliveBodyTimeout: limits.body_timeout bounds the body
// only; a call whose upstream takes longer than it, with or without a
// body, checked or streamed, is answered in full.
func TestLongCallsOutliveBodyTimeout(t *testing.T) {
	up := newRecorder(t)
	g := startGate(t, limitsConfig, up.srv.URL, nil)
	tests := []struct{ name, method, path, body string }{
		{"no body", http.MethodGet, "/slow/get", ""},
		{"checked body", http.MethodPost, "/slow/checked", `{"n":1}`},
		{"streamed body", http.MethodPost, "/slow/streamed", `{"n":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, _ := http.NewRequest(tc.method, g.reverse+tc.path, body)
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || string(b) != `{"ok":1}` {
				t.Fatalf("after %s: %d %q %v", time.Since(start), resp.StatusCode, b, err)
			}
			if got := up.take(); len(got) != 1 || got[0].body != tc.body {
				t.Fatalf("upstream received %+v", got)
			}
		})
	}
}

// TestUpstreamTimeExcludesCallerBody: an event's upstream_us is the time
// upstream took, not the caller's: a body that arrives in two halves 200ms
// apart (inside limits.body_timeout) adds the pause to total_us only. A
// small body of a declared length is read before the call goes upstream,
// on a checked tool and on a call no tool matches alike.
func TestUpstreamTimeExcludesCallerBody(t *testing.T) {
	up := newRecorder(t)
	g := startGate(t, limitsConfig, up.srv.URL, nil)
	addr := strings.TrimPrefix(g.reverse, "http://")
	const pause = 200 * time.Millisecond
	for _, tc := range []struct{ path, tool string }{{"/slow/checked", "slow_checked"}, {"/other/paused", ""}} {
		path := tc.path
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		body := `{"n":12345}`
		head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", path, addr, len(body))
		if _, err := io.WriteString(c, head+body[:5]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(pause)
		if _, err := io.WriteString(c, body[5:]); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		ans, _ := io.ReadAll(c)
		c.Close()
		if !strings.HasPrefix(string(ans), "HTTP/1.1 200") {
			t.Fatalf("%s: answer %q, want 200", path, ans)
		}
		if got := up.take(); len(got) != 1 || got[0].body != body {
			t.Fatalf("%s: upstream received %+v", path, got)
		}
		var ev sink.Event
		g.eventsWhere(t, func(e sink.Event) bool {
			if e.Tool == tc.tool && e.UpstreamStatus == http.StatusOK {
				ev = e
				return true
			}
			return false
		})
		total, upstream := time.Duration(ev.TotalUS)*time.Microsecond, time.Duration(ev.UpstreamUS)*time.Microsecond
		if total < pause || upstream <= 0 || total-upstream < pause {
			t.Errorf("%s: total_us %v, upstream_us %v: the caller's %v pause must be in the total and not in upstream's time", path, total, upstream, pause)
		}
	}
}

// TestSlowHeadersCutOff: a request whose headers never end is closed after
// limits.read_header_timeout.
func TestSlowHeadersCutOff(t *testing.T) {
	up := newRecorder(t)
	g := startGate(t, limitsConfig, up.srv.URL, nil)
	c, err := net.Dial("tcp", strings.TrimPrefix(g.reverse, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	io.WriteString(c, "POST /schema HTTP/1.1\r\nHost: x\r\n")
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err = io.ReadAll(c)
	if err != nil {
		t.Fatalf("the connection was not closed: %v", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("closed after %s; the limit is 500ms", took)
	}
}

// TestConnectionCap fills the reverse listener's three places with idle
// connections: the next connection is refused with a 503 envelope and
// counted; once one place is free, calls go through again.
func TestConnectionCap(t *testing.T) {
	// The three connections that fill the cap hold calls upstream: busy,
	// never stalled, so the newcomer is refused rather than given the
	// place of one of them (TestConnectionCapCutsStalledFirst).
	up := newBlockingUpstream(t)
	g := startGate(t, strings.Replace(limitsConfig, "read_header_timeout: 500ms", "read_header_timeout: 60s", 1), up.srv.URL, nil)
	addr := strings.TrimPrefix(g.reverse, "http://")
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET /hold HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
		held = append(held, c)
	}
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	// The cap counts a connection once Accept returned it: wait until all
	// three are counted, and their calls are upstream.
	waitMetric(t, g.srv, "toolgate_proxy_open_connections", "reverse", 3)
	for deadline := time.Now().Add(15 * time.Second); up.held.Load() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the held calls did not reach the upstream")
		}
	}

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	resp, err := client.Post(g.reverse+"/schema", "application/json", strings.NewReader(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get(proxy.HeaderErrorCode) != "rate_limit" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("over the cap: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	if env := decodeEnvelope(t, b); env.Error.Reason != "too_many_connections" {
		t.Fatalf("reason = %s", env.Error.Reason)
	}
	if got := up.done.Load(); got != 0 {
		t.Fatalf("a refused connection reached the upstream: %d calls", got)
	}
	waitMetric(t, g.srv, "toolgate_proxy_connections_refused_total", "reverse", 1)

	held[0].Close()
	held = held[1:]
	waitMetric(t, g.srv, "toolgate_proxy_open_connections", "reverse", 2)
	resp, err = client.Post(g.reverse+"/schema", "application/json", strings.NewReader(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("with a free place: status %d", resp.StatusCode)
	}
}

// waitMetric waits (generously) until the series of name with the given
// listener label has value want.
func waitMetric(t *testing.T, srv *proxy.Server, name, listener string, want float64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var got float64
	for time.Now().Before(deadline) {
		got = metricValue(t, srv, name, map[string]string{"listener": listener})
		if got == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s{listener=%q} = %v, want %v", name, listener, got, want)
}

// TestCallerIDsBounded: agent and session values longer than
// limits.max_caller_id_bytes are cut and marked, in the event and in the
// policies' input alike.
func TestCallerIDsBounded(t *testing.T) {
	up := newRecorder(t)
	pol := compile(t, "idlen", `package t.idlen
deny contains "the agent is longer than the bound and its mark" if count(input.caller.agent) > 30
deny contains "the cut agent lacks its mark" if not endswith(input.caller.agent, "...[truncated]")
`)
	checkers := map[string]proxy.Checker{
		"by_schema": policies.NewSet("by_schema", []policies.Bound{{Policy: pol, Mode: policies.ModeEnforce}}, 5*time.Second, false),
	}
	g := startGate(t, limitsConfig, up.srv.URL, checkers)
	req, _ := http.NewRequest(http.MethodPost, g.reverse+"/schema", strings.NewReader(`{"n":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(proxy.DefaultAgentHeader, strings.Repeat("a", 100<<10))
	req.Header.Set(proxy.DefaultSessionHeader, "short")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: the policy saw an agent value that is not bounded", resp.StatusCode)
	}
	evs := g.eventsWhere(t, func(e sink.Event) bool { return e.Tool == "by_schema" })
	e := evs[len(evs)-1]
	if want := strings.Repeat("a", 16) + "...[truncated]"; e.Agent != want {
		t.Errorf("agent = %q, want %q", e.Agent, want)
	}
	if e.Session != "short" {
		t.Errorf("session = %q", e.Session)
	}
}

// TestUpstreamToolgateHeadersStripped: an upstream's own X-Toolgate-*
// headers never reach a legacy caller.
func TestUpstreamToolgateHeadersStripped(t *testing.T) {
	up := newRecorder(t)
	up.header = http.Header{"X-Toolgate-Error-Code": {"upstream"}, "X-Toolgate-Other": {"x"}, "X-Kept": {"y"}}
	g := startGate(t, mediationConfig, up.srv.URL, nil)
	for _, path := range []string{"/unchecked", "/elsewhere"} {
		resp, err := http.Post(g.reverse+path, "text/plain", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-Kept") != "y" {
			t.Fatalf("%s: %d %v", path, resp.StatusCode, resp.Header)
		}
		for k := range resp.Header {
			if strings.HasPrefix(k, "X-Toolgate-") {
				t.Errorf("%s: upstream's %s reached the caller", path, k)
			}
		}
	}
}

// TestFailedConnectRecorded: a CONNECT whose destination refuses the
// connection is recorded as the failure it is.
func TestFailedConnectRecorded(t *testing.T) {
	g := startGate(t, `
listen: {forward: 127.0.0.1:0}
tools:
  - name: elsewhere
    match: {host: api.example.test, path: /x}
egress: {allow: [127.0.0.1]}
`, "", nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	c, err := net.Dial("tcp", g.forward)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", dead, dead)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == 200 {
		t.Fatalf("CONNECT to a closed port answered 200")
	}
	g.eventsWhere(t, func(e sink.Event) bool {
		return e.Method == http.MethodConnect && e.Host == dead && !e.OK && e.ErrorCode == "upstream" && e.Reason == "connect"
	})
}

// TestConnectionCapCountsTunnels: a CONNECT tunnel holds its place on the
// forward listener for as long as it is open, and gives it back when it
// closes.
func TestConnectionCapCountsTunnels(t *testing.T) {
	up := newRecorder(t)
	g := startGate(t, `
listen: {forward: 127.0.0.1:0}
limits: {max_conns: 2}
tools:
  - name: elsewhere
    match: {host: api.example.test, path: /x}
egress: {allow: [127.0.0.1]}
`, "", nil)
	target := strings.TrimPrefix(up.srv.URL, "http://")
	var tunnels []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", g.forward)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		// The tunnel carries a call to the upstream.
		fmt.Fprintf(c, "GET /through HTTP/1.1\r\nHost: %s\r\n\r\n", target)
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("through the tunnel: %v %v", resp, err)
		}
		tunnels = append(tunnels, c)
	}
	waitMetric(t, g.srv, "toolgate_proxy_open_connections", "forward", 2)

	proxyURL, _ := url.Parse("http://" + g.forward)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), DisableKeepAlives: true}, Timeout: 30 * time.Second}
	resp, err := client.Get(up.srv.URL + "/plain")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a third connection: status %d, want 503", resp.StatusCode)
	}

	tunnels[0].Close()
	waitMetric(t, g.srv, "toolgate_proxy_open_connections", "forward", 1)
	resp, err = client.Get(up.srv.URL + "/plain")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("after a tunnel closed: status %d", resp.StatusCode)
	}
}
