package proxy

import (
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/mcpcall"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/internal/steps"
)

// stepEntry is one place in the order: its name, and how a tool's step
// there is built, for a plain HTTP tool (build) and for an MCP route's
// tools/call (mcp); a nil builder, or one that returns nil, means the tool
// has no such step.
type stepEntry struct {
	name string
	// eval is true for the steps that decide a call from its arguments
	// and where it goes, with no effect of their own (schema, policies,
	// origin): what Evaluate runs, so that policy eval and policy test
	// cannot disagree with the sidecar.
	eval  bool
	build func(e *pipe.ChainEnv) pipe.RequestStep
	mcp   func(e *pipe.ChainEnv) pipe.RequestStep
}

// requestOrder is the order of a tool's request steps (the package doc's
// steps 2 to 6; steps 0 and 1, canonical form and routing, find the tool
// whose chain runs, and step 7 is dispatch):
//
//	extract → observe → schema → policies → origin → approval → budget
//
// Observe (steps/observe.go) only records the arguments' shape, for a tool in
// observe mode; it never refuses.
//
// Origin runs before approval, so that a person is never asked to approve
// a call that could not go upstream anyway (its injected headers bound
// for another origin), and so that Evaluate, which stops before approval
// and reports the policies' request instead, decides as the sidecar does.
//
// An MCP route runs the same order with its own extraction: each
// tools/call's params (mcpCallStep), then the schema the server listed or
// the route configures (mcpcall.SchemaStep), the policies, and its own approval
// (in band, mcpApprovalStep); it has no observe or origin step (an MCP
// call goes without injected headers), and its budget step runs once for
// the whole message, so that a batch is admitted all or nothing
// (AdmitMCP).
var requestOrder = []stepEntry{
	{name: "extract", build: steps.BuildExtract, mcp: mcpcall.BuildCall},
	{name: "observe", build: steps.BuildObserve},
	{name: "schema", eval: true, build: steps.BuildSchema, mcp: mcpcall.BuildSchema},
	{name: "policies", eval: true, build: steps.BuildPolicies, mcp: steps.BuildPolicies},
	{name: "origin", eval: true, build: steps.BuildOrigin},
	{name: "approval", build: steps.BuildApproval, mcp: mcpcall.BuildApproval},
	{name: "budget", build: steps.BuildBudget},
}

// compileChain builds t's chain for a snapshot.
func compileChain(t *conf.Tool, snap *pipe.Snapshot, approver conf.Approver) *pipe.Chain {
	e := &pipe.ChainEnv{Tool: t, Snap: snap, Approver: approver}
	ch := &pipe.Chain{}
	for _, en := range requestOrder {
		build := en.build
		if t.MCP != nil {
			build = en.mcp
		}
		if build == nil {
			continue
		}
		if s := build(e); s != nil {
			ch.Steps = append(ch.Steps, pipe.Link{Name: en.name, Eval: en.eval, Step: s})
		}
	}
	if t.MCP == nil {
		ch.Answers, ch.AnswerLimit, ch.AnswerPass, ch.AnswerAll = steps.BuildAnswerSteps(e)
	}
	return ch
}

// compileChains builds every tool's chain for a snapshot.
func compileChains(cfg *conf.Config, snap *pipe.Snapshot, approver conf.Approver) map[*conf.Tool]*pipe.Chain {
	out := make(map[*conf.Tool]*pipe.Chain, len(cfg.Compiled))
	for _, t := range cfg.Compiled {
		out[t] = compileChain(t, snap, approver)
	}
	return out
}
