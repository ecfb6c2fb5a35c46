package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAnswerPolicies: a tool's answer.policies are bound to the policies
// section's policies by name, under the tool's policy_mode; a name no
// policy has, or a misplaced field, is an error with its line and field.
func TestAnswerPolicies(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "guard.rego"), []byte("package g\n\nwithhold contains \"x\" if input.answer.body.x\n"), 0o600)
	const base = "listen: {forward: 127.0.0.1:0}\npolicies:\n  rego:\n    - {name: guard, path: guard.rego}\n    - {name: quiet, path: guard.rego, mode: \"off\"}\ntools:\n"
	for _, tc := range []struct {
		name, tools, want string
	}{
		{"unknown policy", "  - name: t\n    match: {path: /t}\n    answer:\n      policies: [guard, nope]\n", `:10: tools[0].answer.policies[1]: no policy named "nope"`},
		{"headers without policies", "  - name: t\n    match: {path: /t}\n    answer:\n      policy_headers: [x-count]\n", "tools[0].answer.policy_headers:"},
		{"bad header name", "  - name: t\n    match: {path: /t}\n    answer:\n      policies: [guard]\n      policy_headers: [\"x count\"]\n", "tools[0].answer.policy_headers[0]:"},
		{"on an mcp route", "  - name: t\n    match: {path: /mcp}\n    protocol: mcp\n    answer:\n      policies: [guard]\n", "tools[0].answer.policies:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(filepath.Join(dir, "toolgate.yaml"), []byte(base+tc.tools))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v; want an error containing %q", err, tc.want)
			}
		})
	}
	lc, err := Parse(filepath.Join(dir, "toolgate.yaml"), []byte(base+
		"  - name: bound\n    match: {path: /a}\n    answer: {policies: [guard]}\n"+
		"  - name: off\n    match: {path: /b}\n    answer: {policies: [quiet]}\n"+
		"  - name: none\n    match: {path: /c}\n    policies: [guard]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if lc.Snapshot.AnswerCheckers["bound"] == nil {
		t.Error("tool bound has no answer checker")
	}
	if lc.Snapshot.AnswerCheckers["off"] != nil || lc.Snapshot.AnswerCheckers["none"] != nil {
		t.Error("an answer checker for a tool whose answer policies are off, or that has none")
	}
	if lc.Snapshot.Checkers["bound"] != nil {
		t.Error("an answer policy decides the tool's calls too")
	}
}
