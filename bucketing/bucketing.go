// Package bucketing turns the outcome of a tool call (a refusal, an upstream
// status, a transport error, a per-tool rule) into the small set of error codes
// dashboards group by, and encodes the standard envelope.
//
// It imports nothing but the standard library, so every other package can
// share its vocabulary.
package bucketing

// Code is the bucket a failed call falls into. It is what dashboards group by.
type Code string

// The error codes. A count above zero for Unknown is a bug in bucketing.
// CodeOK is not an error code: it is how a Rule spells "this answer is a
// success" in configuration (code: ok); Classify turns it into CodeNone and
// never returns it.
const (
	CodeNone       Code = ""           // the call succeeded
	CodeOK         Code = "ok"         // in a Rule only: treat the matched answer as a success
	CodeValidation Code = "validation" // arguments failed the schema, or upstream answered another 4xx
	CodePolicy     Code = "policy"     // a policy or the allowlist refused the call
	CodeRateLimit  Code = "rate_limit" // upstream 429, or a rule says so
	CodeAuth       Code = "auth"       // upstream 401 or 403
	CodeUpstream   Code = "upstream"   // 5xx, connect or reset, timeout, error hidden in a 200, cut short
	CodeUnknown    Code = "unknown"    // anything else
)

// Codes returns the error codes, in the order dashboards list them:
// every Code but CodeNone and CodeOK.
func Codes() []Code {
	return []Code{CodeValidation, CodePolicy, CodeRateLimit, CodeAuth, CodeUpstream, CodeUnknown}
}

// Class tells a caller what to do next.
type Class string

// The error classes.
const (
	ClassNone      Class = ""
	ClassUser      Class = "user"      // fix the arguments
	ClassPolicy    Class = "policy"    // not allowed; do not retry as is
	ClassTransient Class = "transient" // may succeed if retried later
	ClassTerminal  Class = "terminal"  // will not work
)

// Reasons: the finer word under a Code. Rules may use others.
const (
	ReasonSchema        = "schema"
	ReasonUnknownField  = "unknown_field"
	ReasonMissingField  = "missing_field"
	ReasonWrongType     = "wrong_type"
	ReasonMalformedBody = "malformed_body"
	ReasonBodyTooLarge  = "body_too_large"
	// ReasonUnsupportedMediaType refuses a body toolgate cannot read, or
	// cannot read unambiguously, as the tool's arguments (an unknown or
	// malformed Content-Type, multipart, an encoded body): an upstream
	// might parse arguments from it that no check saw.
	ReasonUnsupportedMediaType = "unsupported_media_type"
	// ReasonDuplicateArgument refuses an argument given twice: by two
	// sources, or by two members of one JSON object (at any depth).
	ReasonDuplicateArgument = "duplicate_argument"
	// ReasonBodyTimeout refuses a call whose body did not arrive in time.
	ReasonBodyTimeout = "body_timeout"
	// ReasonTooManyConnections refuses a connection over a listener's cap.
	ReasonTooManyConnections = "too_many_connections"
	ReasonPolicyDenied       = "policy_denied" // a policy's deny rule fired, or its allow was false
	// ReasonPolicyError (policy): a policy's evaluation failed
	// (conflicting values, a builtin error, a bad decision document).
	ReasonPolicyError = "policy_error"
	// ReasonPolicyTimeout (policy): a policy's evaluation ran past its
	// deadline.
	ReasonPolicyTimeout = "policy_timeout"
	ReasonNotAllowlist  = "not_allowlisted"
	// ReasonAmbiguousRequest (validation): the call's host, port or path
	// has no one canonical form (an encoded '/', a double encoding, a
	// numeric host that is no address, ...), so upstreams could read it
	// differently from toolgate.
	ReasonAmbiguousRequest = "ambiguous_request"
	// ReasonOriginMismatch (policy): a call routed to a tool that injects
	// headers goes to another origin (scheme, host, port) than the tool's.
	ReasonOriginMismatch = "origin_mismatch"
	// ReasonBudgetExhausted (policy): the call is past a budget's calls or
	// cost in its window (budgets.limits); retry_after_ms says when the
	// window frees up.
	ReasonBudgetExhausted = "budget_exhausted"
	// ReasonLoopDetected (policy): the same tool with the same arguments
	// was called more than budgets.loops.max_repeats times in one session
	// within the loop window.
	ReasonLoopDetected = "loop_detected"
	// ReasonLocalRateLimit (rate_limit): the call is over toolgate's own
	// rate limit for its upstream (budgets.upstreams) and was not sent.
	ReasonLocalRateLimit = "local_rate_limit"
	// ReasonUpstreamBackoff (rate_limit): the upstream answered 429 with
	// a Retry-After that has not run out; the call was not sent.
	ReasonUpstreamBackoff = "upstream_backoff"
	ReasonTimeout         = "timeout"
	ReasonConnect         = "connect"
	ReasonTruncated       = "truncated"
	ReasonStatus4xx       = "status_4xx"
	ReasonStatus5xx       = "status_5xx"
	ReasonRateLimited     = "status_429"
	ReasonUnauthorized    = "status_401"
	ReasonForbidden       = "status_403"
	ReasonErrorInBody     = "error_in_body"
	ReasonUnexpected      = "unexpected_status"
	ReasonCanceled        = "canceled" // the call was canceled (the client went away) before upstream's answer was read
	ReasonTLS             = "tls"      // upstream's TLS certificate was not accepted
	ReasonRule            = "rule"     // the default reason of a Rule that names none
)

// ClassOf returns the default class of a code: the class a refusal or an
// upstream failure gets when no rule names one. CodeNone and CodeOK have
// ClassNone; a code it does not know is terminal.
func ClassOf(c Code) Class {
	switch c {
	case CodeNone, CodeOK:
		return ClassNone
	case CodeValidation:
		return ClassUser
	case CodePolicy:
		return ClassPolicy
	case CodeRateLimit, CodeUpstream:
		return ClassTransient
	default:
		return ClassTerminal
	}
}

// ReasonEventsUnavailable (upstream, transient): toolgate cannot write the
// call's event (its events disk is full or failing) and
// events.on_write_failure is refuse: the call was not sent, or, when the
// write failed only after it was sent, its answer was withheld.
const ReasonEventsUnavailable = "events_unavailable"
