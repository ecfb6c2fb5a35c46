package approval

import "errors"

// Errors of Decide.
var (
	ErrNotFound  = errors.New("no such approval request in the last pending_ttl + decision_ttl")
	ErrDecided   = errors.New("approval request already decided")
	ErrExpired   = errors.New("approval request expired")
	ErrVerdict   = errors.New("unknown verdict")
	ErrNoDecider = errors.New("a decision must name who made it")
)

// ErrTokenInvalid is the error of an in-band approval state (an MCP
// requestState) that toolgate did not issue, that was altered, or that
// lapsed.
var ErrTokenInvalid = errors.New("invalid approval state")
