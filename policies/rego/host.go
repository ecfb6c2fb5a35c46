package rego

import (
	"context"

	"github.com/toolgate/toolgate/policies"
)

// Host reads and compiles Rego policies for policies.Config.Load, which
// declares what it needs as policies.RegoHost; cmd passes a Host in
// policies.LoadOptions. The zero value is ready to use.
type Host struct{}

var _ policies.RegoHost = Host{}

// ReadRego reads a policy's files; see Read.
func (Host) ReadRego(path string) (map[string][]byte, error) { return Read(path) }

// CompileRego compiles a policy for the interpreter; see Compile.
func (Host) CompileRego(name string, files map[string][]byte) (policies.RegoPolicy, error) {
	p, err := Compile(name, files)
	if err != nil {
		return nil, err
	}
	return hosted{p}, nil
}

// hosted is a Policy as policies.RegoPolicy: Compiled returns the
// interface. Every other method, EvalBefore among them, is the Policy's.
type hosted struct{ *Policy }

var _ policies.RegoPolicy = hosted{}

// Compiled is Policy.Compiled.
func (h hosted) Compiled(ctx context.Context) (policies.RegoPolicy, error) {
	c, err := h.Policy.Compiled(ctx)
	if err != nil {
		return nil, err
	}
	return hosted{c}, nil
}
