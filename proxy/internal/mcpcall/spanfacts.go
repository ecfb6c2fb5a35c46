package mcpcall

import "github.com/toolgate/toolgate/sink"

// spanFacts fills in what an MCP call's span says: the tools/call's tool
// when the server listed it (with its description) or the route
// configures it by name, and the JSON-RPC error that answered the
// request.
func (m *MCPCall) SpanFacts(f *sink.SpanFacts) {
	if name := m.C.Event.Tool; name != "" && m.Srv != nil {
		desc, listed := m.Srv.Described(name)
		if listed || m.Route.Tools[name] != nil {
			f.KnownTool, f.ToolDescription = name, desc
		}
	}
	if resp, _ := m.ans.Response(); resp != nil && resp.Error != nil {
		f.RPCError, f.RPCErrorCode = true, resp.Error.Code
	} else if code, ok := m.ans.RPCError(); ok {
		f.RPCError, f.RPCErrorCode = true, code
	}
}
