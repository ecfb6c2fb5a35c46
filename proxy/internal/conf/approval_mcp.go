package conf

import (
	"github.com/toolgate/toolgate/policies"
)

// approvalNeeder is an Approver that tells, at the cost of a map lookup,
// whether a call needs approval at all (approval.Gate does), so what only
// the in-band ask needs is read only for calls that need approval.
type ApprovalNeeder interface {
	Needs(q *policies.ApprovalCall) bool
}
