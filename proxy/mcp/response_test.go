package mcp

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestCheckResponseReading(t *testing.T) {
	tests := []struct {
		name, raw string
		ok        bool
	}{
		{"a result", `{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"n":1},"isError":false,"_meta":{}}}`, true},
		{"an error", `{"jsonrpc":"2.0","id":"a","error":{"code":-32000,"message":"x","data":{}}}`, true},
		{"a notification", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"Progress":1}}`, true},
		{"StructuredContent", `{"jsonrpc":"2.0","id":1,"result":{"StructuredContent":{}}}`, false},
		{"IsError", `{"jsonrpc":"2.0","id":1,"result":{"IsError":true}}`, false},
		{"is_error", `{"jsonrpc":"2.0","id":1,"result":{"is_error":true}}`, false},
		{"CONTENT", `{"jsonrpc":"2.0","id":1,"result":{"CONTENT":[]}}`, false},
		{"Result", `{"jsonrpc":"2.0","id":1,"Result":{}}`, false},
		{"Message in error", `{"jsonrpc":"2.0","id":1,"error":{"code":1,"Message":"x"}}`, false},
		{"id 1.0", `{"jsonrpc":"2.0","id":1.0,"result":{}}`, false},
		{"not an object", `[1]`, false},
	}
	for _, tt := range tests {
		err := CheckResponseReading([]byte(tt.raw))
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrNotRPC)) {
			t.Errorf("%s: %v; want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func TestLearnedOutputSchema(t *testing.T) {
	s := (&Schemas{}).Server("http://127.0.0.1/mcp")
	out := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)
	in := json.RawMessage(`{"type":"object"}`)
	s.Learn([]ListedTool{{Name: "a", InputSchema: in, OutputSchema: out}, {Name: "b", InputSchema: in}, {Name: "c", InputSchema: in, OutputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string","pattern":"("}}}`)}}, true, 10, 1000, nil)
	sch, listed, why := s.OutputSchema("a")
	if !listed || sch == nil || why != nil {
		t.Fatalf("a: %v %v %v", sch, listed, why)
	}
	if vs := sch.Validate(map[string]any{"n": "many"}); len(vs) == 0 {
		t.Error("a's outputSchema let a string through as n")
	}
	if vs := sch.Validate(map[string]any{"n": json.Number("1"), "extra": true}); len(vs) != 0 {
		t.Errorf("a's outputSchema is applied as written, not made strict: %v", vs)
	}
	if _, listed, _ := s.OutputSchema("b"); listed {
		t.Error("b lists no outputSchema")
	}
	if sch, listed, why := s.OutputSchema("c"); !listed || sch != nil || why == nil {
		t.Errorf("c's outputSchema does not compile: %v %v %v", sch, listed, why)
	}
	// The same inputSchema, another outputSchema: the new one holds.
	s.Learn([]ListedTool{{Name: "a", InputSchema: in, OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"string"}}}`)}}, true, 10, 1000, nil)
	if sch, _, _ := s.OutputSchema("a"); sch == nil || len(sch.Validate(map[string]any{"n": "many"})) != 0 {
		t.Error("a's relisted outputSchema is not the one applied")
	}
	s.Learn([]ListedTool{{Name: "a", InputSchema: in, OutputSchema: json.RawMessage(`{"type":"object","description":"longer than twenty bytes"}`)}}, true, 10, 20, nil)
	if sch, listed, why := s.OutputSchema("a"); !listed || sch != nil || !errors.Is(why, ErrSchemaTooLarge) {
		t.Errorf("an outputSchema over max_schema_bytes: %v %v %v", sch, listed, why)
	}
}
