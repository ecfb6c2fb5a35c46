package proxy

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// Budgeter is the budget step: budgets, loop breaking and the upstream's
// rate limit and backoff. proxy declares what it needs of one here, in its
// own types, so it links no budget engine; the binary adapts its engine
// (policies/budget) to it where it wires the snapshot. Admit decides and
// charges a call that passed every other check, just before dispatch;
// Settle completes an admitted call with its outcome; Refund gives back
// what Admit charged for a call that will not be dispatched after all (an
// MCP batch one of whose calls was refused); Counters is what policies see
// as input.budget, read without charging.
type Budgeter interface {
	Admit(ctx context.Context, c BudgetCall) (BudgetVerdict, BudgetTicket)
	Settle(t BudgetTicket, o BudgetOutcome)
	Counters(c BudgetCall) map[string]any
	Refund(t BudgetTicket)
}

// BudgetCall is what a Budgeter is told of one call. proxy fills it per
// call (per tools/call message on an MCP route) and passes it by value, so
// handing it over allocates nothing; Args are read, never changed.
type BudgetCall struct {
	// Tool is the matched tool's name; for a tools/call on an MCP route,
	// the MCP tool's name (params.name).
	Tool string
	// Route is the configured tool of an MCP route a tools/call came
	// through ("" otherwise).
	Route string
	// Agent and Session are the caller's, from the configured headers; ""
	// when the call carried none.
	Agent, Session string
	// Upstream is the host of the upstream the call goes to, written as
	// the host part of UpstreamKey's keys (IPv6 without brackets, every
	// loopback host as "localhost").
	Upstream string
	// UpstreamPort is the call's port ("443").
	UpstreamPort string
	// UpstreamDefaultPort says UpstreamPort is its scheme's default.
	UpstreamDefaultPort bool
	// Args are the call's arguments.
	Args map[string]any
}

// BudgetTicket is a Budgeter's own record of a call it admitted (what it
// charged), returned by Admit and handed back, unread, to Settle or
// Refund. Settle and Refund of a ticket whose call was refused do nothing.
type BudgetTicket any

// BudgetVerdict is a Budgeter's answer to one call. The zero value lets
// the call through.
type BudgetVerdict struct {
	// Refused is true when the call must not go upstream.
	Refused bool
	// Code and Reason are the refusal's, from bucketing's vocabulary.
	Code   bucketing.Code
	Reason string
	// Name is the budget (its name), "loops", or the upstream host that
	// refused.
	Name string
	// Detail is one sentence for the caller; it never holds an argument
	// value.
	Detail string
	// RetryAfter is when the same call may pass again.
	RetryAfter time.Duration
	// Limit is the budget's limit (calls, or cost when Unit is "cost"),
	// the loop's max_repeats, or the upstream's rate per second.
	Limit float64
	// Unit is what Limit counts: "calls", "cost", "repeats" or "calls/s".
	Unit string
	// Window is the budget's or the loop's window; 0 for upstreams.
	Window time.Duration
	// Waited is how long the call waited for its turn under an upstream's
	// rate before it was let through.
	Waited time.Duration
	// Scope is which counters decided the call ("fleet": the fleet's
	// shared state; "local": this sidecar's), or "" when no budget, loop
	// rule or rate applied to it; recorded as the event's limit scope.
	Scope string
}

// BudgetOutcome is how an admitted call ended, for Settle.
type BudgetOutcome struct {
	// Code is the call's bucketed error code (CodeNone when it succeeded).
	Code bucketing.Code
	// RetryAfter is upstream's Retry-After (0 when none).
	RetryAfter time.Duration
	// Header is upstream's answer's header (nil when upstream never
	// answered), where a cost header is read.
	Header http.Header
}

// budgetCall is the call as the budget step sees it, from the event, the
// arguments and the canonical form. It allocates nothing.
func (c *call) budgetCall() BudgetCall {
	b := BudgetCall{Tool: c.ev.Tool, Agent: c.ev.Agent, Session: c.ev.Session, Args: c.args}
	setUpstream(&b, &c.cn)
	return b
}

// admitBudget runs the budget step for a call about to be dispatched: nil
// lets it go (after any wait its upstream's rate asked for), else the
// refusal. A caller that went away while it waited is not refused: ok is
// false, and the call is recorded as the caller's.
func (c *call) admitBudget() (ref *refusal, ok bool) {
	v, t := c.st.Budgets.Admit(c.in.Context(), c.budgetCall())
	c.bud = t
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
func budgetRefusal(v BudgetVerdict) *refusal {
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
func (c *call) admitMCP(r *http.Request, msgs []mcp.Message, refs []*refusal) (int, bool) {
	var admitted []BudgetTicket
	for i := range msgs {
		if msgs[i].Method != mcp.MethodToolsCall {
			continue
		}
		tc, bad := mcp.ParseToolCall(msgs[i].Params)
		if bad != nil {
			continue // refused already, were it not a batch of passing calls
		}
		b := BudgetCall{Tool: tc.Name, Route: c.t.cfg.Name, Agent: c.ev.Agent, Session: c.ev.Session, Args: tc.Args}
		setUpstream(&b, &c.cn)
		v, t := c.st.Budgets.Admit(r.Context(), b)
		c.noteLimitScope(v.Scope)
		if !v.Refused {
			admitted = append(admitted, t)
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
func budgetViolation(v BudgetVerdict) policies.Violation {
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
	o := BudgetOutcome{Code: res.Code, Header: c.upHeader}
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
