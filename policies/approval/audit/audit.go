// Package audit holds the approval audit rows: the contract between the
// approval step (policies/approval), which writes and reads them through
// the store interface it declares, and the stores that keep them (its own
// file store, sink/clickhouse's ApprovalStore). Standard library only.
package audit

import "time"

// ApprovalRequest is one audit row: a call that needs a person's approval
// was asked for it. Rows are written once and never changed; the state of
// a request is its row and the ApprovalDecision rows with its ID.
type ApprovalRequest struct {
	// ID identifies the request (32 hex digits).
	ID string `json:"id"`
	// Time is when the request was made, UTC.
	Time time.Time `json:"time"`
	// ExpiresAt is when the request lapses if no one decides it, UTC.
	ExpiresAt time.Time `json:"expires_at"`
	// Key binds the request to one call: a digest of the tool, the MCP
	// route, the method, the canonical upstream URL (scheme, host, port,
	// path, query), the argument digest, an unread body's digest, the
	// agent and the session (policies/approval.BindingKey). The same call
	// retried has the same key; a changed call has another.
	Key string `json:"key"`
	// Tool is the tool's name (an MCP tool's name on MCP routes).
	Tool string `json:"tool"`
	// Method is the call's method, shown to the person deciding ("" in
	// rows written before it was recorded).
	Method string `json:"method,omitempty"`
	// Destination is where the call goes, shown to the person deciding:
	// scheme, host, port and the tool's path template, or the MCP route
	// and its server ("" in rows written before it was recorded).
	Destination string `json:"destination,omitempty"`
	// Agent and Session are the caller's, from the configured headers.
	Agent   string `json:"agent"`
	Session string `json:"session"`
	// ArgsDigest is the SHA-256 of the arguments' canonical JSON, hex.
	ArgsDigest string `json:"args_digest"`
	// Effect is the policy's description of what the call does.
	Effect string `json:"effect"`
	// Summary is the argument fields the policy chose to show.
	Summary map[string]string `json:"summary"`
	// Policy names the policy that asked ("" when the configuration did).
	Policy string `json:"policy"`
	// Sidecar names the sidecar that saw the call.
	Sidecar string `json:"sidecar"`
	// TraceID is the call's trace id, to correlate with its events.
	TraceID string `json:"trace_id"`
}

// ApprovalDecision is one audit row: what a person decided about an
// approval request, or a use of its grant by a sidecar.
type ApprovalDecision struct {
	// ID is the request's ID.
	ID string `json:"id"`
	// Time is when the decision was made, UTC.
	Time time.Time `json:"time"`
	// Verdict is one of the Verdict* constants.
	Verdict string `json:"verdict"`
	// Decider names who decided (as the authorisation established it), or
	// the sidecar that used the grant.
	Decider string `json:"decider"`
	// Note is the decider's note, shown to the caller on a revision
	// request.
	Note string `json:"note"`
}

// The verdicts of an ApprovalDecision.
const (
	VerdictApproved = "approved"
	VerdictDenied   = "denied"
	VerdictRevised  = "revised" // a revision was requested
	VerdictUsed     = "used"    // a sidecar forwarded the call on the grant
)
