package irvm

import (
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// objectDoc is an input object as a Document; ObjectDocument hands one to
// the package's external tests.
type objectDoc struct{ obj ast.Object }

func ObjectDocument(obj ast.Object) Document { return objectDoc{obj} }

func (d objectDoc) Value() ast.Value { return d.obj }

func (d objectDoc) Field(key string) (ast.Value, bool) {
	if v := d.obj.Get(ast.StringTerm(key)); v != nil {
		return v.Value, true
	}
	return nil, false
}

func (d objectDoc) Subfield(key, field string) (ast.Value, bool) {
	v, ok := d.Field(key)
	if !ok {
		return nil, false
	}
	if o, ok := v.(ast.Object); ok {
		if f := o.Get(ast.StringTerm(field)); f != nil {
			return f.Value, true
		}
	}
	return nil, false
}

// TestDocRefStandsForItsValue: should a docRef ever reach anything but a
// DotStmt (the plan analysis says it cannot), it compares, hashes and
// prints as the value it stands for, converted whole.
func TestDocRefStandsForItsValue(t *testing.T) {
	in := ast.MustParseTerm(`{"arguments": {"a": 1, "b": [2, 3]}, "tool": "t"}`).Value.(ast.Object)
	doc := objectDoc{in}
	for _, c := range []struct {
		ref  *docRef
		want ast.Value
	}{
		{&docRef{doc: doc}, in},
		{&docRef{doc: doc, key: "arguments"}, in.Get(ast.StringTerm("arguments")).Value},
		{&docRef{doc: doc, key: "missing"}, ast.Null{}},
	} {
		if c.ref.Compare(c.want) != 0 || c.ref.Hash() != c.want.Hash() || c.ref.String() != c.want.String() {
			t.Errorf("docRef %q: compares, hashes or prints unlike %v", c.ref.key, c.want)
		}
		if ast.Compare(c.want, c.ref.value()) != 0 {
			t.Errorf("docRef %q: value() = %v, want %v", c.ref.key, c.ref.value(), c.want)
		}
	}
	// A with on a docRef copies the value it stands for.
	up := upsert(ast.NewTerm(&docRef{doc: doc}), []*ast.Term{ast.StringTerm("tool")}, []int{0}, ast.StringTerm("u"))
	want := ast.MustParseTerm(`{"arguments": {"a": 1, "b": [2, 3]}, "tool": "u"}`).Value
	if up.Value.Compare(want) != 0 {
		t.Errorf("upsert on a docRef = %v, want %v", up, want)
	}
}
