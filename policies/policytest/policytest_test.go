package policytest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/policies"
)

// TestCaseArgumentsAsJSON checks that a case's YAML arguments reach the
// checks as a JSON body's would: numbers as json.Number, nested values as
// maps and slices.
func TestCaseArgumentsAsJSON(t *testing.T) {
	cf, err := ParseCaseFile("a.cases.yaml", []byte("config: x.yaml\ncases:\n  - name: a\n    tool: t\n"+
		"    arguments: {n: 500, f: 1.5, e: 1e3, s: \"5\", b: true, z: null, l: [1, x], m: {k: 2}}\n    expect: {outcome: allowed}\n"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(cf.Cases[0].JSONArguments)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"b":true,"e":1000,"f":1.5,"l":[1,"x"],"m":{"k":2},"n":500,"s":"5","z":null}`; string(got) != want {
		t.Errorf("arguments = %s, want %s", got, want)
	}
	tests := []struct {
		key  string
		want any
	}{
		{"n", json.Number("500")},
		{"f", json.Number("1.5")},
		{"s", "5"},
	}
	for _, tc := range tests {
		if got := cf.Cases[0].JSONArguments[tc.key]; got != tc.want {
			t.Errorf("%s = %#v, want %#v", tc.key, got, tc.want)
		}
	}
	if _, err := ParseCaseFile("a.cases.yaml", []byte("cases:\n  - name: a\n    tool: t\n    arguments: {n: .inf}\n    expect: {outcome: allowed}\n")); err == nil || !strings.Contains(err.Error(), "a.cases.yaml:4: cases[0].arguments: not expressible as JSON") {
		t.Errorf("infinite argument: err = %v, want a.cases.yaml:4: cases[0].arguments: not expressible as JSON", err)
	}
}

// FuzzParseCaseFile feeds ParseCaseFile arbitrary bytes: it must never
// panic, every error names the file, and every case it accepts has a name,
// a tool, a known outcome and JSON-shaped arguments.
func FuzzParseCaseFile(f *testing.F) {
	for _, p := range []string{
		filepath.Join("..", "..", "examples", "policies", "cases", "examples.cases.yaml"),
		filepath.Join("..", "..", "examples", "policies", "cases", "policies-only.cases.yaml"),
		filepath.Join("..", "..", "cmd", "toolgate", "testdata", "wrong.cases.yaml"),
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"", "---\n", "[]\n", "cases: []\n", "cases:\n  -\n",
		"cases:\n  - {name: a, tool: t, expect: {outcome: allowed}}\n---\nx: 1\n",
		"cases:\n  - {name: a, tool: t, arguments: {n: .nan}, expect: {outcome: refused}}\n",
		"cases:\n  - {name: a, tool: t, arguments: {1: 2}, expect: {outcome: refused}}\n",
		"cases:\n  - {name: a, tool: t, headers: {\"a b\": c}, expect: {outcome: refused}}\n",
		"a: &a [*a, *a]\n",
		"cases:\n  - {name: a, tool: t, expect: {outcome: needs_approval, approval: {effect: e, summary: {n: 1}}}}\n",
		"cases:\n  - {name: a, tool: t, expect: {outcome: allowed, approval: {}}}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cf, err := ParseCaseFile("fuzz.cases.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.cases.yaml") {
				t.Errorf("error %q does not start with the file name", err)
			}
			return
		}
		for _, c := range cf.Cases {
			if c.Name == "" || c.Tool == "" || !slices.Contains([]string{outcomeAllowed, outcomeRefused, outcomeApproval}, c.Expect.Outcome) ||
				c.Expect.Approval != nil && c.Expect.Outcome != outcomeApproval {
				t.Errorf("accepted an incomplete case %+v", c.policyCase)
			}
			if _, err := json.Marshal(c.JSONArguments); err != nil {
				t.Errorf("arguments are not JSON: %v", err)
			}
		}
	})
}

// TestEngineFor checks that `toolgate policy test --config` runs a
// policy's unit tests on the engine the configuration gives it.
func TestEngineFor(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a", "b", "c"} {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
		rego := "package toolgate." + p + "\n\ndeny contains {\"message\": \"no\"} if input.arguments.n > 3\n"
		if err := os.WriteFile(filepath.Join(dir, p, p+".rego"), []byte(rego), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "toolgate.yaml")
	if err := os.WriteFile(cfg, []byte("listen: {forward: 127.0.0.1:0}\nadmin: {listen: 'off'}\npolicies:\n  engine: interpreter\n"+
		"  rego:\n    - {name: a, path: a}\n    - {name: b, path: b, engine: compiled}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, configArg, policy, want string
	}{
		{"section engine", cfg, filepath.Join(dir, "a"), "interpreter"},
		{"policy's own engine", cfg, filepath.Join(dir, "b"), "compiled"},
		{"not in the configuration", cfg, filepath.Join(dir, "c"), "compiled"},
		{"without --config", "", filepath.Join(dir, "a"), "compiled"},
		{"configuration that does not load", filepath.Join(dir, "missing.yaml"), filepath.Join(dir, "a"), "compiled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pt := &policyTest{configArg: tc.configArg, load: loadPolicySection, configs: map[string]loadResult{}}
			if got := pt.engineFor(tc.policy); got != tc.want {
				t.Errorf("engineFor(%s) = %q, want %q", tc.policy, got, tc.want)
			}
		})
	}
}

// loadPolicySection loads a configuration file's policies section only:
// the part engineFor reads (the command's loader, which validates the whole
// file, lives in cmd/toolgate, which this package may not import).
func loadPolicySection(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f struct {
		Policies policies.Config `yaml:"policies"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	return policySection{path, &f.Policies}, nil
}

// policySection is a Config that evaluates nothing.
type policySection struct {
	path string
	pc   *policies.Config
}

func (p policySection) Evaluate(context.Context, string, map[string]any, http.Header) (Verdict, error) {
	return Verdict{}, errors.New("not evaluated")
}

func (p policySection) EvaluateMCP(context.Context, MCPTools, string, map[string]any, http.Header) (Verdict, error) {
	return Verdict{}, errors.New("not evaluated")
}

func (p policySection) PolicySection() (string, *policies.Config) { return p.path, p.pc }
