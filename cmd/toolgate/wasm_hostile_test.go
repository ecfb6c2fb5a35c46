package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/procstat"
)

// hostileWasmConfig binds hostile WASM modules to three tools and a good
// one to a fourth, in front of the demo upstream: a module that loops
// forever (deadline 50ms), one that grows its memory a page at a time,
// writing each page, and retries when refused (16 MiB, the default limit),
// and one that grows until refused, then traps (1 MiB). The memory modules
// get a deadline of 30s: what must stop them is their limit, at once.
const hostileWasmConfig = `listen:
  forward: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
events:
  sidecar: hostile
  file: {path: events.ndjson}
  queue: {flush_interval: 20ms}
policies:
  deadline: 30s
  wasm:
    - name: words
      path: words.wasm
      deadline: 10s
    - name: loop
      path: loop.wasm
      deadline: 50ms
    - name: hog
      path: hog.wasm
      deadline: 30s
    - name: bomb
      path: bomb.wasm
      deadline: 30s
      memory_limit_mib: 1
tools:
  - name: search
    match: {host: 127.0.0.1, method: GET, path: /esearch}
    args: [query]
    policies: [words]
  - name: stuck
    match: {host: 127.0.0.1, method: GET, path: /faults/text}
    policies: [loop]
  - name: hog
    match: {host: 127.0.0.1, method: GET, path: /faults/binary}
    policies: [hog]
  - name: bomb
    match: {host: 127.0.0.1, method: GET, path: /faults/hidden-error}
    policies: [bomb]
`

// Bounds of TestHostileWasmInTheSidecar: those of the wasm package's
// TestHostileModules (see there) plus the HTTP round trip through the
// proxy. Measured with the race detector on the shared 2-core machine
// (load average about 20) with two busy loops: worst overrun 0.37-0.8s,
// memory modules answered within 0.3-0.94s, good calls' worst latency
// 0.59-0.79s.
const (
	// sidecarOverrunBound: a looping module's call answers within its
	// deadline plus this.
	sidecarOverrunBound = 6 * time.Second
	// sidecarFastBound: a memory module's call answers within this, far
	// inside its 30s deadline.
	sidecarFastBound = 6 * time.Second
	// goodLatencyBound: the good tool's calls answer within this while the
	// hostile ones run.
	goodLatencyBound = 6 * time.Second
)

// TestHostileWasmInTheSidecar sends calls to tools whose WASM policies loop
// forever or eat memory, through the real listener, while another tool's
// calls keep flowing: each hostile call is refused with the reason and
// message that say what happened (policy_timeout for the loop within its
// deadline plus a bound; policy_error "module exceeded its memory limit"
// at once for the memory modules), none reaches upstream, and the good
// tool's calls keep their answers (allowed and denied) and a bounded
// latency. The process's peak memory is logged.
func TestHostileWasmInTheSidecar(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	dir := t.TempDir()
	for from, to := range map[string]string{"allow": "words", "loop": "loop", "hog": "hog", "bomb": "bomb"} {
		copyFixture(t, "../../wasm/testdata/"+from+".wasm", filepath.Join(dir, to+".wasm"))
	}
	r := startRun(t, dir, hostileWasmConfig)
	l := r.running(t)
	client := proxyClient(t, l.Forward)
	base := up.URL()
	rssBefore := procstat.PeakRSS()

	// The good tool, meanwhile: a fine query passes, a forbidden one is
	// denied by the module, every time.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var good []time.Duration
	var goodErrs []string
	for _, q := range []struct {
		query string
		want  int
	}{{"fine", http.StatusOK}, {"forbidden", http.StatusForbidden}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				a, err := fetch(client, "GET", base+"/esearch?term=x&query="+q.query, nil)
				took := time.Since(start)
				mu.Lock()
				good = append(good, took)
				if err != nil || a.status != q.want {
					goodErrs = append(goodErrs, q.query+": "+errText(err)+" status "+strconv.Itoa(a.status))
				}
				mu.Unlock()
			}
		}()
	}

	tests := []struct {
		name, path string
		deadline   time.Duration // 0: the call must end by itself within sidecarFastBound
		reason     string
		detail     string
	}{
		{"module that loops forever", "/faults/text", 50 * time.Millisecond, "policy_timeout", "module did not decide within 50ms"},
		{"module that fills 16 MiB and retries", "/faults/binary", 0, "policy_error", "module exceeded its memory limit of 16 MiB"},
		{"module that grows past 1 MiB", "/faults/hidden-error", 0, "policy_error", "module exceeded its memory limit of 1 MiB"},
	}
	var worstOverrun, worstFast time.Duration
	for _, tt := range tests {
		for i := range 5 {
			start := time.Now()
			a, err := fetch(client, "GET", base+tt.path, nil)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("%s, call %d: %v after %s", tt.name, i, err, took)
			}
			var env struct {
				Error struct{ Code, Reason, Detail string }
			}
			json.Unmarshal([]byte(a.body), &env)
			if a.status != http.StatusForbidden || a.header.Get("X-Toolgate-Error-Code") != "policy" ||
				env.Error.Reason != tt.reason || !strings.Contains(env.Error.Detail, tt.detail) {
				t.Errorf("%s, call %d: status %d, body %s; want 403 %s saying %q", tt.name, i, a.status, a.body, tt.reason, tt.detail)
			}
			if tt.deadline > 0 {
				worstOverrun = max(worstOverrun, took-tt.deadline)
				if took > tt.deadline+sidecarOverrunBound {
					t.Errorf("%s, call %d: answered after %s; deadline %s, bound %s past it", tt.name, i, took, tt.deadline, sidecarOverrunBound)
				}
			} else {
				worstFast = max(worstFast, took)
				if took > sidecarFastBound {
					t.Errorf("%s, call %d: answered after %s, bound %s", tt.name, i, took, sidecarFastBound)
				}
			}
		}
		if n := up.Hits("GET " + tt.path); n != 0 {
			t.Errorf("%s: %d calls reached upstream", tt.name, n)
		}
	}
	close(stop)
	wg.Wait()

	slices.Sort(good)
	if len(goodErrs) > 0 {
		t.Errorf("%d of %d good calls got a wrong answer while the hostile modules ran, e.g. %s", len(goodErrs), len(good), goodErrs[0])
	}
	if len(good) < 10 {
		t.Fatalf("only %d good calls completed", len(good))
	}
	p95, worst := good[len(good)*95/100], good[len(good)-1]
	if worst > goodLatencyBound {
		t.Errorf("a good call took %s meanwhile (p95 %s), bound %s", worst, p95, goodLatencyBound)
	}
	t.Logf("worst overrun past the deadline %s (bound %s); memory modules answered within %s (bound %s); %d good calls, p95 %s, worst %s",
		worstOverrun, sidecarOverrunBound, worstFast, sidecarFastBound, len(good), p95, worst)
	if rssBefore > 0 {
		t.Logf("peak RSS of the test process %d MiB before the hostile calls, %d MiB after", rssBefore>>20, procstat.PeakRSS()>>20)
	}

	r.stop(t)
	counts := map[string]int{}
	for _, e := range readEvents(t, filepath.Join(dir, "events.ndjson")) {
		counts[e.Tool+" "+e.Reason]++
	}
	for _, want := range []string{"stuck policy_timeout", "hog policy_error", "bomb policy_error"} {
		if counts[want] != 5 {
			t.Errorf("events %q: %d, want 5 (all: %v)", want, counts[want], counts)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
