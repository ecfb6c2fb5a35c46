package rego

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/internal/irvm"
)

// A policy whose decision is only deny rules and inject rules of the
// shapes platform teams write most (an argument compared with a constant,
// looked up in a constant set, matched against a constant pattern, tested
// for a prefix, suffix or substring, counted; a header set from the
// call's trace id) gets a shapes program:
// the compiled engine's first pass over a call, in plain Go over the
// call's arguments as the decoder left them, without the plan, OPA's
// terms or the decision's sets and objects.
//
// The pass answers only the common case: it proves that no deny rule's
// body holds, and reads what the inject rules set. When a deny rule's
// body holds, or a value is of a type whose outcome the pass does not
// decide for itself (a builtin's type error, which strict builtin errors
// make the evaluation's error; an operand that is an array or an object;
// a header value that is not a string), or the call's deadline has passed,
// it answers nothing and the plan runs as before. So a refusal, its
// messages and every error still come from the plan, and the pass's
// answers are the plan's: each expression is evaluated in the body's
// order with OPA's own comparisons (ast.Value.Compare, ast.Term.Equal,
// ast.Set.Contains) on the values the plan would convert, startswith,
// endswith and contains as Go's strings package answers them for two
// strings (the builtins' own code), regex.match
// with Go's regexp compiled as the builtin compiles it (and the plan's
// prefilter: a string that lacks a literal every match contains does not
// match), count as the builtin counts. TestShapesAgreeWithThePlan and FuzzShapes hold the pass
// to the plan and to OPA's interpreter; TestAdversarialRuleShapes (proxy/adversarial)
// judges it by what a real upstream received.

// shapeProgram is a policy's shapes program.
type shapeProgram struct {
	deny   []shapeBody
	inject []shapeInject
}

// shapeInject is inject[key] := value if body.
type shapeInject struct {
	key   string
	body  shapeBody
	value shapeOperand
}

// shapeBody is a rule body: expressions evaluated in order into slots.
type shapeBody struct {
	exprs []shapeExpr
	slots int
}

// Expression kinds.
const (
	shapeBind    = iota // slot = input path
	shapeTest           // a builtin of two scalar operands (shapeTests)
	shapeMember         // internal.member_2(a, constant collection)
	shapeRegex          // regex.match(constant pattern, a)
	shapeCount          // count(a, slot)
	shapeConst          // v = a constant of the package: holds
	shapeUnknown        // an expression the pass does not decide
)

type shapeExpr struct {
	kind    int
	negated bool
	out     int      // the slot bound (shapeBind, shapeCount)
	path    []string // shapeBind: input.<path>
	test    shapeTestFunc
	a, b    shapeOperand
	coll    ast.Value           // shapeMember: the collection
	strs    map[string]struct{} // shapeMember: coll's members when all are strings
	re      *irvm.Regex         // shapeRegex
}

// shapeTestFunc is a shapeTest's builtin on its operands' values; ok is
// false where the builtin would fail (its type error).
type shapeTestFunc func(a, b ast.Value) (holds, ok bool)

// shapeTests are the builtins of two scalar operands the pass runs, each
// as OPA's own implementation answers: comparisons with Value.Compare
// and Term.Equal, the string tests with Go's strings package on two
// strings (a type error otherwise).
var shapeTests = map[string]shapeTestFunc{
	"gt":         func(a, b ast.Value) (bool, bool) { return a.Compare(b) > 0, true },
	"gte":        func(a, b ast.Value) (bool, bool) { return a.Compare(b) >= 0, true },
	"lt":         func(a, b ast.Value) (bool, bool) { return a.Compare(b) < 0, true },
	"lte":        func(a, b ast.Value) (bool, bool) { return a.Compare(b) <= 0, true },
	"equal":      func(a, b ast.Value) (bool, bool) { return ast.NewTerm(a).Equal(ast.NewTerm(b)), true },
	"neq":        func(a, b ast.Value) (bool, bool) { return !ast.NewTerm(a).Equal(ast.NewTerm(b)), true },
	"startswith": stringTest(strings.HasPrefix),
	"endswith":   stringTest(strings.HasSuffix),
	"contains":   stringTest(strings.Contains),
}

func stringTest(f func(s, t string) bool) shapeTestFunc {
	return func(a, b ast.Value) (bool, bool) {
		sa, okA := a.(ast.String)
		sb, okB := b.(ast.String)
		if !okA || !okB {
			return false, false
		}
		return f(string(sa), string(sb)), true
	}
}

// shapeOperand is a slot (slot >= 0) or a constant.
type shapeOperand struct {
	slot  int
	value ast.Value
}

// maxShapeSlots bounds a body's slots (a fixed array per evaluation).
const maxShapeSlots = 16

// shapeVal is a slot's value: raw, as the decoder left it (an input
// value), or an ast value (a constant, a count).
type shapeVal struct {
	raw   any
	value ast.Value
}

// str is the value as a string, false when it is not one.
func (v shapeVal) str() (string, bool) {
	if s, ok := v.raw.(string); ok {
		return s, true
	}
	s, ok := v.value.(ast.String)
	return string(s), ok
}

// newShapeProgram returns the shapes program of a package's compiled
// modules; nil when a decision rule is of a shape the pass cannot take
// (allow, approval and the answer rules, a default or an else on deny or
// inject, two inject rules for one header), or when no rule's body starts
// with an expression the pass decides.
//
// A body's expressions are taken up to the first the pass does not
// decide (a call of the package's own functions, an iteration, a with, a
// builtin not listed here); reaching that one at run time sends the call
// to the plan. So deny rules that first test input.tool, then build their
// messages with sprintf, are decided for every other tool.
func newShapeProgram(pkg string, modules map[string]*ast.Module) *shapeProgram {
	consts := map[string]ast.Value{}
	defs := map[string]int{}
	var rules []*ast.Rule
	for _, m := range modules {
		for _, r := range m.Rules {
			ref := r.Head.Ref()
			name, ok := ref[0].Value.(ast.Var)
			if !ok {
				return nil
			}
			defs[string(name)]++
			switch string(name) {
			case "deny", "inject":
				if r.Default || r.Else != nil || len(r.Head.Args) != 0 {
					return nil
				}
				rules = append(rules, r)
			case "allow", "approval", "withhold", "redact":
				return nil // decided by the plan
			default:
				// A helper: a constant (name := <ground value>) the pass
				// reads; any other is the plan's to evaluate.
				if !r.Default && r.Else == nil && len(r.Head.Args) == 0 && len(ref) == 1 &&
					r.Head.RuleKind() == ast.SingleValue && r.Head.Value != nil &&
					r.Head.Value.IsGround() && trueBody(r.Body) {
					consts[string(name)] = r.Head.Value.Value
				}
			}
		}
	}
	for name := range consts {
		if defs[name] != 1 {
			delete(consts, name)
		}
	}
	prefix := ast.MustParseRef("data." + pkg)
	sp := &shapeProgram{}
	keys := map[string]bool{}
	decided := false
	for _, r := range rules {
		ref := r.Head.Ref()
		c := shapeCompiler{pkg: prefix, consts: consts}
		if string(ref[0].Value.(ast.Var)) == "deny" {
			if len(ref) != 1 || r.Head.RuleKind() != ast.MultiValue {
				return nil
			}
			b := c.body(r.Body)
			decided = decided || b.useful()
			sp.deny = append(sp.deny, b)
			continue
		}
		// inject["Name"] := value
		if len(ref) != 2 || r.Head.RuleKind() != ast.SingleValue || r.Head.Value == nil {
			return nil
		}
		key, ok := ref[1].Value.(ast.String)
		if !ok || keys[string(key)] {
			return nil
		}
		keys[string(key)] = true
		b := c.body(r.Body)
		v, ok := c.operand(r.Head.Value)
		if !ok {
			// A value the pass does not read: the plan's, if the body holds.
			b.exprs = append(b.exprs, shapeExpr{kind: shapeUnknown})
		}
		decided = decided || b.useful()
		sp.inject = append(sp.inject, shapeInject{key: string(key), body: b, value: v})
	}
	if !decided {
		return nil
	}
	return sp
}

// trueBody reports whether a rule's body is the single expression true.
func trueBody(b ast.Body) bool {
	if len(b) != 1 || b[0].Negated || len(b[0].With) != 0 {
		return false
	}
	t, ok := b[0].Terms.(*ast.Term)
	return ok && ast.Boolean(true).Equal(t.Value)
}

// shapeCompiler turns one rule's compiled body into a shapeBody.
type shapeCompiler struct {
	pkg    ast.Ref
	consts map[string]ast.Value
	vars   map[ast.Var]int       // variables bound to input values
	fixed  map[ast.Var]ast.Value // variables bound to the package's constants
	next   int
}

// body takes a body's expressions up to the first the pass does not
// decide, which becomes a shapeUnknown.
func (c *shapeCompiler) body(body ast.Body) shapeBody {
	c.vars, c.fixed = map[ast.Var]int{}, map[ast.Var]ast.Value{}
	var b shapeBody
	for _, e := range body {
		xs, ok := c.exprs(e)
		if !ok || c.next > maxShapeSlots {
			b.exprs = append(b.exprs, shapeExpr{kind: shapeUnknown})
			break
		}
		b.exprs = append(b.exprs, xs...)
	}
	b.slots = min(c.next, maxShapeSlots)
	return b
}

// bind gives v a new slot; a variable bound twice is not taken.
func (c *shapeCompiler) bind(v ast.Var) (int, bool) {
	if c.bound(v) {
		return 0, false
	}
	c.vars[v] = c.next
	c.next++
	return c.next - 1, true
}

func (c *shapeCompiler) bound(v ast.Var) bool {
	_, input := c.vars[v]
	_, fixed := c.fixed[v]
	return input || fixed
}

// operand is a variable bound to an input value, or a scalar: ground, or
// a variable bound to one of the package's constants.
func (c *shapeCompiler) operand(t *ast.Term) (shapeOperand, bool) {
	if v, ok := t.Value.(ast.Var); ok {
		if val, fixed := c.fixed[v]; fixed {
			return shapeOperand{slot: -1, value: val}, scalar(val)
		}
		slot, bound := c.vars[v]
		return shapeOperand{slot: slot}, bound
	}
	if !t.IsGround() || !scalar(t.Value) {
		return shapeOperand{}, false
	}
	return shapeOperand{slot: -1, value: t.Value}, true
}

func scalar(v ast.Value) bool {
	switch v.(type) {
	case ast.String, ast.Number, ast.Boolean, ast.Null:
		return true
	}
	return false
}

// exprs is one expression of a body, as the pass's expressions.
func (c *shapeCompiler) exprs(e *ast.Expr) ([]shapeExpr, bool) {
	if len(e.With) != 0 {
		return nil, false
	}
	if t, ok := e.Terms.(*ast.Term); ok && !e.Negated && ast.Boolean(true).Equal(t.Value) {
		return []shapeExpr{{kind: shapeConst}}, true // true: holds
	}
	if !e.IsCall() {
		return nil, false
	}
	if e.IsEquality() {
		if e.Negated {
			return nil, false
		}
		return c.binding(e.Operand(0), e.Operand(1))
	}
	x, ok := c.expr(e)
	return []shapeExpr{x}, ok
}

// expr is a call of a builtin the pass decides.
func (c *shapeCompiler) expr(e *ast.Expr) (shapeExpr, bool) {
	op := e.Operator().String()
	args := e.Operands()
	if test, ok := shapeTests[op]; ok {
		if len(args) != 2 {
			return shapeExpr{}, false
		}
		a, okA := c.operand(args[0])
		b, okB := c.operand(args[1])
		return shapeExpr{kind: shapeTest, negated: e.Negated, test: test, a: a, b: b}, okA && okB && (a.slot >= 0 || b.slot >= 0)
	}
	switch op {
	case "internal.member_2":
		if len(args) != 2 {
			return shapeExpr{}, false
		}
		a, ok := c.operand(args[0])
		if !ok || a.slot < 0 {
			return shapeExpr{}, false
		}
		coll, ok := c.collection(args[1])
		if !ok {
			return shapeExpr{}, false
		}
		x := shapeExpr{kind: shapeMember, negated: e.Negated, a: a, coll: coll}
		x.strs = stringMembers(coll)
		return x, true
	case "regex.match":
		if len(args) != 2 {
			return shapeExpr{}, false
		}
		pat, ok := args[0].Value.(ast.String)
		if !ok {
			return shapeExpr{}, false
		}
		re, err := irvm.CompileRegex(string(pat)) // as the builtin compiles it
		if err != nil {
			return shapeExpr{}, false // the builtin's error comes from the plan
		}
		a, ok := c.operand(args[1])
		return shapeExpr{kind: shapeRegex, negated: e.Negated, a: a, re: re}, ok && a.slot >= 0
	case "count":
		if len(args) != 2 || e.Negated {
			return shapeExpr{}, false
		}
		a, ok := c.operand(args[0])
		if !ok || a.slot < 0 {
			return shapeExpr{}, false
		}
		v, ok := args[1].Value.(ast.Var)
		if !ok {
			return shapeExpr{}, false
		}
		out, ok := c.bind(v)
		return shapeExpr{kind: shapeCount, a: a, out: out}, ok
	}
	return shapeExpr{}, false
}

// binding is a unification: v = input.<path> or input.<path> = v for an
// unbound v (binds v); v = a constant of the package, or an unbound v =
// a scalar (fixes v, holds); and a bound v, or input.<path>, = a scalar
// (an equality test, as unifying two values is). It may take two
// expressions (input.<path> = scalar: the lookup, then the test).
func (c *shapeCompiler) binding(l, r *ast.Term) ([]shapeExpr, bool) {
	if _, ok := r.Value.(ast.Var); ok {
		l, r = r, l
	} else if _, ok := l.Value.(ast.Var); !ok {
		if _, ok := r.Value.(ast.Ref); ok {
			l, r = r, l
		}
	}
	switch lv := l.Value.(type) {
	case ast.Var:
		if c.bound(lv) {
			a, ok := c.operand(l)
			b, okB := c.operand(r)
			if !ok || !okB || b.slot >= 0 {
				return nil, false
			}
			return []shapeExpr{{kind: shapeTest, test: shapeTests["equal"], a: a, b: b}}, true
		}
		if r.IsGround() && scalar(r.Value) {
			c.fixed[lv] = r.Value
			return []shapeExpr{{kind: shapeConst}}, true
		}
		ref, ok := r.Value.(ast.Ref)
		if !ok {
			return nil, false
		}
		if val, ok := c.constant(ref); ok {
			c.fixed[lv] = val
			return []shapeExpr{{kind: shapeConst}}, true
		}
		path, ok := inputPath(ref)
		if !ok {
			return nil, false
		}
		out, ok := c.bind(lv)
		return []shapeExpr{{kind: shapeBind, out: out, path: path}}, ok
	case ast.Ref:
		path, ok := inputPath(lv)
		if !ok || !r.IsGround() || !scalar(r.Value) {
			return nil, false
		}
		out := c.next
		c.next++
		return []shapeExpr{
			{kind: shapeBind, out: out, path: path},
			{kind: shapeTest, test: shapeTests["equal"], a: shapeOperand{slot: out}, b: shapeOperand{slot: -1, value: r.Value}},
		}, true
	}
	return nil, false
}

// constant is the value of data.<package>.<name>, a constant rule.
func (c *shapeCompiler) constant(ref ast.Ref) (ast.Value, bool) {
	if len(ref) != len(c.pkg)+1 || !ref.HasPrefix(c.pkg) {
		return nil, false
	}
	name, ok := ref[len(ref)-1].Value.(ast.String)
	if !ok {
		return nil, false
	}
	val, ok := c.consts[string(name)]
	return val, ok
}

// collection is the constant a membership test reads: a ground set,
// array or object, the package's constant holding one, or a variable
// bound to that constant.
func (c *shapeCompiler) collection(t *ast.Term) (ast.Value, bool) {
	val := t.Value
	switch x := val.(type) {
	case ast.Var:
		var ok bool
		if val, ok = c.fixed[x]; !ok {
			return nil, false
		}
	case ast.Ref:
		var ok bool
		if val, ok = c.constant(x); !ok {
			return nil, false
		}
	default:
		if !t.IsGround() {
			return nil, false
		}
	}
	switch val.(type) {
	case ast.Set, *ast.Array, ast.Object:
		return val, true
	}
	return nil, false
}

// stringMembers is a collection's members (an object's values) when all
// are strings, nil otherwise.
func stringMembers(coll ast.Value) map[string]struct{} {
	m := map[string]struct{}{}
	all := true
	add := func(t *ast.Term) {
		if s, ok := t.Value.(ast.String); ok {
			m[string(s)] = struct{}{}
		} else {
			all = false
		}
	}
	switch c := coll.(type) {
	case ast.Set:
		c.Foreach(add)
	case *ast.Array:
		c.Foreach(add)
	case ast.Object:
		c.Foreach(func(_, v *ast.Term) { add(v) })
	}
	if !all {
		return nil
	}
	return m
}

// inputPath is ref's path below input: arguments and any keys below it,
// or one of the call's string fields (tool, trace_id, protocol, server,
// caller.agent, caller.session, request.method, request.host,
// request.path).
func inputPath(ref ast.Ref) ([]string, bool) {
	if len(ref) < 2 || !ref[0].Equal(ast.InputRootDocument) {
		return nil, false
	}
	path := make([]string, 0, len(ref)-1)
	for _, t := range ref[1:] {
		s, ok := t.Value.(ast.String)
		if !ok {
			return nil, false
		}
		path = append(path, string(s))
	}
	switch path[0] {
	case "arguments":
		return path, len(path) >= 2
	case "tool", "trace_id", "protocol", "server":
		return path, len(path) == 1
	case "caller":
		return path, len(path) == 2 && (path[1] == "agent" || path[1] == "session")
	case "request":
		return path, len(path) == 2 && (path[1] == "method" || path[1] == "host" || path[1] == "path")
	}
	return nil, false
}

// decide is the pass: the decision, and true, when no deny rule holds
// and every inject rule's header is decided; false to run the plan.
func (sp *shapeProgram) decide(in *policies.Input, deadline time.Time) (policies.Result, bool) {
	if !deadline.IsZero() && !time.Now().Before(deadline) {
		return policies.Result{}, false // the plan answers with its timeout
	}
	var slots [maxShapeSlots]shapeVal
	for i := range sp.deny {
		holds, ok := sp.deny[i].eval(in, slots[:sp.deny[i].slots])
		if !ok || holds {
			return policies.Result{}, false
		}
	}
	res := policies.Result{Allowed: true}
	if len(sp.inject) == 0 {
		return res, true
	}
	res.Inject = make(map[string]string, len(sp.inject))
	for i := range sp.inject {
		r := &sp.inject[i]
		s := slots[:r.body.slots]
		holds, ok := r.body.eval(in, s)
		if !ok {
			return policies.Result{}, false
		}
		if !holds {
			continue
		}
		v, ok := r.value.get(s)
		if !ok {
			return policies.Result{}, false
		}
		str, ok := v.(ast.String)
		if !ok {
			return policies.Result{}, false
		}
		header, ok := policies.InjectHeader(r.key, string(str))
		if !ok {
			return policies.Result{}, false
		}
		res.Inject[header] = string(str)
	}
	return res, true
}

// useful reports whether the pass decides the body for more than a
// missing input value: it holds no shapeUnknown, or a test comes before
// it.
func (b *shapeBody) useful() bool {
	for _, x := range b.exprs {
		switch x.kind {
		case shapeUnknown:
			return false
		case shapeTest, shapeMember, shapeRegex:
			return true
		}
	}
	return true
}

// eval runs a body: holds reports whether every expression held; ok is
// false when an expression's outcome is not the pass's to decide.
func (b *shapeBody) eval(in *policies.Input, slots []shapeVal) (holds, ok bool) {
	clear(slots)
	for i := range b.exprs {
		h, ok := b.exprs[i].eval(in, slots)
		if !ok {
			return false, false
		}
		if !h {
			return false, true
		}
	}
	return true, true
}

// eval reports whether the expression holds; ok is false when the pass
// does not decide it.
func (x *shapeExpr) eval(in *policies.Input, slots []shapeVal) (holds, ok bool) {
	switch x.kind {
	case shapeUnknown:
		return false, false
	case shapeConst:
		return true, true
	case shapeBind:
		raw, value, defined := lookupInput(in, x.path)
		if !defined {
			return false, true
		}
		slots[x.out] = shapeVal{raw: raw, value: value}
		return true, true
	case shapeCount:
		n, ok := count(slots[x.a.slot])
		if !ok {
			return false, false
		}
		slots[x.out] = shapeVal{value: ast.InternedTerm(n).Value}
		return true, true
	}
	var r bool
	switch x.kind {
	case shapeTest:
		a, okA := x.a.get(slots)
		b, okB := x.b.get(slots)
		if !okA || !okB {
			return false, false
		}
		if r, ok = x.test(a, b); !ok {
			return false, false // the builtin's type error
		}
	case shapeMember:
		v := slots[x.a.slot]
		if s, isStr := v.raw.(string); isStr && x.strs != nil {
			_, r = x.strs[s]
			break
		}
		a, ok := x.a.get(slots)
		if !ok {
			return false, false
		}
		t := ast.NewTerm(a)
		switch c := x.coll.(type) {
		case ast.Set:
			r = c.Contains(t)
		case *ast.Array:
			r = c.Until(t.Equal)
		case ast.Object:
			r = c.Until(func(_, v *ast.Term) bool { return t.Equal(v) })
		}
	case shapeRegex:
		s, isStr := slots[x.a.slot].str()
		if !isStr {
			return false, false // the builtin's type error
		}
		r = x.re.MatchString(s)
	}
	return r != x.negated, true
}

// get is the operand's value as a scalar ast value; false for a value
// that is not a scalar (or not one the decoder makes).
func (o shapeOperand) get(slots []shapeVal) (ast.Value, bool) {
	if o.slot < 0 {
		return o.value, true
	}
	v := slots[o.slot]
	if v.value != nil {
		return v.value, scalar(v.value)
	}
	switch r := v.raw.(type) {
	case string:
		return ast.String(r), true
	case json.Number:
		return ast.Number(r), true
	case bool:
		return ast.Boolean(r), true
	case nil:
		return ast.Null{}, true
	}
	return nil, false
}

// count is the count builtin's answer for a value the decoder makes;
// false for one it refuses (its type error) or the pass does not take.
func count(v shapeVal) (int, bool) {
	if s, ok := v.str(); ok {
		return utf8.RuneCountInString(s), true
	}
	switch r := v.raw.(type) {
	case []any:
		return len(r), true
	case map[string]any:
		return len(r), true
	}
	return 0, false
}

// lookupInput is input.<path>: under arguments the decoder's value
// (raw), otherwise the call's string field (value); defined is false
// where the plan finds nothing.
func lookupInput(in *policies.Input, path []string) (raw any, value ast.Value, defined bool) {
	if path[0] != "arguments" {
		d := document{in}
		if len(path) == 1 {
			value, defined = d.Field(path[0])
		} else {
			value, defined = d.Subfield(path[0], path[1])
		}
		return nil, value, defined
	}
	var cur any = in.Arguments
	for _, k := range path[1:] {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, nil, false
		}
	}
	return cur, nil, true
}
