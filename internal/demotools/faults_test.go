package demotools

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestFaultStatus(t *testing.T) {
	const route = "GET /faults/status/{code}"
	js, text := "application/json", "text/plain; charset=utf-8"
	var tests []apiCase
	for _, tc := range []struct {
		code   int
		header map[string]string
	}{
		{200, nil},
		{201, nil},
		{302, map[string]string{"Location": ""}},
		{403, nil},
		{404, nil},
		{418, nil},
		{429, map[string]string{"Retry-After": "2"}},
		{500, nil},
		{502, nil},
		{503, map[string]string{"Retry-After": "2"}},
		{504, map[string]string{"Retry-After": ""}},
		{401, map[string]string{"WWW-Authenticate": "Bearer"}},
		{599, nil},
	} {
		tests = append(tests, apiCase{
			name: strconv.Itoa(tc.code), method: "GET", path: "/faults/status/" + strconv.Itoa(tc.code), route: route,
			wantStatus: tc.code, wantCT: js, wantHeader: tc.header,
			wantBody: `{"status":` + strconv.Itoa(tc.code) + `}`,
		})
	}
	tests = append(tests,
		apiCase{
			name: "400 has a string body", method: "GET", path: "/faults/status/400", route: route,
			wantStatus: 400, wantCT: text, wantBody: "Error: invalid argument",
		},
		apiCase{
			name: "204 has no body", method: "GET", path: "/faults/status/204", route: route,
			wantStatus: 204, wantCT: "",
		},
	)
	for _, bad := range []string{"abc", "100", "199", "600", "-1"} {
		tests = append(tests, apiCase{
			name: "bad " + bad, method: "GET", path: "/faults/status/" + bad, route: route,
			wantStatus: 400, wantCT: text, wantBody: "Error: status code must be an integer from 200 to 599",
		})
	}
	runAPICases(t, tests)
}

func TestFaultFixedBodies(t *testing.T) {
	sum := sha256.Sum256(binaryBody.body)
	runAPICases(t, []apiCase{
		{
			name: "hidden error", method: "GET", path: "/faults/hidden-error", route: "GET /faults/hidden-error",
			wantStatus: 200, wantCT: "application/json",
			wantBody: `{"error":{"code":"INTERNAL","message":"backend unavailable"}}`,
		},
		{
			name: "text", method: "GET", path: "/faults/text", route: "GET /faults/text",
			wantStatus: 200, wantCT: "text/plain; charset=utf-8", wantHeader: map[string]string{"Content-Length": "5"},
			wantBody: "pong\n",
		},
		{
			name: "binary", method: "GET", path: "/faults/binary", route: "GET /faults/binary",
			wantStatus: 200, wantCT: "application/octet-stream", wantHeader: map[string]string{"Content-Length": "4096"},
			wantBody: string(binaryBody.body),
		},
		{
			name: "bench GET", method: "GET", path: "/bench", route: "GET /bench",
			wantStatus: 200, wantCT: "application/json", wantHeader: map[string]string{"Content-Length": "200"},
			wantBody: string(benchBody.body),
		},
		{
			name: "bench POST", method: "POST", path: "/bench", route: "POST /bench",
			contentType: "application/json", body: `{"items":[1,2,3]}`,
			wantStatus: 200, wantCT: "application/json", wantHeader: map[string]string{"Content-Length": "200"},
			wantBody: string(benchBody.body),
		},
	})
	// The binary body is fixed for good: a change here breaks recorded fixtures.
	if got, want := hex.EncodeToString(sum[:8]), binarySHA256Prefix; got != want {
		t.Errorf("binary body sha256 starts %s, want %s", got, want)
	}
	distinct := map[byte]bool{}
	for _, b := range binaryBody.body {
		distinct[b] = true
	}
	if len(distinct) < 250 {
		t.Errorf("binary body uses %d distinct byte values, want nearly all", len(distinct))
	}
	if len(benchBody.body) != benchBodyTarget || !json.Valid(benchBody.body) {
		t.Errorf("bench body: %d bytes, valid JSON %v; want %d and valid", len(benchBody.body), json.Valid(benchBody.body), benchBodyTarget)
	}
}

// binarySHA256Prefix pins /faults/binary's content.
const binarySHA256Prefix = "fdbe3a6d6ad0efc2"

func TestFaultSlow(t *testing.T) {
	s := startServer(t)
	c := testClient()

	t.Run("sleeps then answers", func(t *testing.T) {
		start := time.Now()
		status, _, body := do(t, c, "GET", s.URL()+"/faults/slow?ms=40", "", "")
		if d := time.Since(start); d < 40*time.Millisecond {
			t.Errorf("answered after %v, want at least 40ms", d)
		}
		if status != 200 || string(body) != `{"slept_ms":40}` {
			t.Errorf("GET /faults/slow?ms=40 = %d %q", status, body)
		}
	})

	t.Run("bad ms", func(t *testing.T) {
		for _, ms := range []string{"x", "-1", "120001"} {
			status, _, body := do(t, c, "GET", s.URL()+"/faults/slow?ms="+ms, "", "")
			if status != 400 || !strings.HasPrefix(string(body), "Error: ms must be") {
				t.Errorf("ms=%s: %d %q, want 400", ms, status, body)
			}
		}
	})

	t.Run("client gives up", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", s.URL()+"/faults/slow", nil) // default 5s
		start := time.Now()
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("GET /faults/slow with a 50ms deadline: status %d, want an error", resp.StatusCode)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error = %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("gave up after %v, want about 50ms", d)
		}
	})

	t.Run("handler returns on cancellation", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		req := httptest.NewRequestWithContext(ctx, "GET", "/faults/slow?ms=10000", nil)
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			New().Handler().ServeHTTP(rec, req)
			close(done)
		}()
		time.Sleep(20 * time.Millisecond)
		cancel()
		select {
		case <-done:
		case <-time.After(time.Second):
			t.Fatalf("handler still sleeping 1s after cancellation")
		}
		if rec.Body.Len() != 0 {
			t.Errorf("cancelled handler wrote %q", rec.Body.String())
		}
	})
}

// freshClient never reuses a connection, so net/http has no reason to retry
// a request whose connection died.
func freshClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
}

// TestFaultReset wants a 200 first, then an error while reading the body.
// It runs several times: the failure must be the body's, never the status's.
func TestFaultReset(t *testing.T) {
	s := startServer(t)
	c := freshClient()
	const rounds = 20
	for i := range rounds {
		resp, err := c.Get(s.URL() + "/faults/reset")
		if err != nil {
			t.Fatalf("round %d: GET /faults/reset failed before the status: %v", i, err)
		}
		if resp.StatusCode != 200 || resp.ContentLength != resetDeclared {
			t.Errorf("round %d: status %d, Content-Length %d; want 200, %d", i, resp.StatusCode, resp.ContentLength, resetDeclared)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("round %d: reading the body: err %v, want unexpected EOF or connection reset", i, err)
		}
		if len(body) > resetSent {
			t.Errorf("round %d: read %d bytes, want at most %d", i, len(body), resetSent)
		}
	}
	if got := s.Hits("GET /faults/reset"); got != rounds {
		t.Errorf("Hits = %d, want %d", got, rounds)
	}
}

func TestFaultClose(t *testing.T) {
	s := startServer(t)
	c := freshClient()
	for _, q := range []string{"", "?rst=1"} {
		t.Run("close"+q, func(t *testing.T) {
			before := s.Hits("GET /faults/close")
			resp, err := c.Get(s.URL() + "/faults/close" + q)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("GET /faults/close%s: status %d, want an error and no response", q, resp.StatusCode)
			}
			if resp != nil {
				t.Errorf("got a response with the error")
			}
			t.Logf("error: %v", err)
			if got := s.Hits("GET /faults/close"); got != before+1 {
				t.Errorf("Hits = %d, want %d", got, before+1)
			}
		})
	}
}

func TestFaultStream(t *testing.T) {
	s := startServer(t)
	start := time.Now()
	resp, err := testClient().Get(s.URL() + "/faults/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var (
		events []string
		at     []time.Duration
		cur    strings.Builder
	)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			cur.WriteString(line + "\n")
			continue
		}
		events = append(events, cur.String())
		at = append(at, time.Since(start))
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading stream: %v", err)
	}
	want := []string{
		"id: 1\nevent: message\ndata: {\"seq\":1,\"of\":3}\n",
		"id: 2\nevent: message\ndata: {\"seq\":2,\"of\":3}\n",
		"id: 3\nevent: message\ndata: {\"seq\":3,\"of\":3}\n",
	}
	if strings.Join(events, "|") != strings.Join(want, "|") {
		t.Fatalf("events = %q, want %q", events, want)
	}
	// Each event arrives on its own (flushed), not all at the end.
	if gap := at[2] - at[0]; gap < 90*time.Millisecond {
		t.Errorf("first and last event %v apart, want about 100ms", gap)
	}
}

func TestEcho(t *testing.T) {
	s := startServer(t)
	c := testClient()
	tests := []struct {
		name, method, path, ct, body string
		header                       map[string]string
	}{
		{name: "GET with query", method: "GET", path: "/echo?pmid=1&pmid=2&term=a+b", header: map[string]string{"X-Session-Id": "s1"}},
		{name: "POST JSON", method: "POST", path: "/echo", ct: "application/json", body: `{"a": [1, 2],  "b":"ü"}`},
		{name: "PATCH", method: "PATCH", path: "/echo?x=", ct: "text/plain", body: "raw\r\nbytes"},
		{name: "DELETE", method: "DELETE", path: "/echo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, s.URL()+tt.path, strings.NewReader(tt.body))
			if tt.body == "" {
				req.Body, req.ContentLength = nil, 0
			}
			if tt.ct != "" {
				req.Header.Set("Content-Type", tt.ct)
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got echoAnswer
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256([]byte(tt.body))
			if got.Method != tt.method || got.Body != tt.body || got.BodyLen != len(tt.body) ||
				got.BodySHA256 != hex.EncodeToString(sum[:]) || got.Host != s.Addr() {
				t.Errorf("echo = %+v", got)
			}
			if path, _, _ := strings.Cut(tt.path, "?"); got.Path != path {
				t.Errorf("path = %q, want %q", got.Path, path)
			}
			if want := req.URL.Query(); len(got.Query) != len(want) || strings.Join(got.Query["pmid"], ",") != strings.Join(want["pmid"], ",") {
				t.Errorf("query = %v, want %v", got.Query, want)
			}
			if tt.ct != "" && got.Headers["Content-Type"] != tt.ct {
				t.Errorf("Content-Type header = %q, want %q", got.Headers["Content-Type"], tt.ct)
			}
			for k, v := range tt.header {
				if got.Headers[k] != v {
					t.Errorf("header %s = %q, want %q", k, got.Headers[k], v)
				}
			}
		})
	}
}

func TestEchoHeaders(t *testing.T) {
	req := httptest.NewRequest("POST", "/echo", strings.NewReader("x"))
	req.Header.Set("Connection", "keep-alive")
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	req.Header.Set("Authorization", "Bearer injected")
	req.Header.Add("X-Multi", "a")
	req.Header.Add("X-Multi", "b")
	rec := httptest.NewRecorder()
	New().Handler().ServeHTTP(rec, req)
	var got echoAnswer
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"Authorization": "Bearer injected", "X-Multi": "a, b"}
	if len(got.Headers) != len(want) {
		t.Errorf("headers = %v, want %v", got.Headers, want)
	}
	for k, v := range want {
		if got.Headers[k] != v {
			t.Errorf("header %s = %q, want %q", k, got.Headers[k], v)
		}
	}
}
