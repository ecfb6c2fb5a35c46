package proxy

import (
	"context"

	"github.com/toolgate/toolgate/policies/budget"
)

// EngineBudgeter is the budget engine as proxy's Budgeter, for the tests
// that run the real engine (internal ones, and proxy_test's through this
// file). It is the binary's adapter (cmd/toolgate/internal/config's
// engineBudgeter), which proxy's tests cannot import; keep the two alike.
func EngineBudgeter(e *budget.Engine) Budgeter { return engineBudgeter{e} }

type engineBudgeter struct{ e *budget.Engine }

func engineCall(c *BudgetCall) budget.Call {
	return budget.Call{
		Tool: c.Tool, Route: c.Route, Agent: c.Agent, Session: c.Session,
		Upstream: c.Upstream, UpstreamPort: c.UpstreamPort, UpstreamDefaultPort: c.UpstreamDefaultPort,
		Args: c.Args,
	}
}

func (a engineBudgeter) Admit(ctx context.Context, c BudgetCall) (BudgetVerdict, BudgetTicket) {
	bc := new(budget.Call)
	*bc = engineCall(&c)
	return BudgetVerdict(a.e.Admit(ctx, bc)), bc
}

func (a engineBudgeter) Settle(t BudgetTicket, o BudgetOutcome) {
	if bc, ok := t.(*budget.Call); ok {
		a.e.Settle(bc, budget.Outcome(o))
	}
}

func (a engineBudgeter) Refund(t BudgetTicket) {
	if bc, ok := t.(*budget.Call); ok {
		a.e.Refund(bc)
	}
}

func (a engineBudgeter) Counters(c BudgetCall) map[string]any {
	bc := engineCall(&c)
	return a.e.Counters(&bc)
}
