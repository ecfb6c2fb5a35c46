package rego

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// DecisionPackage is the package of the rule DecisionRego writes, and
// DecisionEntrypoint that rule as a compile entrypoint: it evaluates to the
// whole decision document of a policy.
const (
	DecisionPackage    = "toolgate_decision"
	DecisionEntrypoint = DecisionPackage + "/decision"
)

// DecisionRego returns the Rego v1 source of a module, package
// DecisionPackage, whose rule `decision` is the decision document of the
// policy in files (name to source; *_test.rego ignored): {deny, allow,
// inject}, each key present when the policy defines that rule, allow left
// out when it is undefined. It reads the decision rules exactly as Rego
// policies are read, so a policy compiled to WASM through this rule decides
// as the interpreter does.
func DecisionRego(files map[string][]byte) (string, error) {
	pkg := ""
	var modules []*ast.Module
	for _, f := range slices.Sorted(maps.Keys(files)) {
		if strings.HasSuffix(f, "_test.rego") {
			continue
		}
		m, err := ast.ParseModuleWithOpts(f, string(files[f]), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return "", err
		}
		p := strings.TrimPrefix(m.Package.Path.String(), "data.")
		switch {
		case pkg == "":
			pkg = p
		case pkg != p:
			return "", fmt.Errorf("%s declares package %s, but another file declares %s; one policy is one package", f, p, pkg)
		}
		modules = append(modules, m)
	}
	if pkg == "" {
		return "", errors.New("no policy file (only tests, or none)")
	}
	if pkg == DecisionPackage || strings.HasPrefix(pkg, DecisionPackage+".") {
		return "", fmt.Errorf("package %s is reserved", DecisionPackage)
	}
	q := decisionQuery(pkg, modules, " := ")
	var b strings.Builder
	b.WriteString("package " + DecisionPackage + "\n\n")
	if q == "true" {
		b.WriteString("decision := {}\n")
		return b.String(), nil
	}
	var keys []string
	hasAllow := false
	for _, part := range strings.Split(q, "; ") {
		name, _, _ := strings.Cut(part, " := ")
		switch name {
		case "allow":
			hasAllow = true
		default:
			keys = append(keys, fmt.Sprintf("%q: %s", name, name))
		}
	}
	b.WriteString("decision := d if {\n")
	for _, part := range strings.Split(q, "; ") {
		b.WriteString("\t" + part + "\n")
	}
	base := "{" + strings.Join(keys, ", ") + "}"
	if hasAllow {
		// allow is [] when undefined, [value] otherwise.
		b.WriteString("\td := object.union(" + base + `, {"allow": a | some a in allow})` + "\n")
	} else {
		b.WriteString("\td := " + base + "\n")
	}
	b.WriteString("}\n")
	return b.String(), nil
}

// DeniedBuiltins lists the Rego builtins a toolgate policy may not call,
// sorted; compilers of Rego (to WASM) refuse them too.
func DeniedBuiltins() []string {
	return slices.Sorted(maps.Keys(deniedBuiltins))
}
