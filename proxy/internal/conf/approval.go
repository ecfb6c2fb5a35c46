package conf

import (
	"context"

	"github.com/toolgate/toolgate/policies"
)

// Approver is the approval step: it runs after the policies allowed a
// call and before injection and dispatch, and decides whether the call
// needs a person's approval and has it. approval.Gate satisfies it. A call
// that needs none must cost no more than a map lookup.
type Approver interface {
	Approve(ctx context.Context, q *policies.ApprovalCall) policies.ApprovalOutcome
}
