// Package budgettest adapts the budget engine to the pipeline's Budgeter
// contract, for the tests that run the real engine (proxy's, its internal
// packages', and proxy_test's through proxy.EngineBudgeter). It is the
// binary's adapter (cmd/toolgate/internal/config's engineBudgeter), which
// proxy's tests cannot import; keep the two alike. Only tests import it.
package budgettest

import (
	"context"

	"github.com/toolgate/toolgate/policies/budget"
	"github.com/toolgate/toolgate/proxy/internal/conf"
)

// Engine is the budget engine as the pipeline's Budgeter.
func Engine(e *budget.Engine) conf.Budgeter { return engineBudgeter{e} }

type engineBudgeter struct{ e *budget.Engine }

func engineCall(c *conf.BudgetCall) budget.Call {
	return budget.Call{
		Tool: c.Tool, Route: c.Route, Agent: c.Agent, Session: c.Session,
		Upstream: c.Upstream, UpstreamPort: c.UpstreamPort, UpstreamDefaultPort: c.UpstreamDefaultPort,
		Args: c.Args,
	}
}

func (a engineBudgeter) Admit(ctx context.Context, c conf.BudgetCall) (conf.BudgetVerdict, conf.BudgetTicket) {
	bc := new(budget.Call)
	*bc = engineCall(&c)
	return conf.BudgetVerdict(a.e.Admit(ctx, bc)), bc
}

func (a engineBudgeter) Settle(t conf.BudgetTicket, o conf.BudgetOutcome) {
	if bc, ok := t.(*budget.Call); ok {
		a.e.Settle(bc, budget.Outcome(o))
	}
}

func (a engineBudgeter) Refund(t conf.BudgetTicket) {
	if bc, ok := t.(*budget.Call); ok {
		a.e.Refund(bc)
	}
}

func (a engineBudgeter) MayApply(tool, host string) bool { return a.e.MayApply(tool, host) }

func (a engineBudgeter) Counters(c conf.BudgetCall) map[string]any {
	bc := engineCall(&c)
	return a.e.Counters(&bc)
}
