package steps

import (
	"context"
	"net"
	"net/url"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/canonical"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
)

// approve runs the approval step for a plain HTTP call going upstream to
// its canonical target, records its state in the event, and returns the
// refusal when the call may not go upstream now. A body the tool forwards
// without reading it as its arguments is bound as bytes.
func approve(c *pipe.Call, ctx context.Context, a conf.Approver) *conf.Refusal {
	q := policies.ApprovalCall{
		Tool: c.Tool.Cfg.Name, Arguments: c.Args, Agent: c.Event.Agent, Session: c.Event.Session,
		TraceID: c.Event.TraceID, Ask: c.Ask, Body: c.Unread,
	}
	if n, ok := a.(conf.ApprovalNeeder); ok && !n.Needs(&q) {
		return nil // the common case costs a map lookup
	}
	BindCall(c, &q, c.In.Method, c.Target)
	out := a.Approve(ctx, &q)
	ref := ApprovalRefusal(out)
	c.NoteApproval(out.State, ref)
	return ref
}

// ApprovalRefusal is the refusal of an approval outcome; nil when the
// call may go upstream.
func ApprovalRefusal(out policies.ApprovalOutcome) *conf.Refusal {
	var ref *conf.Refusal
	switch out.State {
	case policies.ApprovalNone, policies.ApprovalApproved:
		return nil
	case policies.ApprovalDenied:
		ref = conf.Refuse(bucketing.CodePolicy, bucketing.ReasonApprovalDenied, out.Detail,
			[]policies.Violation{{Reason: bucketing.ReasonApprovalDenied, Message: "denied by a person", Code: bucketing.CodePolicy}})
	case policies.ApprovalRevised:
		msg := "a person asked for changed arguments"
		if out.Note != "" {
			msg += ": " + out.Note
		}
		ref = conf.Refuse(bucketing.CodeValidation, bucketing.ReasonRevisionRequested, out.Detail,
			[]policies.Violation{{Reason: bucketing.ReasonRevisionRequested, Message: msg, Code: bucketing.CodeValidation}})
	case policies.ApprovalInvalid:
		ref = conf.Refuse(bucketing.CodePolicy, bucketing.ReasonApprovalStateInvalid, out.Detail,
			[]policies.Violation{{Path: "", Reason: bucketing.ReasonApprovalStateInvalid, Message: "requestState is not a valid toolgate approval state", Code: bucketing.CodePolicy}})
		return ref
	case policies.ApprovalMismatch:
		ref = conf.Refuse(bucketing.CodePolicy, bucketing.ReasonApprovalMismatch, out.Detail,
			[]policies.Violation{{Path: "", Reason: bucketing.ReasonApprovalMismatch, Message: "the approval state was issued for another call", Code: bucketing.CodePolicy}})
		return ref
	case policies.ApprovalUnavailable:
		ref = conf.Refuse(bucketing.CodePolicy, bucketing.ReasonApprovalUnavailable, out.Detail, nil)
	default: // pending, held_timeout
		ref = conf.Refuse(bucketing.CodePolicy, bucketing.ReasonApprovalPending, out.Detail,
			[]policies.Violation{{Reason: bucketing.ReasonApprovalPending, Message: "needs a person's approval", Code: bucketing.CodePolicy}})
	}
	if out.RetryAfter > 0 {
		ms := out.RetryAfter.Milliseconds()
		ref.RetryAfterMS = &ms
	}
	if out.ID != "" {
		state := out.State
		if state == policies.ApprovalHeldTimeout {
			state = policies.ApprovalPending
		}
		a := &bucketing.Approval{ID: out.ID, State: state, URL: out.URL, Note: out.Note}
		if !out.ExpiresAt.IsZero() {
			a.ExpiresAt = out.ExpiresAt.UTC().Format(time.RFC3339)
		}
		ref.Approval = a
	}
	return ref
}

// What a grant binds (policies/approval.Binding): besides the tool, the
// arguments, agent and session, the call's canonical method and the URL it
// goes upstream to, in the canonical form routing matched (canonical.go):
// scheme, host, port (always written, so a grant for one port is not one
// for another), the canonical path as sent upstream, and the query with
// its escapes in canonical form (canonical.Query). A tool that forwards a body
// it does not read as its arguments has the body's bytes bound too. An MCP
// tools/call binds the route (the configured tool that names the server)
// and the server's URL, so an approval given on one route is never
// honoured on another.

// BindCall fills what an approval binds and shows of a call going
// upstream to target (its canonical URL).
func BindCall(c *pipe.Call, q *policies.ApprovalCall, method string, target *url.URL) {
	host, port := pipe.SplitHostPort(target)
	origin := target.Scheme + "://" + net.JoinHostPort(host, port)
	q.Method = method
	q.URL = origin + target.EscapedPath()
	if target.RawQuery != "" {
		q.URL += "?" + canonical.Query(target.RawQuery)
	}
	if c.MCP != nil {
		q.Route = c.Tool.Cfg.Name
		q.Destination = "MCP route " + c.Tool.Cfg.Name + " at " + origin + target.EscapedPath()
		return
	}
	q.Destination = origin + c.Event.PathTemplate
}

// needsApproval reports whether a tool's calls may need approval from a
// before anything about them is read: always when the approver cannot
// tell at the cost of a map lookup. The chain asks once, when it is
// compiled.
func needsApproval(a conf.Approver, tool string) bool {
	if a == nil {
		return false
	}
	n, ok := a.(conf.ApprovalNeeder)
	return !ok || n.Needs(&policies.ApprovalCall{Tool: tool})
}
