package proxy

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
)

// The request steps of requestOrder, each with its builder: a builder
// returns nil for a tool that has no such step.

// extractStep reads a plain HTTP tool's arguments from the path, the query
// and the body (step 2). The body is read when arguments come from it, and
// always when the tool's calls are checked: a checked tool never forwards
// a body it did not parse (bodySource says which bodies it can read). A
// call that may need approval has its body read too: a grant binds the
// body it forwards, read as the arguments or, when the tool does not read
// it, as bytes.
type extractStep struct {
	t       *tool
	checked bool // the tool has a schema or policies
	// mayAsk is true when the tool's calls may need approval before
	// anything about them is read (needsApproval).
	mayAsk bool
}

func buildExtract(e *chainEnv) requestStep {
	return extractStep{t: e.t, checked: e.t.schema != nil || e.checker() != nil, mayAsk: needsApproval(e.approver, e.t.cfg.Name)}
}

func (s extractStep) check(_ context.Context, c *call) *refusal {
	t, r, cfg := s.t, c.in, c.st.cfg
	bodySrc, unreadable := bodySource(t, r)
	gated := !s.checked && bodySrc == 0 && s.mayAsk
	var raw []byte
	if bodySrc != 0 || s.checked || gated {
		var err error
		raw, err = readBody(r, cfg.MaxBodyBytes)
		switch {
		case errors.Is(err, errBodyTooLarge):
			return refuse(bucketing.CodeValidation, bucketing.ReasonBodyTooLarge,
				fmt.Sprintf("Tool '%s' got a body larger than the %d-byte limit", t.cfg.Name, cfg.MaxBodyBytes), nil)
		case errors.Is(err, errBodyTimeout):
			return bodyTimeoutRefusal(c.subject(), cfg.Limits.BodyTimeout)
		case err != nil:
			return callerGone
		}
		c.setBody(raw)
		if len(raw) > 0 && bodySrc == 0 && !gated {
			return refuse(bucketing.CodeValidation, bucketing.ReasonUnsupportedMediaType,
				fmt.Sprintf("Tool '%s' cannot check a body it cannot read as its arguments: %s", t.cfg.Name, unreadable), nil)
		}
		if gated && len(raw) > 0 {
			c.unread = raw
		}
	}
	if s.checked && t.sources != 0 && t.sources&bitQuery == 0 && r.URL.RawQuery != "" {
		return unreadQuery(t.cfg.Name, r.URL.RawQuery)
	}
	args, ref := extractArgs(t, r, c.vars, raw, bodySrc, cfg.Limits.MaxJSONDepth)
	c.args = args
	return ref
}

// schemaStep validates the arguments against the tool's schema (step 3),
// strictly (in dryRun when the tool's schema_mode is dry_run), and refuses an argument spelt in another case than a declared
// property even where the schema is open: a case-folding upstream (Go's
// encoding/json into tagged structs reads "Text" as "text") would take it
// for the property the schema never checked.
type schemaStep struct {
	tool   string
	schema *policies.Schema
}

func buildSchema(e *chainEnv) requestStep {
	if e.t.schema == nil {
		return nil
	}
	s := schemaStep{tool: e.t.cfg.Name, schema: e.t.schema}
	if e.t.cfg.SchemaMode == policies.ModeDryRun {
		return dryRun{step: s, label: "schema: "}
	}
	return s
}

func (s schemaStep) check(_ context.Context, c *call) *refusal {
	return validateArgs(s.tool, s.schema, c.args)
}

// validateArgs is the schema check both protocols share: the schema's
// violations, else any argument name that differs from a declared one
// only by case.
func validateArgs(tool string, sch *policies.Schema, args map[string]any) *refusal {
	vs := sch.Validate(args)
	if len(vs) == 0 {
		vs = sch.FoldedNames(args)
	}
	if len(vs) > 0 {
		return schemaRefusal(tool, vs)
	}
	return nil
}

// policyStep asks the tool's policies (step 4): Rego and WASM behind the
// Checker. Dry-run policies only record (the Checker says which).
type policyStep struct{ chk Checker }

func buildPolicies(e *chainEnv) requestStep {
	if chk := e.checker(); chk != nil {
		return policyStep{chk: chk}
	}
	return nil
}

func (s policyStep) check(ctx context.Context, c *call) *refusal {
	return c.policyOutcome(s.chk.Check(ctx, c.input()))
}

// approvalStep asks the approver whether the call needs a person's
// approval and has it (step 4a).
type approvalStep struct{ a Approver }

func buildApproval(e *chainEnv) requestStep {
	if e.approver == nil {
		return nil
	}
	return approvalStep{a: e.approver}
}

func (s approvalStep) check(ctx context.Context, c *call) *refusal {
	return c.approve(ctx, s.a)
}

// originStep refuses a call that would carry injected headers to another
// origin than the tool's (step 5). A tool with neither inject_headers nor
// policies (which may ask for headers) has none; an MCP call goes without
// injected headers instead.
type originStep struct{}

func buildOrigin(e *chainEnv) requestStep {
	if len(e.t.inject) == 0 && e.checker() == nil {
		return nil
	}
	return originStep{}
}

func (originStep) check(_ context.Context, c *call) *refusal { return c.checkOrigin(c.target) }

// budgetStep admits the call against the budgets, loop breaking and the
// upstream's rate (step 6), with a budgets section only. An MCP message's
// calls are admitted together after every one passed its chain
// (admitMCP), so a batch is all or nothing.
type budgetStep struct{}

func buildBudget(e *chainEnv) requestStep {
	if e.snap.Budgets == nil {
		return nil
	}
	return budgetStep{}
}

func (budgetStep) check(_ context.Context, c *call) *refusal {
	ref, ok := c.admitBudget()
	if !ok {
		return callerGone
	}
	return ref
}
