package rego

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policies"
)

func mustRego(t testing.TB, name, src string) *Policy {
	t.Helper()
	p, err := Compile(name, map[string][]byte{name + ".rego": []byte(src)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCompileRegoErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"syntax error", map[string]string{"a.rego": "package p\ndeny contains x if {"}, "a.rego:"},
		{"rego v0 syntax", map[string]string{"a.rego": "package p\ndeny[msg] { msg := \"x\" }"}, "a.rego:"},
		{"network builtin refused", map[string]string{"a.rego": `package p
deny contains "x" if { http.send({"method": "get", "url": "http://127.0.0.1"}) }`}, "http.send"},
		{"environment builtin refused", map[string]string{"a.rego": `package p
deny contains "x" if { opa.runtime().env.SECRET }`}, "opa.runtime"},
		{"two packages", map[string]string{"a.rego": "package p\n", "b.rego": "package q\n"}, "one policy is one package"},
		{"only tests", map[string]string{"a_test.rego": "package p_test\ntest_x if { true }"}, "only test files"},
		{"no files", map[string]string{}, "no .rego files"},
		{"unsafe variable", map[string]string{"a.rego": "package p\ndeny contains x if { y == 1 }"}, "unsafe"},
		{"deny that is not a set", map[string]string{"a.rego": "package p\ndeny := 7\n"}, "deny must be a set"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string][]byte{}
			for k, v := range tc.files {
				files[k] = []byte(v)
			}
			_, err := Compile(tc.name, files)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestSetCheck(t *testing.T) {
	deny := mustRego(t, "deny_big", `package t.deny_big
deny contains {"msg": "n too big", "path": "/n", "code": "validation"} if input.arguments.n > 10
deny contains "no weekends" if input.arguments.weekend
`)
	allowOnly := mustRego(t, "allow_only", `package t.allow_only
default allow := false
allow if input.caller.agent == "good"
`)
	inject := mustRego(t, "inject", `package t.inject
inject["x-session-id"] := input.caller.session
`)
	conflict := mustRego(t, "conflict", `package t.conflict
x := 1 if input.arguments.n > 0
x := 2 if input.arguments.n > 1
deny contains "never" if x == 3
`)
	builtinErr := mustRego(t, "builtin_err", `package t.builtin_err
deny contains "bad" if to_number(input.arguments.s) > 1
`)
	slow := mustRego(t, "slow", `package t.slow
deny contains "slow" if {
	count([x | some x in numbers.range(1, 50000000); x % 7 == 0]) < 0
}
`)
	badOutput := mustRego(t, "bad_output", `package t.bad_output
deny contains 7 if input.arguments.n > 0
`)
	in := func(n int, agent string, extra map[string]any) *policies.Input {
		args := map[string]any{"n": json.Number(strings.TrimSpace(jsonInt(n)))}
		for k, v := range extra {
			args[k] = v
		}
		return &policies.Input{Tool: "tool", Arguments: args, Caller: policies.Caller{Agent: agent, Session: "s-9"}}
	}
	tests := []struct {
		name       string
		bound      []policies.Bound
		failOpen   bool
		in         *policies.Input
		wantAllow  bool
		wantCode   string
		wantReason string
		wantMsgs   []string
		wantDryRun int
		wantInject string
		wantOpen   int
	}{
		{"allowed", []policies.Bound{{Policy: deny, Mode: policies.ModeEnforce}}, false, in(1, "", nil), true, "", "", nil, 0, "", 0},
		{"validation deny", []policies.Bound{{Policy: deny, Mode: policies.ModeEnforce}}, false, in(11, "", nil), false, "validation", "policy_denied", []string{"n too big"}, 0, "", 0},
		{"mixed codes become policy", []policies.Bound{{Policy: deny, Mode: policies.ModeEnforce}}, false, in(11, "", map[string]any{"weekend": true}), false, "policy", "policy_denied",
			[]string{"no weekends", "n too big"}, 0, "", 0},
		{"allow false without deny", []policies.Bound{{Policy: allowOnly, Mode: policies.ModeEnforce}}, false, in(1, "bad", nil), false, "policy", "policy_denied",
			[]string{"not allowed by policy 'allow_only'"}, 0, "", 0},
		{"allow true", []policies.Bound{{Policy: allowOnly, Mode: policies.ModeEnforce}}, false, in(1, "good", nil), true, "", "", nil, 0, "", 0},
		{"dry run reports, allows", []policies.Bound{{Policy: deny, Mode: policies.ModeDryRun}}, false, in(11, "", nil), true, "", "", nil, 1, "", 0},
		{"every enforced policy's messages", []policies.Bound{{Policy: deny, Mode: policies.ModeEnforce}, {Policy: allowOnly, Mode: policies.ModeEnforce}}, false, in(11, "bad", nil), false, "policy", "policy_denied",
			[]string{"n too big", "not allowed by policy 'allow_only'"}, 0, "", 0},
		{"inject after allow", []policies.Bound{{Policy: deny, Mode: policies.ModeEnforce}, {Policy: inject, Mode: policies.ModeEnforce}}, false, in(1, "", nil), true, "", "", nil, 0, "s-9", 0},
		{"no inject when denied", []policies.Bound{{Policy: deny, Mode: policies.ModeEnforce}, {Policy: inject, Mode: policies.ModeEnforce}}, false, in(11, "", nil), false, "validation", "policy_denied", []string{"n too big"}, 0, "", 0},
		{"off is skipped", []policies.Bound{{Policy: deny, Mode: policies.ModeOff}}, false, in(11, "", nil), true, "", "", nil, 0, "", 0},
		{"conflict fails closed", []policies.Bound{{Policy: conflict, Mode: policies.ModeEnforce}}, false, in(5, "", nil), false, "policy", "policy_error", nil, 0, "", 0},
		{"conflict fails open", []policies.Bound{{Policy: conflict, Mode: policies.ModeEnforce}}, true, in(5, "", nil), true, "", "", nil, 0, "", 1},
		{"builtin error fails closed", []policies.Bound{{Policy: builtinErr, Mode: policies.ModeEnforce}}, false, in(1, "", map[string]any{"s": "abc"}), false, "policy", "policy_error", nil, 0, "", 0},
		{"deadline fails closed", []policies.Bound{{Policy: slow, Mode: policies.ModeEnforce}}, false, in(1, "", nil), false, "policy", "policy_timeout", nil, 0, "", 0},
		{"deadline fails open", []policies.Bound{{Policy: slow, Mode: policies.ModeEnforce}}, true, in(1, "", nil), true, "", "", nil, 0, "", 1},
		{"bad decision document fails closed", []policies.Bound{{Policy: badOutput, Mode: policies.ModeEnforce}}, false, in(1, "", nil), false, "policy", "policy_error", nil, 0, "", 0},
	}
	// Every case on both engines that decide Rego in process.
	onEngine := func(engine string, bound []policies.Bound) []policies.Bound {
		out := make([]policies.Bound, len(bound))
		for i, b := range bound {
			out[i] = b
			if r, ok := b.Policy.(*Policy); ok && engine == policies.EngineCompiled {
				c, err := r.Compiled(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				out[i].Policy = c
			}
		}
		return out
	}
	for _, run := range []struct{ engine string }{{policies.EngineInterpreter}, {policies.EngineCompiled}} {
		for _, tc := range tests {
			t.Run(run.engine+"/"+tc.name, func(t *testing.T) {
				// A short deadline where the case is about the deadline;
				// elsewhere one a loaded machine cannot pass (the compiled
				// engine reads the clock before every builtin call, so a
				// decision descheduled past 30 ms would time out).
				deadline := 10 * time.Second
				if strings.HasPrefix(tc.name, "deadline") {
					deadline = 30 * time.Millisecond
				}
				set := policies.NewSet("tool", onEngine(run.engine, tc.bound), deadline, tc.failOpen)
				start := time.Now()
				d := set.Check(context.Background(), tc.in)
				if el := time.Since(start); el > 2*time.Second {
					t.Errorf("check took %v; the deadline must stop it", el)
				}
				if d.Allow != tc.wantAllow || string(d.Code) != tc.wantCode || d.Reason != tc.wantReason {
					t.Fatalf("decision = allow %v %s/%s (%s), want allow %v %s/%s", d.Allow, d.Code, d.Reason, d.Detail, tc.wantAllow, tc.wantCode, tc.wantReason)
				}
				if tc.wantMsgs != nil {
					var msgs []string
					for _, v := range d.Violations {
						msgs = append(msgs, v.Message)
					}
					if strings.Join(msgs, "|") != strings.Join(tc.wantMsgs, "|") {
						t.Errorf("messages = %q, want %q", msgs, tc.wantMsgs)
					}
				}
				if !d.Allow && !strings.HasPrefix(d.Detail, "Tool 'tool' refused") {
					t.Errorf("detail = %q", d.Detail)
				}
				if len(d.DryRun) != tc.wantDryRun {
					t.Errorf("dry-run denials = %d, want %d", len(d.DryRun), tc.wantDryRun)
				}
				if got := d.Inject["X-Session-Id"]; got != tc.wantInject {
					t.Errorf("inject X-Session-Id = %q, want %q", got, tc.wantInject)
				}
				if len(d.FailedOpen) != tc.wantOpen {
					t.Errorf("failed open = %v, want %d", d.FailedOpen, tc.wantOpen)
				}
			})
		}
	}
}

func jsonInt(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestExamplePoliciesPassTheirTests runs every example policy's own unit
// tests, in OPA's tester and again on the compiled engine.
func TestExamplePoliciesPassTheirTests(t *testing.T) {
	for _, name := range []string{"bounds", "allowlist", "pii_guard", "edit_approval", "session_inject"} {
		t.Run(name, func(t *testing.T) {
			p, err := Load(name, "../../examples/policies/"+name)
			if err != nil {
				t.Fatal(err)
			}
			if p, err = p.Compiled(context.Background()); err != nil {
				t.Fatal(err)
			}
			res, err := p.RunTests(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(res) == 0 {
				t.Fatal("no tests ran")
			}
			for _, r := range res {
				if !r.Pass {
					t.Errorf("%s (%s) failed: %s", r.Name, r.Location, r.Err)
				}
			}
		})
	}
}

// TestRegoFailingTestReported: a false test and a test that errors fail,
// on either engine, and the others still pass (on the compiled engine, an
// error in one test makes each run alone).
func TestRegoFailingTestReported(t *testing.T) {
	interp, err := Compile("p", map[string][]byte{
		"p.rego": []byte("package p\ndeny contains \"x\" if input.a == 1\n"),
		"p_test.rego": []byte(`package p_test
import data.p
test_wrong if { count(p.deny) == 0 with input as {"a": 1} }
test_right if { count(p.deny) == 1 with input as {"a": 1} }
test_error if { to_number("x") == 1 }
test_also_right if { count(p.deny) == 0 with input as {"a": 2} }
`),
	})
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := interp.Compiled(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Policy{interp, compiled} {
		t.Run(p.Engine(), func(t *testing.T) {
			res, err := p.RunTests(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, r := range res {
				got[r.Name] = r.Pass
				if !strings.Contains(r.Location, "p_test.rego:") {
					t.Errorf("location %q does not name the file and line", r.Location)
				}
				if r.Name == "data.p_test.test_error" && !strings.Contains(r.Err, "to_number") {
					t.Errorf("test_error's error %q does not name the builtin", r.Err)
				}
			}
			want := map[string]bool{"data.p_test.test_wrong": false, "data.p_test.test_right": true, "data.p_test.test_error": false, "data.p_test.test_also_right": true}
			if !maps.Equal(got, want) {
				t.Errorf("results = %v, want %v", got, want)
			}
		})
	}
}

// TestLoadRegoSkipsHiddenEntries loads a policy folder laid out as a
// Kubernetes ConfigMap volume is: every file once in a hidden timestamped
// folder and once through a symlink beside it. Read twice, the default rule
// would be defined twice.
func TestLoadRegoSkipsHiddenEntries(t *testing.T) {
	dir := t.TempDir()
	hidden := filepath.Join(dir, "..2026_11_22_06_00_00.123")
	if err := os.Mkdir(hidden, 0o755); err != nil {
		t.Fatal(err)
	}
	src := "package p\n\ndefault allow := false\n\nallow if input.tool == \"t\"\n"
	if err := os.WriteFile(filepath.Join(hidden, "p.rego"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hidden, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", "p.rego"), filepath.Join(dir, "p.rego")); err != nil {
		t.Fatal(err)
	}
	p, err := Load("p", dir)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	res, err := p.Eval(context.Background(), &policies.Input{Tool: "t"})
	if err != nil || !res.Allowed {
		t.Fatalf("Eval = %+v, %v; want allowed", res, err)
	}
}
