package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/internal/demotools"
)

// approvalRego asks approval for document edits, showing the document
// and the number of edits only.
const approvalRego = `package toolgate.approve
approval := {
	"effect": sprintf("edits document %s", [input.arguments.doc_id]),
	"summary": {"doc_id": input.arguments.doc_id, "edits": count(input.arguments.requests)},
}
`

// approvalConfig is a sidecar with docs_edit bound to the approval
// policy; STORE is replaced by the events and approvals sections.
const approvalConfig = `
listen: {forward: 127.0.0.1:0}
admin: {listen: off}
tools:
  - name: docs_edit
    match: {host: 127.0.0.1, method: POST, path: "/v1/documents/{doc_id}:batchUpdate"}
    schema: {type: object, properties: {doc_id: {type: string}, requests: {type: array}}, required: [doc_id, requests]}
    policies: [approve]
policies:
  rego:
    - {name: approve, path: approve.rego}
STORE`

func approvalSidecarDir(t *testing.T, store string) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "approve.rego"), approvalRego)
	writeFile(t, filepath.Join(dir, "toolgate.yaml"), strings.Replace(approvalConfig, "STORE", store, 1))
	return dir
}

// editVia sends one docs_edit through a sidecar's forward listener and
// decodes the envelope.
func editVia(t *testing.T, forward, upURL, text string) (int, bucketing.Envelope) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: forward})}, Timeout: 30 * time.Second}
	req, _ := http.NewRequest("POST", upURL+"/v1/documents/doc-7:batchUpdate",
		strings.NewReader(`{"requests":[{"insertText":{"text":"`+text+`","index":1}}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Toolgate-Envelope", "1")
	req.Header.Set("X-Toolgate-Agent", "agent-1")
	req.Header.Set("X-Toolgate-Session", "sess-1")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var env bucketing.Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("answer %d is no envelope: %s", resp.StatusCode, body)
	}
	return resp.StatusCode, env
}

// approvalsCmd runs `toolgate approvals ARGS --config cfg`.
func approvalsCmd(t *testing.T, cfg string, args ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append(append([]string{"approvals"}, args...), "--config", cfg), &out, &errb)
	return code, out.String() + errb.String()
}

// TestApprovalsTwoSidecarsOneClickHouse runs two real sidecars on one
// real ClickHouse: a call through the first is refused pending; `toolgate
// approvals approve` decides it once; the same call through the second
// goes upstream once; tampered arguments after approval are refused; a
// revision's note reaches the caller; the audit tables hold one row per
// request and decision (with who), and events record the states.
func TestApprovalsTwoSidecarsOneClickHouse(t *testing.T) {
	t.Parallel()
	ch := chtest.Shared(t)
	db := ch.Database(t)
	up, err := demotools.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	store := `events:
  queue: {flush_interval: 20ms}
  spool: {segment_age: 20ms, retry_min: 50ms, retry_max: 200ms}
  clickhouse: {addr: [` + ch.Addr() + `], database: ` + db + `}
approvals:
  url: http://127.0.0.1:18091/approvals
`
	dirA, dirB := approvalSidecarDir(t, store), approvalSidecarDir(t, store)
	a, b := startRun(t, dirA, string(mustRead(t, filepath.Join(dirA, "toolgate.yaml")))), startRun(t, dirB, string(mustRead(t, filepath.Join(dirB, "toolgate.yaml"))))
	la, lb := a.running(t), b.running(t)
	const route = "POST /v1/documents/{doc_id}:batchUpdate"

	status, env := editVia(t, la.Forward, up.URL(), "hi")
	if status != 403 || env.Error == nil || env.Error.Reason != "approval_pending" || env.Error.Approval == nil {
		t.Fatalf("first call: %d %+v", status, env.Error)
	}
	id := env.Error.Approval.ID
	if !strings.Contains(env.Error.Approval.URL, "id="+id) {
		t.Errorf("approval url %q", env.Error.Approval.URL)
	}
	// The second sidecar sees the same pending request.
	if status, env := editVia(t, lb.Forward, up.URL(), "hi"); status != 403 || env.Error.Approval == nil || env.Error.Approval.ID != id {
		t.Fatalf("same call through sidecar B: %d %+v", status, env.Error)
	}
	code, out := approvalsCmd(t, filepath.Join(dirA, "toolgate.yaml"), "list")
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "edits document doc-7") || strings.Contains(out, "hi\"") {
		t.Fatalf("approvals list exit %d:\n%s", code, out)
	}
	if want := "POST " + up.URL() + "/v1/documents/{doc_id}:batchUpdate"; !strings.Contains(out, want) {
		t.Errorf("approvals list does not show the call's method and destination %q:\n%s", want, out)
	}
	if code, out := approvalsCmd(t, filepath.Join(dirA, "toolgate.yaml"), "approve", id, "--as", "dana"); code != 0 {
		t.Fatalf("approve exit %d: %s", code, out)
	}
	if status, env := editVia(t, lb.Forward, up.URL(), "hi, tampered"); status != 403 || env.Error.Reason != "approval_pending" || env.Error.Approval.ID == id {
		t.Fatalf("tampered call: %d %+v", status, env.Error)
	}
	if status, env := editVia(t, lb.Forward, up.URL(), "hi"); status != 200 || !env.OK {
		t.Fatalf("approved call through sidecar B: %d %+v", status, env.Error)
	}
	if status, env := editVia(t, la.Forward, up.URL(), "hi"); status != 403 || env.Error.Approval.ID == id {
		t.Fatalf("a used grant through sidecar A: %d %+v", status, env.Error)
	}
	if n := up.Hits(route); n != 1 {
		t.Fatalf("upstream saw %d edits, want 1", n)
	}
	// The tampered call's request: a revision with a note.
	rows := ch.Query(t, "SELECT id FROM "+db+".approval_requests WHERE id != '"+id+"' ORDER BY time, time_us LIMIT 1")
	if len(rows) != 1 {
		t.Fatalf("requests: %v", rows)
	}
	if code, out := approvalsCmd(t, filepath.Join(dirB, "toolgate.yaml"), "revise", rows[0][0], "--as", "erin", "--note", "keep it short"); code != 0 {
		t.Fatalf("revise exit %d: %s", code, out)
	}
	status, env = editVia(t, la.Forward, up.URL(), "hi, tampered")
	if status != 422 || env.Error.Reason != "revision_requested" || env.Error.Class != "user" || env.Error.Approval.Note != "keep it short" {
		t.Fatalf("revised call: %d %+v", status, env.Error)
	}

	for _, r := range []*sidecarRun{a, b} {
		if code := r.stop(t); code != 0 {
			t.Fatalf("run exited %d; stderr:\n%s", code, r.stderr)
		}
	}
	// Audit: 3 requests (the call, the tampered call, the call after its
	// grant was used); decisions: approved by dana, one use, revised by erin.
	if n := ch.Query(t, "SELECT count() FROM "+db+".approval_requests")[0][0]; n != "3" {
		t.Errorf("approval_requests rows = %s, want 3", n)
	}
	got := ch.Query(t, "SELECT verdict, decider, note FROM "+db+".approval_decisions ORDER BY time, time_us")
	var lines []string
	for _, r := range got {
		lines = append(lines, strings.Join(r, "|"))
	}
	if want := "approved|cli:dana|;used|sidecar:" + sidecarName(t) + "|;revised|cli:erin|keep it short"; strings.Join(lines, ";") != want {
		t.Errorf("approval_decisions = %q, want %q", strings.Join(lines, ";"), want)
	}
	if s := ch.Query(t, "SELECT count() FROM "+db+".approval_requests WHERE summary LIKE '%hi%'")[0][0]; s != "0" {
		t.Errorf("%s request rows hold an argument value", s)
	}
	ev := ch.Query(t, "SELECT approval, count() FROM "+db+".events FINAL GROUP BY approval ORDER BY approval")
	var evs []string
	for _, r := range ev {
		evs = append(evs, strings.Join(r, " "))
	}
	if want := "approved 1;pending 4;revised 1"; strings.Join(evs, ";") != want {
		t.Errorf("events by approval = %q, want %q", strings.Join(evs, ";"), want)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sidecarName(t *testing.T) string {
	t.Helper()
	n, _ := os.Hostname()
	return n
}

// TestApprovalsDashboardPage decides through the dashboard's Approvals
// page, served by `toolgate dashboard --config` over the sidecar's
// ClickHouse: the pending request shows its effect and summary (never the
// argument text); a decision without the shared secret, or from another
// site, is refused; with it, the decision records who, and the call goes
// upstream once.
func TestApprovalsDashboardPage(t *testing.T) {
	ch := chtest.Shared(t)
	db := ch.Database(t)
	up, err := demotools.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	t.Setenv("TOOLGATE_TEST_APPROVAL_SECRET", "s3cret-s3cret-s3cret")
	dir := approvalSidecarDir(t, `events:
  queue: {flush_interval: 20ms}
  clickhouse: {addr: [`+ch.Addr()+`], database: `+db+`}
approvals:
  deciders: {secret_env: TOOLGATE_TEST_APPROVAL_SECRET}
`)
	cfg := filepath.Join(dir, "toolgate.yaml")
	sc := startRun(t, dir, string(mustRead(t, cfg)))
	l := sc.running(t)
	status, env := editVia(t, l.Forward, up.URL(), "secret text")
	if status != 403 || env.Error.Approval == nil {
		t.Fatalf("first call: %d %+v", status, env.Error)
	}
	id := env.Error.Approval.ID

	out, stop := startCmd(t, "dashboard", "--config", cfg, "--listen", "127.0.0.1:0")
	base := waitURL(t, out)
	st, body := getBody(t, base+"approvals?id="+id)
	if st != 200 || !strings.Contains(body, `id="req-`+id+`"`) || !strings.Contains(body, "edits document doc-7") ||
		!strings.Contains(body, "<b>edits</b>: 1") || strings.Contains(body, "secret text") {
		t.Fatalf("approvals page: %d\n%.3000s", st, body)
	}
	if want := "POST " + up.URL() + "/v1/documents/{doc_id}:batchUpdate"; !strings.Contains(body, want) {
		t.Errorf("the approvals page does not show the call's method and destination %q:\n%.3000s", want, body)
	}
	noRedirect, csrf := pageSession(t, base)
	post := func(form url.Values, hdr map[string]string) int {
		req, _ := http.NewRequest("POST", base+"approvals/decide", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	good := url.Values{"id": {id}, "verdict": {"approved"}, "who": {"dana"}, "secret": {"s3cret-s3cret-s3cret"}, "csrf": {csrf}}
	bad := url.Values{"id": {id}, "verdict": {"approved"}, "who": {"mallory"}, "secret": {"guess"}, "csrf": {csrf}}
	if st := post(bad, nil); st != 403 {
		t.Errorf("wrong secret: %d, want 403", st)
	}
	noToken := url.Values{"id": {id}, "verdict": {"approved"}, "who": {"dana"}, "secret": {"s3cret-s3cret-s3cret"}}
	if st := post(noToken, map[string]string{"Sec-Fetch-Site": "same-origin"}); st != 403 {
		t.Errorf("the secret without the form's token: %d, want 403", st)
	}
	if st := post(good, map[string]string{"Sec-Fetch-Site": "cross-site"}); st != 403 {
		t.Errorf("cross-site form: %d, want 403", st)
	}
	if status, _ := editVia(t, l.Forward, up.URL(), "secret text"); status != 403 {
		t.Fatalf("undecided call went through: %d", status)
	}
	if st := post(good, map[string]string{"Sec-Fetch-Site": "same-origin"}); st != 303 {
		t.Fatalf("decision with the secret: %d, want 303", st)
	}
	if st := post(good, nil); st != 409 {
		t.Errorf("second decision: %d, want 409", st)
	}
	if status, env := editVia(t, l.Forward, up.URL(), "secret text"); status != 200 || !env.OK {
		t.Fatalf("approved call: %d %+v", status, env.Error)
	}
	st, body = getBody(t, base+"approvals")
	if st != 200 || !strings.Contains(body, "secret:dana") {
		t.Errorf("recent decisions: %d\n%.3000s", st, body)
	}
	if n := up.Hits("POST /v1/documents/{doc_id}:batchUpdate"); n != 1 {
		t.Errorf("upstream saw %d edits, want 1", n)
	}
	stop()
	sc.stop(t)
	if n := ch.Query(t, "SELECT count() FROM "+db+".approval_decisions WHERE verdict = 'approved' AND decider = 'secret:dana'")[0][0]; n != "1" {
		t.Errorf("audit rows for dana's approval = %s, want 1", n)
	}
}

// pageSession opens the dashboard's Approvals page at base as a browser
// does, with the headers hdr (a front's): it returns a client holding the
// page's session cookie (one that does not follow redirects) and the
// decision form's CSRF token.
func pageSession(t *testing.T, base string, hdr ...string) (*http.Client, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("GET", base+"approvals", nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("the Approvals page has no form token: %d\n%.2000s", resp.StatusCode, b)
	}
	return c, string(m[1])
}

// TestPolicyEvalShowsApproval: `toolgate policy eval` says when a policy
// would ask a person's approval, and shows only the summary it chose.
func TestPolicyEvalShowsApproval(t *testing.T) {
	dir := approvalSidecarDir(t, "")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"policy", "eval", "--config", filepath.Join(dir, "toolgate.yaml"), "--tool", "docs_edit",
		"--args", `{"doc_id":"doc-7","requests":[{"insertText":{"text":"private words","index":1}}]}`}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"outcome      needs_approval (the checks allow it; it goes upstream once a person approves it)", "approval     a person must approve it first (asked by policy 'approve'): edits document doc-7", "shown        doc_id: doc-7", "shown        edits: 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "private words") {
		t.Errorf("output shows an argument value:\n%s", out.String())
	}
}
