package wasm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/compile"

	"github.com/toolgate/toolgate/policies/rego"
)

// CompileRego compiles a Rego v1 policy (file name to source; *_test.rego
// files are left out) to an OPA WASM module whose one entrypoint,
// rego.DecisionEntrypoint, evaluates to the policy's decision document
// {deny, allow, inject}, read as the interpreter reads it. It returns the
// policy.wasm bytes, which Load runs. Builtins that reach the network or
// the environment are refused, as by the interpreter; builtins OPA's WASM
// target leaves to the host (sprintf, time.*, ...) run in Go when the
// module is loaded.
func CompileRego(ctx context.Context, files map[string][]byte) ([]byte, error) {
	out, err := compileRego(ctx, files)
	if err != nil {
		return nil, err
	}
	return out.WasmModules[0].Raw, nil
}

// CompileRegoBundle is CompileRego writing an OPA bundle (.tar.gz) that
// holds /policy.wasm, its manifest (entrypoint rego.DecisionEntrypoint)
// and the sources, as `opa build -t wasm` does. Load takes either.
func CompileRegoBundle(ctx context.Context, files map[string][]byte) ([]byte, error) {
	out, err := compileRego(ctx, files)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := bundle.NewWriter(&buf).Write(*out); err != nil {
		return nil, fmt.Errorf("write bundle: %w", err)
	}
	return buf.Bytes(), nil
}

func compileRego(ctx context.Context, files map[string][]byte) (*bundle.Bundle, error) {
	wrapper, err := rego.DecisionRego(files)
	if err != nil {
		return nil, fmt.Errorf("compile rego to wasm: %w", err)
	}
	b := &bundle.Bundle{Data: map[string]any{}}
	add := func(path string, src []byte) error {
		m, err := ast.ParseModuleWithOpts(path, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return err
		}
		regexMatchToHost(m)
		b.Modules = append(b.Modules, bundle.ModuleFile{URL: path, Path: path, Raw: src, Parsed: m})
		return nil
	}
	for name, src := range files {
		if strings.HasSuffix(name, "_test.rego") {
			continue
		}
		if err := add(name, src); err != nil {
			return nil, fmt.Errorf("compile rego to wasm: %w", err)
		}
	}
	if err := add("toolgate_decision.rego", []byte(wrapper)); err != nil {
		return nil, fmt.Errorf("compile rego to wasm: %w", err)
	}
	c := compile.New().
		WithTarget(compile.TargetWasm).
		WithEntrypoints(rego.DecisionEntrypoint).
		WithBundle(b).
		WithCapabilities(capabilities()).
		WithRegoVersion(ast.RegoV1).
		WithOutput(&bytes.Buffer{})
	if err := c.Build(ctx); err != nil {
		return nil, fmt.Errorf("compile rego to wasm: %w", err)
	}
	out := c.Bundle()
	if out == nil || len(out.WasmModules) == 0 {
		return nil, errors.New("compile rego to wasm: OPA produced no module")
	}
	return out, nil
}

// regexMatchBuiltin is regex.match run by the host (OPA's Go
// implementation, which compiles each pattern once and caches it, as the
// interpreter does) rather than by OPA's WASM runtime, which compiles the
// pattern again on every evaluation (tens of microseconds for an e-mail
// pattern). CompileRego rewrites regex.match calls to it; capabilities
// declares it with regex.match's signature, and the host maps it to
// regex.match.
const regexMatchBuiltin = "toolgate_regex_match"

var regexMatchRef = ast.RegexMatch.Ref()

// regexMatchToHost rewrites the module's calls of regex.match, as an
// expression (regex.match(p, s)) or as a term (x := regex.match(p, s)), to
// regexMatchBuiltin.
func regexMatchToHost(m *ast.Module) {
	to := func(t *ast.Term) *ast.Term {
		n := ast.RefTerm(ast.VarTerm(regexMatchBuiltin))
		n.Location = t.Location
		return n
	}
	ast.NewGenericVisitor(func(x any) bool {
		switch x := x.(type) {
		case *ast.Expr:
			if ts, ok := x.Terms.([]*ast.Term); ok && len(ts) > 0 && ts[0].Value.Compare(regexMatchRef) == 0 {
				ts[0] = to(ts[0])
			}
		case ast.Call:
			if len(x) > 0 && x[0].Value.Compare(regexMatchRef) == 0 {
				x[0] = to(x[0])
			}
		}
		return false
	}).Walk(m)
}

// capabilities is this OPA's builtins without those policies deny, and
// with regexMatchBuiltin.
func capabilities() *ast.Capabilities {
	denied := map[string]bool{}
	for _, b := range rego.DeniedBuiltins() {
		denied[b] = true
	}
	c := ast.CapabilitiesForThisVersion()
	kept := c.Builtins[:0]
	for _, b := range c.Builtins {
		if !denied[b.Name] {
			kept = append(kept, b)
		}
	}
	c.Builtins = append(kept, &ast.Builtin{Name: regexMatchBuiltin, Decl: ast.RegexMatch.Decl})
	return c
}
