package browsertest

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/internal/frontjwt"
	"github.com/toolgate/toolgate/internal/frontjwt/frontjwttest"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/sink/dashboard"
	"github.com/toolgate/toolgate/sink/dashboard/internal/dashtest"
)

// csrfPage is a page of another site that submits a decision to the
// dashboard, as the operator's browser, signed in at the front, would
// send it.
const csrfPage = `<!doctype html><html><body>
<form id="f" method="post" action="FRONT/approvals/decide">
<input name="id" value="ID"><input name="verdict" value="approved"><input name="note" value="csrf">
</form>
<script>document.getElementById("f").submit();</script>
</body></html>`

// TestBrowserDecisionCSRF: the dashboard sits behind a front that signs
// every request of the signed-in operator with its JWT (as oauth2-proxy or
// Pomerium do from their session cookie) and, like an older browser, does
// not pass Sec-Fetch-Site or Origin on. A page of another site that
// submits the decision form in the operator's Chromium records nothing:
// it has no form token for the session. The operator's own click on the
// page does decide, and records the front's user.
func TestBrowserDecisionCSRF(t *testing.T) {
	exe := chromium(t)
	srv := chtest.Shared(t)
	db := dashtest.Seed(t, srv, dashtest.GenEvents(5))
	cfg := approval.Config{}
	if err := cfg.Validate(t.TempDir(), false); err != nil {
		t.Fatal(err)
	}
	store, err := approval.OpenFileStore(filepath.Join(t.TempDir(), "a.ndjson"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	g := approval.New(cfg, store, "browser")

	front := frontjwttest.New(t, "https://front.example", "toolgate-dashboard")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "jwks.json"), front.JWKS(t), 0o600); err != nil {
		t.Fatal(err)
	}
	jc := frontjwt.Config{JWKSFile: "jwks.json", Issuer: front.Issuer, Audience: front.Audience}
	if err := jc.Validate(dir); err != nil {
		t.Fatal(err)
	}
	v, err := frontjwt.New(context.Background(), jc)
	if err != nil {
		t.Fatal(err)
	}
	d, err := dashboard.Open(dashboard.Config{Addr: []string{srv.Addr()}, Database: db}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.MountApprovals(gateItems{g}, dashboard.ApprovalAuth{Front: v})
	dash := httptest.NewServer(d)
	defer func() { dash.Close(); d.Close() }()
	du, _ := url.Parse(dash.URL)
	rp := httputil.NewSingleHostReverseProxy(du)
	fr := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+front.Sign(t, front.Claims("dana@example.com", 5*time.Minute)))
		r.Header.Del("Sec-Fetch-Site")
		r.Header.Del("Origin")
		rp.ServeHTTP(w, r)
	}))
	defer fr.Close()

	ask := &policies.Approval{Effect: "edits document doc-9", Summary: map[string]string{"doc_id": "doc-9"}}
	call := &policies.ApprovalCall{Tool: "docs_edit", Arguments: map[string]any{"text": "x"}, Agent: "agent-1", Session: "s", Ask: ask}
	ctx := context.Background()
	pending := g.Approve(ctx, call)
	if pending.State != policies.ApprovalPending {
		t.Fatalf("state %q", pending.State)
	}
	_, frontPort, _ := net.SplitHostPort(fr.Listener.Addr().String())
	page := strings.NewReplacer("FRONT", "http://127.0.0.1:"+frontPort, "ID", pending.ID).Replace(csrfPage)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, page)
	}))
	defer evil.Close()
	_, evilPort, _ := net.SplitHostPort(evil.Listener.Addr().String())

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("host-resolver-rules", "MAP evil.test 127.0.0.1"),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 1000),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Listen(bctx, func(any) {}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 60*time.Second)
		defer cancel()
		if err := chromedp.Do(c, steps...); err != nil {
			t.Fatal(err)
		}
	}
	// The operator opens the page first, so the browser holds the
	// dashboard's session cookie when the other site strikes.
	row := "#req-" + pending.ID
	run(chromedp.Navigate(fr.URL+"/approvals"), chromedp.WaitVisible(row+` button.approve`))
	run(chromedp.Navigate("http://evil.test:"+evilPort+"/"), chromedp.WaitReady("body"))
	// The form navigates the tab to the dashboard's answer.
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, cancel := context.WithTimeout(bctx, 10*time.Second)
		u, err := chromedp.Run(c, chromedp.Evaluate[string](`location.href + " " + document.body.innerText`))
		cancel()
		if err == nil && strings.HasPrefix(u, fr.URL+"/approvals") {
			t.Logf("the other site's form got: %.200s", u)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other site's form was not submitted: %q %v", u, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out := g.Approve(ctx, call); out.State != policies.ApprovalPending {
		t.Fatalf("a page of another site decided the request: %+v", out)
	}
	recs, err := g.List(ctx, 10)
	if err != nil || len(recs) != 1 || recs[0].Verdict() != nil {
		t.Fatalf("the store holds a decision after the other site's form: %v %+v", err, recs)
	}

	// The operator's own click decides, as the front's user.
	run(chromedp.Navigate(fr.URL+"/approvals?id="+pending.ID), chromedp.Click(row+` button.approve`), chromedp.WaitVisible("#done"))
	if out := g.Approve(ctx, call); out.State != policies.ApprovalApproved {
		t.Fatalf("after the operator's click: %q", out.State)
	}
	recs, _ = g.List(ctx, 10)
	if v := recs[0].Verdict(); v == nil || v.Decider != "jwt:dana@example.com" {
		t.Errorf("decision %+v, want by jwt:dana@example.com", v)
	}
}
