package proxy_test

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/demotools"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/policies/approval/audit"
	"github.com/toolgate/toolgate/policies/rego"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink"
)

// approvalSrc asks approval for every document edit, showing the document
// and the number of edits, never the text.
const approvalSrc = `package t.approve
approval := {
	"effect": sprintf("edits document %s", [input.arguments.doc_id]),
	"summary": {"doc_id": input.arguments.doc_id, "edits": count(input.arguments.requests)},
} if input.tool == "docs_edit"
`

const docsRoute = "POST /v1/documents/{doc_id}:batchUpdate"

// newApprovalEnv serves baseConfig with docs_edit bound to the approval
// policy, the gate over a file store configured by cfg, and events in an
// NDJSON file.
func newApprovalEnv(t testing.TB, cfg approval.Config) (*env, *approval.Gate) {
	return newApprovalEnvGate(t, cfg, true)
}

// newApprovalEnvGate is newApprovalEnv, without the approval step when
// gated is false (the benchmark's baseline).
func newApprovalEnvGate(t testing.TB, cfg approval.Config, gated bool) (*env, *approval.Gate) {
	return newApprovalEnvConfig(t, cfg, gated, baseConfig, nil)
}

// newApprovalEnvConfig is newApprovalEnvGate over another proxy
// configuration (UPSTREAM replaced by the demo upstream's URL) and, when
// checkers is not nil, those checkers instead of the approval policy.
func newApprovalEnvConfig(t testing.TB, cfg approval.Config, gated bool, cfgYAML string, checkers map[string]proxy.Checker) (*env, *approval.Gate) {
	t.Helper()
	up, err := demotools.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	cfgYAML = strings.ReplaceAll(cfgYAML, "UPSTREAM", up.URL())
	var pc proxy.Config
	dec := yaml.NewDecoder(strings.NewReader(cfgYAML))
	dec.KnownFields(true)
	if err := dec.Decode(&pc); err != nil {
		t.Fatal(err)
	}
	if err := pc.Validate(schemaDir(t)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := cfg.Validate(dir, false); err != nil {
		t.Fatal(err)
	}
	store, err := approval.OpenFileStore(cfg.FilePath(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	gate := approval.New(cfg, store, "test")
	events := filepath.Join(dir, "events.ndjson")
	f, err := sink.OpenFile(sink.FileConfig{Path: events})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	q, err := sink.NewQueue(f, sink.QueueConfig{FlushInterval: 10 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := rego.Compile("approve", map[string][]byte{"approve.rego": []byte(approvalSrc)})
	if err != nil {
		t.Fatal(err)
	}
	if checkers == nil {
		checkers = map[string]proxy.Checker{
			"docs_edit": policies.NewSet("docs_edit", []policies.Bound{{Policy: pol, Mode: policies.ModeEnforce}}, 10*time.Second, false),
		}
	}
	snap := proxy.Snapshot{Config: &pc, Version: "v", PolicyVersion: "p", Checkers: checkers}
	opts := proxy.Options{Recorder: q, Sidecar: "test", Approver: gate}
	if !gated {
		opts.Approver = nil
	}
	srv, err := proxy.New(snap, opts)
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
	proxyURL := &url.URL{Scheme: "http", Host: srv.Addr("forward", 0)}
	return &env{up: up, srv: srv, queue: q, events: events,
		viaHTTP: &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}, Timeout: 30 * time.Second},
		direct:  &http.Client{Timeout: 30 * time.Second},
	}, gate
}

// editCall sends one docs_edit call as agent a1 in session s1.
func editCall(t *testing.T, e *env, text string) answer {
	t.Helper()
	body := `{"requests":[{"insertText":{"text":"` + text + `","index":1}}]}`
	return do(t, e.viaHTTP, "POST", e.up.URL()+"/v1/documents/doc-42:batchUpdate", "application/json", body,
		map[string]string{"X-Toolgate-Agent": "a1", "X-Toolgate-Session": "s1", "X-Toolgate-Envelope": "1"})
}

func wantRefusal(t *testing.T, a answer, status int, code, reason string) *approvalInfo {
	t.Helper()
	if a.status != status || a.env == nil || a.env.Error == nil {
		t.Fatalf("status %d, want %d; body %s", a.status, status, a.body)
	}
	if string(a.env.Error.Code) != code || a.env.Error.Reason != reason {
		t.Fatalf("error %s/%s, want %s/%s; body %s", a.env.Error.Code, a.env.Error.Reason, code, reason, a.body)
	}
	if a.env.Error.Approval == nil {
		t.Fatalf("no error.approval; body %s", a.body)
	}
	return &approvalInfo{id: a.env.Error.Approval.ID, url: a.env.Error.Approval.URL, note: a.env.Error.Approval.Note}
}

type approvalInfo struct{ id, url, note string }

// TestApprovalRetryFlow is the default mode end to end through the real
// forward listener and upstream: a destructive call is refused pending
// (upstream untouched), approved, retried and forwarded exactly once; a
// second retry needs a new approval; tampered arguments need their own;
// a denial and a revision (with its note) reach the caller; events record
// each state; the stored summary holds only the fields the policy chose.
func TestApprovalRetryFlow(t *testing.T) {
	e, gate := newApprovalEnv(t, approval.Config{URL: "http://127.0.0.1:18099/approvals"})
	ctx := context.Background()

	a := editCall(t, e, "hello")
	p := wantRefusal(t, a, 403, "policy", "approval_pending")
	if ms := a.env.Error.RetryAfterMS; ms == nil || *ms != 5000 {
		t.Errorf("retry_after_ms = %v, want 5000", ms)
	}
	if !strings.HasPrefix(p.url, "http://127.0.0.1:18099/approvals?id="+p.id) {
		t.Errorf("approval url = %q", p.url)
	}
	if a.header.Get("X-Toolgate-Error-Code") != "policy" {
		t.Errorf("X-Toolgate-Error-Code = %q", a.header.Get("X-Toolgate-Error-Code"))
	}
	if again := wantRefusal(t, editCall(t, e, "hello"), 403, "policy", "approval_pending"); again.id != p.id {
		t.Errorf("the same call retried got approval %s, want the pending %s", again.id, p.id)
	}
	if n := e.up.Hits(docsRoute); n != 0 {
		t.Fatalf("upstream saw %d edits before approval", n)
	}
	rec, found, err := gate.Store().Find(ctx, p.id, "")
	if err != nil || !found {
		t.Fatalf("find %s: %v %v", p.id, found, err)
	}
	if rec.Request.Effect != "edits document doc-42" || len(rec.Request.Summary) != 2 ||
		rec.Request.Summary["doc_id"] != "doc-42" || rec.Request.Summary["edits"] != "1" {
		t.Errorf("request effect %q summary %v; want the policy's fields only", rec.Request.Effect, rec.Request.Summary)
	}
	if rec.Request.Agent != "a1" || rec.Request.Session != "s1" || rec.Request.Tool != "docs_edit" {
		t.Errorf("request bound to %s/%s/%s", rec.Request.Tool, rec.Request.Agent, rec.Request.Session)
	}

	if _, err := gate.Decide(ctx, p.id, audit.VerdictApproved, "dana", ""); err != nil {
		t.Fatal(err)
	}
	// Tampering: changed arguments are a different call, refused pending.
	tampered := wantRefusal(t, editCall(t, e, "hello, with more"), 403, "policy", "approval_pending")
	if tampered.id == p.id {
		t.Fatal("a changed call was covered by the first call's approval")
	}
	if a := editCall(t, e, "hello"); a.status != 200 || a.env == nil || !a.env.OK {
		t.Fatalf("approved retry: status %d body %s", a.status, a.body)
	}
	if n := e.up.Hits(docsRoute); n != 1 {
		t.Fatalf("upstream saw %d edits, want 1", n)
	}
	next := wantRefusal(t, editCall(t, e, "hello"), 403, "policy", "approval_pending")
	if next.id == p.id {
		t.Fatal("a used grant was used twice")
	}
	if n := e.up.Hits(docsRoute); n != 1 {
		t.Fatalf("upstream saw %d edits after the grant was used, want 1", n)
	}

	// Denied, then revision requested with a note.
	if _, err := gate.Decide(ctx, next.id, audit.VerdictDenied, "dana", "not today"); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, editCall(t, e, "hello"), 403, "policy", "approval_denied")
	if _, err := gate.Decide(ctx, tampered.id, audit.VerdictRevised, "erin", "insert at index 2 instead"); err != nil {
		t.Fatal(err)
	}
	a = editCall(t, e, "hello, with more")
	rv := wantRefusal(t, a, 422, "validation", "revision_requested")
	if rv.note != "insert at index 2 instead" || !strings.Contains(a.env.Error.Detail, "insert at index 2 instead") ||
		string(a.env.Error.Class) != "user" {
		t.Errorf("revision: class %s note %q detail %q", a.env.Error.Class, rv.note, a.env.Error.Detail)
	}
	if _, err := gate.Decide(ctx, p.id, audit.VerdictDenied, "mallory", ""); err == nil {
		t.Error("a decided request was decided again")
	}

	evs := e.waitEvents(t, 7)
	var states []string
	for _, ev := range evs {
		states = append(states, ev.Approval)
		if strings.Contains(ev.Detail, "hello") {
			t.Errorf("event detail holds an argument value: %q", ev.Detail)
		}
	}
	want := "pending pending pending approved pending denied revised"
	if got := strings.Join(states, " "); got != want {
		t.Errorf("event approval states %q, want %q", got, want)
	}
	if n := e.up.Hits(docsRoute); n != 1 {
		t.Fatalf("upstream saw %d edits in all, want 1", n)
	}
}

// TestApprovalRequiredByConfig checks a tool without policies whose
// configuration requires approval (echo_json, require: always), and that
// a tool that needs none passes untouched.
func TestApprovalRequiredByConfig(t *testing.T) {
	e, gate := newApprovalEnv(t, approval.Config{Tools: map[string]approval.ToolRule{"echo_json": {Require: approval.RequireAlways, Uses: 2}}})
	call := func() answer {
		return do(t, e.viaHTTP, "POST", e.up.URL()+"/echo", "application/json", `{"q":"x","n":1}`, map[string]string{"X-Toolgate-Envelope": "1"})
	}
	p := wantRefusal(t, call(), 403, "policy", "approval_pending")
	if _, err := gate.Decide(context.Background(), p.id, audit.VerdictApproved, "dana", ""); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if a := call(); a.status != 200 {
			t.Fatalf("use %d: status %d body %s", i+1, a.status, a.body)
		}
	}
	wantRefusal(t, call(), 403, "policy", "approval_pending")
	if a := do(t, e.viaHTTP, "GET", e.up.URL()+"/esearch?term=x", "", "", nil); a.status != 200 {
		t.Fatalf("a tool that needs no approval: status %d body %s", a.status, a.body)
	}
}

// TestApprovalExpiry checks that a pending request lapses: it can no
// longer be approved, and the same call asks anew.
func TestApprovalExpiry(t *testing.T) {
	e, gate := newApprovalEnv(t, approval.Config{PendingTTL: 300 * time.Millisecond})
	p := wantRefusal(t, editCall(t, e, "x"), 403, "policy", "approval_pending")
	time.Sleep(400 * time.Millisecond)
	if _, err := gate.Decide(context.Background(), p.id, audit.VerdictApproved, "dana", ""); err == nil {
		t.Fatal("an expired request was approved")
	}
	if again := wantRefusal(t, editCall(t, e, "x"), 403, "policy", "approval_pending"); again.id == p.id {
		t.Fatal("an expired request was reused")
	}
}

// TestApprovalHold checks hold mode: the request is held open and
// released by the approval (forwarded once), or refused at hold_timeout.
// It logs the time from the decision to the release.
func TestApprovalHold(t *testing.T) {
	e, gate := newApprovalEnv(t, approval.Config{Mode: approval.ModeHold, HoldTimeout: 60 * time.Second, PollInterval: 50 * time.Millisecond})
	var wg sync.WaitGroup
	var a answer
	var released time.Time
	wg.Add(1)
	go func() {
		defer wg.Done()
		a = editCall(t, e, "held")
		released = time.Now()
	}()
	var id string
	for deadline := time.Now().Add(20 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		recs, err := gate.List(context.Background(), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) > 0 {
			id = recs[0].Request.ID
		}
	}
	if id == "" {
		t.Fatal("no request was made")
	}
	decided := time.Now()
	if _, err := gate.Decide(context.Background(), id, audit.VerdictApproved, "dana", ""); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if a.status != 200 {
		t.Fatalf("held call: status %d body %s", a.status, a.body)
	}
	t.Logf("decision to release: %s", released.Sub(decided))
	if n := e.up.Hits(docsRoute); n != 1 {
		t.Fatalf("upstream saw %d edits, want 1", n)
	}
}

func TestApprovalHoldTimeout(t *testing.T) {
	e, _ := newApprovalEnv(t, approval.Config{Mode: approval.ModeHold, HoldTimeout: 300 * time.Millisecond, PollInterval: 50 * time.Millisecond})
	start := time.Now()
	wantRefusal(t, editCall(t, e, "held"), 403, "policy", "approval_pending")
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("answered after %s, before hold_timeout", d)
	}
	evs := e.waitEvents(t, 1)
	if len(evs) != 1 || evs[0].Approval != policies.ApprovalHeldTimeout {
		t.Fatalf("events %+v", evs)
	}
	if n := e.up.Hits(docsRoute); n != 0 {
		t.Fatalf("upstream saw %d edits", n)
	}
}
