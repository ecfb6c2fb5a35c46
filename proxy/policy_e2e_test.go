package proxy_test

import (
	"cmp"
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/policies/approval/audit"
	"github.com/toolgate/toolgate/policies/rego"
	"github.com/toolgate/toolgate/proxy"
)

// policyConfig binds policies to pubmed_search (query args) and
// drug_targets (JSON body) over the demo upstream.
const policyConfig = `
listen:
  forward: 127.0.0.1:0
tools:
  - name: pubmed_search
    # Its policy injects a header, which goes only to the tool's origin:
    # the demo upstream's port, over plain HTTP by consent.
    match: {host: "UPHOSTPORT", method: GET, path: /esearch}
    inject_over_http: true
    schema_file: schemas/pubmed_search.json
  - name: drug_targets
    match: {host: 127.0.0.1, method: POST, path: /v1/targets/search}
    schema_file: schemas/drug_targets.json
`

const policySrc = `package t.guard
deny contains {"msg": "retmax must be at most 20", "path": "/retmax", "code": "validation"} if input.arguments.retmax > 20
deny contains {"msg": "no searches for secret projects", "path": "/term"} if contains(input.arguments.term, "project-x")
deny contains "no searches by scraper bots" if startswith(input.request.headers["user-agent"], "scraper-bot/")
deny contains "the secret header must not be visible" if input.request.headers["x-secret"]
inject["X-Session-Id"] := input.caller.session if input.caller.session != ""
`

const slowSrc = `package t.slow
deny contains "slow" if {
	count([x | some x in numbers.range(1, 50000000); x % 7 == 0]) < 0
}
`

func compile(t *testing.T, name, src string) *rego.Policy {
	t.Helper()
	p, err := rego.Compile(name, map[string][]byte{name + ".rego": []byte(src)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPolicyModesThroughProxy checks enforce, dry_run and off through the
// real listener: a denial never reaches upstream and carries every message;
// a dry-run denial goes upstream and is recorded; off does nothing.
func TestPolicyModesThroughProxy(t *testing.T) {
	guard := compile(t, "guard", policySrc)
	slow := compile(t, "slow", slowSrc)
	// Only the slow policy's cases run against a short deadline: a loaded
	// machine can deschedule a quick decision past 30 ms, and the cases
	// that expect a decision must not time out then.
	set := func(mode string, pols ...*rego.Policy) proxy.Checker {
		var b []policies.Bound
		deadline := 10 * time.Second
		for _, p := range pols {
			b = append(b, policies.Bound{Policy: p, Mode: mode})
			if p == slow {
				deadline = 30 * time.Millisecond
			}
		}
		return policies.NewSet("pubmed_search", b, deadline, false)
	}
	tests := []struct {
		name        string
		checker     proxy.Checker
		query       string
		headers     map[string]string
		wantStatus  int
		wantCode    string
		wantReason  string
		wantMsgs    []string
		wantHits    int64
		wantDryRun  bool
		wantInject  string
		wantPolicyE string
	}{
		{name: "enforce allows", checker: set(policies.ModeEnforce, guard), query: "term=crispr&retmax=5",
			headers: map[string]string{"X-Toolgate-Session": "s-1"}, wantStatus: 200, wantHits: 1, wantInject: "s-1"},
		{name: "enforce refuses with validation code", checker: set(policies.ModeEnforce, guard), query: "term=crispr&retmax=50",
			wantStatus: 422, wantCode: "validation", wantReason: "policy_denied", wantMsgs: []string{"retmax must be at most 20"}},
		{name: "enforce refuses with every message", checker: set(policies.ModeEnforce, guard), query: "term=project-x&retmax=50",
			wantStatus: 403, wantCode: "policy", wantReason: "policy_denied",
			wantMsgs: []string{"retmax must be at most 20", "no searches for secret projects"}},
		{name: "allow-listed header seen", checker: set(policies.ModeEnforce, guard), query: "term=x",
			headers:    map[string]string{"User-Agent": "scraper-bot/1.0"},
			wantStatus: 403, wantCode: "policy", wantReason: "policy_denied", wantMsgs: []string{"no searches by scraper bots"}},
		{name: "headers off the allow-list are not seen", checker: set(policies.ModeEnforce, guard), query: "term=x",
			headers: map[string]string{"X-Secret": "1"}, wantStatus: 200, wantHits: 1},
		{name: "dry run forwards and records", checker: set(policies.ModeDryRun, guard), query: "term=crispr&retmax=50",
			wantStatus: 200, wantHits: 1, wantDryRun: true},
		{name: "off does nothing", checker: set(policies.ModeOff, guard), query: "term=crispr&retmax=50",
			wantStatus: 200, wantHits: 1},
		{name: "deadline fails closed", checker: set(policies.ModeEnforce, slow), query: "term=x",
			wantStatus: 403, wantCode: "policy", wantReason: "policy_timeout"},
		{name: "deadline fails open when the tool says so",
			checker: policies.NewSet("pubmed_search", []policies.Bound{{Policy: slow, Mode: policies.ModeEnforce}}, 30*time.Millisecond, true),
			query:   "term=x", wantStatus: 200, wantHits: 1, wantPolicyE: "slow: policy_timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvWith(t, policyConfig, map[string]proxy.Checker{"pubmed_search": tc.checker},
				[]string{"user-agent"})
			a := do(t, e.viaHTTP, "GET", e.up.URL()+"/esearch?"+tc.query, "", "", tc.headers)
			if a.status != tc.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", a.status, tc.wantStatus, a.body)
			}
			if got := e.up.Hits("GET /esearch"); got != tc.wantHits {
				t.Errorf("upstream hits = %d, want %d", got, tc.wantHits)
			}
			if tc.wantCode != "" {
				if a.env == nil || a.env.Error == nil {
					t.Fatalf("no error envelope: %s", a.body)
				}
				er := a.env.Error
				if string(er.Code) != tc.wantCode || er.Reason != tc.wantReason || a.header.Get(proxy.HeaderErrorCode) != tc.wantCode {
					t.Errorf("error = %s/%s (header %q), want %s/%s", er.Code, er.Reason, a.header.Get(proxy.HeaderErrorCode), tc.wantCode, tc.wantReason)
				}
				var msgs []string
				for _, v := range er.Violations {
					msgs = append(msgs, v.Message)
				}
				if tc.wantMsgs != nil && strings.Join(msgs, "|") != strings.Join(tc.wantMsgs, "|") {
					t.Errorf("violation messages = %q, want %q", msgs, tc.wantMsgs)
				}
			}
			if tc.wantInject != "" {
				if got := e.up.LastRequest().Header.Get("X-Session-Id"); got != tc.wantInject {
					t.Errorf("injected X-Session-Id = %q, want %q", got, tc.wantInject)
				}
			}
			evs := e.waitEvents(t, 1)
			if len(evs) != 1 {
				t.Fatalf("%d events, want 1", len(evs))
			}
			ev := evs[0]
			if ev.DryRunDenied != tc.wantDryRun || (tc.wantDryRun && len(ev.DryRunViolations) == 0) {
				t.Errorf("event dry run = %v %q, want %v", ev.DryRunDenied, ev.DryRunViolations, tc.wantDryRun)
			}
			if ev.PolicyError != tc.wantPolicyE {
				t.Errorf("event policy_error = %q, want %q", ev.PolicyError, tc.wantPolicyE)
			}
			if ev.PolicyVersion != "p-test" {
				t.Errorf("event policy_version = %q", ev.PolicyVersion)
			}
			if tc.wantCode != "" && (ev.ErrorCode != tc.wantCode || ev.Reason != tc.wantReason || !ev.Refused) {
				t.Errorf("event = %s/%s refused %v, want %s/%s refused", ev.ErrorCode, ev.Reason, ev.Refused, tc.wantCode, tc.wantReason)
			}
		})
	}
}

// TestPolicySeesJSONArguments checks a policy on a JSON-body tool sees
// arguments after validation, and the schema runs first: a schema refusal
// is never handed to the policy.
func TestPolicySeesJSONArguments(t *testing.T) {
	limit := compile(t, "limit", `package t.limit
deny contains {"msg": "limit over 10", "path": "/limit"} if input.arguments.limit > 10
deny contains "filters seen" if input.arguments.filters.phase_min == 3
`)
	e := newEnvWith(t, policyConfig, map[string]proxy.Checker{
		"drug_targets": policies.NewSet("drug_targets", []policies.Bound{{Policy: limit, Mode: policies.ModeEnforce}}, 10*time.Second, false),
	}, nil)
	for _, tc := range []struct {
		body       string
		wantStatus int
		wantReason string
	}{
		{`{"query":"EGFR","limit":5}`, 200, ""},
		{`{"query":"EGFR","limit":11}`, 403, "policy_denied"},
		{`{"query":"EGFR","filters":{"phase_min":3}}`, 403, "policy_denied"},
		{`{"query":"EGFR","limit":11,"lmit":1}`, 422, "unknown_field"},
	} {
		a := do(t, e.viaHTTP, "POST", e.up.URL()+"/v1/targets/search", "application/json", tc.body, wantEnvelope)
		if a.status != tc.wantStatus {
			t.Errorf("%s: status %d, want %d (%s)", tc.body, a.status, tc.wantStatus, a.body)
			continue
		}
		if tc.wantReason != "" && (a.env == nil || a.env.Error == nil || a.env.Error.Reason != tc.wantReason) {
			t.Errorf("%s: %s, want reason %s", tc.body, a.body, tc.wantReason)
		}
	}
	if got := e.up.Hits("POST /v1/targets/search"); got != 1 {
		t.Errorf("upstream hits = %d, want 1", got)
	}
}

// TestCallerSetApprovalGrantsNothing is the attacker's test of approvals,
// with the example policy edit_approval on docs_edit: headers a caller
// sets to claim an approval (an approver's name, an approved flag, the id
// of the very request that is pending) get a deletion nothing past the
// gate, and the upstream sees no call; only a person's decision in the
// approval store lets the same call through, once. The grant is bound to
// the caller's session too: another session replaying the call after the
// approval, with the same claims, is asked anew.
func TestCallerSetApprovalGrantsNothing(t *testing.T) {
	pol, err := rego.Load("edit_approval", filepath.Join("..", "examples", "policies", "edit_approval"))
	if err != nil {
		t.Fatal(err)
	}
	e, gate := newApprovalEnvConfig(t, approval.Config{URL: "http://127.0.0.1:18091/approvals"}, true, baseConfig, map[string]proxy.Checker{
		"docs_edit": policies.NewSet("docs_edit", []policies.Bound{{Policy: pol, Mode: policies.ModeEnforce}}, 10*time.Second, false),
	})
	const deletion = `{"requests":[{"deleteRange":{"startIndex":1,"endIndex":6}}]}`
	claims := map[string]string{
		"X-Approved-By":       "dana",
		"X-Approval":          "approved",
		"X-Toolgate-Approval": "approved",
		"Approved-By":         "dana",
		"X-Toolgate-Agent":    "a1",
		"X-Toolgate-Session":  "s1",
		proxy.HeaderEnvelope:  "1",
	}
	send := func(body string, hdr map[string]string) answer {
		return do(t, e.viaHTTP, "POST", e.up.URL()+"/v1/documents/doc-42:batchUpdate", "application/json", body, hdr)
	}
	pending := func(what string, a answer) string {
		t.Helper()
		if a.status != 403 || a.env == nil || a.env.Error == nil || a.env.Error.Reason != "approval_pending" || a.env.Error.Approval == nil {
			t.Fatalf("%s: status %d, want 403 policy/approval_pending with error.approval; body %s", what, a.status, a.body)
		}
		return a.env.Error.Approval.ID
	}

	id := pending("claims of an approval", send(deletion, claims))
	claims["X-Toolgate-Approval-Id"], claims["X-Approval-Id"] = id, id
	if again := pending("the pending request's own id", send(deletion, claims)); again != id {
		t.Errorf("the same call got approval %s, want the pending %s", again, id)
	}
	if got := e.up.Hits(docsRoute); got != 0 {
		t.Fatalf("upstream saw %d deletions before anyone decided, want 0", got)
	}
	// An insertion needs no approval: the claims are as irrelevant to it.
	if a := send(`{"requests":[{"insertText":{"text":"hi","index":1}}]}`, claims); a.status != 200 {
		t.Fatalf("insertion: status %d, want 200; body %s", a.status, a.body)
	}

	if _, err := gate.Decide(context.Background(), id, audit.VerdictApproved, "test:person", ""); err != nil {
		t.Fatal(err)
	}
	other := maps.Clone(claims)
	other["X-Toolgate-Session"] = "s2"
	if other := pending("another session after the approval", send(deletion, other)); other == id {
		t.Errorf("another session was given the approved request %s", id)
	}
	if a := send(deletion, claims); a.status != 200 {
		t.Fatalf("the approved call: status %d, want 200; body %s", a.status, a.body)
	}
	pending("the approved call again", send(deletion, claims))
	if got := e.up.Hits(docsRoute); got != 2 {
		t.Errorf("upstream saw %d calls, want 2 (the insertion and the approved deletion, once)", got)
	}
	// One event per call (in any order: each is written as its call
	// ends), the insertion's with no approval state.
	var states []string
	for _, ev := range e.waitEvents(t, 6) {
		states = append(states, cmp.Or(ev.Approval, "none"))
	}
	slices.Sort(states)
	if got, want := strings.Join(states, " "), "approved none pending pending pending pending"; got != want {
		t.Errorf("events' approval states %q, want %q", got, want)
	}
}

// TestPolicyDepthFromTheDecoder: the policies' bound on how deep
// arguments nest (policies.MaxInputDepth) holds where the decoder measured
// the depth from the body's bytes and the engine does not walk the
// arguments again: with max_json_depth set above it, a body one level too
// deep fails the policy (the call is refused, and upstream sees nothing),
// one at the bound passes.
func TestPolicyDepthFromTheDecoder(t *testing.T) {
	const cfg = `
listen:
  forward: 127.0.0.1:0
limits:
  max_json_depth: 1500
tools:
  - name: deep
    match: {host: 127.0.0.1, method: POST, path: /v1/targets/search}
`
	reads := compile(t, "reads", `package t.reads
deny contains "limit over 10" if input.arguments.limit > 10
`)
	e := newEnvWith(t, cfg, map[string]proxy.Checker{
		"deep": policies.NewSet("deep", []policies.Bound{{Policy: reads, Mode: policies.ModeEnforce}}, 10*time.Second, false),
	}, nil)
	nested := func(depth int) string { // an arguments object depth levels deep
		return `{"query":"EGFR","limit":1,"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
	}
	for _, tc := range []struct {
		depth      int
		wantStatus int
		wantHits   int64
	}{
		{policies.MaxInputDepth, 200, 1},
		{policies.MaxInputDepth + 1, 403, 1},
	} {
		a := do(t, e.viaHTTP, "POST", e.up.URL()+"/v1/targets/search", "application/json", nested(tc.depth), wantEnvelope)
		if a.status != tc.wantStatus {
			t.Errorf("depth %d: status %d, want %d (%s)", tc.depth, a.status, tc.wantStatus, a.body)
		}
		if tc.wantStatus == 403 && (a.env == nil || a.env.Error == nil || a.env.Error.Reason != "policy_error") {
			t.Errorf("depth %d: %s, want the policy to fail (policy_error)", tc.depth, a.body)
		}
		if got := e.up.Hits("POST /v1/targets/search"); got != tc.wantHits {
			t.Errorf("depth %d: upstream hits = %d, want %d", tc.depth, got, tc.wantHits)
		}
	}
}
