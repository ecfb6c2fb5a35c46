package proxy

import (
	"context"
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

// approve runs the approval step for a plain HTTP call going upstream to
// its canonical target, records its state in the event, and returns the
// refusal when the call may not go upstream now. A body the tool forwards
// without reading it as its arguments is bound as bytes.
func (c *call) approve(ctx context.Context, a Approver) *refusal {
	q := policies.ApprovalCall{
		Tool: c.t.cfg.Name, Arguments: c.args, Agent: c.ev.Agent, Session: c.ev.Session,
		TraceID: c.ev.TraceID, Ask: c.ask, Body: c.unread,
	}
	if n, ok := a.(approvalNeeder); ok && !n.Needs(&q) {
		return nil // the common case costs a map lookup
	}
	c.bindCall(&q, c.in.Method, c.target)
	out := a.Approve(ctx, &q)
	ref := approvalRefusal(out)
	c.noteApproval(out.State, ref)
	return ref
}

// approvalRefusal is the refusal of an approval outcome; nil when the
// call may go upstream.
func approvalRefusal(out policies.ApprovalOutcome) *refusal {
	var ref *refusal
	switch out.State {
	case policies.ApprovalNone, policies.ApprovalApproved:
		return nil
	case policies.ApprovalDenied:
		ref = refuse(bucketing.CodePolicy, bucketing.ReasonApprovalDenied, out.Detail,
			[]policies.Violation{{Reason: bucketing.ReasonApprovalDenied, Message: "denied by a person", Code: bucketing.CodePolicy}})
	case policies.ApprovalRevised:
		msg := "a person asked for changed arguments"
		if out.Note != "" {
			msg += ": " + out.Note
		}
		ref = refuse(bucketing.CodeValidation, bucketing.ReasonRevisionRequested, out.Detail,
			[]policies.Violation{{Reason: bucketing.ReasonRevisionRequested, Message: msg, Code: bucketing.CodeValidation}})
	case policies.ApprovalInvalid:
		ref = refuse(bucketing.CodePolicy, bucketing.ReasonApprovalStateInvalid, out.Detail,
			[]policies.Violation{{Path: "", Reason: bucketing.ReasonApprovalStateInvalid, Message: "requestState is not a valid toolgate approval state", Code: bucketing.CodePolicy}})
		return ref
	case policies.ApprovalMismatch:
		ref = refuse(bucketing.CodePolicy, bucketing.ReasonApprovalMismatch, out.Detail,
			[]policies.Violation{{Path: "", Reason: bucketing.ReasonApprovalMismatch, Message: "the approval state was issued for another call", Code: bucketing.CodePolicy}})
		return ref
	case policies.ApprovalUnavailable:
		ref = refuse(bucketing.CodePolicy, bucketing.ReasonApprovalUnavailable, out.Detail, nil)
	default: // pending, held_timeout
		ref = refuse(bucketing.CodePolicy, bucketing.ReasonApprovalPending, out.Detail,
			[]policies.Violation{{Reason: bucketing.ReasonApprovalPending, Message: "needs a person's approval", Code: bucketing.CodePolicy}})
	}
	if out.RetryAfter > 0 {
		ms := out.RetryAfter.Milliseconds()
		ref.retryAfterMS = &ms
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
		ref.approval = a
	}
	return ref
}
