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

import "github.com/toolgate/toolgate/bucketing"

// Violation is one problem with a call: a schema violation or a policy
// denial. It is the envelope's violation (bucketing.Violation), so a
// refusal carries what the checks found as it is; see there for its
// fields.
type Violation = bucketing.Violation
