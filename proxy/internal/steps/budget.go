package steps

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// admitBudget runs the budget step for a call about to be dispatched: nil
// lets it go (after any wait its upstream's rate asked for), else the
// refusal. A caller that went away while it waited is not refused: ok is
// false, and the call is recorded as the caller's.
func admitBudget(c *pipe.Call) (ref *conf.Refusal, ok bool) {
	v, t := c.State.Budgets.Admit(c.In.Context(), c.BudgetCall())
	c.Budget = t
	c.NoteLimitScope(v.Scope)
	if !v.Refused {
		return nil, true
	}
	if c.Client.Err() != nil {
		return nil, false
	}
	c.NoteBudget(v.Name)
	return budgetRefusal(v), true
}

// budgetRefusal is the refusal of a call the budget step refused.
func budgetRefusal(v conf.BudgetVerdict) *conf.Refusal {
	ref := conf.Refuse(v.Code, v.Reason, v.Detail, []policies.Violation{budgetViolation(v)})
	ms := max(1, v.RetryAfter.Milliseconds())
	ref.RetryAfterMS = &ms
	return ref
}

// AdmitMCP runs the budget step for the tools/call messages of an MCP
// request that passed every other check, each counted as a call of its
// MCP tool (params.name). A batch is all or nothing, as its refusals are:
// when one of its calls is refused, those admitted before it are
// refunded. It returns the index of the refused message (-1: none), and
// false when the caller went away while a call waited for its turn.
func AdmitMCP(c *pipe.Call, r *http.Request, msgs []mcp.Message, refs []*conf.Refusal) (int, bool) {
	var admitted []conf.BudgetTicket
	for i := range msgs {
		if msgs[i].Method != mcp.MethodToolsCall {
			continue
		}
		tc, bad := mcp.ParseToolCall(msgs[i].Params)
		if bad != nil {
			continue // refused already, were it not a batch of passing calls
		}
		b := conf.BudgetCall{Tool: tc.Name, Route: c.Tool.Cfg.Name, Agent: c.Event.Agent, Session: c.Event.Session, Args: tc.Args}
		conf.SetUpstream(&b, &c.Canon)
		v, t := c.State.Budgets.Admit(r.Context(), b)
		c.NoteLimitScope(v.Scope)
		if !v.Refused {
			admitted = append(admitted, t)
			continue
		}
		for _, a := range admitted {
			c.State.Budgets.Refund(a)
		}
		if c.Client.Err() != nil {
			return -1, false
		}
		c.NoteBudget(v.Name)
		refs[i] = budgetRefusal(v)
		return i, true
	}
	if len(admitted) > 0 {
		c.Budget = admitted[0]
	}
	return -1, true
}

// budgetViolation names the budget or limiter that refused, its limit and
// its window, for the envelope's violations.
func budgetViolation(v conf.BudgetVerdict) policies.Violation {
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
