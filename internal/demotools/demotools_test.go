package demotools

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// startServer starts a real server on a free port, closed when the test ends.
func startServer(t testing.TB) *Server {
	t.Helper()
	s, err := Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// testClient is a real client with a timeout, so a broken route fails the
// test instead of hanging it.
func testClient() *http.Client {
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64},
	}
}

// do sends one request and returns status, headers and the whole body.
func do(t *testing.T, c *http.Client, method, url, contentType, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	if body == "" {
		req.Body = nil
		req.ContentLength = 0
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, b
}

func TestStartURLAddr(t *testing.T) {
	s := startServer(t)
	if got, want := s.URL(), "http://"+s.Addr(); got != want {
		t.Errorf("URL() = %q, want %q", got, want)
	}
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") || strings.HasSuffix(s.Addr(), ":0") {
		t.Errorf("Addr() = %q, want 127.0.0.1 and a real port", s.Addr())
	}
}

func TestStartBadAddr(t *testing.T) {
	if s, err := Start("256.0.0.1:bad"); err == nil {
		s.Close()
		t.Errorf("Start(bad address): no error")
	}
}

func TestCloseStopsServing(t *testing.T) {
	s, err := Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	url := s.URL()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := c.Get(url + "/bench"); err == nil {
		resp.Body.Close()
		t.Errorf("GET after Close: status %d, want a connection error", resp.StatusCode)
	}
}

func TestCloseCancelsRunningHandlers(t *testing.T) {
	s, err := Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	errc := make(chan error, 1)
	go func() {
		resp, err := testClient().Get(s.URL() + "/faults/slow?ms=10000")
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	waitFor(t, func() bool { return s.Hits("GET /faults/slow") == 1 })
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-errc; err == nil {
		t.Errorf("slow request survived Close")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close with a slow request running took %v", d)
	}
}

func TestNewServesThroughHTTPTest(t *testing.T) {
	s := New()
	if s.URL() != "" || s.Addr() != "" {
		t.Errorf("New(): URL %q Addr %q, want empty", s.URL(), s.Addr())
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close on New(): %v", err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	status, _, body := do(t, testClient(), "GET", ts.URL+"/faults/text", "", "")
	if status != http.StatusOK || string(body) != "pong\n" {
		t.Errorf("GET /faults/text = %d %q, want 200 \"pong\\n\"", status, body)
	}
	if got := s.Hits("GET /faults/text"); got != 1 {
		t.Errorf("Hits = %d, want 1", got)
	}
}

// TestDocListsEveryRoute keeps the package doc's route table in step with
// the route table.
func TestDocListsEveryRoute(t *testing.T) {
	src, err := os.ReadFile("demotools.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range Routes() {
		row := fmt.Sprintf("//\t| %-39s |", rt.Pattern)
		if !bytes.Contains(src, []byte(row)) {
			t.Errorf("package doc has no row %q", row)
		}
	}
}

func TestRoutes(t *testing.T) {
	routes := Routes()
	if len(routes) != len(routeTable) {
		t.Fatalf("Routes() has %d routes, want %d", len(routes), len(routeTable))
	}
	seen := map[string]bool{}
	for _, rt := range routes {
		if seen[rt.Pattern] {
			t.Errorf("route %q listed twice", rt.Pattern)
		}
		seen[rt.Pattern] = true
		if rt.Description == "" {
			t.Errorf("route %q has no description", rt.Pattern)
		}
	}
	routes[0].Pattern = "changed"
	if Routes()[0].Pattern == "changed" {
		t.Errorf("Routes() returns the server's own slice")
	}
}

func TestIndex(t *testing.T) {
	s := startServer(t)
	status, h, body := do(t, testClient(), "GET", s.URL()+"/", "", "")
	if status != http.StatusOK || h.Get("Content-Type") != "application/json" {
		t.Errorf("GET / = %d %q", status, h.Get("Content-Type"))
	}
	for _, rt := range Routes() {
		if !bytes.Contains(body, []byte(`"pattern":"`+rt.Pattern+`"`)) {
			t.Errorf("index lacks %q", rt.Pattern)
		}
	}
}

// TestHitsExactUnderConcurrency hammers several routes from many goroutines
// over keep-alive connections and checks every counter to the unit.
func TestHitsExactUnderConcurrency(t *testing.T) {
	s := startServer(t)
	c := testClient()
	type target struct {
		route, method, path, body string
	}
	targets := []target{
		{"GET /bench", "GET", "/bench", ""},
		{"POST /bench", "POST", "/bench", `{"x":1}`},
		{"GET /v1/structure/{uniprot_id}", "GET", "/v1/structure/P69905", ""},
		{"GET /faults/status/{code}", "GET", "/faults/status/503", ""},
		{"POST /v1/documents/{doc_id}:batchUpdate", "POST", "/v1/documents/d1:batchUpdate", `{"requests":[]}`},
	}
	const workers, perWorker = 16, 40
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				tg := targets[(w+i)%len(targets)]
				req, _ := http.NewRequest(tg.method, s.URL()+tg.path, strings.NewReader(tg.body))
				resp, err := c.Do(req)
				if err != nil {
					errc <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	stop := make(chan struct{})
	readers := make(chan struct{})
	go func() { // LastRequest races every write above; the race detector checks it
		defer close(readers)
		for {
			select {
			case <-stop:
				return
			default:
				_ = s.LastRequest()
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-readers
	close(errc)
	for err := range errc {
		t.Fatalf("request: %v", err)
	}
	want := map[string]int64{}
	for w := range workers {
		for i := range perWorker {
			want[targets[(w+i)%len(targets)].route]++
		}
	}
	for _, tg := range targets {
		if got := s.Hits(tg.route); got != want[tg.route] {
			t.Errorf("Hits(%q) = %d, want %d", tg.route, got, want[tg.route])
		}
	}
	if got, want := s.TotalHits(), int64(workers*perWorker); got != want {
		t.Errorf("TotalHits() = %d, want %d", got, want)
	}
	if got := s.Hits("GET /esearch"); got != 0 {
		t.Errorf("Hits(untouched route) = %d, want 0", got)
	}
	if got := s.Hits("GET /no/such/route"); got != 0 {
		t.Errorf("Hits(unknown key) = %d, want 0", got)
	}
}

func TestUnmatchedCountsOnlyInTotal(t *testing.T) {
	s := startServer(t)
	c := testClient()
	tests := []struct {
		name, method, path string
		wantStatus         int
	}{
		{"no such path", "GET", "/nope", http.StatusNotFound},
		{"wrong method", "DELETE", "/esearch", http.StatusMethodNotAllowed},
		{"batchUpdate without colon verb", "POST", "/v1/documents/d1", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, _ := do(t, c, tt.method, s.URL()+tt.path, "", "")
			if status != tt.wantStatus {
				t.Errorf("%s %s = %d, want %d", tt.method, tt.path, status, tt.wantStatus)
			}
		})
	}
	if got := s.TotalHits(); got != 3 {
		t.Errorf("TotalHits() = %d, want 3", got)
	}
	if got := s.Hits("GET /esearch"); got != 0 {
		t.Errorf("Hits(GET /esearch) after a DELETE = %d, want 0", got)
	}
	// The colon route's handler saw the request and refused it itself.
	if got := s.Hits("POST /v1/documents/{doc_id}:batchUpdate"); got != 1 {
		t.Errorf("Hits(batchUpdate) = %d, want 1", got)
	}
}

func TestLastRequest(t *testing.T) {
	s := startServer(t)
	if got := s.LastRequest(); got.Method != "" || got.Header != nil || got.Body != nil {
		t.Errorf("LastRequest() before any request = %+v, want zero", got)
	}
	body := "{\"b\":\"\xff\x00 raw\"}\n"
	req, _ := http.NewRequest("PUT", s.URL()+"/echo?a=1&a=2&b=%20x", strings.NewReader(body))
	req.Header.Set("X-Session-Id", "sess-42")
	req.Header.Add("X-Multi", "one")
	req.Header.Add("X-Multi", "two")
	resp, err := testClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	got := s.LastRequest()
	if got.Method != "PUT" || got.Path != "/echo" || got.RawQuery != "a=1&a=2&b=%20x" || got.Host != s.Addr() {
		t.Errorf("LastRequest() = %s %s ? %s host %s", got.Method, got.Path, got.RawQuery, got.Host)
	}
	if string(got.Body) != body {
		t.Errorf("LastRequest().Body = %q, want %q", got.Body, body)
	}
	if v := got.Header.Get("X-Session-Id"); v != "sess-42" {
		t.Errorf("X-Session-Id = %q, want sess-42", v)
	}
	if v := got.Header.Values("X-Multi"); len(v) != 2 || v[0] != "one" || v[1] != "two" {
		t.Errorf("X-Multi = %q, want [one two]", v)
	}

	// The copy is the caller's own.
	got.Header.Set("X-Session-Id", "changed")
	got.Body[0] = 'Z'
	again := s.LastRequest()
	if again.Header.Get("X-Session-Id") != "sess-42" || string(again.Body) != body {
		t.Errorf("changing the returned Request changed the server's copy")
	}
}

func TestBodyTooLarge(t *testing.T) {
	s := startServer(t)
	big := strings.Repeat("x", maxBodyBytes+1)
	tests := []struct {
		name          string
		contentLength int64
	}{
		{"declared length", int64(len(big))},
		{"chunked", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := s.Hits("POST /echo")
			req, _ := http.NewRequest("POST", s.URL()+"/echo", strings.NewReader(big))
			req.ContentLength = tt.contentLength
			if tt.contentLength < 0 {
				req.Body = io.NopCloser(strings.NewReader(big)) // hide the length
			}
			resp, err := testClient().Do(req)
			if err != nil {
				// The server may answer and close before the client has sent
				// everything; a reset while writing is acceptable.
				t.Logf("POST big body: %v", err)
			} else {
				resp.Body.Close()
				if resp.StatusCode != http.StatusRequestEntityTooLarge {
					t.Errorf("status = %d, want 413", resp.StatusCode)
				}
			}
			if got := s.Hits("POST /echo"); got != before {
				t.Errorf("Hits(POST /echo) = %d, want %d: a too-large body reached the route", got, before)
			}
		})
	}
}

// waitFor polls cond for up to two seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within 2s")
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkBenchDirect measures the fake upstream alone over real
// connections: the baseline a proxied benchmark compares against.
func BenchmarkBenchDirect(b *testing.B) {
	s := startServer(b)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	url := s.URL() + "/bench"
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.Get(url)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

// BenchmarkBenchHandler measures the handler alone: routing, counting,
// recording and the precomputed answer.
func BenchmarkBenchHandler(b *testing.B) {
	h := New().Handler()
	req := httptest.NewRequest("GET", "/bench", nil)
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, req)
	}
}

type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}
