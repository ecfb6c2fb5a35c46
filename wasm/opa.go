package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/rego"
)

// opaHost instantiates the env module OPA-compiled modules import:
// opa_abort and opa_println, and opa_builtin0..4 for builtins the module
// leaves to the host, run by OPA's Go implementations through p.builtins
// (filled by the first instance). env.memory is not imported: Load
// rewrites the module to define its memory, so each instance owns one.
func (p *Policy) opaHost(ctx context.Context) error {
	logs := p.logs
	p.builtins = &builtinTable{}
	table := p.builtins
	b := p.rt.rt.NewHostModuleBuilder("env")
	i32 := api.ValueTypeI32
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
		msg := cString(m.Memory(), api.DecodeU32(stack[0]))
		panic(fmt.Errorf("opa_abort: %s", boundLog(msg)))
	}), []api.ValueType{i32}, nil).Export("opa_abort")
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
		logs.line(cString(m.Memory(), api.DecodeU32(stack[0])))
	}), []api.ValueType{i32}, nil).Export("opa_println")
	for n := 0; n <= 4; n++ {
		params := make([]api.ValueType, n+2) // builtin id, context, args
		for i := range params {
			params[i] = i32
		}
		b.NewFunctionBuilder().WithGoModuleFunction(builtinHost(table, n), params, []api.ValueType{i32}).Export(fmt.Sprintf("opa_builtin%d", n))
	}
	_, err := b.Instantiate(ctx)
	return err
}

// cString reads a NUL-terminated string, at most 64 KiB.
func cString(m api.Memory, ptr uint32) string {
	if m == nil || ptr >= m.Size() {
		return ""
	}
	b, _ := m.Read(ptr, min(m.Size()-ptr, 64<<10))
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// opaInstance is an instance of an OPA-compiled module, evaluated through
// opa_eval: input written at the heap base, the heap reset on every call,
// data {} parsed once.
type opaInstance struct {
	*base
	call     *opaCall // nil when the module calls no host builtins
	evalFn   api.Function
	entry    uint32
	dataAddr uint32
	heapBase uint32
	version  string
	stack    [7]uint64
}

func (p *Policy) newOPA(ctx context.Context) (instance, error) {
	b, err := p.newBase(ctx, wazero.NewModuleConfig())
	if err != nil {
		return nil, err
	}
	in, err := setupOPA(ctx, b, p.builtins)
	if err != nil {
		b.close(ctx)
		return nil, err
	}
	return in, nil
}

func setupOPA(ctx context.Context, b *base, table *builtinTable) (*opaInstance, error) {
	mod := b.mod
	in := &opaInstance{base: b, evalFn: mod.ExportedFunction("opa_eval")}
	if in.mem == nil {
		return nil, errors.New("OPA module has no memory")
	}
	major, minor := globalU32(mod, "opa_wasm_abi_version"), globalU32(mod, "opa_wasm_abi_minor_version")
	if major != 1 || minor < 2 {
		return nil, fmt.Errorf("OPA module speaks ABI %d.%d; toolgate runs 1.2 and later (opa_eval)", major, minor)
	}
	in.version = fmt.Sprintf("opa/%d.%d", major, minor)
	call := func(name string, args ...uint64) (uint32, error) {
		f := mod.ExportedFunction(name)
		if f == nil {
			return 0, fmt.Errorf("OPA module does not export %s", name)
		}
		r, err := f.Call(ctx, args...)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		if len(r) != 1 {
			return 0, fmt.Errorf("%s returned %d values", name, len(r))
		}
		return uint32(r[0]), nil
	}
	dump := func(fn string) (map[string]json.RawMessage, error) {
		addr, err := call(fn)
		if err != nil {
			return nil, err
		}
		s, err := call("opa_json_dump", uint64(addr))
		if err != nil {
			return nil, err
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(cString(in.mem, s)), &m); err != nil {
			return nil, fmt.Errorf("%s: %w", fn, err)
		}
		return m, nil
	}
	if !table.ready { // the first instance, made by Load
		builtins, err := dump("builtins")
		if err != nil {
			return nil, err
		}
		if err := table.resolve(builtins); err != nil {
			return nil, err
		}
	}
	if table.count > 0 {
		c, err := newOPACall(mod, in.mem)
		if err != nil {
			return nil, err
		}
		in.call = c
	}
	eps, err := dump("entrypoints")
	if err != nil {
		return nil, err
	}
	var epID json.RawMessage
	if id, ok := eps[rego.DecisionEntrypoint]; ok {
		epID = id
	} else if len(eps) == 1 {
		for _, id := range eps {
			epID = id
		}
	} else {
		names := make([]string, 0, len(eps))
		for n := range eps {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("OPA module has %d entrypoints (%s); build it with one (the policy package, or %s as toolgate policy build does)", len(eps), strings.Join(names, ", "), rego.DecisionEntrypoint)
	}
	var id int32
	if err := json.Unmarshal(epID, &id); err != nil {
		return nil, fmt.Errorf("entrypoint id: %w", err)
	}
	in.entry = uint32(id)
	// data is {}: parsed once, kept below the heap base.
	addr, err := call("opa_malloc", 2)
	if err != nil {
		return nil, err
	}
	if !in.mem.Write(addr, []byte("{}")) {
		return nil, errors.New("opa_malloc returned an address past the end of memory")
	}
	if in.dataAddr, err = call("opa_json_parse", uint64(addr), 2); err != nil {
		return nil, err
	}
	if in.heapBase, err = call("opa_heap_ptr_get"); err != nil {
		return nil, err
	}
	if in.evalFn == nil {
		return nil, errors.New("OPA module does not export opa_eval")
	}
	return in, nil
}

func globalU32(mod api.Module, name string) uint32 {
	g := mod.ExportedGlobal(name)
	if g == nil {
		return 0
	}
	return uint32(g.Get())
}

func (in *opaInstance) abi() string { return in.version }

// resultPrefix and resultSuffix frame opa_eval's JSON result set of one
// result: [{"result": <document>}].
var (
	resultPrefix = []byte(`[{"result":`)
	resultSuffix = []byte(`}]`)
)

func (in *opaInstance) eval(ctx context.Context, input []byte) ([]byte, error) {
	n := uint32(len(input))
	end := uint64(in.heapBase) + uint64(n)
	if size := uint64(in.mem.Size()); end > size {
		if _, ok := in.mem.Grow(uint32((end - size + pageSize - 1) / pageSize)); !ok {
			return nil, fmt.Errorf("%w: the input document does not fit", ErrMemoryLimit)
		}
	}
	in.mem.Write(in.heapBase, input)
	if in.call != nil {
		ctx = context.WithValue(ctx, opaCallKey{}, in.call)
		defer in.call.end()
	}
	s := in.stack[:]
	s[0], s[1], s[2], s[3], s[4], s[5], s[6] = 0, uint64(in.entry), uint64(in.dataAddr), uint64(in.heapBase), uint64(n), uint64(in.heapBase+n), 0 // format 0: JSON
	if err := in.evalFn.CallWithStack(ctx, s); err != nil {
		return nil, err
	}
	addr := uint32(s[0])
	size := in.mem.Size()
	if addr >= size {
		return nil, fmt.Errorf("%w: result address %d past the end of memory", ErrBadDecision, addr)
	}
	buf, _ := in.mem.Read(addr, min(size-addr, policies.MaxDecisionBytes+64))
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		buf = buf[:i]
	} else {
		return nil, fmt.Errorf("%w: result larger than 1 MiB", ErrBadDecision)
	}
	if bytes.Equal(buf, []byte("[]")) {
		return []byte("{}"), nil // undefined: no opinion, as for Rego
	}
	if !bytes.HasPrefix(buf, resultPrefix) || !bytes.HasSuffix(buf, resultSuffix) {
		return nil, fmt.Errorf("%w: unexpected result set %.40q", ErrBadDecision, buf)
	}
	return buf[len(resultPrefix) : len(buf)-len(resultSuffix)], nil
}
