package mcppin

import "errors"

// Sentinels of the package. Callers test them with errors.Is.
var (
	// ErrMalformedList marks a tools/list result ParseTools cannot read as
	// one bounded JSON object with a tools array of objects.
	ErrMalformedList = errors.New("the tools/list result is not readable")
	// ErrDuplicateName marks a tools/list result with an object that names
	// a member twice: readers disagree on which one counts.
	ErrDuplicateName = errors.New("the tools/list result names a member twice in one object")
	// ErrNoPin is Accept's error for a tool that has no pin.
	ErrNoPin = errors.New("the tool has no pin")
	// ErrNoChange is Accept's error for a tool whose listed definition
	// equals its pin: there is nothing to accept.
	ErrNoChange = errors.New("the tool's definition has not changed")
	// ErrStaleAccept is Accept's error when the digest the operator
	// reviewed is not the changed definition last seen: the server changed
	// the tool again since.
	ErrStaleAccept = errors.New("the definition changed again since it was reviewed")
	// ErrBadLockFile marks a lock file that cannot be read; the error
	// names the file and the line.
	ErrBadLockFile = errors.New("bad lock file")
)
