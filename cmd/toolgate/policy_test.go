package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/policies/policytest"
	"github.com/toolgate/toolgate/proxy"
)

var update = flag.Bool("update", false, "rewrite golden files from the current output")

// examplePolicies is the folder of example policies and their case files.
var examplePolicies = filepath.Join("..", "..", "examples", "policies")

// setExampleSecrets sets the environment variables examples/toolgate.yaml
// expands, as a deployment would.
func setExampleSecrets(t testing.TB) {
	t.Setenv("PUBMED_API_KEY", "pubmed-key")
	t.Setenv("DOCS_TOKEN", "docs-token")
}

// runArgs runs one command line and returns its exit code and output.
func runArgs(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// durations matches the durations of PASS lines, which vary run to run.
var durations = regexp.MustCompile(`\((\d+(\.\d+)?(ns|µs|ms|s))+\)$`)

func withoutDurations(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "PASS ") {
			lines[i] = durations.ReplaceAllString(l, "(DURATION)")
		}
	}
	return strings.Join(lines, "\n")
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestPolicyTestExamples runs `toolgate policy test` on the example
// policies: every Rego test and every case passes, and the summary counts
// them all.
func TestPolicyTestExamples(t *testing.T) {
	setExampleSecrets(t)
	regoTests, cases := 0, 0
	testRule := regexp.MustCompile(`(?m)^test_\w+ if`)
	tests, err := filepath.Glob(filepath.Join(examplePolicies, "*", "*_test.rego"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("no example tests: %v", err)
	}
	for _, f := range tests {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		regoTests += len(testRule.FindAll(b, -1))
	}
	caseFiles, err := filepath.Glob(filepath.Join(examplePolicies, "*", "*.cases.yaml"))
	if err != nil || len(caseFiles) == 0 {
		t.Fatalf("no example case files: %v", err)
	}
	for _, f := range caseFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct{ Cases []yaml.Node }
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		cases += len(doc.Cases)
	}

	code, stdout, stderr := runArgs("policy", "test", examplePolicies)
	if code != exitOK {
		t.Errorf("exit code = %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitOK, stdout, stderr)
	}
	if stderr != "" {
		t.Errorf("stderr = %q, want nothing", stderr)
	}
	if got, want := lastLine(stdout), fmt.Sprintf("%d passed, 0 failed", regoTests+cases); got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
	for _, want := range []string{
		"PASS bounds/test_over_bounds_denied (",
		"PASS session_inject/test_session_injected (",
		"PASS cases/examples.cases.yaml: session id injected upstream (",
		"PASS cases/policies-only.cases.yaml: bounds refuses retmax over 100 (",
	} {
		if !strings.Contains(stdout, "\n"+want) && !strings.HasPrefix(stdout, want) {
			t.Errorf("stdout lacks a line starting %q:\n%s", want, stdout)
		}
	}
}

// TestPolicyTestWrongCases runs testdata/wrong.cases.yaml, whose
// expectations are wrong on purpose: it fails, and the output (each
// mismatch as want and got) is the golden file's.
func TestPolicyTestWrongCases(t *testing.T) {
	setExampleSecrets(t)
	code, stdout, stderr := runArgs("policy", "test", filepath.Join("testdata", "wrong.cases.yaml"))
	if code != exitError {
		t.Errorf("exit code = %d, want %d", code, exitError)
	}
	if stderr != "" {
		t.Errorf("stderr = %q, want nothing: the summary says it", stderr)
	}
	golden := filepath.Join("testdata", "wrong.golden")
	got := withoutDurations(stdout)
	if *update {
		writeFile(t, golden, got)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -run TestPolicyTestWrongCases -update rewrites it)\ngot:\n%s\nwant:\n%s", golden, got, want)
	}
}

// TestPolicyTestFailures runs `toolgate policy test` on folders built for
// each case: failing and broken Rego tests, broken case files.
func TestPolicyTestFailures(t *testing.T) {
	const policy = "package toolgate.limits\n\ndeny contains \"too many\" if input.arguments.n > 3\n"
	const config = "admin:\n  listen: \"off\"\npolicies:\n  rego:\n    - {name: limits, path: limits}\ntools:\n  - name: t\n    match: {path: /t}\n    policies: [limits]\n"
	tests := []struct {
		name      string
		files     map[string]string // relative to the folder run
		args      []string          // after "policy test DIR"
		wantCode  int
		wantLines []string // lines stdout must hold, "DIR" standing for the folder
		wantOut   []string // fragments of stdout
		wantErr   []string // fragments of stderr
	}{
		{
			name: "a failing Rego test names file and line",
			files: map[string]string{
				"limits/limits.rego": policy,
				"limits/limits_test.rego": "package toolgate.limits_test\n\nimport data.toolgate.limits\n\n" +
					"test_few_allowed if count(limits.deny) == 0 with input as {\"arguments\": {\"n\": 1}}\n\n" +
					"test_wrong if count(limits.deny) == 0 with input as {\"arguments\": {\"n\": 9}}\n",
			},
			wantCode:  exitError,
			wantLines: []string{"FAIL limits/test_wrong (DIR/limits/limits_test.rego:7)", "  the rule is false or undefined", "1 passed, 1 failed"},
			wantOut:   []string{"PASS limits/test_few_allowed ("},
		},
		{
			name: "a Rego test that errors shows the error",
			files: map[string]string{
				"limits/limits.rego":      policy,
				"limits/limits_test.rego": "package toolgate.limits_test\n\ntest_bad_number if to_number(\"ten\") == 10\n",
			},
			wantCode:  exitError,
			wantLines: []string{"FAIL limits/test_bad_number (DIR/limits/limits_test.rego:3)", "0 passed, 1 failed"},
			wantOut:   []string{"invalid syntax"},
		},
		{
			name: "a Rego syntax error fails the policy with the compiler's message",
			files: map[string]string{
				"broken/broken.rego":      "package toolgate.broken\n\ndeny contains \"x\" if {\n\tinput.a = = 1\n}\n",
				"broken/broken_test.rego": "package toolgate.broken_test\n\ntest_x if true\n",
			},
			wantCode:  exitError,
			wantLines: []string{"FAIL broken (does not compile)", "0 passed, 1 failed"},
			wantOut:   []string{`policy "broken"`, "DIR/broken/broken.rego:4: rego_parse_error"},
		},
		{
			name:     "nothing to run",
			files:    map[string]string{"README.md": "policies go here\n"},
			wantCode: exitError,
			wantOut:  []string{"0 passed, 0 failed"},
			wantErr:  []string{"no Rego tests and no cases"},
		},
		{
			name: "cases pass through the case file's config",
			files: map[string]string{
				"limits/limits.rego": policy,
				"toolgate.yaml":      config,
				"limits.cases.yaml": "config: toolgate.yaml\ncases:\n" +
					"  - {name: few, tool: t, arguments: {n: 1}, expect: {outcome: allowed}}\n" +
					"  - {name: many, tool: t, arguments: {n: 9}, expect: {outcome: refused, code: policy, reason: policy_denied, message: too many, paths: [\"\"]}}\n",
			},
			wantCode:  exitOK,
			wantLines: []string{"2 passed, 0 failed"},
			wantOut:   []string{"PASS limits.cases.yaml: few (", "PASS limits.cases.yaml: many ("},
		},
		{
			name: "--config overrides the case file's",
			files: map[string]string{
				"limits/limits.rego": policy,
				"other.yaml":         config,
				"limits.cases.yaml":  "config: missing.yaml\ncases:\n  - {name: many, tool: t, arguments: {n: 9}, expect: {outcome: refused}}\n",
			},
			args:      []string{"--config", "DIR/other.yaml"},
			wantCode:  exitOK,
			wantLines: []string{"1 passed, 0 failed"},
		},
		{
			name: "a case file without a config",
			files: map[string]string{
				"limits.cases.yaml": "cases:\n  - {name: many, tool: t, expect: {outcome: refused}}\n",
			},
			wantCode:  exitError,
			wantLines: []string{"FAIL limits.cases.yaml", "  DIR/limits.cases.yaml: no configuration: set config: in the file or pass --config", "0 passed, 1 failed"},
		},
		{
			name: "a misspelt key names file, line and field",
			files: map[string]string{
				"toolgate.yaml":      config,
				"limits/limits.rego": policy,
				"limits.cases.yaml": "config: toolgate.yaml\ncases:\n  - name: many\n    tool: t\n    expect:\n" +
					"      outcom: refused\n",
			},
			wantCode:  exitError,
			wantLines: []string{"FAIL limits.cases.yaml", "  DIR/limits.cases.yaml:6: cases[0].expect.outcom: unknown field; did you mean outcome?"},
		},
		{
			name: "an allowed case with a code",
			files: map[string]string{
				"limits.cases.yaml": "config: toolgate.yaml\ncases:\n  - name: few\n    tool: t\n    expect:\n      outcome: allowed\n      code: policy\n",
			},
			wantCode:  exitError,
			wantLines: []string{"  DIR/limits.cases.yaml:7: cases[0].expect.code: only a refused case has one; the outcome is allowed"},
		},
		{
			name: "an unknown outcome",
			files: map[string]string{
				"limits.cases.yaml": "config: toolgate.yaml\ncases:\n  - name: few\n    tool: t\n    expect: {outcome: denied}\n",
			},
			wantCode:  exitError,
			wantLines: []string{`  DIR/limits.cases.yaml:5: cases[0].expect.outcome: "denied": expected refused, allowed or needs_approval`},
		},
		{
			name: "an allowed case with an approval",
			files: map[string]string{
				"limits.cases.yaml": "config: toolgate.yaml\ncases:\n  - name: few\n    tool: t\n    expect:\n      outcome: allowed\n      approval: {effect: x}\n",
			},
			wantCode:  exitError,
			wantLines: []string{"  DIR/limits.cases.yaml:7: cases[0].expect.approval: only a needs_approval case has one; the outcome is allowed"},
		},
		{
			name: "a needs_approval case with a message",
			files: map[string]string{
				"limits.cases.yaml": "config: toolgate.yaml\ncases:\n  - name: few\n    tool: t\n    expect: {outcome: needs_approval, message: x}\n",
			},
			wantCode:  exitError,
			wantLines: []string{"  DIR/limits.cases.yaml:5: cases[0].expect.message: only a refused case has one; the outcome is needs_approval"},
		},
		{
			name: "two cases with one name",
			files: map[string]string{
				"limits.cases.yaml": "config: toolgate.yaml\ncases:\n  - {name: a, tool: t, expect: {outcome: allowed}}\n  - {name: a, tool: t, expect: {outcome: allowed}}\n",
			},
			wantCode:  exitError,
			wantLines: []string{`  DIR/limits.cases.yaml:4: cases[1].name: another case is named "a"`},
		},
		{
			name: "a config that does not load fails the file",
			files: map[string]string{
				"toolgate.yaml":     "tools:\n  - name: t\n    match: {path: /t}\n    policies: [nope]\n",
				"limits.cases.yaml": "config: toolgate.yaml\ncases:\n  - {name: a, tool: t, expect: {outcome: allowed}}\n",
			},
			wantCode:  exitError,
			wantLines: []string{"FAIL limits.cases.yaml", "0 passed, 1 failed"},
			wantOut:   []string{"config: DIR/toolgate.yaml:4: tools[0].policies[0]: no policy named \"nope\""},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tc.files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, p, body)
			}
			args := []string{"policy", "test", dir}
			for _, a := range tc.args {
				args = append(args, strings.ReplaceAll(a, "DIR", dir))
			}
			code, stdout, stderr := runArgs(args...)
			if code != tc.wantCode {
				t.Errorf("exit code = %d, want %d", code, tc.wantCode)
			}
			lines := strings.Split(stdout, "\n")
			for _, want := range tc.wantLines {
				want = strings.ReplaceAll(want, "DIR", dir)
				found := false
				for _, l := range lines {
					if l == want {
						found = true
					}
				}
				if !found {
					t.Errorf("stdout lacks the line %q", want)
				}
			}
			for _, want := range tc.wantOut {
				if want = strings.ReplaceAll(want, "DIR", dir); !strings.Contains(stdout, want) {
					t.Errorf("stdout lacks %q", want)
				}
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr = %q, want it to contain %q", stderr, want)
				}
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
			}
		})
	}
}

// TestPolicyEval runs `toolgate policy eval` on the example config: the
// exit code, the decision's lines, and the envelope, which must be the
// Verdict's, byte for byte once indented.
func TestPolicyEval(t *testing.T) {
	setExampleSecrets(t)
	lc, err := config.Load(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	edit := `{"doc_id": "d-1", "requests": [{"insertText": {"text": "hi", "index": 1}}]}`
	deletion := `{"doc_id": "d-1", "requests": [{"insertText": {"text": "a secret", "index": 1}}, {"deleteRange": {"startIndex": 40, "endIndex": 52}}]}`
	tests := []struct {
		name     string
		tool     string
		args     string
		headers  []string
		wantCode int
		wantOut  []string // lines of stdout
		notOut   []string // fragments stdout must not hold
		wantErr  []string // fragments of stderr
	}{
		{
			name: "allowed, with a dry-run denial and injected headers", tool: "pubmed_search",
			args:     `{"term": "mail jane@example.org", "retmax": 20}`,
			headers:  []string{"X-Toolgate-Session=s-1"},
			wantCode: exitOK,
			wantOut: []string{
				"tool         pubmed_search",
				"outcome      allowed",
				"dry run      term looks like it holds an e-mail address",
				"inject       X-Api-Key: (set)",
				"inject       X-Session-Id: s-1",
			},
		},
		{
			name: "refused by the schema", tool: "pubmed_search",
			args:     `{"term": "x", "retmax": 500}`,
			wantCode: exitRefused,
			wantOut: []string{
				"outcome      refused (HTTP 422)",
				"code         validation",
				"reason       schema",
				"violation    /retmax: too large",
			},
		},
		{
			name: "refused by two policies", tool: "docs_edit",
			args:     `{"doc_id": "d-9", "requests": [{"deleteRange": {"startIndex": 52, "endIndex": 40}}]}`,
			headers:  []string{"X-Toolgate-Agent=writer-agent"},
			wantCode: exitRefused,
			wantOut: []string{
				"outcome      refused (HTTP 403)",
				"code         policy",
				"reason       policy_denied",
				`detail       Tool 'docs_edit' refused by policy 'allowlist': doc_id is not one of the documents agents may edit (and 1 more problem)`,
				`violation    /doc_id: doc_id is not one of the documents agents may edit`,
				"violation    /requests/0/deleteRange/endIndex: deleteRange must end after it starts",
			},
		},
		{
			name: "an insertion needs no approval", tool: "docs_edit", args: edit,
			wantCode: exitOK,
			wantOut:  []string{"outcome      allowed", "inject       Authorization: (set)"},
		},
		{
			// A caller-set header grants nothing: the deletion still waits
			// for a person, who is shown the chosen fields and no text.
			name: "a deletion waits for a person, whatever the caller says", tool: "docs_edit", args: deletion,
			headers:  []string{"X-Approved-By=dana"},
			wantCode: exitOK,
			wantOut: []string{
				"outcome      needs_approval (the checks allow it; it goes upstream once a person approves it)",
				"approval     a person must approve it first (asked by policy 'edit_approval'): deletes 12 characters from document d-1 in 1 of 2 edits",
				"shown        characters: 12",
				"shown        deletions: 1",
				"shown        doc_id: d-1",
				"shown        edits: 2",
			},
			notOut: []string{"secret", "shown        requests"},
		},
		{
			name: "unknown tool lists the tools", tool: "pubmed_serch", args: `{}`,
			wantCode: exitError,
			wantErr:  []string{`no tool named "pubmed_serch"; the config has: docs_edit, drug_targets, notes_create, pubmed_search, structure_lookup`},
		},
		{
			name: "arguments that are not JSON", tool: "pubmed_search", args: `{"term": x}`,
			wantCode: exitError,
			wantErr:  []string{"--args: not valid JSON: invalid character 'x' looking for beginning of value (at byte 10)"},
		},
		{
			name: "arguments that are not an object", tool: "pubmed_search", args: `["x"]`,
			wantCode: exitError,
			wantErr:  []string{"--args: must be a JSON object of arguments, got an array"},
		},
		{
			name: "a header without a value", tool: "pubmed_search", args: `{}`,
			headers:  []string{"X-Toolgate-Session"},
			wantCode: exitUsage,
			wantErr:  []string{`--header "X-Toolgate-Session": expected NAME=VALUE`},
		},
		{
			name: "no tool", args: `{}`,
			wantCode: exitUsage,
			wantErr:  []string{"--tool is required"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"policy", "eval", "--config", examplePath, "--args", tc.args}
			if tc.tool != "" {
				args = append(args, "--tool", tc.tool)
			}
			for _, h := range tc.headers {
				args = append(args, "--header", h)
			}
			code, stdout, stderr := runArgs(args...)
			if code != tc.wantCode {
				t.Errorf("exit code = %d, want %d", code, tc.wantCode)
			}
			lines := strings.Split(stdout, "\n")
			for _, want := range tc.wantOut {
				found := false
				for _, l := range lines {
					if l == want {
						found = true
					}
				}
				if !found {
					t.Errorf("stdout lacks the line %q", want)
				}
			}
			for _, no := range tc.notOut {
				if strings.Contains(stdout, no) {
					t.Errorf("stdout holds %q", no)
				}
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr = %q, want it to contain %q", stderr, want)
				}
			}
			if tc.wantCode == exitError || tc.wantCode == exitUsage {
				if stdout != "" {
					t.Errorf("stdout = %q on an error, want nothing", stdout)
				}
			} else if stderr != "" {
				t.Errorf("stderr = %q, want nothing", stderr)
			}
			if tc.wantCode == exitOK || tc.wantCode == exitRefused {
				checkEnvelope(t, lc, tc.tool, tc.args, tc.headers, stdout)
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
			}
		})
	}
}

// checkEnvelope compares the envelope eval printed with the Verdict of
// proxy.Evaluate for the same call: none when allowed; otherwise the same
// JSON, and the same code and reason.
func checkEnvelope(t *testing.T, lc *config.Loaded, tool, rawArgs string, headers []string, stdout string) {
	t.Helper()
	args, err := policytest.DecodeArguments([]byte(rawArgs))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	for _, kv := range headers {
		k, v, _ := strings.Cut(kv, "=")
		h.Add(k, v)
	}
	v, err := proxy.Evaluate(context.Background(), lc.Snapshot, tool, args, h)
	if err != nil {
		t.Fatal(err)
	}
	_, printed, found := strings.Cut(stdout, "\nenvelope (HTTP ")
	if v.Allowed {
		if found {
			t.Errorf("an allowed call printed an envelope")
		}
		return
	}
	if !found {
		t.Fatalf("no envelope in the output")
	}
	if head := fmt.Sprintf("%d, X-Toolgate-Error-Code: %s):\n", v.Status, v.Code); !strings.HasPrefix(printed, head) {
		t.Errorf("envelope heading = %q, want %q", strings.SplitN(printed, "\n", 2)[0], head)
	}
	_, body, _ := strings.Cut(printed, "\n")
	var got struct {
		OK    bool `json:"ok"`
		Error struct {
			Code   string `json:"code"`
			Reason string `json:"reason"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("the envelope does not parse: %v\n%s", err, body)
	}
	if got.OK {
		t.Errorf("envelope ok = true, want false")
	}
	if got.Error.Code != v.Code {
		t.Errorf("envelope code = %q, Verdict code = %q", got.Error.Code, v.Code)
	}
	if got.Error.Reason != v.Reason {
		t.Errorf("envelope reason = %q, Verdict reason = %q", got.Error.Reason, v.Reason)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(body)); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := json.Compact(&want, v.Envelope); err != nil {
		t.Fatal(err)
	}
	if compact.String() != want.String() {
		t.Errorf("envelope = %s, want the Verdict's %s", compact.String(), want.String())
	}
}

// TestPolicyCheck runs `toolgate policy check` on the example config and on
// broken ones, whose errors point at FILE:LINE of the marked line.
func TestPolicyCheck(t *testing.T) {
	setExampleSecrets(t)
	lc, err := config.Load(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runArgs("policy", "check", "--config", examplePath)
	if code != exitOK {
		t.Errorf("exit code = %d, want %d (stderr %q)", code, exitOK, stderr)
	}
	if want := fmt.Sprintf("ok: 5 tools, 5 policies, config version %s, policy version %s\n", lc.Version, lc.LoadedPolicies.Version()); stdout != want {
		t.Errorf("stdout = %q, want %q", stdout, want)
	}

	tests := []struct {
		name  string
		yaml  string            // marker ends the line the error names
		files map[string]string // beside the config
		want  []string          // fragments of the message after FILE:LINE:
	}{
		{
			name: "a policy path that does not exist",
			yaml: "admin: {listen: \"off\"}\npolicies:\n  rego:\n    - name: a\n      path: nowhere " + marker + "\ntools:\n  - name: t\n    match: {path: /t}\n",
			want: []string{"policies.rego[0].path:", `policy "a"`, "no such file or directory"},
		},
		{
			name:  "a policy whose unit test fails",
			yaml:  "admin: {listen: \"off\"}\npolicies: " + marker + "\n  rego:\n    - {name: a, path: a}\n",
			files: map[string]string{"a/a.rego": "package toolgate.a\n\ndeny contains \"no\" if false\n", "a/a_test.rego": "package toolgate.a_test\n\ntest_fails if false\n"},
			want:  []string{"policies: 1 policy test(s) failed", "test_fails"},
		},
		{
			name: "an unknown key",
			yaml: "admin: {listen: \"off\"}\ntools:\n  - name: t\n    match: {path: /t}\n    polices: [a] " + marker + "\n",
			want: []string{"tools[0].polices: unknown field"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tc.files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, p, body)
			}
			path := filepath.Join(dir, "toolgate.yaml")
			writeFile(t, path, tc.yaml)
			code, stdout, stderr := runArgs("policy", "check", "--config", path)
			if code != exitError {
				t.Errorf("exit code = %d, want %d", code, exitError)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			prefix := fmt.Sprintf("toolgate: %s:%d: ", path, markedLine(t, tc.yaml))
			if !strings.HasPrefix(stderr, prefix) {
				t.Errorf("stderr = %q, want it to start %q", stderr, prefix)
			}
			for _, want := range tc.want {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr = %q, want it to contain %q", stderr, want)
				}
			}
		})
	}
}

// TestPolicyUsage checks the policy commands' usage errors: exit 2 and a
// pointer to the help.
func TestPolicyUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", []string{"policy"}, "missing subcommand: test, eval, check or build"},
		{"unknown subcommand", []string{"policy", "tset"}, `unknown command "tset" for "toolgate policy"`},
		{"test without a folder", []string{"policy", "test"}, "accepts 1 arg(s), received 0"},
		{"test with two folders", []string{"policy", "test", "a", "b"}, "accepts 1 arg(s), received 2"},
		{"check with an argument", []string{"policy", "check", "x.yaml"}, "accepts 0 arg(s), received 1"},
		{"unknown flag", []string{"policy", "eval", "--nope"}, "see 'toolgate policy eval --help'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runArgs(tc.args...)
			if code != exitUsage {
				t.Errorf("exit code = %d, want %d", code, exitUsage)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			if !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "--help") {
				t.Errorf("stderr = %q, want it to contain %q and --help", stderr, tc.want)
			}
		})
	}
}
