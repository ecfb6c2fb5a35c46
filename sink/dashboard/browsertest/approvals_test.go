package browsertest

import (
	"context"
	"maps"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/sink/dashboard"
	"github.com/toolgate/toolgate/sink/dashboard/internal/dashtest"
)

// gateItems shows an approval gate on the dashboard, as toolgate
// dashboard --config does.
type gateItems struct{ g *approval.Gate }

func (a gateItems) Items(ctx context.Context, limit int) ([]dashboard.ApprovalItem, error) {
	recs, err := a.g.List(ctx, limit)
	if err != nil {
		return nil, err
	}
	var out []dashboard.ApprovalItem
	for i := range recs {
		r := &recs[i]
		it := dashboard.ApprovalItem{ID: r.Request.ID, State: a.g.StateOf(r), Time: r.Request.Time, ExpiresAt: r.Request.ExpiresAt,
			Tool: r.Request.Tool, Agent: r.Request.Agent, Effect: r.Request.Effect, Uses: r.Uses()}
		for _, k := range slices.Sorted(maps.Keys(r.Request.Summary)) {
			it.Summary = append(it.Summary, [2]string{k, r.Request.Summary[k]})
		}
		if v := r.Verdict(); v != nil {
			it.Verdict, it.Decider, it.Note, it.DecidedAt = v.Verdict, v.Decider, v.Note, v.Time
		}
		out = append(out, it)
	}
	return out, nil
}

func (a gateItems) Decide(ctx context.Context, id, verdict, who, note string) error {
	_, err := a.g.Decide(ctx, id, verdict, who, note)
	return err
}

// TestBrowserApprovals approves a pending request on the Approvals page
// in headless Chromium: the page shows the effect and the summary the
// policy chose (not the arguments); typing a name and the shared secret
// and pressing Approve records the decision by that name, and the same
// call is then approved; a revision request's note reaches the caller.
func TestBrowserApprovals(t *testing.T) {
	exe := chromium(t)
	srv := chtest.Shared(t)
	db := dashtest.Seed(t, srv, dashtest.GenEvents(10))
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
	d, err := dashboard.Open(dashboard.Config{Addr: []string{srv.Addr()}, Database: db}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "browser-test-secret-0123"
	d.MountApprovals(gateItems{g}, dashboard.ApprovalAuth{Secret: secret})
	hs := httptest.NewServer(d)
	defer func() { hs.Close(); d.Close() }()

	ask := &policies.Approval{Effect: "edits document doc-42", Summary: map[string]string{"doc_id": "doc-42", "edits": "1"}}
	callOf := func(text string) *policies.ApprovalCall {
		return &policies.ApprovalCall{Tool: "docs_edit", Arguments: map[string]any{"text": text}, Agent: "agent-1", Session: "s", Ask: ask}
	}
	ctx := context.Background()
	first := g.Approve(ctx, callOf("top secret words"))
	second := g.Approve(ctx, callOf("other words"))
	if first.State != policies.ApprovalPending || second.State != policies.ApprovalPending {
		t.Fatalf("states %q %q", first.State, second.State)
	}

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 1000),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	// Listening starts the browser on bctx, so that the steps' shorter
	// contexts below do not end it.
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
	text := func(sel string) string {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		v, err := chromedp.Run(c, chromedp.Evaluate[string](`document.querySelector(`+"`"+sel+"`"+`) ? document.querySelector(`+"`"+sel+"`"+`).innerText : ""`))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	row := "#req-" + first.ID
	run(chromedp.Navigate(hs.URL+"/approvals?id="+first.ID), chromedp.WaitVisible(row))
	if got := text(row); !strings.Contains(got, "edits document doc-42") || !strings.Contains(got, "doc_id: doc-42") || strings.Contains(text("body"), "secret words") {
		t.Fatalf("pending row: %q", got)
	}
	run(chromedp.SendKeys(row+` input[name="who"]`, "dana"), chromedp.SendKeys(row+` input[name="secret"]`, secret),
		chromedp.Click(row+` button.approve`), chromedp.WaitVisible("#done"))
	if got := text("#recent " + row); !strings.Contains(got, "approved") || !strings.Contains(got, "secret:dana") {
		t.Fatalf("recent row: %q\n%s", got, text("body"))
	}
	if out := g.Approve(ctx, callOf("top secret words")); out.State != policies.ApprovalApproved {
		t.Fatalf("after the approval on the page: %q", out.State)
	}

	row2 := "#req-" + second.ID
	run(chromedp.Navigate(hs.URL+"/approvals"), chromedp.WaitVisible(row2))
	run(chromedp.SendKeys(row2+` input[name="who"]`, "erin"), chromedp.SendKeys(row2+` input[name="secret"]`, secret),
		chromedp.SendKeys(row2+` input[name="note"]`, "shorter, please"), chromedp.Click(row2+` button.revise`), chromedp.WaitVisible("#done"))
	out := g.Approve(ctx, callOf("other words"))
	if out.State != policies.ApprovalRevised || out.Note != "shorter, please" {
		t.Fatalf("after the revision request: %+v", out)
	}
}
