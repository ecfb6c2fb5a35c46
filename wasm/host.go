package wasm

import (
	"context"

	"github.com/toolgate/toolgate/policies"
)

// Host runs the WASM policies of a configuration: it is what
// policies.Config.Load needs to load the wasm section and Rego policies on
// the wasm engine.
type Host struct {
	// Engine compiles and runs the modules. Required.
	Engine *Engine
	// Log receives the modules' log lines; nil discards them.
	Log func(policy, msg string)
}

var _ policies.WasmHost = Host{}

// LoadWasm loads a module file (toolgate's ABI, OPA's, or an OPA bundle).
func (h Host) LoadWasm(ctx context.Context, name, path string, o policies.WasmOptions) (policies.Evaluator, error) {
	return h.Engine.LoadFile(ctx, name, path, h.options(o))
}

// CompileRego compiles a Rego policy with OPA's WASM compiler and loads
// the module.
func (h Host) CompileRego(ctx context.Context, name string, files map[string][]byte, o policies.WasmOptions) (policies.Evaluator, error) {
	module, err := CompileRego(ctx, files)
	if err != nil {
		return nil, err
	}
	return h.Engine.Load(ctx, name, module, h.options(o))
}

func (h Host) options(o policies.WasmOptions) Options {
	return Options{MemoryLimit: o.MemoryLimit, Deadline: o.Deadline, PoolSize: o.PoolSize, Log: h.Log}
}
