package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/internal/demotools"
	"github.com/toolgate/toolgate/internal/testutil"
)

var buildOnce struct {
	sync.Once
	path string
	err  error
}

// toolgateBinary builds the toolgate binary once per test run.
func toolgateBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "toolgate-bin-")
		if err != nil {
			buildOnce.err = err
			return
		}
		buildOnce.path, buildOnce.err = testutil.ToolgateBinary("../..", dir)
	})
	if buildOnce.err != nil {
		t.Fatal(buildOnce.err)
	}
	return buildOnce.path
}

// removeToolgateBinary removes the binary toolgateBinary built, if any,
// and its folder; TestMain calls it once the tests are done.
func removeToolgateBinary() {
	if buildOnce.path != "" {
		os.RemoveAll(filepath.Dir(buildOnce.path))
	}
}

// process is a toolgate sidecar running as its own process.
type process struct {
	cmd    *exec.Cmd
	stderr *testutil.SyncBuffer
	line   runningLine
}

func startProcess(t *testing.T, bin, cfg string) *process {
	t.Helper()
	p := &process{stderr: new(testutil.SyncBuffer)}
	p.cmd = exec.Command(bin, "run", "--config", cfg)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	deadline := time.Now().Add(15 * time.Second)
	for {
		if l, ok := findRunning(p.stderr.String()); ok {
			p.line = l
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("no running line; stderr:\n%s", p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// spoolStatus decodes the spool's part of /status into v (a pointer to a
// struct of the fields wanted); it fails the test when there is none.
func (p *process) spoolStatus(t *testing.T, v any) {
	t.Helper()
	resp, err := http.Get("http://" + p.line.Admin + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Events struct {
			Spool json.RawMessage `json:"spool"`
		} `json:"events"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || len(st.Events.Spool) == 0 || string(st.Events.Spool) == "null" {
		t.Fatalf("/status: %v, spool %s", err, st.Events.Spool)
	}
	if err := json.Unmarshal(st.Events.Spool, v); err != nil {
		t.Fatalf("/status spool: %v", err)
	}
}

// spoolPending reads the pending events of the spool from /status.
func (p *process) spoolPending(t *testing.T) int64 {
	t.Helper()
	var sp struct {
		PendingEvents int64 `json:"pending_events"`
	}
	p.spoolStatus(t, &sp)
	return sp.PendingEvents
}

// TestFaultSidecarKilledWhileClickHouseDown kills the sidecar process with
// SIGKILL while ClickHouse is down and events wait in its spool; then both
// come back, and every spooled event is in ClickHouse exactly once.
func TestFaultSidecarKilledWhileClickHouseDown(t *testing.T) {
	t.Parallel()
	bin := toolgateBinary(t)
	ch := chtest.Start(t)
	up, err := demotools.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "toolgate.yaml")
	writeFile(t, cfg, `
listen: {forward: 127.0.0.1:0}
admin: {listen: 127.0.0.1:0}
events:
  queue: {flush_interval: 20ms}
  spool: {dir: spool, segment_age: 20ms, retry_min: 50ms, retry_max: 300ms}
  clickhouse: {addr: [`+ch.Addr()+`], database: killed, dial_timeout: 500ms}
tools:
  - name: echo
    match: {host: 127.0.0.1, path: /echo}
`)
	ch.Stop()
	p := startProcess(t, bin, cfg)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: p.line.Forward})}}
	const calls = 60
	for i := 0; i < calls; i++ {
		resp, err := client.Get(fmt.Sprintf("%s/echo?i=%d", up.URL(), i))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.spoolPending(t) < calls && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := p.spoolPending(t); n != calls {
		t.Fatalf("spool holds %d events before the kill, want %d", n, calls)
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()

	ch.Restart(t)
	p2 := startProcess(t, bin, cfg)
	deadline = time.Now().Add(20 * time.Second)
	for p2.spoolPending(t) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	p2.cmd.Process.Signal(syscall.SIGTERM)
	p2.cmd.Wait()
	rows := ch.Query(t, "SELECT uniqExact(event_id), (SELECT count() FROM killed.events FINAL) FROM killed.events")
	if got := strings.Join(rows[0], " "); got != fmt.Sprintf("%d %d", calls, calls) {
		t.Errorf("distinct, FINAL = %s; want every one of %d spooled events once\nstderr:\n%s", got, calls, p2.stderr)
	}
}
