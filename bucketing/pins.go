package bucketing

// ReasonDefinitionChanged (policy): an MCP tools/call named a tool whose
// definition differs from its pin (a changed description, schema or
// annotations), that has no reviewed definition, or whose server's tool
// list could not be read; its calls are refused until an operator accepts
// the change (proxy/mcppin, docs/mcp.md "Pinned tool definitions").
const ReasonDefinitionChanged = "definition_changed"
