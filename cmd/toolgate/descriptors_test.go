package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testutil"
)

// startLimited starts the toolgate binary with RLIMIT_NOFILE soft:hard
// (prlimit, from util-linux), or skips the test without prlimit.
func startLimited(t *testing.T, bin, cfg string, soft, hard int) *process {
	t.Helper()
	prl, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("needs prlimit (util-linux) to start toolgate with a low RLIMIT_NOFILE")
	}
	p := &process{stderr: new(testutil.SyncBuffer)}
	p.cmd = exec.Command(prl, fmt.Sprintf("--nofile=%d:%d", soft, hard), "--", bin, "run", "--config", cfg)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if l, ok := findRunning(p.stderr.String()); ok {
			p.line = l
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("no running line; stderr:\n%s", p.stderr)
		}
	}
}

// descriptorsConfig has a forward listener, a tool that reads a JSON body
// (whose stalled bodies the test holds open) and one that takes a query.
const descriptorsConfig = `listen:
  forward: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
events:
  sidecar: fds
  file: {path: events.ndjson}
tools:
  - name: pubmed_search
    match: {host: 127.0.0.1, method: GET, path: /esearch}
    args: [query]
  - name: drug_targets
    match: {host: 127.0.0.1, method: POST, path: /v1/targets/search}
    args: [json]
`

// stallBodies opens n connections to forward, each sending a request's
// head and the first bytes of a body it never finishes; they stay open
// until the test ends (or toolgate cuts them).
func stallBodies(t *testing.T, forward, upstream string, n int) []net.Conn {
	t.Helper()
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	head := "POST " + upstream + "/v1/targets/search HTTP/1.1\r\nHost: " + strings.TrimPrefix(upstream, "http://") +
		"\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n{\"query\": \""
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", forward, 5*time.Second)
		if err != nil {
			t.Fatalf("stalled connection %d: %v", i, err)
		}
		conns = append(conns, c)
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		c.Write([]byte(head)) // a connection refused at once may fail here: fine
	}
	return conns
}

// TestDescriptorBudgetUnderStalledBodies starts toolgate with 256
// descriptors (soft and hard: it cannot raise them) and opens 300
// connections that stop mid-body, which would take every descriptor for
// the 30 s body timeout. The descriptor budget caps caller connections
// below what the process has, and at the cap the stalled ones are cut
// first: a valid call is still answered within its client's timeout,
// /healthz answers, the call's event is written, and a reload succeeds.
func TestDescriptorBudgetUnderStalledBodies(t *testing.T) {
	t.Parallel()
	bin := toolgateBinary(t)
	up := startUpstream(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "toolgate.yaml")
	writeFile(t, cfg, descriptorsConfig)
	p := startLimited(t, bin, cfg, 256, 256)

	budget := logLines(p.stderr.String(), "descriptor budget: caller connections capped at what the descriptor limit leaves after the reserve (event path, admin listener, reloads) and an upstream connection per call")
	if len(budget) != 1 || budget[0]["rlimit_nofile"] != float64(256) {
		t.Fatalf("no descriptor budget logged for a limit of 256; stderr:\n%s", p.stderr)
	}
	t.Logf("budget: %v", budget[0])

	stalled := stallBodies(t, p.line.Forward, up.URL(), 300)
	// Past stallAfter (1 s) the stalled connections may be cut for newcomers.
	time.Sleep(1500 * time.Millisecond)

	client := proxyClient(t, p.line.Forward)
	client.Timeout = 10 * time.Second
	admin := directClient(t)
	admin.Timeout = 10 * time.Second
	start := time.Now()
	a, err := fetch(client, "GET", up.URL()+"/esearch?term=crispr", map[string]string{"X-Toolgate-Session": "fds-valid"})
	if err != nil || a.status != http.StatusOK {
		t.Fatalf("valid call during the flood: %v, status %d, body %s\nstderr:\n%s", err, a.status, a.body, p.stderr)
	}
	t.Logf("valid call answered in %v with %d stalled bodies open", time.Since(start), len(stalled))

	if h, err := fetch(admin, "GET", "http://"+p.line.Admin+"/healthz", nil); err != nil || h.status != http.StatusOK {
		t.Errorf("/healthz during the flood: %v, status %d", err, h.status)
	}
	r, err := fetch(admin, "POST", "http://"+p.line.Admin+"/reload", map[string]string{"X-Toolgate-Admin": "1"})
	if err != nil || r.status != http.StatusOK {
		t.Errorf("POST /reload during the flood: %v, status %d, body %s", err, r.status, r.body)
	}
	m, err := fetch(admin, "GET", "http://"+p.line.Admin+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(m.body, "\n") {
		if strings.HasPrefix(line, "toolgate_proxy_stalled_connections_cut_total") || strings.HasPrefix(line, "toolgate_proxy_connections_refused_total") ||
			strings.HasPrefix(line, "toolgate_proxy_open_connections") || strings.HasPrefix(line, "process_open_fds") {
			t.Log(line)
		}
	}
	// The event of the valid call was written before it was answered:
	// stopping appends the journal to the file.
	st := getDiskStatus(t, admin, p.line.Admin)
	if st.Events.Queue.Written == 0 || st.Events.Queue.Dropped != 0 {
		t.Errorf("/status events: %+v: want written and none dropped", st.Events.Queue)
	}
	// The flood ends before the stop: a graceful stop waits up to
	// sidecar.ShutdownGrace for connections mid-request, which the
	// stalled ones are until their body timeout.
	for _, c := range stalled {
		c.Close()
	}
	p.cmd.Process.Signal(os.Interrupt)
	p.cmd.Wait()
	var found bool
	for _, e := range readEvents(t, filepath.Join(dir, "events.ndjson")) {
		found = found || e.Session == "fds-valid" && e.OK
	}
	if !found {
		t.Errorf("the valid call's event is not in the file; stderr:\n%s", p.stderr)
	}
	if strings.Contains(p.stderr.String(), "too many open files") {
		t.Errorf("toolgate ran out of descriptors:\n%s", grepLines(p.stderr.String(), "too many open files"))
	}
}

// TestDescriptorLimitRaised: a soft limit below the hard one is raised to
// it at start, and the budget says so.
func TestDescriptorLimitRaised(t *testing.T) {
	t.Parallel()
	bin := toolgateBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "toolgate.yaml")
	writeFile(t, cfg, descriptorsConfig)
	p := startLimited(t, bin, cfg, 256, 2048)
	var b map[string]any
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && strings.HasPrefix(fmt.Sprint(m["msg"]), "descriptor budget") {
			b = m
		}
	}
	if b == nil || b["rlimit_nofile"] != float64(2048) {
		t.Fatalf("descriptor budget %v: want rlimit_nofile 2048 (raised from 256); stderr:\n%s", b, p.stderr)
	}
	// 2048: admin 128, reserve 64 + 128, callers (2048 - 192) / 2.
	if b["caller_conns"] != float64(928) || b["max_conns_per_listener"] != float64(928) {
		t.Errorf("budget %v: want 928 caller connections", b)
	}
}
