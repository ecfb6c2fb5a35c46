package wasm

import (
	"context"
	"errors"
)

// Errors Eval returns, each wrapped with what happened. Test with
// errors.Is.
var (
	// ErrTrap: the module trapped (unreachable, out-of-bounds access,
	// division by zero, stack overflow) or exited.
	ErrTrap = errors.New("module trapped")
	// ErrMemoryLimit: the module needed more memory than its limit.
	ErrMemoryLimit = errors.New("module exceeded its memory limit")
	// ErrTimeout: the module did not decide within its deadline. It wraps
	// context.DeadlineExceeded, so policies.Set reports policy_timeout.
	ErrTimeout = timeoutError{}
	// ErrBadDecision: the module returned bytes that are not a decision
	// document (garbage, out of bounds, too large).
	ErrBadDecision = errors.New("module returned a bad decision")
	// ErrModuleError: the module reported an error of its own
	// ({"error": "..."}).
	ErrModuleError = errors.New("module reported an error")
	// ErrBuiltin: a builtin an OPA-compiled module left to the host
	// (sprintf, time.parse_rfc3339_ns, units.parse_bytes, ...) failed on its
	// arguments. Builtin errors are strict, as in the Rego interpreter: the
	// call fails rather than the expression being undefined.
	ErrBuiltin = errors.New("builtin failed")
	// ErrClosed: the engine was closed.
	ErrClosed = errors.New("wasm engine closed")
)

type timeoutError struct{}

func (timeoutError) Error() string   { return "timeout" }
func (timeoutError) Is(e error) bool { return e == context.DeadlineExceeded }
