package bucketing

import (
	"errors"
	"strconv"
)

// ErrInvalidRule is the sentinel every *RuleError matches with errors.Is.
var ErrInvalidRule = errors.New("invalid bucketing rule")

// RuleError is one problem with one rule, as Rules.Validate reports it.
type RuleError struct {
	// Index is the rule's position in its Rules, from 0.
	Index int
	// Problem says what is wrong and what would be accepted.
	Problem string
}

// Error returns the problem prefixed with the rule's index, such as
// `rules[2]: unknown code "ratelimit"; expected one of: ok, validation, ...`.
func (e *RuleError) Error() string {
	return "rules[" + strconv.Itoa(e.Index) + "]: " + e.Problem
}

// Is reports whether target is ErrInvalidRule.
func (e *RuleError) Is(target error) bool { return target == ErrInvalidRule }
