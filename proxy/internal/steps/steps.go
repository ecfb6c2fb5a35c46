package steps

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
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
	t       *conf.Tool
	checked bool // the tool has a schema or policies
	// mayAsk is true when the tool's calls may need approval before
	// anything about them is read (needsApproval).
	mayAsk bool
}

func BuildExtract(e *pipe.ChainEnv) pipe.RequestStep {
	return extractStep{t: e.Tool, checked: e.Tool.Schema != nil || e.Checker() != nil, mayAsk: needsApproval(e.Approver, e.Tool.Cfg.Name)}
}

func (s extractStep) Check(_ context.Context, c *pipe.Call) *conf.Refusal {
	t, r, cfg := s.t, c.In, c.State.Cfg
	bodySrc, unreadable := bodySource(t, r)
	gated := !s.checked && bodySrc == 0 && s.mayAsk
	var raw []byte
	if bodySrc != 0 || s.checked || gated {
		var err error
		raw, err = conf.ReadBody(r, cfg.MaxBodyBytes)
		switch {
		case errors.Is(err, conf.ErrBodyTooLarge):
			return conf.Refuse(bucketing.CodeValidation, bucketing.ReasonBodyTooLarge,
				fmt.Sprintf("Tool '%s' got a body larger than the %d-byte limit", t.Cfg.Name, cfg.MaxBodyBytes), nil)
		case errors.Is(err, conf.ErrBodyTimeout):
			return conf.BodyTimeoutRefusal(c.Subject(), cfg.Limits.BodyTimeout)
		case err != nil:
			return pipe.CallerGone
		}
		c.SetBody(raw)
		if len(raw) > 0 && bodySrc == 0 && !gated {
			return conf.Refuse(bucketing.CodeValidation, bucketing.ReasonUnsupportedMediaType,
				fmt.Sprintf("Tool '%s' cannot check a body it cannot read as its arguments: %s", t.Cfg.Name, unreadable), nil)
		}
		if gated && len(raw) > 0 {
			c.Unread = raw
		}
	}
	if s.checked && t.Sources != 0 && t.Sources&conf.BitQuery == 0 && r.URL.RawQuery != "" {
		return conf.UnreadQuery(t.Cfg.Name, r.URL.RawQuery)
	}
	args, depth, inRange, ref := extractArgs(t, r, c.Vars, raw, bodySrc, cfg.Limits.MaxJSONDepth)
	c.SetArgs(args, depth, inRange)
	return ref
}

// schemaStep validates the arguments against the tool's schema (step 3),
// strictly (in DryRun when the tool's schema_mode is dry_run), and refuses an argument spelt in another case than a declared
// property even where the schema is open: a case-folding upstream (Go's
// encoding/json into tagged structs reads "Text" as "text") would take it
// for the property the schema never checked.
type schemaStep struct {
	tool   string
	schema *policies.Schema
}

func BuildSchema(e *pipe.ChainEnv) pipe.RequestStep {
	if e.Tool.Schema == nil {
		return nil
	}
	s := schemaStep{tool: e.Tool.Cfg.Name, schema: e.Tool.Schema}
	if e.Tool.Cfg.SchemaMode == policies.ModeDryRun {
		return pipe.DryRun{Step: s, Label: "schema: "}
	}
	return s
}

func (s schemaStep) Check(_ context.Context, c *pipe.Call) *conf.Refusal {
	return ValidateArgs(s.tool, s.schema, c.Args, c.NumbersInRange())
}

// ValidateArgs is the schema check both protocols share: the schema's
// violations, else any argument name that differs from a declared one
// only by case. inRange says the arguments' decoder found every number
// in them within policies.NumberInRange (Schema.ValidateInRange).
func ValidateArgs(tool string, sch *policies.Schema, args map[string]any, inRange bool) *conf.Refusal {
	var vs []policies.Violation
	if inRange {
		vs = sch.ValidateInRange(args)
	} else {
		vs = sch.Validate(args)
	}
	if len(vs) == 0 {
		vs = sch.FoldedNames(args)
	}
	if len(vs) > 0 {
		return conf.SchemaRefusal(tool, vs)
	}
	return nil
}

// policyStep asks the tool's policies (step 4): Rego and WASM behind the
// Checker. Dry-run policies only record (the Checker says which).
type policyStep struct{ chk pipe.Checker }

func BuildPolicies(e *pipe.ChainEnv) pipe.RequestStep {
	if chk := e.Checker(); chk != nil {
		return policyStep{chk: chk}
	}
	return nil
}

func (s policyStep) Check(ctx context.Context, c *pipe.Call) *conf.Refusal {
	return c.PolicyOutcome(s.chk.Check(ctx, c.Input()))
}

// approvalStep asks the approver whether the call needs a person's
// approval and has it (step 4a). rule says the tool's own rule may ask
// for approval (needsApproval, asked once when the chain is compiled):
// without it, only a policy's request (Call.Ask) can, and a call without
// one is done with at once.
type approvalStep struct {
	a    conf.Approver
	rule bool
}

func BuildApproval(e *pipe.ChainEnv) pipe.RequestStep {
	if e.Approver == nil {
		return nil
	}
	return approvalStep{a: e.Approver, rule: needsApproval(e.Approver, e.Tool.Cfg.Name)}
}

func (s approvalStep) Check(ctx context.Context, c *pipe.Call) *conf.Refusal {
	if !s.rule && c.Ask == nil {
		return nil
	}
	return approve(c, ctx, s.a)
}

// originStep refuses a call that would carry injected headers to another
// origin than the tool's (step 5). A tool with neither inject_headers nor
// policies (which may ask for headers) has none; an MCP call goes without
// injected headers instead.
type originStep struct{}

func BuildOrigin(e *pipe.ChainEnv) pipe.RequestStep {
	if len(e.Tool.Inject) == 0 && e.Checker() == nil {
		return nil
	}
	return originStep{}
}

func (originStep) Check(_ context.Context, c *pipe.Call) *conf.Refusal {
	return c.CheckOrigin(c.Target)
}

// budgetStep admits the call against the budgets, loop breaking and the
// upstream's rate (step 6), with a budgets section only, and only for a
// tool the budgets could ever apply to (conf.BudgetScoper): a tool no
// budget, loop rule or upstream rate covers pays nothing for the section.
// An MCP message's calls are admitted together after every one passed its
// chain (AdmitMCP), so a batch is all or nothing.
type budgetStep struct{}

func BuildBudget(e *pipe.ChainEnv) pipe.RequestStep {
	if e.Snap.Budgets == nil {
		return nil
	}
	if s, ok := e.Snap.Budgets.(conf.BudgetScoper); ok && !s.MayApply(e.Tool.Cfg.Name, conf.ToolUpstream(e.Tool)) {
		return nil
	}
	return budgetStep{}
}

func (budgetStep) Check(_ context.Context, c *pipe.Call) *conf.Refusal {
	ref, ok := admitBudget(c)
	if !ok {
		return pipe.CallerGone
	}
	return ref
}
