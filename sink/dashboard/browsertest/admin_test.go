package browsertest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/internal/testutil"
)

// evilPage is a page of another site that tries to reload the sidecar
// behind the operator's back, every way a page can: a form POST
// (text/plain and form-encoded) into a hidden frame, a no-cors fetch with
// and without a body, and a fetch with the admin header (which needs a
// CORS preflight). It sends the same requests to CANARY, a server that
// records them, so the test knows the browser sent them. The title turns
// "done" once every fetch settled.
const evilPage = `<!doctype html><html><body>
<iframe name="sink" style="display:none"></iframe>
<form id="f1" method="post" enctype="text/plain" target="sink" action="ADMIN/reload"><input name="a" value="b"></form>
<form id="f2" method="post" target="sink" action="ADMIN/reload"><input name="a" value="b"></form>
<form id="c1" method="post" enctype="text/plain" target="sink" action="CANARY/form"><input name="a" value="b"></form>
<script>
async function attack() {
  document.getElementById("f1").submit();
  await new Promise(r => setTimeout(r, 300));
  document.getElementById("f2").submit();
  await new Promise(r => setTimeout(r, 300));
  document.getElementById("c1").submit();
  for (const base of ["ADMIN", "CANARY"]) {
    await fetch(base + "/reload", {method: "POST", mode: "no-cors"}).catch(() => {});
    await fetch(base + "/reload", {method: "POST", mode: "no-cors", body: "x"}).catch(() => {});
    await fetch(base + "/reload", {method: "POST", headers: {"X-Toolgate-Admin": "1"}}).catch(() => {});
  }
  await new Promise(r => setTimeout(r, 500));
  document.title = "done";
}
attack();
</script></body></html>`

// TestBrowserAdminCrossSite opens, in headless Chromium, a page of another
// site (evil.test, resolved to loopback by the browser) that POSTs to a
// real sidecar's /reload every way a page can. The sidecar is the toolgate
// binary, built from this repository and run as a process. The reload
// counters of its /status must not move; a canary server shows the
// browser did send such requests to loopback; and the operator's own POST
// /reload with X-Toolgate-Admin moves them.
func TestBrowserAdminCrossSite(t *testing.T) {
	exe := chromium(t)
	dir := t.TempDir()
	bin, err := testutil.ToolgateBinary(filepath.Join("..", "..", ".."), dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "toolgate.yaml")
	if err := os.WriteFile(cfg, []byte("listen: {forward: 127.0.0.1:0}\nadmin: {listen: 127.0.0.1:0}\nevents: {file: {path: events.ndjson}}\ntools: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sc := exec.CommandContext(ctx, bin, "run", "--config", cfg)
	sc.Cancel = func() error { return sc.Process.Signal(os.Interrupt) }
	sc.WaitDelay = 20 * time.Second
	stderr, err := sc.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); sc.Wait() }()
	adminc := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			var l struct{ Msg, Admin string }
			if json.Unmarshal(s.Bytes(), &l) == nil && l.Msg == "toolgate running" {
				adminc <- l.Admin
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	var admin string
	select {
	case admin = <-adminc:
	case <-time.After(60 * time.Second):
		t.Fatal("the sidecar did not start within 60s")
	}
	c := &http.Client{Timeout: 30 * time.Second}
	reloads := func() uint64 {
		t.Helper()
		resp, err := c.Get("http://" + admin + "/status")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st struct {
			Reload struct {
				Reloads struct{ OK, Failed uint64 } `json:"reloads"`
			} `json:"reload"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st.Reload.Reloads.OK + st.Reload.Reloads.Failed
	}

	var mu sync.Mutex
	var seen []string
	canary := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s site=%s origin=%s type=%s", r.Method, r.URL.Path, r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Origin"), r.Header.Get("Content-Type")))
		mu.Unlock()
	}))
	defer canary.Close()
	_, canaryPort, _ := net.SplitHostPort(canary.Listener.Addr().String())
	page := strings.NewReplacer("ADMIN", "http://"+admin, "CANARY", "http://127.0.0.1:"+canaryPort).Replace(evilPage)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, page)
	}))
	defer evil.Close()
	_, evilPort, _ := net.SplitHostPort(evil.Listener.Addr().String())

	before := reloads()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		// evil.test is another site, served from loopback.
		chromedp.Flag("host-resolver-rules", "MAP evil.test 127.0.0.1"),
		chromedp.UserDataDir(t.TempDir()),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	if err := chromedp.Listen(bctx, func(any) {}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	rctx, cancelR := context.WithTimeout(bctx, 90*time.Second)
	defer cancelR()
	if err := chromedp.Do(rctx, chromedp.Navigate("http://evil.test:"+evilPort+"/"), chromedp.Poll[chromedp.Void](`document.title === "done"`, chromedp.WithPollingTimeout(60*time.Second))); err != nil {
		t.Fatalf("the attacking page: %v", err)
	}
	mu.Lock()
	got := append([]string(nil), seen...)
	mu.Unlock()
	// The browser did send cross-site POSTs to loopback: the canary saw
	// the form and the no-cors fetches.
	crossSite := 0
	for _, s := range got {
		if strings.HasPrefix(s, "POST ") && strings.Contains(s, "site=cross-site") {
			crossSite++
		}
	}
	if crossSite < 2 {
		t.Fatalf("the canary saw %d cross-site POSTs, want the form and the fetches: %q", crossSite, got)
	}
	if n := reloads(); n != before {
		t.Errorf("a page of another site reloaded the sidecar: the reload counters went %d -> %d", before, n)
	}
	t.Logf("admin in Chromium: 7 cross-site requests tried (2 forms, 4 no-cors fetches, 1 preflighted), canary saw %d; reload counters %d -> %d", len(got), before, reloads())

	req, _ := http.NewRequest("POST", "http://"+admin+"/reload", nil)
	req.Header.Set("X-Toolgate-Admin", "1")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || reloads() != before+1 {
		t.Errorf("the operator's POST /reload: %d, counters %d -> %d; want 200 and one more", resp.StatusCode, before, reloads())
	}
}
