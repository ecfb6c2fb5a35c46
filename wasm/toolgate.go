package wasm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/toolgate/toolgate/policies"
)

// ABIVersion is the version of toolgate's guest ABI a module's
// toolgate_abi_version export must return.
const ABIVersion = 1

// hostModule is the import module of toolgate's host functions.
const hostModule = "toolgate"

// host instantiates the host modules a policy's modules import: toolgate's
// log for toolgate-ABI modules, a WASI with nothing reachable for Go
// (GOOS=wasip1) modules, OPA's env functions for OPA modules.
func (p *Policy) host(ctx context.Context, abi abiKind, wasi bool) error {
	rt := p.rt.rt
	logs := p.logs
	switch abi {
	case abiToolgate:
		_, err := rt.NewHostModuleBuilder(hostModule).
			NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
				ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
				if logs.log == nil {
					return
				}
				if n > maxLogLine {
					n = maxLogLine
				}
				if b, ok := m.Memory().Read(ptr, n); ok {
					logs.line(string(b))
				}
			}), []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, nil).
			WithParameterNames("ptr", "len").
			Export("log").
			Instantiate(ctx)
		if err != nil {
			return err
		}
		if wasi {
			// Only the WASI functions; what they reach is set per instance
			// in newToolgate: nothing.
			if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
				return err
			}
		}
	case abiOPA:
		return p.opaHost(ctx)
	}
	return nil
}

// toolgateInstance is an instance of a module speaking toolgate's ABI.
type toolgateInstance struct {
	*base
	alloc    api.Function
	validate api.Function
	stack    [2]uint64
}

// newToolgate instantiates a toolgate-ABI module with nothing reachable: no
// file system, environment, arguments or network; a WASI module's clocks
// are wazero's fake ones, its random source deterministic, its stdout and
// stderr go to Options.Log.
func (p *Policy) newToolgate(ctx context.Context) (instance, error) {
	var out io.Writer = io.Discard
	if p.logs.log != nil {
		out = p.logs
	}
	b, err := p.newBase(ctx, wazero.NewModuleConfig().WithStdout(out).WithStderr(out))
	if err != nil {
		return nil, err
	}
	mod := b.mod
	in := &toolgateInstance{
		base:     b,
		alloc:    mod.ExportedFunction("toolgate_alloc"),
		validate: mod.ExportedFunction("toolgate_validate"),
	}
	ver := mod.ExportedFunction("toolgate_abi_version")
	if in.mem == nil || in.alloc == nil || in.validate == nil || ver == nil {
		b.close(ctx)
		return nil, fmt.Errorf("module lacks toolgate's exports (memory, toolgate_alloc, toolgate_validate, toolgate_abi_version)")
	}
	v, err := ver.Call(ctx)
	if err != nil {
		b.close(ctx)
		return nil, fmt.Errorf("toolgate_abi_version: %w", err)
	}
	if len(v) != 1 || uint32(v[0]) != ABIVersion {
		b.close(ctx)
		return nil, fmt.Errorf("module speaks toolgate ABI version %d; this toolgate speaks %d", uint32(v[0]), ABIVersion)
	}
	return in, nil
}

func (in *toolgateInstance) abi() string { return fmt.Sprintf("toolgate/%d", ABIVersion) }

func (in *toolgateInstance) eval(ctx context.Context, input []byte) ([]byte, error) {
	n := uint32(len(input))
	in.stack[0] = uint64(n)
	if err := in.alloc.CallWithStack(ctx, in.stack[:]); err != nil {
		return nil, err
	}
	ptr := uint32(in.stack[0])
	if ptr == 0 && n > 0 {
		return nil, fmt.Errorf("%w: toolgate_alloc(%d) returned 0", ErrMemoryLimit, n)
	}
	if !in.mem.Write(ptr, input) {
		return nil, fmt.Errorf("%w: toolgate_alloc(%d) returned %d, past the end of memory", ErrBadDecision, n, ptr)
	}
	in.stack[0], in.stack[1] = uint64(ptr), uint64(n)
	if err := in.validate.CallWithStack(ctx, in.stack[:]); err != nil {
		return nil, err
	}
	optr, olen := uint32(in.stack[0]>>32), uint32(in.stack[0])
	if olen > policies.MaxDecisionBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than 1 MiB", ErrBadDecision, olen)
	}
	out, ok := in.mem.Read(optr, olen)
	if !ok {
		return nil, fmt.Errorf("%w: result at %d+%d is past the end of memory (%d bytes)", ErrBadDecision, optr, olen, in.mem.Size())
	}
	return out, nil
}

// moduleError reads a module's own error report, {"error": "message"}.
func moduleError(out []byte) (string, bool) {
	var e struct {
		Error *string `json:"error"`
	}
	if json.Unmarshal(out, &e) != nil || e.Error == nil {
		return "", false
	}
	return boundLog(*e.Error), true
}
