package bucketing

// Reasons of the approval step: a call that needs a person's approval
// (docs/approvals.md). error.approval names the request.
const (
	// ReasonApprovalPending (policy): the call needs a person's approval,
	// which was asked for; retry the same call after retry_after_ms.
	ReasonApprovalPending = "approval_pending"
	// ReasonApprovalDenied (policy): a person denied this call.
	ReasonApprovalDenied = "approval_denied"
	// ReasonRevisionRequested (validation, class user): a person asked
	// for changed arguments; error.approval.note says what to change.
	ReasonRevisionRequested = "revision_requested"
	// ReasonApprovalUnavailable (policy): the call needs approval and the
	// approval store could not be read or written, or holds too many
	// pending requests; the call is refused (fail closed).
	ReasonApprovalUnavailable = "approval_unavailable"
	// ReasonApprovalStateInvalid (policy): an MCP retry carried a
	// requestState that claims to be toolgate's approval state and is not:
	// forged, altered, cut or lapsed. Call again without it.
	ReasonApprovalStateInvalid = "approval_state_invalid"
	// ReasonApprovalMismatch (policy): an MCP retry carried toolgate's
	// approval state for another call (its tool, MCP route, method,
	// destination, arguments, agent or session differ): a call cannot be
	// changed, or moved to another route, under an approval.
	ReasonApprovalMismatch = "approval_mismatch"
)
