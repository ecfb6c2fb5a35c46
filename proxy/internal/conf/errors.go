package conf

import (
	"errors"

	"github.com/toolgate/toolgate/proxy/mcp"
)

// Sentinels for bounded inputs. Each maps to one answer in exactly one place
// (handle): errBodyTooLarge to validation/body_too_large, errBodyTimeout to
// validation/body_timeout, errClientBody to a
// caller that went away, which is not a failure of the tool.
var (
	ErrBodyTooLarge = errors.New("request body exceeds the limit")
	errClientBody   = errors.New("reading the caller's body failed")
	// errBodyTimeout marks a body that did not arrive within
	// limits.body_timeout: validation/body_timeout, 408.
	ErrBodyTimeout = errors.New("the caller's body did not arrive in time")
	// errOtherName marks an upstream connection the dial guard refused: a
	// call under a name that is not a tool host reached a loopback host a
	// tool names. It becomes policy/not_allowlisted.
	ErrOtherName = errors.New("the connection reached a loopback tool host under another name")
	// errEventLost ends a raw answer's body whose call's event was not
	// kept (events.on_write_failure: refuse): the caller's connection is
	// cut before the last bytes.
	ErrEventLost = errors.New("the call's event could not be written")
)

// ErrNotToolsList is EvaluateMCP's error for a recorded tools/list
// (MCPTools.List) that is not one whole tools/list answer within the
// route's mcp.max_message_bytes.
var ErrNotToolsList = mcp.ErrNotToolsList
