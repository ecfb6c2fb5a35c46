package mcp

import "encoding/json"

// resultTypeComplete marks a result toolgate makes itself as final, as
// 2026-07-28 asks of every result.
var resultTypeComplete = []byte(`"complete"`)

// MetaEnvelope is the _meta key of an isError result toolgate makes that
// holds its envelope, whatever the tool's outputSchema.
const MetaEnvelope = "toolgate/envelope"

// ToolError is a JSON-RPC response holding a tool result with isError
// true: text for the model, the envelope in _meta (MetaEnvelope) for
// programs, and also as structuredContent when structured is true (a tool
// listed without an outputSchema: see ServerTools.PlainResult). A result for
// a stateless-era request says resultType "complete", as 2026-07-28 asks
// of every result.
func ToolError(id json.RawMessage, text string, envelope []byte, complete, structured bool) []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
	}{"2.0", id, ToolErrorResult(text, envelope, complete, structured, nil)})
	return b
}

// ToolErrorResult is the CallToolResult of ToolError; meta adds _meta
// members (a task's related-task key).
func ToolErrorResult(text string, envelope []byte, complete, structured bool, meta map[string]any) json.RawMessage {
	type content struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type result struct {
		Content           []content       `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
		IsError           bool            `json:"isError"`
		ResultType        json.RawMessage `json:"resultType,omitempty"`
		Meta              map[string]any  `json:"_meta"`
	}
	var rt json.RawMessage
	if complete {
		rt = resultTypeComplete
	}
	m := map[string]any{MetaEnvelope: json.RawMessage(envelope)}
	for k, v := range meta {
		m[k] = v
	}
	res := result{Content: []content{{Type: "text", Text: text}}, IsError: true, ResultType: rt, Meta: m}
	if structured {
		res.StructuredContent = envelope
	}
	b, _ := json.Marshal(res)
	return b
}
