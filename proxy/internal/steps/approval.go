package steps

import (
	"context"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
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

// approvalRefusal is the refusal of an approval outcome; nil when the
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
