package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
)

// maxBatch bounds the messages of one JSON-RPC batch toolgate inspects; a
// larger batch is refused whole.
const maxBatch = 100

// maxRPCID bounds a JSON-RPC id as recorded in events.
const maxRPCID = 128

// MCP methods toolgate reads.
const (
	// MethodToolsCall calls a tool: the call toolgate checks.
	MethodToolsCall = "tools/call"
	// MethodToolsList lists a server's tools and their schemas.
	MethodToolsList = "tools/list"
	// MethodToolsListChanged is the server's notice that its list changed.
	MethodToolsListChanged = "notifications/tools/list_changed"
)

// Message is one JSON-RPC 2.0 message: a request (method and id), a
// notification (method, no id) or a response (id, and result or error).
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// ErrNotRPC marks a body that is not a JSON-RPC message toolgate reads
// (ParseRPC's errors wrap it).
var ErrNotRPC = errors.New("not a JSON-RPC message")

// IsRequest reports whether m is a request: a method and an id that is not
// null.
func (m *Message) IsRequest() bool {
	return m.Method != "" && len(m.ID) > 0 && !bytes.Equal(m.ID, []byte("null"))
}

// IsResponse reports whether m answers a request.
func (m *Message) IsResponse() bool {
	return m.Method == "" && len(m.ID) > 0 && (m.Result != nil || m.Error != nil)
}

// ParseRPC decodes a POST body holding one JSON-RPC message or a batch of
// them. It fails for anything that is not JSON, a message that is not an
// object, a batch that is empty or larger than maxBatch, and a message
// without jsonrpc "2.0" or without a string method or an id of string or
// number type when it has one; and for a body a server could read
// differently from toolgate (readers.go).
func ParseRPC(body []byte) (msgs []Message, batch bool, err error) {
	if err := checkRPCText(body); err != nil {
		return nil, false, err
	}
	body = TrimJSONSpace(body)
	if len(body) == 0 {
		return nil, false, ErrNotRPC
	}
	if body[0] == '[' {
		var raws []json.RawMessage
		if err := json.Unmarshal(body, &raws); err != nil {
			return nil, true, fmt.Errorf("%w: %v", ErrNotRPC, err)
		}
		if len(raws) == 0 || len(raws) > maxBatch {
			return nil, true, fmt.Errorf("%w: a batch of %d messages (1 to %d are read)", ErrNotRPC, len(raws), maxBatch)
		}
		msgs = make([]Message, len(raws))
		for i, raw := range raws {
			if err := decodeRequest(raw, &msgs[i]); err != nil {
				return nil, true, fmt.Errorf("%w (message %d of the batch)", err, i+1)
			}
		}
		return msgs, true, nil
	}
	var m Message
	if err := decodeRequest(body, &m); err != nil {
		return nil, false, err
	}
	return []Message{m}, false, nil
}

// decodeRequest decodes one message of a request body, refusing one a
// server could read differently from toolgate.
func decodeRequest(raw []byte, m *Message) error {
	obj, err := decodeRPCObject(raw, m)
	if err != nil {
		return err
	}
	return checkRPCReading(obj, m)
}

// decodeRPC decodes one message. Members are matched by their exact names,
// unlike encoding/json's case-insensitive matching; a request whose names
// a server would match otherwise is refused by decodeRequest.
func decodeRPC(raw []byte, m *Message) error {
	_, err := decodeRPCObject(raw, m)
	return err
}

// decodeRPCObject is decodeRPC, returning the message's members as well.
func decodeRPCObject(raw []byte, m *Message) (map[string]json.RawMessage, error) {
	raw = TrimJSONSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, fmt.Errorf("%w: not an object", ErrNotRPC)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotRPC, err)
	}
	*m = Message{ID: obj["id"], Params: obj["params"], Result: obj["result"]}
	if err := unmarshalExact(obj["jsonrpc"], &m.JSONRPC); err != nil || m.JSONRPC != "2.0" {
		return nil, fmt.Errorf("%w: jsonrpc is not \"2.0\"", ErrNotRPC)
	}
	if err := unmarshalExact(obj["method"], &m.Method); err != nil {
		return nil, fmt.Errorf("%w: method is not a string", ErrNotRPC)
	}
	if e := obj["error"]; e != nil && !bytes.Equal(e, []byte("null")) {
		m.Error = new(RPCError)
		if err := json.Unmarshal(e, m.Error); err != nil {
			return nil, fmt.Errorf("%w: error: %v", ErrNotRPC, err)
		}
	}
	if len(m.ID) > 0 {
		switch m.ID[0] {
		case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		default:
			return nil, fmt.Errorf("%w: id must be a string or a number", ErrNotRPC)
		}
	}
	return obj, nil
}

// unmarshalExact decodes an optional string member.
func unmarshalExact(raw json.RawMessage, s *string) error {
	if raw == nil {
		return nil
	}
	return json.Unmarshal(raw, s)
}

// IDText is a JSON-RPC id as recorded in events: its JSON text, bounded.
func IDText(id json.RawMessage) string {
	s := string(id)
	if len(s) > maxRPCID {
		cut := maxRPCID
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}

// ToolCall is a tools/call request's params.
type ToolCall struct {
	// Name is params.name, the tool's name.
	Name string
	// Args are params.arguments, numbers kept as json.Number.
	Args map[string]any
	// Meta is params._meta, as sent.
	Meta json.RawMessage
	// State and Responses are params.requestState and
	// params.inputResponses as sent (2026-07-28 MRTR), their names matched
	// up to case; nil when absent.
	State, Responses json.RawMessage
}

// ParseToolCall reads a tools/call request's params: the tool name and the
// arguments object (numbers kept as json.Number). A Problem is returned for
// params that do not name a tool or whose arguments are not an object.
func ParseToolCall(params json.RawMessage) (ToolCall, *Problem) {
	var p map[string]json.RawMessage // exact member names, as in decodeRPC
	var name string
	if len(params) == 0 || json.Unmarshal(params, &p) != nil || p["name"] == nil || json.Unmarshal(p["name"], &name) != nil || name == "" {
		return ToolCall{}, problem(bucketing.ReasonMalformedBody,
			"A tools/call must name its tool in params.name", []policies.Violation{{Path: "", Reason: bucketing.ReasonMissingField,
				Message: "params.name is missing", Expected: "string"}})
	}
	tc := ToolCall{Name: name, Meta: p["_meta"]}
	for k, v := range p {
		// Up to case, as a case-insensitive decoder on the server reads
		// them (proxy's checkJSONNames refused two names that fold together).
		switch {
		case strings.EqualFold(k, ParamRequestState):
			tc.State = v
		case strings.EqualFold(k, ParamInputResponses):
			tc.Responses = v
		}
	}
	args := bytes.TrimSpace(p["arguments"])
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		tc.Args = map[string]any{}
		return tc, nil
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return tc, problem(bucketing.ReasonMalformedBody,
			fmt.Sprintf("Tool '%s' got arguments that are not valid JSON", tc.Name), nil)
	}
	if _, extra := dec.Token(); extra != io.EOF {
		return tc, problem(bucketing.ReasonMalformedBody,
			fmt.Sprintf("Tool '%s' got arguments with data after their end", tc.Name), nil)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return tc, problem(bucketing.ReasonWrongType,
			fmt.Sprintf("Tool '%s' expects an object of arguments; got %s", tc.Name, JSONType(v)),
			[]policies.Violation{{Path: "", Reason: bucketing.ReasonWrongType, Message: "arguments must be an object", Expected: "object", Got: JSONType(v)}})
	}
	tc.Args = obj
	return tc, nil
}

// ListedTool is one entry of a tools/list result, as toolgate reads it.
type ListedTool struct {
	Name string `json:"name"`
	// Description is the tool's description as listed: raw, so a list
	// whose description is not a string is still read (toolgate did not
	// read it before tracing used it). Only the first maxDescription bytes
	// of a string are kept (ServerTools.Described).
	Description json.RawMessage `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Annotations *ToolHints      `json:"annotations"`
	// OutputSchema: a client validates structuredContent against it (see
	// ServerTools.PlainResult), and so do an MCP route's answer checks
	// (ServerTools.OutputSchema).
	OutputSchema json.RawMessage `json:"outputSchema"`
}

// ToolHints are a tool's behaviour annotations, as the server lists them.
// They are hints from the server, not guarantees (2026-07-28 server/tools:
// clients must treat them as untrusted unless the server is trusted).
type ToolHints struct {
	ReadOnly    *bool `json:"readOnlyHint,omitempty"`
	Destructive *bool `json:"destructiveHint,omitempty"`
	Idempotent  *bool `json:"idempotentHint,omitempty"`
	OpenWorld   *bool `json:"openWorldHint,omitempty"`
}

// CacheScopePrivate is the cacheScope of a list that may differ per
// authorization context (2026-07-28 server/utilities/caching).
const CacheScopePrivate = "private"

// ToolsListResult is a tools/list result. TTLMs and CacheScope are the
// 2026-07-28 freshness hints; earlier servers send neither.
type ToolsListResult struct {
	Tools      []ListedTool `json:"tools"`
	NextCursor string       `json:"nextCursor"`
	TTLMs      *int64       `json:"ttlMs"`
	CacheScope string       `json:"cacheScope"`
	// Raw is the result object as the server wrote it (a copy), set when
	// the result is decoded from JSON: the pins digest every member of each
	// tool, and the typed fields above drop those toolgate does not read.
	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON decodes a tools/list result and keeps its text in Raw.
func (r *ToolsListResult) UnmarshalJSON(data []byte) error {
	type plain ToolsListResult
	if err := json.Unmarshal(data, (*plain)(r)); err != nil {
		return err
	}
	r.Raw = append(json.RawMessage(nil), data...)
	return nil
}

// CallResult is the part of a tools/call result toolgate reads.
type CallResult struct {
	IsError bool `json:"isError"`
}

// Problem is why a tools/call's params cannot be checked: the reason,
// detail and violations of the validation refusal the caller gets.
type Problem struct {
	// Reason is the refusal's reason (a bucketing reason).
	Reason string
	// Detail is one sentence for the caller; it never quotes argument
	// values.
	Detail string
	// Violations say where the params went wrong; nil when none is named.
	Violations []policies.Violation
}

func problem(reason, detail string, vs []policies.Violation) *Problem {
	return &Problem{Reason: reason, Detail: detail, Violations: vs}
}

// JSONType names the type of a value decoded from JSON (numbers as
// "number", integral or not), as refusals name what they got.
func JSONType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}
