// Package sink carries toolgate's invocation events from the request path to
// where analysts read them: the Event type, the Writer interface that every
// destination satisfies, a bounded asynchronous Queue in front of it, and the
// destinations themselves (an NDJSON file with rotation; a disk spool in
// front of a slower destination). The ClickHouse destination lives in
// sink/clickhouse, so that the data path, which imports sink for Event and
// Writer, does not link clickhouse-go.
//
// The request path only ever calls Queue.Record, which returns once the
// event has been written (to the page cache: a killed process loses
// nothing), or after a bounded wait (QueueConfig.MaxWait); when the queue
// is full the event is dropped and counted, never silently.
package sink

import (
	"context"
	"time"
)

// Event is one tool call as analysts see it: exactly one per call, refused or
// forwarded. It never holds argument values, only their paths.
type Event struct {
	// EventID is a random UUID; duplicates of one id are the same call.
	EventID string `json:"event_id"`
	// Time is when the call arrived at the sidecar, in UTC.
	Time time.Time `json:"time"`
	// Sidecar names the sidecar instance that saw the call (host name by default).
	Sidecar string `json:"sidecar"`
	// Listener is the listener kind that took the call: forward, reverse,
	// transparent or connect.
	Listener string `json:"listener"`
	// Tool is the matched tool's name, or "" when no tool matched.
	Tool string `json:"tool"`
	// Agent is the calling agent, from the configured agent header.
	Agent string `json:"agent"`
	// Session is the caller's session, from the configured session header.
	Session string `json:"session"`
	// TraceID is the W3C trace id from traceparent, or a generated one.
	TraceID string `json:"trace_id"`
	// Method is the HTTP method.
	Method string `json:"method"`
	// Host is the upstream host (and port, when not the scheme's default).
	Host string `json:"host"`
	// PathTemplate is the matched tool's path template, never the raw path
	// (path segments may carry argument values). "" when no tool matched.
	PathTemplate string `json:"path_template"`
	// UpstreamStatus is upstream's HTTP status, or 0 when upstream was never
	// reached or never answered.
	UpstreamStatus int `json:"upstream_status"`
	// OK is true when the call succeeded after bucketing.
	OK bool `json:"ok"`
	// ErrorCode is the bucket (validation, policy, rate_limit, auth,
	// upstream, unknown), or "" when OK.
	ErrorCode string `json:"error_code"`
	// ErrorClass is user, policy, transient or terminal, or "" when OK.
	ErrorClass string `json:"error_class"`
	// Reason is the finer reason, such as unknown_field or status_5xx.
	Reason string `json:"reason"`
	// Detail is the human sentence the caller got; it never holds values.
	Detail string `json:"detail"`
	// ViolationPaths are the JSON pointers of every violation.
	ViolationPaths []string `json:"violation_paths"`
	// Envelope is true when the caller took the envelope: it asked for it
	// (or its tool forces it) and its answer was enveloped. It is false for
	// legacy callers, even when a refusal or a transport failure answered
	// them in the envelope, and for answers that passed through raw
	// (binary, streamed, too large). The adoption view counts it.
	Envelope bool `json:"envelope"`
	// Refused is true when toolgate answered itself and upstream was never called.
	Refused bool `json:"refused"`
	// RetryAfterMS is upstream's Retry-After in milliseconds, or 0.
	RetryAfterMS int64 `json:"retry_after_ms"`
	// TotalUS is the time from the request's arrival to the end of the
	// answer's body, in microseconds.
	TotalUS int64 `json:"total_us"`
	// UpstreamUS is the time from dispatch to the end of upstream's body, in
	// microseconds; 0 when upstream was not called.
	UpstreamUS int64 `json:"upstream_us"`
	// RequestBytes is the size of the request body read from the caller.
	RequestBytes int64 `json:"request_bytes"`
	// ResponseBytes is the size of the body sent back to the caller.
	ResponseBytes int64 `json:"response_bytes"`
	// ConfigVersion is the content hash of the configuration (and its
	// schemas) that decided the call.
	ConfigVersion string `json:"config_version"`
	// PolicyVersion is the content hash of the policy set that decided the
	// call.
	PolicyVersion string `json:"policy_version"`
	// DryRunDenied is true when a dry-run policy would have refused the
	// call; it went upstream anyway.
	DryRunDenied bool `json:"dry_run_denied"`
	// DryRunViolations are the would-be denial messages of dry-run policies.
	DryRunViolations []string `json:"dry_run_violations"`
	// PolicyError names policies that failed or ran past their deadline
	// while the tool fails open ("name: policy_timeout"); "" when none did.
	PolicyError string `json:"policy_error"`
	// MCPServer is the MCP server of a call on an MCP route: its host (and
	// port) and path, such as "mcp.example.com/mcp". "" for plain HTTP calls.
	MCPServer string `json:"mcp_server"`
	// RPCMethod is an MCP request's JSON-RPC method ("tools/call",
	// "tools/list", "initialize", "notifications/initialized"), "batch" for
	// a batch, or "" for plain HTTP calls, MCP GET and DELETE requests and
	// bodies that are not JSON-RPC.
	RPCMethod string `json:"rpc_method"`
	// RPCID is the JSON-RPC id as its JSON text (7, "a1"), at most 128
	// bytes; "" for notifications and plain HTTP calls.
	RPCID string `json:"rpc_id"`
	// Inspected is true when toolgate read the call and ran every check
	// that applies to it: a call matched to a plain tool, an MCP message
	// it parsed, a tools/call whose arguments were checked against a
	// schema. It is false for unmatched calls, CONNECT tunnels, and
	// tools/call it passed without a schema (mcp.unknown_tool: pass, a
	// schema too large or not compilable).
	Inspected bool `json:"inspected"`
	// Outcome is what an MCP server answered to a tools/call, one of the
	// Outcome* constants. "" for everything else.
	Outcome string `json:"outcome"`
	// MCPProtocol is the MCP protocol version of a message on an MCP route:
	// the request's io.modelcontextprotocol/protocolVersion (2026-07-28 and
	// later, which carry it on every request), else its MCP-Protocol-Version
	// header, else an initialize request's params.protocolVersion; "" when
	// none says (and for plain HTTP calls).
	MCPProtocol string `json:"mcp_protocol"`
	// Approval is the approval state of a call that needs a person's
	// approval: pending (refused, asked), approved (forwarded on a grant),
	// denied, revised, held_timeout (held until hold_timeout, then
	// refused), unavailable (the store failed); "" for calls that need none.
	Approval string `json:"approval"`
	// Budget names what refused the call in the budget step: a budget's
	// name (budget_exhausted), "loops" (loop_detected), or the upstream
	// host whose rate limit or backoff refused it (local_rate_limit,
	// upstream_backoff). "" otherwise.
	Budget string `json:"budget"`
	// LimitScope says which counters decided the budget step: "fleet"
	// (the fleet's shared Redis, state.redis) or "local" (this sidecar's
	// own: no state.redis, or Redis could not answer and the limits fell
	// back as on_unavailable says). "" when no budget, loop rule or rate
	// applied to the call.
	LimitScope string `json:"limit_scope"`
	// Answer is what the answer checks (a tool's or MCP route's answer:
	// section) did with upstream's answer, one of the Answer* constants;
	// "" when the call has no answer checks or upstream never answered.
	Answer string `json:"answer"`
	// AnswerFindings are the kinds of what the answer checks found in the
	// answer (a detector's kind such as secret.github_token or pii.email,
	// "schema" for an answer that broke its schema, a policy's name), each
	// at most once, never the values found.
	AnswerFindings []string `json:"answer_findings"`
	// Redactions is how many values in the answer were replaced before the
	// caller saw it (0 when none, and when only a dry run would have).
	Redactions int64 `json:"redactions"`
	// DefinitionChanges lists the MCP tool definitions that differed from
	// their pins in the tools/list answer (or the tools/call) this event is
	// about, each as "tool: field,field" with the names of the fields that
	// changed (description, inputSchema, ...), never their values; empty
	// when every definition matched its pin.
	DefinitionChanges []string `json:"definition_changes"`
	// ArgShape is the shape of the call's arguments, never their values, on
	// a tool in observe mode: member names, JSON types, presence, nesting
	// and recognised formats as compact JSON (proxy/argshape), at most 4000
	// bytes; "" (and absent from the event's JSON) for a tool that does
	// not observe.
	ArgShape string `json:"arg_shape,omitempty"`
}

// The verdicts of the answer checks (Event.Answer).
const (
	AnswerPassed        = "passed"         // checked, and passed unchanged
	AnswerRedacted      = "redacted"       // checked, and passed with values replaced
	AnswerWithheld      = "withheld"       // checked, and refused: the caller never saw it
	AnswerWouldRedact   = "would_redact"   // dry run: passed unchanged, enforcing would have redacted
	AnswerWouldWithhold = "would_withhold" // dry run: passed, enforcing would have withheld
	AnswerUninspected   = "uninspected"    // passed unchecked: larger than the bound, or a stream declared uninspected
)

// The outcomes of an MCP tools/call (Event.Outcome).
const (
	OutcomeOK       = "ok"         // a result
	OutcomeToolErr  = "tool_error" // a result with isError true
	OutcomeRPCError = "rpc_error"  // a JSON-RPC error
	OutcomeRefused  = "refused"    // toolgate answered itself
	OutcomeNoAnswer = "no_answer"  // the answer ended without a response to the call
	OutcomeUnread   = "unread"     // the answer could not be read: too large, or not JSON-RPC
	// OutcomeInputRequired is an MRTR interim result (resultType
	// "input_required", 2026-07-28): the server asked the client for
	// input; the client's retry is a call of its own.
	OutcomeInputRequired = "input_required"
)

// Writer is a destination for events: a file, ClickHouse. WriteEvents is
// called from a single goroutine with batches in arrival order; an error
// means the batch was not stored, and the caller may retry it. WriteEvents
// must not keep the slice after it returns (a Queue reuses it), and should
// return soon after ctx ends.
type Writer interface {
	WriteEvents(ctx context.Context, events []Event) error
}

// Appender is a Writer whose WriteEvents appends to a local file (one
// write(2), or one copy into a memory-mapped segment) and never waits on
// the network or an fsync: File and Spool. A
// Queue in front of one lets a call that finds the writer idle write its
// own event (see Queue). AppendsLocally does nothing; it marks the type.
type Appender interface {
	Writer
	AppendsLocally()
}

// Syncer is a Writer that can force what it wrote to stable storage
// (fsync). A Queue in front of one calls Sync every
// QueueConfig.SyncInterval while it writes, from a goroutine of its own,
// so Sync must be safe to call while WriteEvents runs, and should not make
// it wait.
type Syncer interface {
	Sync() error
}
