package proxy_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/demotools"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink"
)

// gateRecorder holds every Record until release is closed: a destination
// whose write takes as long as the test likes.
type gateRecorder struct {
	entered chan sink.Event
	release chan struct{}
}

func (g *gateRecorder) Record(e sink.Event) bool {
	g.entered <- e
	<-g.release
	return true
}

const orderConfig = `
listen: {forward: 127.0.0.1:0}
tools:
  - name: echo
    match: {host: 127.0.0.1, method: POST, path: /echo}
    args: [json]
    schema:
      type: object
      properties: {term: {type: string}}
      required: [term]
  - name: binary
    match: {host: 127.0.0.1, method: GET, path: /faults/binary}
  - name: stream
    match: {host: 127.0.0.1, method: GET, path: /faults/stream}
`

// TestRecordBeforeAnswerEnds checks the order the write-ahead event path
// rests on: the pipeline records a call's event before the caller can
// have its whole answer, for every way toolgate answers. While Record is
// held, the caller must not have the answer's last byte; once it returns,
// the answer completes. (sink.Queue's Record returns once the event is
// written, so together no answered call's event is lost when the process
// dies.)
func TestRecordBeforeAnswerEnds(t *testing.T) {
	up, err := demotools.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		envelope   bool
		wantReason string
		wantStatus int
	}{
		{name: "refusal", method: "POST", path: "/echo", body: `{"trem":"x"}`, wantReason: "unknown_field", wantStatus: 422},
		{name: "envelope", method: "POST", path: "/echo", body: `{"term":"x"}`, envelope: true, wantStatus: 200},
		{name: "raw with a length", method: "GET", path: "/faults/binary", wantStatus: 200},
		{name: "raw stream", method: "GET", path: "/faults/stream", wantStatus: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gate := &gateRecorder{entered: make(chan sink.Event, 1), release: make(chan struct{})}
			forward := startWithRecorder(t, up.URL(), gate)
			client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: forward})}}
			type result struct {
				status int
				n      int
				err    error
			}
			done := make(chan result, 1)
			go func() {
				var body io.Reader
				if tt.body != "" {
					body = strings.NewReader(tt.body)
				}
				req, _ := http.NewRequest(tt.method, up.URL()+tt.path, body)
				if tt.body != "" {
					req.Header.Set("Content-Type", "application/json")
				}
				if tt.envelope {
					req.Header.Set("X-Toolgate-Envelope", "1")
				}
				resp, err := client.Do(req)
				if err != nil {
					done <- result{err: err}
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				done <- result{status: resp.StatusCode, n: len(b), err: err}
			}()
			var ev sink.Event
			select {
			case ev = <-gate.entered:
			case r := <-done:
				close(gate.release)
				t.Fatalf("the answer completed (%+v) before its event was recorded", r)
			case <-time.After(10 * time.Second):
				close(gate.release)
				t.Fatal("no event recorded within 10s")
			}
			if ev.Reason != tt.wantReason {
				t.Errorf("event reason = %q, want %q", ev.Reason, tt.wantReason)
			}
			select {
			case r := <-done:
				close(gate.release)
				t.Fatalf("the caller had its whole answer (%+v) while its event's Record was still held", r)
			case <-time.After(300 * time.Millisecond):
			}
			close(gate.release)
			select {
			case r := <-done:
				if r.err != nil || r.status != tt.wantStatus || r.n == 0 {
					t.Errorf("answer = %+v, want status %d and a body", r, tt.wantStatus)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the answer did not complete within 10s of Record returning")
			}
		})
	}
}

// startWithRecorder starts a sidecar with orderConfig over the upstream at
// upURL and rec as its Recorder, and returns its forward listener's address.
func startWithRecorder(t *testing.T, upURL string, rec proxy.Recorder) string {
	t.Helper()
	var cfg proxy.Config
	dec := yaml.NewDecoder(strings.NewReader(orderConfig))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(proxy.Snapshot{Config: &cfg, Version: "v-test"}, proxy.Options{Recorder: rec, Sidecar: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-served
	})
	return srv.Addr("forward", 0)
}
