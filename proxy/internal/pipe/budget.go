package pipe

import (
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/proxy/internal/conf"
)

// BudgetCall is the call as the budget step sees it, from the event, the
// arguments and the canonical form. It allocates nothing.
func (c *Call) BudgetCall() conf.BudgetCall {
	b := conf.BudgetCall{Tool: c.Event.Tool, Agent: c.Event.Agent, Session: c.Event.Session, Args: c.Args}
	conf.SetUpstream(&b, &c.Canon)
	return b
}

// SettleBudget tells the budget step how an admitted call ended.
func (c *Call) SettleBudget(res bucketing.Result) {
	o := conf.BudgetOutcome{Code: res.Code, Header: c.upHeader}
	if res.RetryAfterMS != nil {
		o.RetryAfter = time.Duration(*res.RetryAfterMS) * time.Millisecond
	}
	c.State.Budgets.Settle(c.Budget, o)
}

// budgetInput is input.budget for a call's policies: nil without budgets.
func (c *Call) budgetInput() map[string]any {
	if c.State.Budgets == nil || c.Tool == nil || c.MCP != nil {
		return nil
	}
	return c.State.Budgets.Counters(c.BudgetCall())
}
