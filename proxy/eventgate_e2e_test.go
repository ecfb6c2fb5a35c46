package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink"
)

// fullDisk is a small tmpfs the test can fill and empty again.
type fullDisk struct {
	dir string
	n   int
}

// newFullDisk mounts a tmpfs of size, unmounted in cleanup, or skips the
// test (not root, no mount).
func newFullDisk(t *testing.T, size string) *fullDisk {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs (sink's TestQueueDurableOnFullDisk injects ENOSPC instead)")
	}
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return &fullDisk{dir: dir}
}

// fill writes files until the file system is full.
func (d *fullDisk) fill(t *testing.T) {
	t.Helper()
	chunk := make([]byte, 4<<10)
	for {
		d.n++
		f, err := os.Create(filepath.Join(d.dir, fmt.Sprintf("filler-%d", d.n)))
		if errors.Is(err, syscall.ENOSPC) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 64 && err == nil; i++ {
			_, err = f.Write(chunk)
		}
		f.Close()
		if errors.Is(err, syscall.ENOSPC) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func (d *fullDisk) empty() {
	for i := 1; i <= d.n; i++ {
		os.Remove(filepath.Join(d.dir, fmt.Sprintf("filler-%d", i)))
	}
}

// gatedConfig has a plain tool and an MCP route on the same upstreams.
const gatedConfig = `
listen:
  forward: 127.0.0.1:0
tools:
  - name: plain
    match: {method: GET, path: /ok}
  - name: issues_mcp
    protocol: mcp
    match: {host: 127.0.0.1, path: /mcp}
`

// TestEventsUnavailableRefusesBeforeUpstream runs the proxy with its
// events file on a real tmpfs and the events gate on
// (events.on_write_failure: refuse). While the disk is full, plain calls
// and MCP tools/call are refused with events_unavailable and never reach
// their (real) upstreams; the one call forwarded before the first failed
// write gets no answer; every call answered has its event; when the space
// returns, calls pass again.
func TestEventsUnavailableRefusesBeforeUpstream(t *testing.T) {
	disk := newFullDisk(t, "1m")
	plain := newBlockingUpstream(t)
	mcpUp := startMCPUpstream(t)

	var cfg proxy.Config
	if err := yaml.Unmarshal([]byte(gatedConfig), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(disk.dir, "events.ndjson")
	f, err := sink.OpenFile(sink.FileConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	q, err := sink.NewQueue(f, sink.QueueConfig{MaxWait: 50 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(proxy.Snapshot{Config: &cfg, Version: "v"}, proxy.Options{Recorder: q, Sidecar: "test", Events: q})
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
	proxyURL, _ := url.Parse("http://" + srv.Addr("forward", 0))
	hc := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}, Timeout: 20 * time.Second}
	get := func(session string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, plain.srv.URL+"/ok", nil)
		req.Header.Set(proxy.DefaultSessionHeader, session)
		req.Header.Set("X-Toolgate-Envelope", "1")
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b := make([]byte, 4096)
		n, _ := resp.Body.Read(b)
		return resp.StatusCode, string(b[:n])
	}
	cs := connect(t, mcpUp.srv.URL+"/mcp", hc, "", nil)

	if st, body := get("before"); st != http.StatusOK {
		t.Fatalf("before the disk fills: %d %s", st, body)
	}
	if res := callTool(t, cs, "create_issue", map[string]any{"title": "before"}); res.IsError {
		t.Fatalf("MCP call before the disk fills: %s", resultText(res))
	}

	disk.fill(t)
	executed := plain.done.Load()
	created := mcpUp.created.Load()
	answered := map[string]bool{"before": true}
	refused, withheld := 0, 0
	for i := 0; i < 20; i++ {
		st, body := get(fmt.Sprintf("full-%d", i))
		switch {
		case st == http.StatusOK:
			answered[fmt.Sprintf("full-%d", i)] = true
		case st == http.StatusServiceUnavailable && strings.Contains(body, `"events_unavailable"`) && strings.Contains(body, "withheld"):
			withheld++
		case st == http.StatusServiceUnavailable && strings.Contains(body, `"events_unavailable"`) && strings.Contains(body, `"retryable":true`):
			refused++
		default:
			t.Errorf("call %d on a full disk: %d %s", i, st, body)
		}
	}
	res := callTool(t, cs, "create_issue", map[string]any{"title": "full"})
	if !res.IsError || !strings.Contains(resultText(res), "cannot write its event") {
		t.Errorf("MCP tools/call on a full disk: isError %v, %q; want the events_unavailable refusal", res.IsError, resultText(res))
	}
	if got := mcpUp.created.Load(); got != created {
		t.Errorf("the MCP server executed %d tools/call on a full disk, want none", got-created)
	}
	if refused == 0 {
		t.Error("no call was refused on a full disk")
	}
	// Only calls forwarded before toolgate knew the disk was full reach
	// the upstream, and none of them was answered.
	if got := plain.done.Load() - executed; got != int64(withheld+len(answered)-1) {
		t.Errorf("upstream executed %d calls on a full disk; %d were withheld and %d answered", got, withheld, len(answered)-1)
	}
	t.Logf("on a full disk: %d answered, %d refused, %d withheld", len(answered)-1, refused, withheld)

	disk.empty()
	deadline := time.Now().Add(20 * time.Second)
	for try := 0; ; try++ {
		// Each try its own session: a try refused while the queue still
		// catches up has an event of its own.
		if st, _ := get(fmt.Sprintf("after-%d", try)); st == http.StatusOK {
			answered[fmt.Sprintf("after-%d", try)] = true
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("calls still refused 20 s after the space returned")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if res := callTool(t, cs, "create_issue", map[string]any{"title": "after"}); res.IsError {
		t.Errorf("MCP call after the space returned: %s", resultText(res))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := sink.ReadEvents(fh)
	fh.Close()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	sessions := map[string]int{}
	for _, e := range evs {
		ids[e.EventID]++
		sessions[e.Session]++
	}
	for s := range answered {
		if sessions[s] != 1 {
			t.Errorf("answered call %q has %d events, want 1", s, sessions[s])
		}
	}
	for id, n := range ids {
		if n > 1 {
			t.Errorf("event %s written %d times", id, n)
		}
	}
	if got := metricValue(t, srv, "toolgate_proxy_events_unavailable_total", map[string]string{"outcome": "refused"}); got < float64(refused) {
		t.Errorf("toolgate_proxy_events_unavailable_total{outcome=refused} = %v, want at least %d", got, refused)
	}
}
