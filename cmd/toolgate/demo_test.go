package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/demo"
)

// demoRow is one row of the demo's table.
type demoRow struct {
	via, sent, status, answer, code, reason, detail string
}

// cells splits a tabwriter row: cells are at least two spaces apart.
var cells = regexp.MustCompile(`\s{2,}`)

// TestDemo runs `toolgate demo` and reads its table: one row per scripted
// call, showing what the client got and the event recorded for it, and a
// footer counting calls and events.
func TestDemo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"demo", "--dir", dir}, &stdout, &stderr); code != exitOK {
		t.Fatalf("demo = %d, want 0; stderr:\n%s\nstdout:\n%s", code, stderr.String(), stdout.String())
	}
	out := stdout.String()
	script := demo.Script()

	rows := map[int]demoRow{}
	// A detail longer than demo.DetailWidth wraps onto lines of its own,
	// which start at the DETAIL column; they join their row's detail.
	detailAt, last := -1, 0
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, "DETAIL"); i > 0 && strings.HasPrefix(line, "#") {
			detailAt = i
			continue
		}
		if detailAt > 0 && last > 0 && len(line) > detailAt && strings.TrimSpace(line[:detailAt]) == "" && line[detailAt] != ' ' {
			r := rows[last]
			cont := strings.TrimRight(line[detailAt:], " ")
			if len(cont) > demo.DetailWidth {
				t.Errorf("row %d: a DETAIL line of %d bytes, wider than %d: %q", last, len(cont), demo.DetailWidth, cont)
			}
			r.detail += " " + cont
			rows[last] = r
			continue
		}
		c := cells.Split(strings.TrimRight(line, " "), 8)
		if len(c) < 7 {
			continue
		}
		n, err := strconv.Atoi(c[0])
		if err != nil {
			continue // the header
		}
		if _, dup := rows[n]; dup {
			t.Errorf("row %d appears twice", n)
		}
		r := demoRow{via: c[1], sent: c[2], status: c[3], answer: c[4], code: c[5], reason: c[6]}
		if len(c) == 8 {
			r.detail = c[7]
			if len(r.detail) > demo.DetailWidth {
				t.Errorf("row %d: a DETAIL of %d bytes, wider than %d: %q", n, len(r.detail), demo.DetailWidth, r.detail)
			}
		}
		rows[n] = r
		last = n
	}
	if detailAt < 0 {
		t.Fatalf("no header with a DETAIL column:\n%s", out)
	}
	if len(rows) != len(script) {
		t.Errorf("%d rows, want one per scripted call (%d):\n%s", len(rows), len(script), out)
	}
	for i := range script {
		if _, ok := rows[i+1]; !ok {
			t.Errorf("no row %d", i+1)
		}
	}

	// rowOf finds a call's row by the call's method and path.
	rowOf := func(method, path string) (demoRow, bool) {
		for i, c := range script {
			if c.Method == method && c.Path == path {
				r, ok := rows[i+1]
				return r, ok
			}
		}
		return demoRow{}, false
	}
	tests := []struct {
		name         string
		method, path string
		want         demoRow // via, status, answer, code, reason are compared
	}{
		{"valid, raw for a legacy caller", "GET", "/esearch?term=crispr&retmax=5",
			demoRow{via: "proxy", status: "200", answer: "raw", code: "ok", reason: "-"}},
		{"typo", "GET", "/esearch?trem=crispr",
			demoRow{via: "proxy", status: "422", answer: "envelope", code: "validation", reason: "unknown_field"}},
		{"via base URL", "GET", "/v1/structure/P69905",
			demoRow{via: "base_url", status: "200", answer: "envelope", code: "ok", reason: "-"}},
		{"429", "GET", "/faults/status/429",
			demoRow{via: "proxy", status: "429", answer: "envelope", code: "rate_limit", reason: "status_429"}},
		{"legacy 503", "GET", "/faults/status/503",
			demoRow{via: "proxy", status: "503", answer: "raw", code: "upstream", reason: "status_5xx"}},
		{"binary", "GET", "/faults/binary",
			demoRow{via: "proxy", status: "200", answer: "raw", code: "ok", reason: "-"}},
		{"unmatched", "GET", "/echo?anything=goes",
			demoRow{via: "proxy", status: "200", answer: "raw", code: "ok", reason: "-"}},
		{"session_inject adds a header upstream", "POST", "/echo",
			demoRow{via: "proxy", status: "200", answer: "envelope", code: "ok", reason: "-", detail: "upstream got X-Session-Id: demo-"}},
	}
	for _, tc := range tests {
		r, ok := rowOf(tc.method, tc.path)
		if !ok {
			t.Errorf("%s: no row for %s %s", tc.name, tc.method, tc.path)
			continue
		}
		got := fmt.Sprintf("%s %s %s %s %s", r.via, r.status, r.answer, r.code, r.reason)
		want := fmt.Sprintf("%s %s %s %s %s", tc.want.via, tc.want.status, tc.want.answer, tc.want.code, tc.want.reason)
		if got != want {
			t.Errorf("%s: via status answer code reason = %q, want %q", tc.name, got, want)
		}
		if !strings.Contains(r.detail, tc.want.detail) {
			t.Errorf("%s: DETAIL = %q, want it to contain %q", tc.name, r.detail, tc.want.detail)
		}
		if !strings.HasPrefix(r.sent, tc.method+" ") {
			t.Errorf("%s: SENT = %q, want it to start with %s", tc.name, r.sent, tc.method)
		}
	}

	// Rows found by what they show: a Rego policy's refusal, a dry-run
	// policy's would-be refusal, a WASM module's refusal, and the legacy
	// caller's raw answer beside the opted-in caller's envelope.
	decisions := []struct {
		name string
		want demoRow // status, answer, code, reason are compared; detail is a fragment
	}{
		{"Rego deny", demoRow{status: "403", answer: "envelope", code: "policy", reason: "policy_denied", detail: "refused by policy 'edit_approval': deleteRange must end after it starts"}},
		{"Rego dry run", demoRow{status: "200", answer: "envelope", code: "ok", reason: "-", detail: "dry run, forwarded; enforcing would refuse: query looks like it holds an e-mail address"}},
		{"WASM deny", demoRow{status: "403", answer: "envelope", code: "policy", reason: "policy_denied", detail: "refused by policy 'label_guard'"}},
		{"legacy caller, raw", demoRow{status: "200", answer: "raw", code: "ok", reason: "-", detail: "legacy caller gets the raw answer"}},
		{"opted-in caller, envelope", demoRow{status: "200", answer: "envelope", code: "ok", reason: "-", detail: "valid; enveloped"}},
		// The refusal's hint whole: the DETAIL column wraps, never cuts.
		{"loop broken", demoRow{status: "403", answer: "envelope", code: "policy", reason: "loop_detected", detail: "Tool 'pubmed_search' was called 3 times with the same arguments in this session within 1m0s (loops.max_repeats 3); change the call or stop (retry in "}},
		{"changed call after the loop", demoRow{status: "200", answer: "raw", code: "ok", reason: "-", detail: "a changed call passes"}},
	}
	for _, d := range decisions {
		found := false
		for _, r := range rows {
			if r.status == d.want.status && r.answer == d.want.answer && r.code == d.want.code && r.reason == d.want.reason && strings.Contains(r.detail, d.want.detail) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no row with status %s, answer %s, code %s, reason %s and a detail containing %q:\n%s", d.name, d.want.status, d.want.answer, d.want.code, d.want.reason, d.want.detail, out)
		}
	}
	for n, r := range rows {
		if strings.HasSuffix(r.detail, "...") {
			t.Errorf("row %d: DETAIL %q is cut; it wraps instead", n, r.detail)
		}
	}
	checkDemoApprovals(t, dir, script, rows)
	// The approval rows link to the Approvals page, which make demo does
	// not serve: the legend and the footer say what does.
	for _, want := range []string{
		"the pending rows link to the Approvals page: make demo-dashboard serves it (make demo does not)",
		"the approval requests on its Approvals page (the links above):\nmake demo-dashboard",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output does not say %q:\n%s", want, out)
		}
	}
	for _, s := range []string{"edit_approval (Rego, enforce)", "pii_guard (Rego, dry_run)", "session_inject (Rego, inject)", "label_guard (WASM module"} {
		if !strings.Contains(out, s) {
			t.Errorf("the policy legend lacks %q:\n%s", s, out)
		}
	}
	// Every code a caller can get shows in the table; unknown (a bug in
	// bucketing) is counted as 0.
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.code] = true
	}
	for _, code := range []string{"ok", "validation", "policy", "rate_limit", "auth", "upstream"} {
		if !seen[code] {
			t.Errorf("no row has event code %s", code)
		}
	}

	events := filepath.Join(dir, "events.ndjson")
	n := len(script)
	for _, want := range []string{
		fmt.Sprintf("%d calls, %d events (dropped: 0) written to %s", n, n, events),
		" unknown=0 ",
		"refused calls never reached it",
		"config used: " + filepath.Join(dir, "toolgate.yaml"),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout does not contain %q:\n%s", want, out)
		}
	}
	// The README tells how many calls the demo plays.
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("plays %d calls", n); !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not say the demo %s", want)
	}
	evs := readEvents(t, events)
	if got := len(evs); got != n {
		t.Errorf("%d events in %s, want %d", got, events, n)
	}
	// The answers section: the account's token and e-mail were redacted,
	// its notes' instruction withheld.
	answers := map[string]string{}
	for _, e := range evs {
		if e.Tool == "account_lookup" || e.Tool == "account_notes" {
			answers[e.Tool] = fmt.Sprintf("%s %v %d", e.Answer, e.AnswerFindings, e.Redactions)
		}
	}
	if answers["account_lookup"] != "redacted [pii.email secret.github_token] 2" || answers["account_notes"] != "withheld [instruction] 0" {
		t.Errorf("the answers section's events: %v; want account_lookup redacted (a token and an e-mail), account_notes withheld (an instruction)", answers)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr = %q, want nothing", stderr.String())
	}
}

// checkDemoApprovals checks the demo's approval story: a deletion is
// refused pending, with the Approvals page's URL naming its request; a
// person approves that request with `toolgate approvals approve`; the
// agent's changed call asks anew (the grant is bound to the arguments);
// the approved call goes upstream once; the same call again asks anew.
// The approval store records the request, the decision and its use.
func checkDemoApprovals(t *testing.T, dir string, script []demo.Call, rows map[int]demoRow) {
	t.Helper()
	var got []demoRow
	for i, c := range script {
		if c.Session == "demo-approval" {
			got = append(got, rows[i+1])
		}
	}
	const page = "http://127.0.0.1:18091/approvals?id="
	want := []struct{ status, code, reason, note string }{
		{"403", "policy", "approval_pending", "a deletion waits for a person: " + page},
		{"403", "policy", "approval_pending", "approved on the CLI; a changed range asks anew: " + page},
		{"200", "ok", "-", "the approved call goes upstream, once"},
		{"403", "policy", "approval_pending", "the same call again asks anew: " + page},
	}
	if len(got) != len(want) {
		t.Fatalf("%d approval rows, want %d: %v", len(got), len(want), got)
	}
	ids := map[string]bool{}
	first := ""
	for i, w := range want {
		r := got[i]
		if r.status != w.status || r.code != w.code || r.reason != w.reason || !strings.HasPrefix(r.detail, w.note) {
			t.Errorf("approval row %d: %s %s %s %q, want %s %s %s and a detail starting %q", i+1, r.status, r.code, r.reason, r.detail, w.status, w.code, w.reason, w.note)
			continue
		}
		if id, ok := strings.CutPrefix(r.detail, w.note); ok && w.reason == "approval_pending" {
			if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) {
				t.Errorf("approval row %d: the page's URL names %q, not a request id", i+1, id)
			}
			if ids[id] {
				t.Errorf("approval row %d: request %s named twice; each call that asks gets its own", i+1, id)
			}
			ids[id] = true
			if first == "" {
				first = id
			}
		}
	}
	// The store, as `toolgate approvals list` shows it: three requests,
	// the first (the one the pending answer named) approved by the demo's
	// operator and used.
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"approvals", "list", "--json", "--config", filepath.Join(dir, "toolgate.yaml")}, &out, &errb); code != exitOK {
		t.Fatalf("approvals list = %d: %s", code, errb.String())
	}
	var decided int
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for _, l := range lines {
		if !strings.Contains(l, `"tool":"docs_edit"`) {
			t.Errorf("approval record not for docs_edit: %s", l)
		}
		if strings.Contains(l, `"cli:demo-operator"`) {
			decided++
			for _, w := range []string{`"state":"used"`, `"id":"` + first + `"`, `"effect":"deletes 5 characters from document d1 in 1 of 1 edits"`, `"characters":"5"`, `"doc_id":"d1"`} {
				if !strings.Contains(l, w) {
					t.Errorf("the approved request lacks %s: %s", w, l)
				}
			}
		}
	}
	if len(lines) != 3 || decided != 1 {
		t.Errorf("approvals list: %d requests, %d decided by cli:demo-operator; want 3 and 1:\n%s", len(lines), decided, out.String())
	}
}

// TestDemoRemovesItsTemporaryFolder runs the demo without --dir and checks
// that it leaves no toolgate-demo-* folder in the temporary directory.
func TestDemoRemovesItsTemporaryFolder(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"demo"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("demo = %d, want 0; stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "written to a temporary folder, removed at the end") {
		t.Errorf("the footer does not say the folder is removed:\n%s", stdout.String())
	}
	left, err := filepath.Glob(filepath.Join(tmp, "toolgate-demo-*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("the demo left %v behind", left)
	}
}

// TestDemoEditApprovalIsTheExample: the demo embeds its own copy of the
// example policy edit_approval (embed cannot reach examples/); the two
// stay the same, and docs/approvals.md shows the example's approval rule
// as it is.
func TestDemoEditApprovalIsTheExample(t *testing.T) {
	example := filepath.Join("..", "..", "examples", "policies", "edit_approval")
	for _, name := range []string{"edit_approval.rego", "edit_approval_test.rego"} {
		want, err := os.ReadFile(filepath.Join(example, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("..", "..", "internal", "demo", "policies", "edit_approval", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("internal/demo/policies/edit_approval/%s differs from the example's: copy it over", name)
		}
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "approvals.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "```rego\n")
	block, _, _ = strings.Cut(block, "```")
	if !ok || !strings.Contains(block, "approval := {") {
		t.Fatal("docs/approvals.md shows no approval rule")
	}
	policy, err := os.ReadFile(filepath.Join(example, "edit_approval.rego"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(block, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") && !strings.Contains(string(policy), l) {
			t.Errorf("docs/approvals.md's policy has %q, which the example edit_approval.rego lacks", l)
		}
	}
}
