package config

import (
	"context"

	"github.com/toolgate/toolgate/policies/budget"
	"github.com/toolgate/toolgate/proxy"
)

// engineBudgeter adapts the budget engine to the Budgeter proxy declares.
// proxy states what it needs of a budget step in its own types, so that it
// links neither the engine nor the fleet's Redis client; this is where the
// two meet. It adds one allocation per admitted call (the engine's record
// of what it charged, which proxy carries as the call's ticket), as proxy
// did before, and none elsewhere.
type engineBudgeter struct{ e *budget.Engine }

var (
	_ proxy.Budgeter     = engineBudgeter{}
	_ proxy.BudgetScoper = engineBudgeter{}
)

// engineCall is c in the engine's terms.
func engineCall(c *proxy.BudgetCall) budget.Call {
	return budget.Call{
		Tool: c.Tool, Route: c.Route, Agent: c.Agent, Session: c.Session,
		Upstream: c.Upstream, UpstreamPort: c.UpstreamPort, UpstreamDefaultPort: c.UpstreamDefaultPort,
		Args: c.Args,
	}
}

// Admit decides and charges c; the ticket is the engine's call, for
// Settle and Refund.
func (a engineBudgeter) Admit(ctx context.Context, c proxy.BudgetCall) (proxy.BudgetVerdict, proxy.BudgetTicket) {
	bc := new(budget.Call)
	*bc = engineCall(&c)
	return proxy.BudgetVerdict(a.e.Admit(ctx, bc)), bc
}

// Settle completes the call whose ticket Admit returned.
func (a engineBudgeter) Settle(t proxy.BudgetTicket, o proxy.BudgetOutcome) {
	if bc, ok := t.(*budget.Call); ok {
		a.e.Settle(bc, budget.Outcome(o))
	}
}

// Refund takes back what Admit charged the call of t.
func (a engineBudgeter) Refund(t proxy.BudgetTicket) {
	if bc, ok := t.(*budget.Call); ok {
		a.e.Refund(bc)
	}
}

// MayApply tells the chain's compiler whether the engine could ever count
// a tool's calls (budget.Engine.MayApply).
func (a engineBudgeter) MayApply(tool, host string) bool { return a.e.MayApply(tool, host) }

// Counters is input.budget for c, read without charging.
func (a engineBudgeter) Counters(c proxy.BudgetCall) map[string]any {
	bc := engineCall(&c)
	return a.e.Counters(&bc)
}
