package proxy

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/budget"
)

// Budgeter is the budget step: budgets, loop breaking and the upstream's
// rate limit and backoff (budget.Engine satisfies it). Admit decides and
// charges a call that passed every other check, just before dispatch;
// Settle completes an admitted call with its outcome; Counters is what
// policies see as input.budget.
type Budgeter interface {
	Admit(ctx context.Context, c *budget.Call) budget.Verdict
	Settle(c *budget.Call, o budget.Outcome)
	Counters(c *budget.Call) map[string]any
	Refund(c *budget.Call)
}

// budgetCall fills the call's budget.Call once, from the event and the
// arguments.
func (c *call) budgetCall() *budget.Call {
	if c.bud == nil {
		c.bud = &budget.Call{Tool: c.ev.Tool, Agent: c.ev.Agent, Session: c.ev.Session, Args: c.args}
		setUpstream(c.bud, &c.cn)
	}
	return c.bud
}

// admitBudget runs the budget step for a call about to be dispatched: nil
// lets it go (after any wait its upstream's rate asked for), else the
// refusal. A caller that went away while it waited is not refused: ok is
// false, and the call is recorded as the caller's.
func (c *call) admitBudget() (ref *refusal, ok bool) {
	b := c.budgetCall()
	v := c.st.Budgets.Admit(c.in.Context(), b)
	c.noteLimitScope(v.Scope)
	if !v.Refused {
		return nil, true
	}
	if c.client.Err() != nil {
		return nil, false
	}
	c.noteBudget(v.Name)
	return budgetRefusal(v), true
}

// budgetRefusal is the refusal of a call the budget step refused.
func budgetRefusal(v budget.Verdict) *refusal {
	ref := refuse(v.Code, v.Reason, v.Detail, []policies.Violation{budgetViolation(v)})
	ms := max(1, v.RetryAfter.Milliseconds())
	ref.retryAfterMS = &ms
	return ref
}

// admitMCP runs the budget step for the tools/call messages of an MCP
// request that passed every other check, each counted as a call of its
// MCP tool (params.name). A batch is all or nothing, as its refusals are:
// when one of its calls is refused, those admitted before it are
// refunded. It returns the index of the refused message (-1: none), and
// false when the caller went away while a call waited for its turn.
func (c *call) admitMCP(r *http.Request, msgs []rpcMessage, refs []*refusal) (int, bool) {
	var admitted []*budget.Call
	for i := range msgs {
		if msgs[i].Method != methodToolsCall {
			continue
		}
		tc, bad := parseToolCall(msgs[i].Params)
		if bad != nil {
			continue // refused already, were it not a batch of passing calls
		}
		b := &budget.Call{Tool: tc.name, Route: c.t.cfg.Name, Agent: c.ev.Agent, Session: c.ev.Session, Args: tc.args}
		setUpstream(b, &c.cn)
		v := c.st.Budgets.Admit(r.Context(), b)
		c.noteLimitScope(v.Scope)
		if !v.Refused {
			admitted = append(admitted, b)
			continue
		}
		for _, a := range admitted {
			c.st.Budgets.Refund(a)
		}
		if c.client.Err() != nil {
			return -1, false
		}
		c.noteBudget(v.Name)
		refs[i] = budgetRefusal(v)
		return i, true
	}
	if len(admitted) > 0 {
		c.bud = admitted[0]
	}
	return -1, true
}

// budgetViolation names the budget or limiter that refused, its limit and
// its window, for the envelope's violations.
func budgetViolation(v budget.Verdict) policies.Violation {
	limit := strconv.FormatFloat(v.Limit, 'f', -1, 64) + " " + v.Unit
	if v.Window > 0 {
		limit += " per " + v.Window.String()
	}
	var msg string
	switch v.Reason {
	case bucketing.ReasonBudgetExhausted:
		msg = fmt.Sprintf("budget '%s' exhausted", v.Name)
	case bucketing.ReasonLoopDetected:
		msg = "same call repeated in this session"
		limit = "at most " + limit
	case bucketing.ReasonUpstreamBackoff:
		msg = fmt.Sprintf("upstream %s backing off", v.Name)
		limit = "no calls until its Retry-After ends"
	case bucketing.ReasonLimitUnavailable:
		msg = fmt.Sprintf("the fleet's counter for %s could not be reached (state.redis)", v.Name)
		limit = "on_unavailable: deny"
	default:
		msg = fmt.Sprintf("rate limit of upstream %s", v.Name)
	}
	return policies.Violation{Path: "", Reason: v.Reason, Message: msg, Expected: limit}
}

// settleBudget tells the budget step how an admitted call ended.
func (c *call) settleBudget(res bucketing.Result) {
	o := budget.Outcome{Code: res.Code, Header: c.upHeader}
	if res.RetryAfterMS != nil {
		o.RetryAfter = time.Duration(*res.RetryAfterMS) * time.Millisecond
	}
	c.st.Budgets.Settle(c.bud, o)
}

// budgetInput is input.budget for a call's policies: nil without budgets.
func (c *call) budgetInput() map[string]any {
	if c.st.Budgets == nil || c.t == nil || c.mcp != nil {
		return nil
	}
	return c.st.Budgets.Counters(c.budgetCall())
}
