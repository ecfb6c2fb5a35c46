package wasm

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/builtins"
	"github.com/tetratelabs/wazero/api"
)

// Host builtins: the builtins OPA's WASM runtime does not implement
// (sprintf, time.*, units.*, net.cidr_*, crypto.*, ...) are imported by an
// OPA-compiled module as env.opa_builtin0..4(id, ctx, args...) and run here
// by OPA's own Go implementations, as the interpreter runs them.

const (
	// maxBuiltinValue bounds one argument of a host builtin, as the module
	// serializes it, and one result, as the host serializes it.
	maxBuiltinValue = 4 << 20
	// maxBuiltinID bounds the ids of a module's builtin table (OPA numbers
	// them from 0 up, one per builtin the policy calls).
	maxBuiltinID = 1 << 12
)

// builtinError is a host builtin that failed on its arguments. Its
// message names the builtin and OPA's error code, not OPA's message, which
// may quote argument values.
type builtinError struct {
	name, code string
}

func (e *builtinError) Error() string {
	return ErrBuiltin.Error() + ": " + e.name + ": " + e.code
}

func (e *builtinError) Is(target error) bool { return target == ErrBuiltin }

// hostBuiltin is one entry of a module's builtin table.
type hostBuiltin struct {
	name  string
	arity int // -1 when variadic
	fn    topdown.BuiltinFunc
}

// builtinTable maps the ids of a module's host builtins to their Go
// implementations. Load fills it from the first instance; later instances
// of the same compiled module share it, read only.
type builtinTable struct {
	ready bool
	byID  []*hostBuiltin // index: id
	count int
}

// sharedCapabilities is capabilities(), made once for the builtin
// contexts (which only read it).
var sharedCapabilities = sync.OnceValue(capabilities)

// allowedBuiltins are the builtins a policy may call: those of
// capabilities(), which the interpreter allows too.
var allowedBuiltins = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for _, b := range sharedCapabilities().Builtins {
		m[b.Name] = true
	}
	return m
})

// resolve fills the table from the module's builtins object (name to id),
// refusing builtins toolgate does not allow or OPA does not implement in Go.
func (t *builtinTable) resolve(names map[string]json.RawMessage) error {
	var denied, unknown []string
	for name, raw := range names {
		var id int32
		if err := json.Unmarshal(raw, &id); err != nil || id < 0 || id >= maxBuiltinID {
			return fmt.Errorf("OPA module's builtin table gives %s the id %.20s", name, raw)
		}
		fn, shown := topdown.GetBuiltin(name), name
		if name == regexMatchBuiltin {
			fn, shown = topdown.GetBuiltin(ast.RegexMatch.Name), ast.RegexMatch.Name
		}
		switch {
		case fn == nil:
			unknown = append(unknown, name)
			continue
		case !allowedBuiltins()[name]:
			denied = append(denied, name)
			continue
		}
		for int(id) >= len(t.byID) {
			t.byID = append(t.byID, nil)
		}
		if t.byID[id] != nil {
			return fmt.Errorf("OPA module's builtin table gives %s and %s the same id", t.byID[id].name, name)
		}
		arity := -1
		if decl, ok := ast.BuiltinMap[shown]; ok && decl.Decl != nil && decl.Decl.FuncArgs().Variadic == nil {
			arity = len(decl.Decl.FuncArgs().Args)
		}
		t.byID[id] = &hostBuiltin{name: shown, arity: arity, fn: fn}
		t.count++
	}
	var msgs []string
	if len(denied) > 0 {
		sort.Strings(denied)
		msgs = append(msgs, "OPA module calls builtins toolgate refuses: "+strings.Join(denied, ", "))
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		msgs = append(msgs, "OPA module calls builtins toolgate does not implement: "+strings.Join(unknown, ", "))
	}
	if len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "; "))
	}
	t.ready = true
	return nil
}

func (t *builtinTable) lookup(id int32) *hostBuiltin {
	if id < 0 || int(id) >= len(t.byID) {
		return nil
	}
	return t.byID[id]
}

// builtinHost returns env.opa_builtinN: it finds the instance's opaCall in
// ctx (opa_eval's context) and runs the builtin there. A failure panics
// with its error, which wazero turns into opa_eval's error.
func builtinHost(t *builtinTable, n int) api.GoModuleFunc {
	return func(ctx context.Context, m api.Module, stack []uint64) {
		c, _ := ctx.Value(opaCallKey{}).(*opaCall)
		if c == nil {
			panic(errors.New("the module called a host builtin outside an evaluation"))
		}
		addr, err := c.invoke(ctx, t, int32(stack[0]), stack[2:2+n])
		if err != nil {
			panic(err)
		}
		stack[0] = uint64(addr)
	}
}

type opaCallKey struct{}

// opaCall is an instance's side of host builtin calls: the module's
// functions to move values in and out, and the builtin context of the
// evaluation in progress (made at its first builtin call).
type opaCall struct {
	mem                 api.Memory
	dump, malloc, parse api.Function
	stack               [2]uint64
	args                [4]*ast.Term
	buf                 []byte
	bctx                topdown.BuiltinContext
	active              bool
	stopCancel          func() bool
}

func newOPACall(mod api.Module, mem api.Memory) (*opaCall, error) {
	c := &opaCall{mem: mem}
	for _, f := range []struct {
		name string
		fn   *api.Function
	}{{"opa_value_dump", &c.dump}, {"opa_malloc", &c.malloc}, {"opa_value_parse", &c.parse}} {
		if *f.fn = mod.ExportedFunction(f.name); *f.fn == nil {
			return nil, fmt.Errorf("OPA module calls host builtins but does not export %s", f.name)
		}
	}
	return c, nil
}

// begin makes the builtin context of one evaluation, as the interpreter
// makes one per query: one clock reading (time.now_ns is the same
// throughout), a fresh cache, a random source, and cancellation by ctx.
func (c *opaCall) begin(ctx context.Context) {
	cancel := topdown.NewCancel()
	c.bctx = topdown.BuiltinContext{
		Context:      ctx,
		Metrics:      noMetrics,
		Seed:         rand.Reader,
		Time:         ast.NumberTerm(json.Number(strconv.FormatInt(time.Now().UnixNano(), 10))),
		Cancel:       cancel,
		Cache:        builtins.Cache{},
		Capabilities: sharedCapabilities(),
	}
	c.stopCancel = context.AfterFunc(ctx, cancel.Cancel)
	c.active = true
}

// end forgets the evaluation's builtin context.
func (c *opaCall) end() {
	if !c.active {
		return
	}
	c.stopCancel()
	c.bctx, c.stopCancel, c.active = topdown.BuiltinContext{}, nil, false
	c.args = [4]*ast.Term{}
	if cap(c.buf) > 64<<10 {
		c.buf = nil
	}
}

var noMetrics = metrics.NoOp()

// invoke runs builtin id on the values at argAddrs and returns the address
// of its result, 0 when it is undefined.
func (c *opaCall) invoke(ctx context.Context, t *builtinTable, id int32, argAddrs []uint64) (uint32, error) {
	b := t.lookup(id)
	if b == nil {
		return 0, fmt.Errorf("the module called host builtin #%d, which is not in its builtin table", id)
	}
	if b.arity >= 0 && b.arity != len(argAddrs) {
		return 0, fmt.Errorf("the module called host builtin %s with %d arguments; it takes %d", b.name, len(argAddrs), b.arity)
	}
	args := c.args[:len(argAddrs)]
	for i, a := range argAddrs {
		v, err := c.load(ctx, uint32(a))
		if err != nil {
			return 0, fmt.Errorf("host builtin %s: argument %d: %w", b.name, i+1, err)
		}
		args[i] = v
	}
	if !c.active {
		c.begin(ctx)
	}
	out, err := callBuiltin(b, c.bctx, args)
	if err != nil {
		return 0, err
	}
	if out == nil {
		return 0, nil // undefined
	}
	addr, err := c.store(ctx, out.Value)
	if err != nil {
		return 0, fmt.Errorf("host builtin %s: result: %w", b.name, err)
	}
	return addr, nil
}

// callBuiltin calls a builtin with OPA's strict builtin errors, as the
// interpreter does: an error fails the call (it is not undefined). A Go
// panic inside the builtin is an error too.
func callBuiltin(b *hostBuiltin, bctx topdown.BuiltinContext, args []*ast.Term) (out *ast.Term, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, &builtinError{name: b.name, code: "panic"}
		}
	}()
	err = b.fn(bctx, args, func(t *ast.Term) error {
		out = t
		return nil
	})
	if err != nil {
		code := topdown.BuiltinErr
		var te *topdown.Error
		if errors.As(err, &te) {
			code = te.Code
		}
		return nil, &builtinError{name: b.name, code: code}
	}
	return out, nil
}

// load reads the value at addr: the module serializes it (opa_value_dump,
// Rego syntax, so sets stay sets) and the host parses it.
func (c *opaCall) load(ctx context.Context, addr uint32) (*ast.Term, error) {
	c.stack[0] = uint64(addr)
	if err := c.dump.CallWithStack(ctx, c.stack[:]); err != nil {
		return nil, fmt.Errorf("opa_value_dump: %w", err)
	}
	text, err := readCString(c.mem, uint32(c.stack[0]), maxBuiltinValue)
	if err != nil {
		return nil, err
	}
	v, err := parseRegoValue(text)
	if err != nil {
		return nil, err
	}
	return ast.NewTerm(v), nil
}

// store writes v into the module's heap and returns its address.
func (c *opaCall) store(ctx context.Context, v ast.Value) (uint32, error) {
	buf, err := appendRegoValue(c.buf[:0], v)
	if err != nil {
		return 0, err
	}
	c.buf = buf
	if len(buf) > maxBuiltinValue {
		return 0, errResultTooLarge
	}
	n := uint64(len(buf))
	c.stack[0] = n
	if err := c.malloc.CallWithStack(ctx, c.stack[:]); err != nil {
		return 0, fmt.Errorf("opa_malloc: %w", err)
	}
	ptr := uint32(c.stack[0])
	if !c.mem.Write(ptr, buf) {
		return 0, errors.New("opa_malloc returned an address past the end of memory")
	}
	c.stack[0], c.stack[1] = uint64(ptr), n
	if err := c.parse.CallWithStack(ctx, c.stack[:]); err != nil {
		return 0, fmt.Errorf("opa_value_parse: %w", err)
	}
	addr := uint32(c.stack[0])
	if addr == 0 {
		return 0, errors.New("opa_value_parse refused the result")
	}
	return addr, nil
}

// readCString reads the NUL-terminated bytes at ptr, at most limit of them.
func readCString(m api.Memory, ptr uint32, limit uint32) ([]byte, error) {
	size := m.Size()
	if ptr >= size {
		return nil, fmt.Errorf("address %d past the end of memory", ptr)
	}
	b, _ := m.Read(ptr, min(size-ptr, limit+1))
	for i, c := range b {
		if c == 0 {
			return b[:i], nil
		}
	}
	if uint32(len(b)) > limit {
		return nil, fmt.Errorf("value larger than %s", mib(limit))
	}
	return nil, errors.New("value not terminated")
}

var errResultTooLarge = fmt.Errorf("larger than %s", mib(maxBuiltinValue))

// appendRegoValue serializes v as opa_value_parse reads it: JSON, with
// sets as {a, b} or set(), object keys of any type, and strings escaped as
// JSON (Go's %q escapes such as \x01 are not JSON).
func appendRegoValue(b []byte, v ast.Value) ([]byte, error) {
	if len(b) > maxBuiltinValue {
		return nil, errResultTooLarge
	}
	var err error
	switch v := v.(type) {
	case ast.Null:
		return append(b, "null"...), nil
	case ast.Boolean:
		return strconv.AppendBool(b, bool(v)), nil
	case ast.Number:
		if isJSONNumber(string(v)) {
			return append(b, v...), nil
		}
		// Rego's own spellings (.5, 1.) and what else a builtin may make.
		f, ok := v.Float64()
		if !ok {
			return nil, fmt.Errorf("a builtin returned the number %.20q, which is not JSON", string(v))
		}
		return strconv.AppendFloat(b, f, 'g', -1, 64), nil
	case ast.String:
		return appendJSONString(b, string(v)), nil
	case *ast.Array:
		b = append(b, '[')
		for i := range v.Len() {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendRegoValue(b, v.Elem(i).Value); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case ast.Object:
		b = append(b, '{')
		i := 0
		err = v.Iter(func(k, x *ast.Term) error {
			if i > 0 {
				b = append(b, ',')
			}
			i++
			var err error
			if b, err = appendRegoValue(b, k.Value); err != nil {
				return err
			}
			b = append(b, ':')
			b, err = appendRegoValue(b, x.Value)
			return err
		})
		if err != nil {
			return nil, err
		}
		return append(b, '}'), nil
	case ast.Set:
		if v.Len() == 0 {
			return append(b, "set()"...), nil
		}
		b = append(b, '{')
		i := 0
		err = v.Iter(func(x *ast.Term) error {
			if i > 0 {
				b = append(b, ',')
			}
			i++
			var err error
			b, err = appendRegoValue(b, x.Value)
			return err
		})
		if err != nil {
			return nil, err
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("a builtin returned %T, which is not a value", v)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string; invalid UTF-8 becomes
// U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\ufffd"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
