// Package policies decides whether a tool call may go upstream. It owns the
// decision contract (Input, Decision, Violation, Evaluator), strict JSON
// Schema validation with lax coercion of string-typed sources, and the
// policy sets that run a tool's Rego and WASM policies in order (Set,
// Config.Load).
//
// It does not link OPA: Rego policies are read and compiled by package
// policies/rego, and WASM modules run in package wasm, both reached
// through interfaces this package declares (RegoHost, WasmHost) and wired
// in by cmd. So proxy, which imports this package for the contract and
// the schema, does not link OPA either.
package policies

// Violation is one problem with a call: a schema violation or a policy denial.
// It never holds the rejected value, only its JSON type.
type Violation struct {
	// Path is a JSON pointer to the argument ("" for the call as a whole),
	// such as "/requests/0/txt".
	Path string `json:"path"`
	// Reason is the kind of problem: unknown_field, missing_field,
	// wrong_type, or schema for any other schema keyword (see the Reason*
	// constants); policies may add their own, such as policy_denied.
	Reason string `json:"reason"`
	// Message is a short human statement, such as "unknown argument" or
	// "too large". For unknown_field it also lists the names the schema
	// allows there: "unknown argument; expected one of: index, text".
	Message string `json:"message"`
	// Expected says what would be accepted: "absent", "integer",
	// "array of string", "one of: text, index", "at most 100".
	Expected string `json:"expected,omitempty"`
	// Got is the JSON type received ("string", "object"; "integer" for an
	// integral number), never the value. Empty when nothing was received.
	Got string `json:"got,omitempty"`
	// Code is the envelope code a policy gives this violation: "policy"
	// (the default for deny messages) or "validation" (argument problems a
	// schema cannot express). Empty for schema violations.
	Code string `json:"code,omitempty"`
	// Display is the path as Detail's sentence shows it, set by Validate
	// only where Path alone would be misread: a key made of digits, such
	// as "123", is an object key there, shown quoted (a["123"]), while
	// DisplayPath reads "/a/123" as an array index (a[123]). Not sent in
	// the envelope; "" otherwise.
	Display string `json:"-"`
}
