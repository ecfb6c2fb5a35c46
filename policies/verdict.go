package policies

// Verdict is what a tool's checks decide for one call, found without
// sending anything: `toolgate policy eval` and `toolgate policy test` print
// and compare it. proxy.Evaluate and proxy.EvaluateMCP find it as the
// sidecar's chain would, without dispatch.
type Verdict struct {
	// Allowed is true when the call would go upstream.
	Allowed bool
	// Status is the HTTP status of the refusal; 0 when allowed.
	Status int
	// Envelope is the exact body a refused caller gets; nil when allowed.
	Envelope []byte
	// Code, Reason and Detail are the refusal's; empty when allowed.
	Code, Reason, Detail string
	// Paths are the violations' JSON pointers.
	Paths []string
	// Messages are the violations' messages.
	Messages []string
	// Inject are the headers that would be added upstream: the tool's
	// inject_headers, then the policies'. Secrets from the environment are
	// shown as "(set)".
	Inject map[string]string
	// InjectOrigin says, when Inject is not empty, the only origin the
	// headers go to (the tool's: its scheme, host and port) and the
	// settings that widen it; a call sent elsewhere is refused
	// (policy/origin_mismatch).
	InjectOrigin string
	// DryRun are the messages of dry-run policies that would have denied.
	DryRun []string
	// PolicyError names policies that failed while the tool fails open.
	PolicyError string
	// Answer is, for a refused MCP tools/call (EvaluateMCP), the JSON-RPC
	// response the caller gets over HTTP 200: a result with isError true,
	// the text for the model and the envelope as structuredContent. Nil
	// otherwise.
	Answer []byte
	// Approval is, for an allowed call, a policy's request that a person
	// approve it (the sidecar would hold or refuse it until then); nil
	// when no policy asks. A tool's approvals.tools rule is not shown.
	Approval *Approval
	// Unchecked is true for an MCP tools/call no schema checked (a tool
	// the list lacks on a route with unknown_tool: pass, a schema too large
	// or that does not compile): the sidecar records it inspected=false.
	Unchecked bool
}
