package bucketing

import "encoding/json"

// EnvelopeMediaType is the media type a caller names in Accept to ask for the
// envelope instead of upstream's raw answer.
const EnvelopeMediaType = "application/vnd.toolgate.envelope+json"

// Envelope is the one shape every enveloped answer takes. Exactly one of Data
// and Error is meaningful: OK true means Data holds upstream's answer and
// Error is nil; OK false means Data is null and Error says what went wrong.
type Envelope struct {
	// OK is true when the call reached upstream and upstream's answer counts
	// as a success after bucketing rules were applied.
	OK bool `json:"ok"`
	// Data is upstream's answer: its JSON as is, or a JSON string holding a
	// text answer. It is null when OK is false.
	Data json.RawMessage `json:"data"`
	// Error describes the failure. It is nil when OK is true.
	Error *Error `json:"error"`
}

// Error is the error member of the envelope. Dashboards group by Code; LLM
// callers act on Class.
type Error struct {
	// Code is the bucket: validation, policy, rate_limit, auth, upstream or unknown.
	Code Code `json:"code"`
	// Class tells the caller what to do next: user, policy, transient or terminal.
	Class Class `json:"class"`
	// Reason is a finer word than Code, such as unknown_field or status_5xx.
	Reason string `json:"reason"`
	// Detail is one human sentence naming field paths and expected types. It
	// never holds a rejected value or a stack trace.
	Detail string `json:"detail"`
	// Violations lists every problem found, so a caller can fix all of them
	// on its next try. Empty for upstream failures.
	Violations []Violation `json:"violations"`
	// Retryable is true when retrying the same call later may succeed
	// (class transient).
	Retryable bool `json:"retryable"`
	// RetryAfterMS is upstream's Retry-After in milliseconds, or nil when
	// upstream gave none.
	RetryAfterMS *int64 `json:"retry_after_ms"`
	// Upstream describes upstream's answer, or is nil when the call never
	// reached upstream or upstream never answered.
	Upstream *Upstream `json:"upstream"`
	// Approval names the approval a refusal waits for or was decided by
	// (reasons approval_pending, approval_denied, revision_requested);
	// absent otherwise.
	Approval *Approval `json:"approval,omitempty"`
}

// Approval is the envelope's error.approval: which approval request the
// call is bound to, where a person decides it, and what they said.
type Approval struct {
	// ID identifies the approval request; the same call retried gets the
	// same ID until it is decided or expires.
	ID string `json:"id"`
	// State is pending, approved, denied, revised or expired.
	State string `json:"state"`
	// URL is where a person decides the request (the dashboard's
	// Approvals page); empty when none is configured.
	URL string `json:"url,omitempty"`
	// Note is the decider's note (a revision request's instructions);
	// empty when there is none.
	Note string `json:"note,omitempty"`
	// ExpiresAt is when a pending request lapses, RFC 3339 UTC.
	ExpiresAt string `json:"expires_at,omitempty"`
}

// Violation is one problem with a call's arguments or one policy denial:
// what a schema or a policy found, and the envelope's violations member.
// It never holds the rejected value, only its JSON type. Path, Message,
// Expected and Got are sent in the envelope; Reason, Code and Display are
// for toolgate's own use (the refusal's reason and code, Detail's
// sentence) and are not.
type Violation struct {
	// Path is a JSON pointer to the argument concerned ("" for the whole
	// call), such as "/requests/0/txt".
	Path string `json:"path"`
	// Reason is the kind of problem, one of the Reason* words:
	// unknown_field (an argument or field the schema does not declare),
	// missing_field (a required one is absent), wrong_type, or schema for
	// any other schema keyword (bounds, enum, pattern, ...); policies give
	// policy_denied, policy_error or policy_timeout. Not sent in the
	// envelope, whose error.reason says it for the call.
	Reason string `json:"-"`
	// Message says what is wrong, without the rejected value, such as
	// "unknown argument" or "too large". For unknown_field it also lists
	// the names the schema allows there: "unknown argument; expected one
	// of: index, text".
	Message string `json:"message"`
	// Expected says what would have been accepted: "absent", "integer",
	// "array of string", "one of: text, index", "at most 100".
	Expected string `json:"expected,omitempty"`
	// Got names the JSON type that was received ("string", "object";
	// "integer" for an integral number), never the value itself. Empty
	// when nothing was received.
	Got string `json:"got,omitempty"`
	// Code is the code a policy gives this violation: CodePolicy (the
	// default for deny messages) or CodeValidation (argument problems a
	// schema cannot express). Empty for schema violations. Not sent in the
	// envelope.
	Code Code `json:"-"`
	// Display is the path as a Detail sentence shows it, set only where
	// Path alone would be misread: a key made of digits, such as "123",
	// is an object key there, shown quoted (a["123"]), while a pointer
	// "/a/123" reads as an array index (a[123]). Not sent in the envelope;
	// "" otherwise.
	Display string `json:"-"`
}

// Upstream is what the envelope reports of upstream's own answer.
type Upstream struct {
	// Status is upstream's HTTP status code.
	Status int `json:"status"`
	// Body is the start of upstream's body, at most MaxExcerpt bytes, cut at
	// a UTF-8 boundary.
	Body string `json:"body"`
	// Truncated is true when Body is shorter than upstream's body.
	Truncated bool `json:"truncated,omitempty"`
	// Headers holds the useful response headers (Retry-After, rate-limit
	// headers, Content-Type, request ids), by canonical name.
	Headers map[string]string `json:"headers,omitempty"`
}

// MaxExcerpt is the most bytes of upstream's body an envelope carries.
const MaxExcerpt = 1024
