package policies

import (
	"context"
	"time"
)

// RegoHost reads and compiles Rego policies for Load. Package
// policies/rego provides it (rego.Host), so that this package, and proxy,
// which imports it for the decision contract, do not link OPA; cmd wires
// it in, as it wires the WasmHost.
type RegoHost interface {
	// ReadRego reads a policy's files from a .rego file or a folder of
	// them: file name to source, *_test.rego files included.
	ReadRego(path string) (map[string][]byte, error)
	// CompileRego compiles a policy (file name to source) for OPA's
	// interpreter.
	CompileRego(name string, files map[string][]byte) (RegoPolicy, error)
}

// RegoPolicy is one compiled Rego policy as Load uses it.
type RegoPolicy interface {
	Evaluator
	// Version is a content hash of the policy's files.
	Version() string
	// Engine names what evaluates the policy: EngineInterpreter or
	// EngineCompiled.
	Engine() string
	// Compiled returns the policy on the compiled engine, or the policy
	// itself when it stays in the interpreter (many rules).
	Compiled(ctx context.Context) (RegoPolicy, error)
	// RunTests runs the policy's unit tests (its test_ rules).
	RunTests(ctx context.Context) ([]TestResult, error)
}

// TestResult is the outcome of one Rego unit test (a test_ rule).
type TestResult struct {
	// Name is package and rule, as in "toolgate.bounds.test_retmax_over".
	Name string
	// Location is file:line of the rule.
	Location string
	// Pass is true when the rule evaluated to true.
	Pass bool
	// Err holds an evaluation error, if any.
	Err string
	// Duration is how long the test took.
	Duration time.Duration
}
