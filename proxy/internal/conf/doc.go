// Package conf is the proxy section made ready: its YAML types and
// defaults (Config, ToolConfig, the mcp, answer and observe sections),
// Validate, which compiles them into the Tools and routes calls are
// matched against, the canonical form of a call (canonical.go) and its
// routing (route.go), the dial and egress guards' view of a call's route
// (guard.go), the refusal every step answers with (refusal.go), and the
// contracts the pipeline consumes from outside (contracts.go: Approver,
// Budgeter). It is the lowest layer of proxy's internal packages and
// imports none of them.
package conf
