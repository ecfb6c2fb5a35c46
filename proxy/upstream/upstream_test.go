package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bucketing"
)

// The fast path (Transport) is checked against Go's http.Transport
// as toolgate configures it: the same calls go to a real upstream through
// each, and what a caller of the transport sees must be the same (status,
// headers, body, the bucketed failure), as must what the upstream received
// and how many connections it was sent over.

// transports returns Go's transport (as toolgate builds it) and the fast
// path over another one, each with its own pool.
func transports(t testing.TB) (std http.RoundTripper, fast *Transport) {
	t.Helper()
	mk := func() *http.Transport {
		// As proxy builds it, with its defaults (upstream.max_idle_conns_per_host 512, dial_timeout 5s).
		return NewStd(512, nil, Dialer(&net.Dialer{Timeout: 5 * time.Second}, &Conns{}))
	}
	s := mk()
	ft := mk()
	fast = New(ft, ft.DialContext)
	t.Cleanup(func() { s.CloseIdleConnections(); fast.CloseIdleConnections() })
	return s, fast
}

// outcome is what a caller of a transport sees of one call.
type outcome struct {
	Status   int
	Header   string // sorted, without Date
	Body     string
	Length   int64
	Close    bool
	Trailer  string
	Failure  string // bucketing's code/reason/detail of the error, "" when none
	BodyFail string // the same for an error reading the body
}

func (o outcome) String() string {
	type plain outcome
	return fmt.Sprintf("%+v", plain(o))
}

func failure(err error) string {
	if err == nil {
		return ""
	}
	r := bucketing.Classify(bucketing.Outcome{Err: err}, nil, time.Now())
	return string(r.Code) + "/" + r.Reason + ": " + r.Detail
}

// do sends one call through rt (the fast path gets the body as held).
func do(ctx context.Context, rt http.RoundTripper, method, url string, body []byte, h http.Header) outcome {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		panic(err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	var held *bytes.Reader
	if body != nil {
		held = bytes.NewReader(body)
		req.Body, req.ContentLength = io.NopCloser(held), int64(len(body))
	}
	var resp *http.Response
	if f, ok := rt.(*Transport); ok {
		resp, err = f.RoundTripHeld(req, held)
	} else {
		resp, err = rt.RoundTrip(req)
	}
	if err != nil {
		return outcome{Failure: failure(err)}
	}
	b, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Header.Del("Date")
	var hb strings.Builder
	resp.Header.WriteSubset(&hb, nil)
	var tb strings.Builder
	resp.Trailer.WriteSubset(&tb, nil)
	o := outcome{Status: resp.StatusCode, Header: hb.String(), Body: string(b), Length: resp.ContentLength, Close: resp.Close, Trailer: tb.String()}
	if rerr != nil {
		o.BodyFail = failure(rerr)
	}
	return o
}

// rawUpstream is an HTTP/1.1 upstream that answers with bytes a test
// writes itself, so answers net/http's server never sends can be tried. It
// records each request's bytes as they arrived.
type rawUpstream struct {
	ln       net.Listener
	accepts  atomic.Int32
	mu       sync.Mutex
	requests [][]byte
	// answer returns the bytes to answer the n-th request on a connection
	// (from 0) with, and whether to close the connection after them.
	answer func(n int, req *http.Request) ([]byte, bool)
}

func startRaw(t *testing.T, answer func(n int, req *http.Request) ([]byte, bool)) *rawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{ln: ln, answer: answer}
	var wg sync.WaitGroup
	var conns sync.Map
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.accepts.Add(1)
			conns.Store(c, true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				u.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		wg.Wait()
	})
	return u
}

type recorder struct {
	r   io.Reader
	buf bytes.Buffer
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.buf.Write(p[:n])
	return n, err
}

func (u *rawUpstream) serve(c net.Conn) {
	rec := &recorder{r: c}
	br := bufio.NewReader(rec)
	for n := 0; ; n++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		u.mu.Lock()
		u.requests = append(u.requests, bytes.Clone(rec.buf.Bytes()))
		u.mu.Unlock()
		rec.buf.Reset()
		raw, closeAfter := u.answer(n, req)
		if _, err := c.Write(raw); err != nil || closeAfter {
			return
		}
	}
}

func (u *rawUpstream) url(path string) string { return "http://" + u.ln.Addr().String() + path }

func (u *rawUpstream) take() [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	r := u.requests
	u.requests = nil
	return r
}

// TestUpstreamSendsSameBytes: the fast path writes exactly what Go's
// transport writes for the same request.
func TestUpstreamSendsSameBytes(t *testing.T) {
	up := startRaw(t, func(int, *http.Request) ([]byte, bool) {
		return []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), false
	})
	std, fast := transports(t)
	cases := []struct {
		name   string
		method string
		path   string
		body   []byte
		h      http.Header
	}{
		{"get", "GET", "/a?b=c&d=%20e", nil, nil},
		{"post json", "POST", "/bench/rego", []byte(`{"query":"x","n":3}`), http.Header{"Content-Type": {"application/json"}, "User-Agent": {"wrk"}}},
		{"injected header", "POST", "/x", []byte("a=b"), http.Header{"Authorization": {"Bearer s3cret"}, "X-Multi": {"1", "2"}}},
		{"delete empty", "DELETE", "/item/7", nil, http.Header{"Accept": {"*/*"}}},
		{"no user agent", "PUT", "/p", []byte("x"), http.Header{"User-Agent": {""}}},
		{"head", "HEAD", "/h", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			a := do(ctx, std, tc.method, up.url(tc.path), tc.body, tc.h)
			sent := up.take()
			b := do(ctx, fast, tc.method, up.url(tc.path), tc.body, tc.h)
			got := up.take()
			if a.String() != b.String() {
				t.Errorf("answers differ:\nstd:  %s\nfast: %s", a, b)
			}
			if len(sent) != 1 || len(got) != 1 || !bytes.Equal(sent[0], got[0]) {
				t.Errorf("upstream received\nstd:  %q\nfast: %q", sent, got)
			}
		})
	}
}

// answerShape says how a scripted upstream answers.
type answerShape struct {
	Status  int
	HTTP10  bool
	Framing byte // 0 Content-Length, 1 chunked (with a trailer), 2 until close, 3 Content-Length cut short, 4 no answer at all
	Close   bool // Connection: close
	Interim byte // 1xx answers before the final one
	Extra   bool // bytes after the answer (an unasked answer)
	Body    []byte
}

// raw is the answer's bytes, and whether the upstream closes after them.
func (s answerShape) raw(req *http.Request) ([]byte, bool) {
	var b bytes.Buffer
	proto := "HTTP/1.1"
	if s.HTTP10 {
		proto = "HTTP/1.0"
	}
	if s.Framing == 4 {
		return nil, true
	}
	for i := 0; i < int(s.Interim); i++ {
		fmt.Fprintf(&b, "HTTP/1.1 103 Early Hints\r\nLink: </s%d.css>; rel=preload\r\n\r\n", i)
	}
	fmt.Fprintf(&b, "%s %d %s\r\nContent-Type: application/json\r\nX-Shape: 1\r\n", proto, s.Status, http.StatusText(s.Status))
	if s.Close {
		b.WriteString("Connection: close\r\n")
	}
	bodyless := req.Method == http.MethodHead || s.Status == 204 || s.Status == 304
	closeAfter := s.Close || s.HTTP10
	switch s.Framing {
	case 0:
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(s.Body))
		if !bodyless {
			b.Write(s.Body)
		}
	case 1:
		if s.HTTP10 {
			fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(s.Body))
			if !bodyless {
				b.Write(s.Body)
			}
			break
		}
		b.WriteString("Transfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n")
		if !bodyless {
			for p := s.Body; len(p) > 0; {
				n := min(len(p), 7)
				fmt.Fprintf(&b, "%x\r\n%s\r\n", n, p[:n])
				p = p[n:]
			}
			b.WriteString("0\r\nX-Sum: 42\r\n\r\n")
		}
	case 2:
		b.WriteString("\r\n")
		if !bodyless {
			b.Write(s.Body)
		}
		closeAfter = true
	case 3:
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(s.Body)+10)
		if !bodyless {
			b.Write(s.Body)
		}
		closeAfter = true
	}
	if s.Extra {
		b.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	}
	return b.Bytes(), closeAfter
}

// compareShapes sends the same calls through both transports to an upstream
// answering with shape (three calls in a row, so reuse is tried) and fails
// when what the caller sees, what upstream received, or how many
// connections it took differ.
func compareShapes(t *testing.T, shape answerShape, method string) {
	t.Helper()
	std, fast := transports(t)
	run := func(rt http.RoundTripper) ([]outcome, [][]byte, int32) {
		up := startRaw(t, func(n int, req *http.Request) ([]byte, bool) { return shape.raw(req) })
		var os []outcome
		for i := 0; i < 3; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			os = append(os, do(ctx, rt, method, up.url("/s"), []byte(`{"a":1}`), nil))
			cancel()
			// Let Go's transport see what upstream did after its answer
			// (closed the connection, sent more): its reader goroutine
			// notices it in the background, the fast path when it next
			// takes the connection.
			time.Sleep(20 * time.Millisecond)
		}
		return os, up.take(), up.accepts.Load()
	}
	a, reqA, connsA := run(std)
	b, reqB, connsB := run(fast)
	for i := range a {
		if a[i].String() != b[i].String() {
			t.Errorf("%s %+v, call %d:\nstd:  %s\nfast: %s", method, shape, i, a[i], b[i])
		}
	}
	if len(reqA) != len(reqB) {
		t.Errorf("%s %+v: upstream received %d requests from std, %d from fast", method, shape, len(reqA), len(reqB))
	}
	if !shape.Extra && connsA != connsB {
		t.Errorf("%s %+v: %d connections from std, %d from fast", method, shape, connsA, connsB)
	}
}

// TestUpstreamAnswersLikeTransport: for every way an HTTP/1.x upstream can
// frame an answer, the fast path gives the caller what Go's transport gives,
// and reuses connections where it does.
func TestUpstreamAnswersLikeTransport(t *testing.T) {
	body := []byte(`{"ok":true,"n":12345,"s":"abcdefghijklmnop"}`)
	shapes := map[string]answerShape{
		"length":           {Status: 200, Body: body},
		"chunked trailer":  {Status: 200, Framing: 1, Body: body},
		"until close":      {Status: 200, Framing: 2, Body: body},
		"connection close": {Status: 200, Close: true, Body: body},
		"http/1.0":         {Status: 200, HTTP10: true, Body: body},
		"cut short":        {Status: 200, Framing: 3, Body: body},
		"no answer":        {Framing: 4},
		"early hints":      {Status: 200, Interim: 2, Body: body},
		"too many 1xx":     {Status: 200, Interim: 6, Body: body},
		"204":              {Status: 204},
		"304":              {Status: 304},
		"empty 200":        {Status: 200},
		"500 chunked":      {Status: 500, Framing: 1, Body: []byte("boom")},
		"429":              {Status: 429, Body: body},
		"unasked bytes":    {Status: 200, Body: body, Extra: true},
	}
	for name, s := range shapes {
		t.Run(name, func(t *testing.T) {
			for _, m := range []string{"POST", "GET", "HEAD"} {
				compareShapes(t, s, m)
			}
		})
	}
}

// FuzzUpstreamAnswers tries answer shapes the table does not name.
func FuzzUpstreamAnswers(f *testing.F) {
	f.Add(200, false, byte(0), false, byte(0), []byte(`{"a":1}`), byte(0))
	f.Add(404, true, byte(1), false, byte(1), []byte("not found"), byte(1))
	f.Add(503, false, byte(2), true, byte(0), []byte(""), byte(2))
	f.Add(204, false, byte(1), false, byte(3), []byte("x"), byte(0))
	f.Add(301, false, byte(3), false, byte(0), []byte("moved"), byte(1))
	f.Fuzz(func(t *testing.T, status int, http10 bool, framing byte, closeHdr bool, interim byte, body []byte, method byte) {
		if status < 200 || status > 599 || len(body) > 4096 {
			t.Skip()
		}
		s := answerShape{Status: status, HTTP10: http10, Framing: framing % 5, Close: closeHdr, Interim: interim % 7, Body: body}
		compareShapes(t, s, []string{"POST", "GET", "HEAD"}[method%3])
	})
}

// TestUpstreamStaleConnection: a pooled connection upstream closed is seen
// before a call is sent on it; a call on a reused connection that upstream
// closes after reading it is sent again only when net/http would (GET, not
// POST), and upstream receives the same requests either way.
func TestUpstreamStaleConnection(t *testing.T) {
	t.Run("closed while idle", func(t *testing.T) {
		var hits atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			io.Copy(io.Discard, r.Body)
			w.Write([]byte("ok"))
		}))
		defer srv.Close()
		_, fast := transports(t)
		ctx := context.Background()
		if o := do(ctx, fast, "POST", srv.URL, []byte("1"), nil); o.Status != 200 {
			t.Fatalf("first call: %s", o)
		}
		srv.CloseClientConnections()
		time.Sleep(50 * time.Millisecond) // the close reaches toolgate's side
		if o := do(ctx, fast, "POST", srv.URL, []byte("2"), nil); o.Status != 200 || o.Body != "ok" {
			t.Fatalf("call after upstream closed the idle connection: %s", o)
		}
		if n := hits.Load(); n != 2 {
			t.Errorf("upstream handled %d calls, want 2", n)
		}
	})
	closedAfterReading(t, 2, func(*Transport) {})
}

// closedAfterReading calls, with each method, an upstream that reads the
// last of calls requests on one connection and closes it unanswered,
// through net/http's transport and through Transport (after tune): both
// must give the same outcomes and send upstream as many requests; a POST
// is not sent again (the caller gets the failure), a GET is, once.
func closedAfterReading(t *testing.T, calls int, tune func(fast *Transport)) {
	t.Helper()
	drop := func(n int, req *http.Request) ([]byte, bool) {
		if n == calls-1 {
			return nil, true
		}
		return []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), false
	}
	for _, method := range []string{"POST", "GET"} {
		t.Run("closed after reading "+method, func(t *testing.T) {
			std, fast := transports(t)
			tune(fast)
			var got [2][]outcome
			var reqs [2]int
			for i, rt := range []http.RoundTripper{std, fast} {
				up := startRaw(t, drop)
				var body []byte
				if method == "POST" {
					body = []byte("b")
				}
				for j := 0; j < calls; j++ {
					got[i] = append(got[i], do(context.Background(), rt, method, up.url("/x"), body, nil))
				}
				reqs[i] = len(up.take())
			}
			if fmt.Sprint(got[0]) != fmt.Sprint(got[1]) || reqs[0] != reqs[1] {
				t.Errorf("std: %v (%d requests upstream)\nfast: %v (%d requests upstream)", got[0], reqs[0], got[1], reqs[1])
			}
			want := calls // POST: not sent again, the caller gets the failure
			if method == "GET" {
				want = calls + 1
			}
			if reqs[1] != want {
				t.Errorf("upstream received %d requests, want %d", reqs[1], want)
			}
		})
	}
}

// stall answers nothing until release closes or the caller goes: on
// /body it first sends the head and part of a 100-byte body, elsewhere
// not even the head.
func stall(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
	if r.URL.Path == "/body" {
		w.Header().Set("Content-Length", "100")
		w.Write([]byte("part"))
		w.(http.Flusher).Flush()
	}
	select {
	case <-release:
	case <-r.Context().Done():
	}
}

// TestUpstreamDeadlines: the request's context bounds waiting for the
// answer and reading its body, and its error is what the caller gets.
func TestUpstreamDeadlines(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { stall(w, r, release) }))
	defer srv.Close()
	defer close(release)
	std, fast := transports(t)
	for _, path := range []string{"/head", "/body"} {
		for _, cancel := range []bool{false, true} {
			var got [2]outcome
			for i, rt := range []http.RoundTripper{std, fast} {
				ctx, stop := context.WithTimeout(context.Background(), 200*time.Millisecond)
				if cancel {
					ctx, stop = context.WithCancel(context.Background())
					time.AfterFunc(200*time.Millisecond, stop)
				}
				start := time.Now()
				got[i] = do(ctx, rt, "POST", srv.URL+path, []byte("x"), nil)
				stop()
				if d := time.Since(start); d > 5*time.Second {
					t.Errorf("%s cancel=%v: call took %v", path, cancel, d)
				}
			}
			if got[0].String() != got[1].String() {
				t.Errorf("%s cancel=%v:\nstd:  %s\nfast: %s", path, cancel, got[0], got[1])
			}
			if got[1].Failure == "" && got[1].BodyFail == "" {
				t.Errorf("%s cancel=%v: no failure: %s", path, cancel, got[1])
			}
		}
	}
}

// TestUpstreamOriginsApart: calls to two upstreams, alternating, each with
// its own secret header: each upstream receives only its own.
func TestUpstreamOriginsApart(t *testing.T) {
	var seen [2]atomic.Value
	var srvs [2]*httptest.Server
	for i := range srvs {
		srvs[i] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if v := r.Header.Get("Authorization"); v != "Bearer "+strconv.Itoa(i) {
				seen[i].Store(v)
			}
			w.Write([]byte("ok"))
		}))
		defer srvs[i].Close()
	}
	_, fast := transports(t)
	for j := 0; j < 20; j++ {
		i := j % 2
		if o := do(context.Background(), fast, "POST", srvs[i].URL, []byte("x"), http.Header{"Authorization": {"Bearer " + strconv.Itoa(i)}}); o.Status != 200 {
			t.Fatal(o)
		}
	}
	for i := range seen {
		if v := seen[i].Load(); v != nil {
			t.Errorf("upstream %d received Authorization %q", i, v)
		}
	}
}

// TestUpstreamFlask: the same calls through both transports to a stock
// Flask app (werkzeug's HTTP/1.1 server, keep-alive on) give the same
// answers.
func TestUpstreamFlask(t *testing.T) {
	port := startFlaskApp(t, "testdata/upstream_flask.py")
	std, fast := transports(t)
	base := "http://127.0.0.1:" + port
	calls := []struct{ method, path, body string }{
		{"POST", "/echo", `{"q":"x"}`},
		{"GET", "/echo?a=1", ""},
		{"GET", "/stream", ""},
		{"HEAD", "/echo", ""},
		{"GET", "/empty", ""},
		{"GET", "/notmod", ""},
		{"POST", "/close", "z"},
		{"POST", "/big", ""},
		{"POST", "/echo", strings.Repeat("y", 5000)},
		{"GET", "/missing", ""},
	}
	for round := 0; round < 2; round++ {
		for _, c := range calls {
			var body []byte
			if c.body != "" {
				body = []byte(c.body)
			}
			h := http.Header{"Content-Type": {"application/json"}}
			a := do(context.Background(), std, c.method, base+c.path, body, h)
			b := do(context.Background(), fast, c.method, base+c.path, body, h)
			a.Header, b.Header = dropServerHeader(a.Header), dropServerHeader(b.Header)
			if a.String() != b.String() {
				t.Errorf("%s %s:\nstd:  %s\nfast: %s", c.method, c.path, a, b)
			}
			if a.Failure != "" || a.Status == 0 {
				t.Errorf("%s %s: %s", c.method, c.path, a)
			}
		}
	}
}

func dropServerHeader(h string) string {
	var kept []string
	for _, l := range strings.SplitAfter(h, "\r\n") {
		if !strings.HasPrefix(l, "Server:") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "")
}

// startFlaskApp runs a Flask script with Debian's python3; the script prints
// its port on its first line and exits when its standard input closes.
func startFlaskApp(t *testing.T, script string) string {
	t.Helper()
	abs, err := filepath.Abs(script)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", abs)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // it exits when its standard input closes, even if the test dies
	cmd.Stderr = io.Discard
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start flask (python3-flask; run scripts/testdeps.sh): %v", err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
		io.Copy(io.Discard, out)
	}()
	select {
	case p := <-line:
		if _, err := strconv.Atoi(p); err != nil {
			t.Fatalf("flask app did not print its port (is python3-flask installed? run scripts/testdeps.sh); got %q", p)
		}
		return p
	case <-time.After(60 * time.Second):
		t.Fatal("flask app did not start within 60s")
	}
	return ""
}

// BenchmarkUpstreamTransport compares one call upstream (the bench body and
// answer) through Go's transport and through the fast path, in process:
// go test -run '^$' -bench BenchmarkUpstreamTransport -benchmem ./proxy/upstream/
func BenchmarkUpstreamTransport(b *testing.B) {
	answer := []byte(strings.Repeat("x", 200))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	}))
	defer srv.Close()
	std, fast := transports(b)
	body := []byte(strings.Repeat("y", 150))
	for _, c := range []struct {
		name string
		rt   http.RoundTripper
	}{{"std", std}, {"fast", fast}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest("POST", srv.URL+"/bench", nil)
				held := bytes.NewReader(body)
				req.Body, req.ContentLength = io.NopCloser(held), int64(len(body))
				var resp *http.Response
				var err error
				if f, ok := c.rt.(*Transport); ok {
					resp, err = f.RoundTripHeld(req, held)
				} else {
					resp, err = c.rt.RoundTrip(req)
				}
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// TestUpstreamHammer: many callers at once through one pool, against an
// upstream that answers each call with its own body in varied framings and
// sometimes closes; every caller must get its own answer (a connection
// handed to two calls, or reused with an answer unread, would mix them up),
// and the pool must stay within its limits. Run it with -race.
func TestUpstreamHammer(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Query().Get("f") {
		case "close":
			w.Header().Set("Connection", "close")
		case "chunked":
			w.Write(b[:len(b)/2])
			w.(http.Flusher).Flush()
			w.Write(b[len(b)/2:])
			return
		case "empty":
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	_, fast := transports(t)
	fast.maxIdlePerHost = 4 // fewer idle than callers: put must close the rest
	const callers, calls = 16, 60
	framings := []string{"", "close", "chunked", "empty", "", ""}
	var wg sync.WaitGroup
	errs := make(chan string, callers*calls)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				f := framings[(g+i)%len(framings)]
				method := "POST"
				if i%7 == 3 {
					method = "HEAD"
				}
				body := []byte(fmt.Sprintf("caller %d call %d %s", g, i, strings.Repeat("x", (g*i)%300)))
				o := do(context.Background(), fast, method, srv.URL+"/h?f="+f, body, nil)
				want := string(body)
				switch {
				case method == "HEAD" || f == "empty":
					want = ""
				}
				if o.Failure != "" || o.BodyFail != "" || o.Body != want {
					errs <- fmt.Sprintf("caller %d call %d (%s %q): got %s", g, i, method, f, o)
				}
				if g == 0 && i == calls/2 {
					fast.CloseIdleConnections() // calls under way pool again after it
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	fast.mu.Lock()
	defer fast.mu.Unlock()
	n := 0
	for _, l := range fast.idle {
		n += len(l)
	}
	if n != fast.nidle || n > fast.maxIdlePerHost {
		t.Errorf("pool holds %d connections, counts %d, limit %d", n, fast.nidle, fast.maxIdlePerHost)
	}
	t.Logf("%d calls over %d connections", callers*calls, conns.Load())
}

// TestUpstreamShutdownPoolsNothing: after close (the server's Shutdown), a
// call still works but leaves no connection open behind it.
func TestUpstreamShutdownPoolsNothing(t *testing.T) {
	var open atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.Start()
	defer srv.Close()
	_, fast := transports(t)
	if o := do(context.Background(), fast, "GET", srv.URL, nil, nil); o.Body != "ok" {
		t.Fatal(o)
	}
	fast.Close()
	if o := do(context.Background(), fast, "GET", srv.URL, nil, nil); o.Body != "ok" {
		t.Fatal(o)
	}
	deadline := time.Now().Add(10 * time.Second)
	for open.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := open.Load(); n != 0 {
		t.Errorf("%d connections still open upstream after close", n)
	}
}

// TestUpstreamIdleTimeout: a pooled connection idle past the idle timeout
// is closed without another call coming to find it.
func TestUpstreamIdleTimeout(t *testing.T) {
	var open atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.Start()
	defer srv.Close()
	_, fast := transports(t)
	fast.idleTimeout = 200 * time.Millisecond
	if o := do(context.Background(), fast, "GET", srv.URL, nil, nil); o.Body != "ok" {
		t.Fatal(o)
	}
	if n := open.Load(); n != 1 {
		t.Fatalf("%d connections open after one call, want 1 (pooled)", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for open.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := open.Load(); n != 0 {
		t.Errorf("%d connections still open 10 s after the 200 ms idle timeout", n)
	}
}

// TestUpstreamCloseCutsRead: closing an answer's body from another
// goroutine ends a read that waits for upstream, as with http.Transport.
func TestUpstreamCloseCutsRead(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { stall(w, r, release) }))
	defer srv.Close()
	defer close(release)
	_, fast := transports(t)
	req, _ := http.NewRequest("GET", srv.URL+"/body", nil)
	resp, err := fast.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	resp.Body.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("the read of a body closed midway returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the read under way")
	}
}

// TestUpstreamCallContext: a call whose deadline the fast path keeps on the
// connection (CallContext) ends as a call under context.WithTimeout ends,
// through net/http's transport, at a stalled head or body; a caller going
// away still cuts it off; a connection pooled after such a call carries no
// deadline into the next one; and a call that leaves the fast path (a
// streamed body) gets a context that ends at the deadline.
func TestUpstreamCallContext(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var remotes []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		remotes = append(remotes, r.RemoteAddr)
		mu.Unlock()
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte("ok"))
			return
		case "/slow":
			time.Sleep(400 * time.Millisecond)
			w.Write([]byte("slow"))
			return
		}
		stall(w, r, release)
	}))
	defer srv.Close()
	defer close(release)
	const limit = 200 * time.Millisecond
	bounded := func(name string, start time.Time) {
		t.Helper()
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: call took %v", name, d)
		}
	}
	for _, path := range []string{"/head", "/body"} {
		for _, warm := range []bool{false, true} {
			std, fast := transports(t)
			if warm {
				// The call goes over a pooled connection, not a dial.
				cc := NewCallContext(context.Background(), time.Now().Add(5*time.Second))
				if o := do(cc, fast, "POST", srv.URL+"/ok", []byte("x"), nil); o.Body != "ok" {
					t.Fatalf("warm-up: %s", o)
				}
			}
			ctx, stop := context.WithTimeout(context.Background(), limit)
			want := do(ctx, std, "POST", srv.URL+path, []byte("x"), nil)
			stop()
			start := time.Now()
			cc := NewCallContext(context.Background(), time.Now().Add(limit))
			got := do(cc, fast, "POST", srv.URL+path, []byte("x"), nil)
			bounded(path, start)
			if got.String() != want.String() {
				t.Errorf("%s warm=%v:\nstd under WithTimeout: %s\nfast under CallContext: %s", path, warm, want, got)
			}
			if !strings.Contains(got.Failure+got.BodyFail, "timeout") {
				t.Errorf("%s warm=%v: not a timeout: %s", path, warm, got)
			}
			if cc.Err() != nil {
				t.Errorf("%s warm=%v: the fast path armed the context (%v)", path, warm, cc.Err())
			}
		}
	}

	t.Run("error and no retry", func(t *testing.T) {
		// A GET may be sent again after a reused connection failed
		// before its answer began; one cut off by its deadline is not.
		_, fast := transports(t)
		get := func(path string, d time.Duration) (*CallContext, *http.Response, error) {
			cc := NewCallContext(context.Background(), time.Now().Add(d))
			req, err := http.NewRequestWithContext(cc, "GET", srv.URL+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := fast.RoundTripHeld(req, nil)
			return cc, resp, err
		}
		if _, resp, err := get("/ok", 5*time.Second); err != nil {
			t.Fatal(err)
		} else {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		mu.Lock()
		remotes = nil
		mu.Unlock()
		start := time.Now()
		_, _, err := get("/head", limit)
		bounded("GET /head", start)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("head: %v, want context.DeadlineExceeded", err)
		}
		mu.Lock()
		if len(remotes) != 1 {
			t.Errorf("upstream received the call %d times, want once", len(remotes))
		}
		mu.Unlock()
		_, resp, err := get("/body", limit)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("body: %v, want context.DeadlineExceeded", err)
		}
	})

	t.Run("caller gone", func(t *testing.T) {
		std, fast := transports(t)
		var got [2]outcome
		for i, rt := range []http.RoundTripper{std, fast} {
			parent, cancel := context.WithCancel(context.Background())
			time.AfterFunc(limit, cancel)
			ctx := context.Context(parent)
			if rt == http.RoundTripper(fast) {
				ctx = NewCallContext(parent, time.Now().Add(time.Minute))
			}
			start := time.Now()
			got[i] = do(ctx, rt, "POST", srv.URL+"/head", []byte("x"), nil)
			bounded("caller gone", start)
			cancel()
		}
		if got[0].String() != got[1].String() || got[1].Failure == "" {
			t.Errorf("std: %s\nfast: %s", got[0], got[1])
		}
	})

	t.Run("pooled connection keeps no deadline", func(t *testing.T) {
		_, fast := transports(t)
		mu.Lock()
		remotes = nil
		mu.Unlock()
		cc := NewCallContext(context.Background(), time.Now().Add(limit))
		if o := do(cc, fast, "POST", srv.URL+"/ok", []byte("x"), nil); o.Body != "ok" {
			t.Fatalf("first call: %s", o)
		}
		time.Sleep(limit + 50*time.Millisecond) // the first call's deadline has passed
		if o := do(context.Background(), fast, "POST", srv.URL+"/slow", []byte("x"), nil); o.Body != "slow" {
			t.Fatalf("a call without a deadline over the pooled connection: %s", o)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(remotes) != 2 || remotes[0] != remotes[1] {
			t.Errorf("the calls came over %v, want one connection twice", remotes)
		}
	})

	t.Run("streamed body arms", func(t *testing.T) {
		_, fast := transports(t)
		cc := NewCallContext(context.Background(), time.Now().Add(limit))
		req, err := http.NewRequestWithContext(cc, "POST", srv.URL+"/head", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = -1 // streamed: net/http's transport carries it
		start := time.Now()
		resp, err := fast.RoundTripHeld(req, nil)
		bounded("streamed", start)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("answered %d, want a timeout", resp.StatusCode)
		}
		if !errors.Is(cc.Err(), context.DeadlineExceeded) {
			t.Errorf("context: %v, want it ended at its deadline", cc.Err())
		}
		cc.Cancel()
	})
}
