// Package exit holds toolgate's exit codes and the two errors by which a
// command's work, in whichever package it lives, chooses one: UsageError
// for a command called wrongly, Status for a command that has already said
// everything on stdout. The command tree in main maps them to the process's
// exit code.
package exit

import "fmt"

// Exit codes.
const (
	OK    = 0
	Error = 1
	Usage = 2
	// Refused is the exit code of `toolgate policy eval` when the checks
	// refuse the call: not an error, an answer a script can branch on.
	Refused = 3
)

// Status ends a command with an exit code and nothing more on stderr: the
// command has already said everything on stdout.
type Status int

func (e Status) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// UsageError marks an error in how the command was called (exit Usage).
type UsageError struct{ error }

// Usagef is a UsageError with a formatted message, as fmt.Errorf makes it.
func Usagef(format string, a ...any) error { return UsageError{fmt.Errorf(format, a...)} }

// AsUsage marks err as a UsageError.
func AsUsage(err error) error { return UsageError{err} }
