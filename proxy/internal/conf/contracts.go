package conf

import (
	"context"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
)

// Approver is the approval step: it runs after the policies allowed a
// call and before injection and dispatch, and decides whether the call
// needs a person's approval and has it. approval.Gate satisfies it. A call
// that needs none must cost no more than a map lookup.
type Approver interface {
	Approve(ctx context.Context, q *policies.ApprovalCall) policies.ApprovalOutcome
}

// ApprovalNeeder is an Approver that tells, at the cost of a map lookup,
// whether a call needs approval at all (approval.Gate does), so what only
// the in-band ask needs is read only for calls that need approval.
type ApprovalNeeder interface {
	Needs(q *policies.ApprovalCall) bool
}

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

// BudgetScoper is a Budgeter that tells, when a tool's chain is compiled,
// whether anything it counts could ever apply to the tool's calls going
// to upstream host (ToolUpstream; "" when the tool's calls may go to any
// host). A tool it cannot apply to has no budget step. A Budgeter that
// does not implement it gives every tool one.
type BudgetScoper interface {
	MayApply(tool, host string) bool
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
