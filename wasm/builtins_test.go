package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/compile"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/types"
	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/rego"
)

// exampleCases are the calls of examples/policies/cases/*.cases.yaml as
// policy inputs: arguments and headers, the agent from X-Toolgate-Agent.
func exampleCases(t *testing.T) map[string]*policies.Input {
	t.Helper()
	files, _ := filepath.Glob("../examples/policies/cases/*.cases.yaml")
	if len(files) == 0 {
		t.Fatal("no case files")
	}
	out := map[string]*policies.Input{}
	for _, f := range files {
		var cf struct {
			Cases []struct {
				Name      string            `yaml:"name"`
				Tool      string            `yaml:"tool"`
				Arguments map[string]any    `yaml:"arguments"`
				Headers   map[string]string `yaml:"headers"`
			} `yaml:"cases"`
		}
		if err := yaml.Unmarshal(must(os.ReadFile(f)), &cf); err != nil {
			t.Fatal(err)
		}
		for _, c := range cf.Cases {
			// Through JSON, so numbers are json.Number as the proxy gives them.
			var args map[string]any
			d := json.NewDecoder(bytes.NewReader(must(json.Marshal(c.Arguments))))
			d.UseNumber()
			if err := d.Decode(&args); err != nil {
				t.Fatal(err)
			}
			in := &policies.Input{
				Tool:      c.Tool,
				Arguments: args,
				Request:   policies.Request{Method: "POST", Host: "upstream", Path: "/" + c.Tool, Headers: map[string]string{}},
				TraceID:   "4bf92f3577b34da6a3ce929d0e0e4736",
			}
			for k, v := range c.Headers {
				in.Request.Headers[strings.ToLower(k)] = v
				switch strings.ToLower(k) {
				case "x-toolgate-agent":
					in.Caller.Agent = v
				case "x-toolgate-session":
					in.Caller.Session = v
				}
			}
			out[filepath.Base(f)+": "+c.Name] = in
		}
	}
	return out
}

// TestExamplePolicies: every example policy compiles to WASM, loads, and
// decides every call of the example case files as the interpreter does.
// Several call host builtins (bounds and allowlist call sprintf).
func TestExamplePolicies(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	cases := exampleCases(t)
	dirs, _ := filepath.Glob("../examples/policies/*")
	tested, denied, withBuiltins := 0, 0, 0
	for _, dir := range dirs {
		files, err := rego.Read(dir)
		if err != nil || len(files) == 0 {
			continue // cases/
		}
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			interp, err := rego.Compile(name, files)
			if err != nil {
				t.Fatal(err)
			}
			mod, err := CompileRego(ctx, files)
			if err != nil {
				t.Fatal(err)
			}
			p, err := e.Load(ctx, name, mod, Options{Deadline: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if p.builtins.count > 0 {
				withBuiltins++
			}
			for cname, in := range cases {
				want, werr := interp.Eval(ctx, in)
				got, gerr := p.Eval(ctx, in)
				if (werr != nil) != (gerr != nil) || werr == nil && !equalResult(got, want) {
					t.Errorf("%s:\ninterpreter: %s %v\nwasm:        %s %v", cname, must(json.Marshal(want)), werr, must(json.Marshal(got)), gerr)
				}
				if len(want.Denies) > 0 {
					denied++
				}
			}
			tested++
		})
	}
	if tested < 5 || denied == 0 || withBuiltins < 2 {
		t.Fatalf("%d policies, %d with host builtins, %d denials: the examples are not exercised", tested, withBuiltins, denied)
	}
}

// TestHostBuiltins: results of host builtins cross back into the module
// intact (strings with quotes and control characters, sets), their
// errors fail the call without quoting the arguments, and a failed call
// leaves the policy working.
func TestHostBuiltins(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	const secret = "secret-value-4711"
	tests := []struct {
		name, src string
		arg       string
		err       string // "" when the interpreter's decision is expected
	}{
		{"string with quotes and control characters", `deny contains sprintf("<%s>", [input.arguments.s])`, "q\"uo\\te \x01\x1f\t\n\u2028 ünï 🙂", ""},
		{"a set back from the host", `deny contains x if some x in net.cidr_expand("10.0.0.0/31")`, "", ""},
		{"a set into the host", `deny contains sprintf("%v", [{x | some x in ["b", "a", "b"]}])`, "", ""},
		{"an object with number keys", `deny contains sprintf("%v", [{1: "a", 2.5: {"k": [null, true]}}])`, "", ""},
		{"numbers of every shape", `deny contains sprintf("%v %d %v %v", [1e3, 12, 0.1, -7.25])`, "", ""},
		{"undefined, not failed", `deny contains "no" if not strings.count(input.arguments.s, "x") > 0`, "abc", ""},
		{"time and rand", `deny contains "t" if { time.now_ns() > 0; rand.intn("k", 10) < 10 }`, "", ""},
		{"regex.match, run by the host", `deny contains "m" if regex.match("^[a-z]+@", input.arguments.s)`, "ab@c", ""},
		{"regex.match as a term", `deny contains "m" if { m := regex.match("^[a-z]+@", input.arguments.s); not m }`, "AB@c", ""},
		{"regex.match inside a call", `deny contains sprintf("%v", [regex.match("b", input.arguments.s)])`, "abc", ""},
		{"regex.match with a bad pattern", `deny contains "m" if regex.match(input.arguments.s, "x")`, "(" + secret, "builtin failed: regex.match: eval_builtin_error"},
		{"a builtin error", `deny contains "big" if units.parse_bytes(input.arguments.s) > 10`, secret, "builtin failed: units.parse_bytes: eval_builtin_error"},
		{"a type error at run time", `deny contains "t" if time.parse_rfc3339_ns(input.arguments.s) > 0`, secret, "builtin failed: time.parse_rfc3339_ns: eval_builtin_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string][]byte{"p.rego": []byte("package p\n" + tt.src + "\n")}
			interp, err := rego.Compile("p", files)
			if err != nil {
				t.Fatal(err)
			}
			p, err := e.Load(ctx, "p", must(CompileRego(ctx, files)), Options{Deadline: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if p.builtins.count == 0 {
				t.Fatal("the policy calls no host builtin")
			}
			in := &policies.Input{Tool: "t", Arguments: map[string]any{"s": tt.arg}}
			for range 3 { // a failed call throws its instance away; the next works the same
				want, werr := interp.Eval(ctx, in)
				got, gerr := p.Eval(ctx, in)
				if tt.err != "" {
					if werr == nil || gerr == nil || !errors.Is(gerr, ErrBuiltin) || gerr.Error() != tt.err {
						t.Fatalf("interpreter: %v\nwasm: %v, want %q", werr, gerr, tt.err)
					}
					continue
				}
				if werr != nil || gerr != nil || !equalResult(got, want) || len(want.Denies) == 0 {
					t.Fatalf("interpreter: %s %v\nwasm:        %s %v", must(json.Marshal(want)), werr, must(json.Marshal(got)), gerr)
				}
			}
		})
	}
}

// compileWith compiles src (package p) to a WASM module with the given
// capabilities, as `opa build -t wasm -e p` would.
func compileWith(t *testing.T, src string, caps *ast.Capabilities) []byte {
	t.Helper()
	m, err := ast.ParseModuleWithOpts("p.rego", src, ast.ParserOptions{RegoVersion: ast.RegoV1, Capabilities: caps})
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle.Bundle{Data: map[string]any{}, Modules: []bundle.ModuleFile{{URL: "p.rego", Path: "p.rego", Raw: []byte(src), Parsed: m}}}
	c := compile.New().WithTarget(compile.TargetWasm).WithEntrypoints("p").WithBundle(b).
		WithCapabilities(caps).WithRegoVersion(ast.RegoV1).WithOutput(&bytes.Buffer{})
	if err := c.Build(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c.Bundle().WasmModules[0].Raw
}

// TestLoadRefusesBuiltins: a module built elsewhere that calls a builtin
// toolgate refuses, or one OPA does not implement, is refused at Load with
// their names.
func TestLoadRefusesBuiltins(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	caps := ast.CapabilitiesForThisVersion()
	caps.Builtins = append(caps.Builtins, &ast.Builtin{Name: "acme.magic", Decl: types.NewFunction(types.Args(types.S), types.B)})
	mod := compileWith(t, `package p
deny contains "x" if http.send({"method": "GET", "url": input.u}).status_code == 200
deny contains "y" if acme.magic(input.s)
deny contains sprintf("%s", [input.s])
`, caps)
	_, err := e.Load(ctx, "p", mod, Options{})
	want := "OPA module calls builtins toolgate refuses: http.send; OPA module calls builtins toolgate does not implement: acme.magic"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want %q", err, want)
	}
}

// FuzzRegoValue: the host's serialization of values (appendRegoValue,
// what opa_value_parse reads) and its parser (parseRegoValue, for what
// opa_value_dump writes) agree with Rego's own parser: what one writes
// the other reads back unchanged, and what parseRegoValue accepts Rego
// reads as the same value.
func FuzzRegoValue(f *testing.F) {
	for _, s := range []string{`"a\u0001\"\\"`, `{1, "a", [null]}`, `set()`, `{"k": {2: 3.5e10}}`, `[true, false, -0.0]`,
		`{"a":1,"b":[1,2,{3,4}]}`, `"\ud83d\ude00 \u00e9"`, `[1E5, 1e-3, 0, -12]`, `{{1}: set()}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if v, err := parseRegoValue([]byte(src)); err == nil && utf8.ValidString(src) {
			term, err := ast.ParseTerm(src)
			if err != nil {
				t.Fatalf("parseRegoValue reads %q as %v, Rego refuses it: %v", src, v, err)
			}
			if ast.Compare(term.Value, v) != 0 {
				t.Fatalf("parseRegoValue reads %q as %v, Rego as %v", src, v, term)
			}
		}
		term, err := ast.ParseTerm(src)
		if err != nil || !ast.IsConstant(term.Value) {
			return
		}
		b, err := appendRegoValue(nil, term.Value)
		if err != nil {
			return
		}
		back, err := parseRegoValue(b)
		if err != nil {
			t.Fatalf("%s serialized as %s, which does not parse: %v", src, b, err)
		}
		if utf8.ValidString(src) && ast.Compare(back, term.Value) != 0 {
			t.Fatalf("%s serialized as %s, read back as %v", src, b, back)
		}
	})
}

// TestHostBuiltinDeadline: a host builtin that runs long (net.cidr_expand
// of a /8: 16 million addresses) is cancelled at the call's deadline, and
// the call fails as a timeout.
func TestHostBuiltinDeadline(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	files := map[string][]byte{"p.rego": []byte("package p\ndeny contains \"n\" if count(net.cidr_expand(input.arguments.s)) > 0\n")}
	p, err := e.Load(ctx, "p", must(CompileRego(ctx, files)), Options{Deadline: 50 * time.Millisecond, MemoryLimit: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = p.Eval(ctx, &policies.Input{Tool: "t", Arguments: map[string]any{"s": "10.0.0.0/8"}})
	if took := time.Since(start); !errors.Is(err, ErrTimeout) || took > 2*time.Second {
		t.Fatalf("after %s: %v, want a timeout", took, err)
	}
	res, err := p.Eval(ctx, &policies.Input{Tool: "t", Arguments: map[string]any{"s": "10.0.0.0/30"}})
	if err != nil || len(res.Denies) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
}

// TestBuiltinPanic: a Go panic inside a builtin (none of OPA's is known
// to panic, so a stand-in) becomes the call's ErrBuiltin.
func TestBuiltinPanic(t *testing.T) {
	b := &hostBuiltin{name: "boom", arity: 0, fn: func(topdown.BuiltinContext, []*ast.Term, func(*ast.Term) error) error {
		panic("boom") // what a buggy builtin does
	}}
	_, err := callBuiltin(b, topdown.BuiltinContext{}, nil)
	if !errors.Is(err, ErrBuiltin) || err.Error() != "builtin failed: boom: panic" {
		t.Fatalf("%v", err)
	}
}
