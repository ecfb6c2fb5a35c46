package mcp

import (
	"encoding/json"
	"fmt"
)

// Reading a server's response the way every client does. An MCP route's
// answer checks read a tools/call result to check it (its
// structuredContent against the tool's outputSchema, its text through the
// detectors); a result some client reads differently from toolgate could
// carry what the checks never saw. The clients whose rules count are the
// readers of readers.go seen from the other side: the Go SDK and the
// TypeScript SDK match member names exactly, a hand-written Go client
// decoding with encoding/json matches them up to case, and a Python
// client (pydantic) also by their snake_case names.

// namesResult are a tools/call result's members that decide what a client
// reads: the text, the structured result, whether it is an error.
var namesResult = newRPCNames("content", "structuredContent", "isError", "_meta", "resultType")

// CheckResponseReading returns an error when a response message (raw)
// could be read differently by some client than by toolgate: a member of
// the message, of its error or of its result that is a known name in
// another letter case or with underscores ("StructuredContent",
// "is_error"), or an id that is not one every reader holds the same.
// Duplicate names are the caller's to check (proxy's checkJSONNames).
func CheckResponseReading(raw []byte) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return fmt.Errorf("%w: %v", ErrNotRPC, err)
	}
	for k := range obj {
		if n := namesMessage.variant([]byte(k)); n != "" {
			return spellingError("the message's", []byte(k), n)
		}
	}
	if err := checkID(obj["id"]); err != nil {
		return err
	}
	if err := checkSpelling("error's", obj["error"], namesError); err != nil {
		return err
	}
	return checkSpelling("result's", obj["result"], namesResult)
}

// DecodeResponse decodes one message of a server's answer, members matched
// by their exact names: ok is false when raw is not a JSON-RPC message.
func DecodeResponse(raw []byte) (m Message, ok bool) {
	return m, decodeRPC(raw, &m) == nil
}
