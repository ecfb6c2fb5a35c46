package irvm

import (
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ir"
)

// unknownStmt stands for a statement a later OPA's planner may emit.
type unknownStmt struct{ ir.NopStmt }

// TestUnknownStatementRefused checks that a plan holding a statement the
// engine does not run is refused when it is prepared, not when a call
// reaches it.
func TestUnknownStatementRefused(t *testing.T) {
	pol := &ir.Policy{Plans: &ir.Plans{Plans: []*ir.Plan{{Name: "eval", Blocks: []*ir.Block{{
		Stmts: []ir.Stmt{&ir.NopStmt{}, &unknownStmt{}},
	}}}}}}
	_, err := compile(pol, nil)
	if err == nil || !strings.Contains(err.Error(), "does not run") {
		t.Fatalf("compile of a plan with an unknown statement: %v, want a refusal", err)
	}
	pol.Plans.Plans[0].Blocks[0].Stmts = []ir.Stmt{&ir.NopStmt{}}
	if _, err := compile(pol, nil); err != nil {
		t.Fatalf("compile of a plan of known statements: %v", err)
	}
}
