package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/sidecar"
	"github.com/toolgate/toolgate/internal/demotools"
	"github.com/toolgate/toolgate/internal/testutil"
	"github.com/toolgate/toolgate/sink"
)

// runningLine is the "toolgate running" log line, the fields tests read.
type runningLine struct {
	Msg           string `json:"msg"`
	ConfigVersion string `json:"config_version"`
	Forward       string `json:"forward"`
	Admin         string `json:"admin"`
	Events        string `json:"events"`
}

// sidecarRun is `toolgate run --config FILE` running in a goroutine.
type sidecarRun struct {
	path string // the configuration file
	data []byte // its content
	// version is the configuration's version as config.Load computes it
	// (file and schemas), or "" when the file does not load.
	version string
	stdout  *testutil.SyncBuffer
	stderr  *testutil.SyncBuffer
	cancel  context.CancelFunc // SIGINT, as run sees it
	done    chan struct{}      // closed when run has returned
	code    int                // run's exit code, once done is closed
}

// runningWithin bounds a sidecar's start in these tests. A start waits for
// the schema's migrations when ClickHouse answers: on a fresh two-server
// cluster nine ON CLUSTER migrations took 1 to 1.5 s each on the loaded
// test machine, over the 10 s this once was (TestRunIntoClickHouseCluster);
// a start that hangs still fails.
const runningWithin = 60 * time.Second

// startRun writes cfg as toolgate.yaml in dir and calls run on it in a
// goroutine. The test's cleanup stops it and waits for it.
func startRun(t *testing.T, dir, cfg string) *sidecarRun {
	t.Helper()
	r := &sidecarRun{
		path: filepath.Join(dir, "toolgate.yaml"), data: []byte(cfg),
		stdout: new(testutil.SyncBuffer), stderr: new(testutil.SyncBuffer), done: make(chan struct{}),
	}
	writeFile(t, r.path, cfg)
	if lc, err := config.Load(r.path); err == nil {
		r.version = lc.Version
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		r.code = run(ctx, []string{"run", "--config", r.path}, r.stdout, r.stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(sidecar.ShutdownGrace + 5*time.Second):
			t.Errorf("run did not return after its context ended; stderr:\n%s", r.stderr)
		}
	})
	return r
}

// running waits for the "toolgate running" line and returns it.
func (r *sidecarRun) running(t *testing.T) runningLine {
	t.Helper()
	l, ok := r.runningOrReturned(t)
	if !ok {
		t.Fatalf("run returned %d without a \"toolgate running\" line; stderr:\n%s", r.code, r.stderr)
	}
	return l
}

// runningOrReturned waits for the "toolgate running" line, or for run to
// return without one (ok false), at most runningWithin.
func (r *sidecarRun) runningOrReturned(t *testing.T) (l runningLine, ok bool) {
	t.Helper()
	deadline := time.After(runningWithin)
	for {
		returned := false
		select {
		case <-r.done: // run wrote all it will write
			returned = true
		default:
		}
		if l, ok := findRunning(r.stderr.String()); ok {
			return l, true
		}
		if returned {
			return runningLine{}, false
		}
		select {
		case <-r.done:
		case <-deadline:
			t.Fatalf("no \"toolgate running\" line after %v; stderr:\n%s", runningWithin, r.stderr)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// findRunning finds the "toolgate running" line in a JSON log.
func findRunning(log string) (runningLine, bool) {
	for _, line := range strings.Split(log, "\n") {
		var l runningLine
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "toolgate running" {
			return l, true
		}
	}
	return runningLine{}, false
}

// stop cancels run's context and returns its exit code.
func (r *sidecarRun) stop(t *testing.T) int {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		return r.code
	case <-time.After(sidecar.ShutdownGrace + 5*time.Second):
		t.Fatalf("run did not return after its context ended; stderr:\n%s", r.stderr)
		return 0
	}
}

// answer is what a client got back.
type answer struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, c *http.Client, method, u string, header map[string]string) answer {
	t.Helper()
	a, err := fetch(c, method, u, header)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// fetch is do for goroutines other than the test's.
func fetch(c *http.Client, method, u string, header map[string]string) (answer, error) {
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		return answer{}, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: reading the answer: %w", method, u, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}, nil
}

// proxyClient is a legacy client whose only setting is HTTP_PROXY.
func proxyClient(t *testing.T, forward string) *http.Client {
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: forward})}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// directClient is a client with no proxy, for base URLs and the admin listener.
func directClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func startUpstream(t *testing.T) *demotools.Server {
	t.Helper()
	up, err := demotools.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	return up
}

// readEvents reads the events in the file at path and in its rotated
// backups (PATH.N, events.file.max_bytes), oldest first.
func readEvents(t *testing.T, path string) []sink.Event {
	t.Helper()
	var evs []sink.Event
	for i := sink.DefaultMaxBackups; i >= 0; i-- {
		p := path
		if i > 0 {
			p = fmt.Sprintf("%s.%d", path, i)
		}
		f, err := os.Open(p)
		if i > 0 && errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		more, err := sink.ReadEvents(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, more...)
	}
	return evs
}

// statusDoc is the part of /status the tests read.
type statusDoc struct {
	ConfigVersion string   `json:"config_version"`
	Sidecar       string   `json:"sidecar"`
	Ready         bool     `json:"ready"`
	Tools         []string `json:"tools"`
	Unmatched     string   `json:"unmatched"`
	Listeners     struct {
		Forward string   `json:"forward"`
		Reverse []string `json:"reverse"`
		Admin   string   `json:"admin"`
	} `json:"listeners"`
	Events struct {
		Queue struct {
			Recorded uint64 `json:"recorded"`
			Written  uint64 `json:"written"`
			Dropped  uint64 `json:"dropped"`
			// WaitTimeouts counts calls answered before their event
			// was written.
			WaitTimeouts uint64 `json:"wait_timeouts"`
		} `json:"queue"`
		Destination string `json:"destination"`
		Spool       struct {
			PendingEvents int64 `json:"pending_events"`
		} `json:"spool"`
	} `json:"events"`
}

// readShipped reads the events file at path once the spool in front of
// it, its journal, holds no event it has not appended to the file (within
// 30 s): every call answered so far then has its line.
func readShipped(t *testing.T, c *http.Client, admin, path string) []sink.Event {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st := getStatus(t, c, admin)
		if st.Events.Spool.PendingEvents == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the journal still holds %d events after 30 s", st.Events.Spool.PendingEvents)
		}
	}
	return readEvents(t, path)
}

func getStatus(t *testing.T, c *http.Client, admin string) statusDoc {
	t.Helper()
	a := do(t, c, "GET", "http://"+admin+"/status", nil)
	if a.status != http.StatusOK {
		t.Fatalf("/status = %d, want 200; body %s", a.status, a.body)
	}
	var st statusDoc
	if err := json.Unmarshal([]byte(a.body), &st); err != nil {
		t.Fatalf("/status is not JSON: %v\n%s", err, a.body)
	}
	return st
}

// e2eConfig has every listener on a free port, one tool over the demo
// upstream, and a flush_interval, which is no longer used but still loads
// (events are written before their calls are answered). UPSTREAM is the
// demo upstream's URL.
const e2eConfig = `listen:
  forward: 127.0.0.1:0
  reverse:
    - listen: 127.0.0.1:0
      upstream: UPSTREAM
admin:
  listen: 127.0.0.1:0
events:
  sidecar: e2e
  file:
    path: events.ndjson
  queue:
    flush_interval: 1h
tools:
  - name: pubmed_search
    match: {host: 127.0.0.1, method: GET, path: /esearch}
    args: [query]
    schema:
      type: object
      properties:
        term: {type: string, minLength: 1}
        retmax: {type: integer, minimum: 1, maximum: 100}
      required: [term]
`

// TestRunEndToEnd runs `toolgate run` with a real configuration file in
// front of the demo upstream: the admin endpoints answer, a valid call goes
// through the forward proxy, a typo through the reverse listener is refused
// before upstream, and stopping flushes both events to the file.
func TestRunEndToEnd(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	dir := t.TempDir()
	r := startRun(t, dir, strings.ReplaceAll(e2eConfig, "UPSTREAM", up.URL()))
	l := r.running(t)
	admin := directClient(t)

	if l.Forward == "" || l.Admin == "" {
		t.Fatalf("running line names forward %q, admin %q; want both", l.Forward, l.Admin)
	}
	if want := r.version; l.ConfigVersion != want {
		t.Errorf("running line config_version = %q, want %q", l.ConfigVersion, want)
	}
	// The file and its journal (on by default), beside it.
	events := filepath.Join(dir, "events.ndjson")
	destination := events + " (journal " + events + ".journal)"
	if l.Events != destination {
		t.Errorf("running line events = %q, want %q (relative to the config file)", l.Events, destination)
	}

	st := getStatus(t, admin, l.Admin)
	if len(st.Listeners.Reverse) != 1 {
		t.Fatalf("/status listeners.reverse = %q, want one", st.Listeners.Reverse)
	}
	reverse, upstream, _ := strings.Cut(st.Listeners.Reverse[0], " -> ")
	statusChecks := []struct {
		what      string
		got, want any
	}{
		{"config_version", st.ConfigVersion, r.version},
		{"ready", st.Ready, true},
		{"tools", strings.Join(st.Tools, ","), "pubmed_search"},
		{"sidecar", st.Sidecar, "e2e"},
		{"unmatched", st.Unmatched, "pass"},
		{"listeners.forward", st.Listeners.Forward, l.Forward},
		{"listeners.admin", st.Listeners.Admin, l.Admin},
		{"listeners.reverse upstream", upstream, up.URL()},
		{"events.destination", st.Events.Destination, destination},
	}
	for _, c := range statusChecks {
		if c.got != c.want {
			t.Errorf("/status %s = %v, want %v", c.what, c.got, c.want)
		}
	}

	// The calls: a valid one through HTTP_PROXY, a typo through the base URL.
	calls := []struct {
		name       string
		client     *http.Client
		url        string
		session    string
		wantStatus int
		wantCode   string // X-Toolgate-Error-Code
	}{
		{"valid via forward", proxyClient(t, l.Forward), up.URL() + "/esearch?term=crispr&retmax=5", "e2e-valid", http.StatusOK, ""},
		{"typo via reverse", directClient(t), "http://" + reverse + "/esearch?trem=crispr", "e2e-typo", http.StatusUnprocessableEntity, "validation"},
	}
	for _, c := range calls {
		a := do(t, c.client, "GET", c.url, map[string]string{"X-Toolgate-Session": c.session})
		if a.status != c.wantStatus {
			t.Errorf("%s: status = %d, want %d; body %s", c.name, a.status, c.wantStatus, a.body)
		}
		if got := a.header.Get("X-Toolgate-Error-Code"); got != c.wantCode {
			t.Errorf("%s: X-Toolgate-Error-Code = %q, want %q", c.name, got, c.wantCode)
		}
	}
	if got := up.Hits("GET /esearch"); got != 1 {
		t.Errorf("upstream saw %d calls to /esearch, want 1: the typo must not reach it", got)
	}
	if got := up.TotalHits(); got != 1 {
		t.Errorf("upstream saw %d requests in all, want 1", got)
	}

	// Both events were written (to the file's journal) before their
	// calls were answered; stopping puts them in the file.
	st = getStatus(t, admin, l.Admin)
	if st.Events.Queue.Recorded != 2 || st.Events.Queue.Written != 2 || st.Events.Queue.WaitTimeouts != 0 {
		t.Errorf("/status events recorded, written, wait timeouts = %d, %d, %d; want 2, 2, 0",
			st.Events.Queue.Recorded, st.Events.Queue.Written, st.Events.Queue.WaitTimeouts)
	}

	endpoints := []struct {
		path       string
		wantStatus int
		want       []string
	}{
		{"/healthz", http.StatusOK, []string{"ok"}},
		{"/readyz", http.StatusOK, []string{"ready"}},
		{"/metrics", http.StatusOK, []string{
			`toolgate_proxy_calls_total{code="ok",tool="pubmed_search"} 1`,
			`toolgate_proxy_calls_total{code="validation",tool="pubmed_search"} 1`,
			"toolgate_sink_queue_depth ",
			"toolgate_sink_events_recorded_total 2",
			"go_goroutines ",
		}},
		{"/status", http.StatusOK, []string{`"pubmed_search"`, `"config_version": "` + r.version + `"`}},
		{"/nowhere", http.StatusNotFound, nil},
	}
	for _, e := range endpoints {
		a := do(t, admin, "GET", "http://"+l.Admin+e.path, nil)
		if a.status != e.wantStatus {
			t.Errorf("GET %s = %d, want %d; body %s", e.path, a.status, e.wantStatus, a.body)
		}
		for _, w := range e.want {
			if !strings.Contains(a.body, w) {
				t.Errorf("GET %s does not contain %q", e.path, w)
			}
		}
	}

	if code := r.stop(t); code != exitOK {
		t.Fatalf("run = %d after its context ended, want 0; stderr:\n%s", code, r.stderr)
	}
	if !strings.Contains(r.stderr.String(), `"msg":"stopping"`) {
		t.Errorf("stderr has no \"stopping\" line:\n%s", r.stderr)
	}

	evs := readEvents(t, events)
	if len(evs) != 2 {
		t.Fatalf("%d events in the file, want 2: %+v", len(evs), evs)
	}
	bySession := map[string]sink.Event{}
	for _, e := range evs {
		bySession[e.Session] = e
	}
	wantEvents := []struct {
		session, listener, code, reason string
		ok, refused                     bool
		upstreamStatus                  int
	}{
		{"e2e-valid", "forward", "", "", true, false, http.StatusOK},
		{"e2e-typo", "reverse", "validation", "unknown_field", false, true, 0},
	}
	for _, w := range wantEvents {
		e, found := bySession[w.session]
		if !found {
			t.Errorf("no event for session %s", w.session)
			continue
		}
		got := fmt.Sprintf("tool=%s sidecar=%s listener=%s ok=%v code=%q reason=%q refused=%v upstream=%d config=%s",
			e.Tool, e.Sidecar, e.Listener, e.OK, e.ErrorCode, e.Reason, e.Refused, e.UpstreamStatus, e.ConfigVersion)
		want := fmt.Sprintf("tool=pubmed_search sidecar=e2e listener=%s ok=%v code=%q reason=%q refused=%v upstream=%d config=%s",
			w.listener, w.ok, w.code, w.reason, w.refused, w.upstreamStatus, r.version)
		if got != want {
			t.Errorf("event %s:\n got %s\nwant %s", w.session, got, want)
		}
	}
}

// TestRunGracefulStop stops the sidecar while a call is under way: readiness
// drops at once, the call still gets its answer, and its event is written.
func TestRunGracefulStop(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	dir := t.TempDir()
	r := startRun(t, dir, `listen:
  forward: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
events:
  file: {path: events.ndjson}
  queue: {flush_interval: 1h}
tools:
  - name: slow
    match: {host: 127.0.0.1, method: GET, path: /faults/slow}
    timeout: 5s
`)
	l := r.running(t)
	admin := directClient(t)

	client := proxyClient(t, l.Forward)
	result := make(chan answer, 1)
	go func() {
		a, err := fetch(client, "GET", up.URL()+"/faults/slow?ms=700", nil)
		if err != nil {
			a.body = err.Error()
		}
		result <- a
	}()
	for deadline := time.Now().Add(5 * time.Second); up.Hits("GET /faults/slow") == 0; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow call never reached upstream")
		}
	}
	r.cancel()

	// Readiness drops before the listeners stop; admin stays up while the
	// call finishes.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if a := do(t, admin, "GET", "http://"+l.Admin+"/readyz", nil); a.status == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/readyz still ready after the stop began")
		}
	}
	select {
	case a := <-result:
		if a.status != http.StatusOK {
			t.Errorf("call under way got %d, want 200; body %s", a.status, a.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call under way got no answer")
	}
	if code := r.stop(t); code != exitOK {
		t.Fatalf("run = %d, want 0; stderr:\n%s", code, r.stderr)
	}
	evs := readEvents(t, filepath.Join(dir, "events.ndjson"))
	if len(evs) != 1 || !evs[0].OK || evs[0].Tool != "slow" {
		t.Errorf("events = %+v, want one ok event for tool slow", evs)
	}
}

// TestRunServesUntilStopped checks that run keeps serving until its context
// ends, whichever listeners are configured, or else refuses the
// configuration before starting.
func TestRunServesUntilStopped(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		listen    string // the first line of the configuration
		mayReject string // the field a config error may name instead of serving
		bug       string
	}{
		{name: "forward listener", listen: "listen: {forward: 127.0.0.1:0}"},
		{
			name:      "admin listener only",
			listen:    `listen: {forward: "off"}`,
			mayReject: "listen",
			bug: "with forward off and no reverse listener, proxy.Server.Serve returns nil at once, " +
				"sidecar.wait (serve.go:138) takes that as a failed listener (logging err=null) and run exits 0 " +
				"while admin was serving; either reject a configuration without proxy listeners or wait for ctx",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := startRun(t, t.TempDir(), tc.listen+"\nadmin: {listen: 127.0.0.1:0}\nevents: {file: {path: events.ndjson}}\n")
			if _, ok := r.runningOrReturned(t); !ok {
				rejected := fmt.Sprintf("%s:1: %s: ", r.path, tc.mayReject)
				if tc.mayReject == "" || r.code != exitError || !strings.Contains(r.stderr.String(), rejected) {
					t.Errorf("run returned %d without starting or a config error naming %q; stderr:\n%s", r.code, rejected, r.stderr)
				}
				return
			}
			select {
			case <-r.done:
				report(t, tc.bug, []string{fmt.Sprintf("run returned %d before its context ended; stderr:\n%s", r.code, r.stderr)})
				return
			case <-time.After(300 * time.Millisecond):
			}
			if code := r.stop(t); code != exitOK {
				t.Errorf("run = %d after its context ended, want 0", code)
			}
		})
	}
}

// TestRunStartFailureLeavesNothingRunning makes the admin listener fail to
// bind after the forward listener was bound: run must exit 1 naming the
// address, and the forward address must be free again.
func TestRunStartFailureLeavesNothingRunning(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	forward := "127.0.0.1:" + freePort(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "toolgate.yaml")
	writeFile(t, path, fmt.Sprintf("listen: {forward: %q}\nadmin: {listen: %q}\nevents: {file: {path: events.ndjson}}\n", forward, busy.Addr()))

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run", "--config", path}, &stdout, &stderr)
	if code != exitError {
		t.Errorf("run = %d, want 1", code)
	}
	if want := "listen admin on " + busy.Addr().String(); !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr does not name the admin address (%q):\n%s", want, stderr.String())
	}
	ln, err := net.Listen("tcp", forward)
	if err != nil {
		report(t, "startSidecar (serve.go:105) calls proxy.Shutdown when admin fails to bind, but "+
			"proxy.Server.Shutdown only stops http.Servers that Serve created, so the forward listener bound by "+
			"Listen stays open: 'On error nothing is left running' does not hold",
			[]string{fmt.Sprintf("the forward address %s is still bound after run returned: %v", forward, err)})
		return
	}
	ln.Close()
}

// TestRunStoppedAtOnce cancels run's context before it starts: run must
// still return 0, and no listener may outlive it. Whether the proxy's
// Serve goroutine has started when the stop comes is up to the scheduler,
// so the test tries several times.
func TestRunStoppedAtOnce(t *testing.T) {
	t.Parallel()
	const tries = 20
	leaked := 0
	for range tries {
		dir := t.TempDir()
		path := filepath.Join(dir, "toolgate.yaml")
		writeFile(t, path, "listen: {forward: 127.0.0.1:0}\nadmin: {listen: 127.0.0.1:0}\nevents: {file: {path: events.ndjson}}\n")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var stdout, stderr bytes.Buffer
		if code := run(ctx, []string{"run", "--config", path}, &stdout, &stderr); code != exitOK {
			t.Fatalf("run = %d, want 0; stderr:\n%s", code, stderr.String())
		}
		l, _ := findRunning(stderr.String())
		if l.Forward == "" {
			t.Fatalf("no running line with a forward address:\n%s", stderr.String())
		}
		if c, err := net.DialTimeout("tcp", l.Forward, time.Second); err == nil {
			c.Close()
			leaked++
		}
	}
	if leaked > 0 {
		report(t, "proxy.Server.Serve creates its http.Servers in the goroutine startSidecar starts; a Shutdown "+
			"that runs first finds none, and Serve then serves forever (proxy/proxy.go:185-226)",
			[]string{fmt.Sprintf("%d of %d runs left the forward listener accepting after run returned", leaked, tries)})
	}
}

// TestAdminConnectionCap holds the admin listener's AdminMaxConns
// connections open (each has had its answer and sits idle, as a
// keep-alive client's would for up to the idle timeout): a probe then
// waits unserved, calls through the proxy listener still go through, and
// the probe is served as soon as one held connection closes.
func TestAdminConnectionCap(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	r := startRun(t, t.TempDir(), strings.ReplaceAll(e2eConfig, "UPSTREAM", up.URL()))
	l := r.running(t)

	held := make([]net.Conn, 0, sidecar.AdminMaxConns)
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for range sidecar.AdminMaxConns {
		c, err := net.Dial("tcp", l.Admin)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: toolgate\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("held connection %d: %v", len(held), err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("held connection %d: /healthz = %d", len(held), resp.StatusCode)
		}
	}

	// Over the cap: the probe's connection waits in the kernel's queue.
	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	if a, err := fetch(probe, "GET", "http://"+l.Admin+"/healthz", nil); err == nil {
		t.Fatalf("with %d admin connections open a probe was served (%d); want it to wait", sidecar.AdminMaxConns, a.status)
	}

	// The proxy listener does not share the admin listener's cap.
	if a := do(t, proxyClient(t, l.Forward), "GET", up.URL()+"/esearch?term=crispr", nil); a.status != http.StatusOK {
		t.Errorf("a call through the forward listener = %d while admin was full; want 200: %s", a.status, a.body)
	}

	held[0].Close()
	held = held[1:]
	if a := do(t, directClient(t), "GET", "http://"+l.Admin+"/healthz", nil); a.status != http.StatusOK {
		t.Errorf("/healthz = %d after a held connection closed, want 200", a.status)
	}
}
