# Session-id injection after the check: upstream gets the caller's session
# in X-Session-Id, added only once every check has passed.
package toolgate.session_inject

inject["X-Session-Id"] := input.caller.session if input.caller.session != ""

inject["X-Trace-Id"] := input.trace_id
