// Package budgetengine adapts the budget engine (policies/budget) to the
// Budgeter contract proxy declares (proxy.Budgeter and proxy.BudgetScoper).
// proxy states what it needs of a budget step in its own types, so that it
// links neither the engine nor the fleet's Redis client; this package is
// where the two meet, and only the binary's configuration and the tests
// import it. The adapter adds one allocation per admitted call (the
// engine's record of what it charged, which proxy carries as the call's
// ticket) and none elsewhere.
package budgetengine

import (
	"context"

	"github.com/toolgate/toolgate/policies/budget"
	"github.com/toolgate/toolgate/proxy/internal/conf"
)

// Adapt returns e as proxy's Budgeter (which is also a BudgetScoper).
func Adapt(e *budget.Engine) conf.Budgeter { return adapter{e} }

type adapter struct{ e *budget.Engine }

var _ conf.BudgetScoper = adapter{}

// engineCall is c in the engine's terms.
func engineCall(c *conf.BudgetCall) budget.Call {
	return budget.Call{
		Tool: c.Tool, Route: c.Route, Agent: c.Agent, Session: c.Session,
		Upstream: c.Upstream, UpstreamPort: c.UpstreamPort, UpstreamDefaultPort: c.UpstreamDefaultPort,
		Args: c.Args,
	}
}

// Admit decides and charges c; the ticket is the engine's call, for
// Settle and Refund.
func (a adapter) Admit(ctx context.Context, c conf.BudgetCall) (conf.BudgetVerdict, conf.BudgetTicket) {
	bc := new(budget.Call)
	*bc = engineCall(&c)
	return conf.BudgetVerdict(a.e.Admit(ctx, bc)), bc
}

// Settle completes the call whose ticket Admit returned.
func (a adapter) Settle(t conf.BudgetTicket, o conf.BudgetOutcome) {
	if bc, ok := t.(*budget.Call); ok {
		a.e.Settle(bc, budget.Outcome(o))
	}
}

// Refund takes back what Admit charged the call of t.
func (a adapter) Refund(t conf.BudgetTicket) {
	if bc, ok := t.(*budget.Call); ok {
		a.e.Refund(bc)
	}
}

// MayApply tells the chain's compiler whether the engine could ever count
// a tool's calls (budget.Engine.MayApply).
func (a adapter) MayApply(tool, host string) bool { return a.e.MayApply(tool, host) }

// Counters is input.budget for c, read without charging.
func (a adapter) Counters(c conf.BudgetCall) map[string]any {
	bc := engineCall(&c)
	return a.e.Counters(&bc)
}
