package irvm

import (
	"context"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Document is an input given field by field. A plan that only ever dots
// into its input with constant keys (Program.InputKeys is not nil) gets
// each value it reads converted when it reads it, instead of the whole
// input converted up front: for a tool call's arguments, the three fields a
// policy reads rather than the whole body.
type Document interface {
	// Value is the whole document, for plans that read it whole.
	Value() ast.Value
	// Field is input[key]; false when there is none.
	Field(key string) (ast.Value, bool)
	// Subfield is input[key][field], read when InputFields(key) names the
	// fields the plan reads; false when there is none.
	Subfield(key, field string) (ast.Value, bool)
}

// EvalDocument is Eval with the input given as a Document.
func (p *Program) EvalDocument(ctx context.Context, doc Document, o Options) ([]*ast.Term, error) {
	if p.inputKeys == nil {
		return p.Eval(ctx, ast.NewTerm(doc.Value()), o)
	}
	return p.eval(ctx, nil, doc, o)
}

// docRef (a *docRef) stands in a local for the input (key "") or for input[key] whose
// fields the plan reads one by one: only DotStmt reads it, by the plan's
// analysis (readsOfInput, fieldsOfInput). Should anything else ever read
// one, its methods answer for the value it stands for, converted.
type docRef struct {
	doc Document
	key string
}

// value is what r stands for, converted whole.
func (r *docRef) value() ast.Value {
	if r.key == "" {
		return r.doc.Value()
	}
	if v, ok := r.doc.Field(r.key); ok {
		return v
	}
	return ast.Null{}
}

func (r *docRef) Compare(other ast.Value) int          { return r.value().Compare(other) }
func (r *docRef) Find(path ast.Ref) (ast.Value, error) { return r.value().Find(path) }
func (r *docRef) Hash() int                            { return r.value().Hash() }
func (r *docRef) IsGround() bool                       { return true }
func (r *docRef) String() string                       { return r.value().String() }
func (r *docRef) StringLength() int                    { return r.value().StringLength() }

// dotDoc is r[key]: a docRef for an input key whose fields the plan reads
// one by one (the same term each time within an evaluation), else the
// value converted.
func (e *eval) dotDoc(r *docRef, key *ast.Term) *ast.Term {
	p := e.p
	k, ok := key.Value.(ast.String)
	if !ok {
		return nil
	}
	if r.key != "" {
		if v, ok := r.doc.Subfield(r.key, string(k)); ok {
			return e.term(v)
		}
		return nil
	}
	if _, fieldwise := p.inputFields[string(k)]; fieldwise {
		// Not checked for existence: the plan only dots into it, and a
		// field of a missing (or non-object) input[key] is as undefined
		// as input[key] itself.
		for _, t := range e.docRefs {
			if t.Value.(*docRef).key == string(k) {
				return t
			}
		}
		t := e.ref(r.doc, string(k))
		e.docRefs = append(e.docRefs, t)
		return t
	}
	if v, ok := r.doc.Field(string(k)); ok {
		return e.term(v)
	}
	return nil
}

// refTerm is a docRef and the term that holds it, allocated together.
type refTerm struct {
	ref  docRef
	term ast.Term
}

// refsPerChunk is how many refTerms eval.ref allocates at once: the input
// and the few input keys a policy reads field by field.
const refsPerChunk = 4

// ref is a term holding a docRef for doc[key] (doc itself when key is
// ""), cut from the evaluation's chunk of them.
func (e *eval) ref(doc Document, key string) *ast.Term {
	r := e.refs.next(refsPerChunk)
	r.ref = docRef{doc: doc, key: key}
	r.term.Value = &r.ref
	return &r.term
}
