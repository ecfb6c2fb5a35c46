package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/proxy/mcp"
)

func TestLearnedSchemasBounded(t *testing.T) {
	var m mcpSchemas
	s := m.server("http://a/mcp")
	tools := make([]mcp.ListedTool, 0, 12)
	for i := range 12 {
		tools = append(tools, mcp.ListedTool{Name: fmt.Sprintf("t%02d", i), InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)})
	}
	tools = append(tools, mcp.ListedTool{Name: "big", InputSchema: json.RawMessage(`{"type":"object","description":"` + strings.Repeat("d", 200) + `"}`)})
	s.learn(tools, true, 10, 100, nil)
	if s.size() != 10 {
		t.Errorf("kept %d tools, want the bound of 10", s.size())
	}
	if s.isListed() || !s.isCut() {
		t.Error("a list cut at the bound counts as complete: a dropped tool would be refused as unknown")
	}
	s.learn(tools[:1], true, 10, 100, nil)
	if got := s.names(); !reflect.DeepEqual(got, []string{"t00"}) || !s.isListed() {
		t.Errorf("a complete list keeps %v (listed %v), want [t00]", got, s.isListed())
	}
	s.learn([]mcp.ListedTool{{Name: "big", InputSchema: tools[12].InputSchema}}, false, 10, 100, nil)
	if sch, known, why := s.lookup("big", true); !known || sch != nil || why != errSchemaTooLarge {
		t.Errorf("a schema past the bound: %v %v %v", sch, known, why)
	}
	sch, known, why := s.lookup("t00", true)
	if !known || sch == nil || why != nil {
		t.Fatalf("t00: %v %v %v", sch, known, why)
	}
	if vs := sch.Validate(map[string]any{"b": "x"}); len(vs) != 1 || vs[0].Path != "/b" {
		t.Errorf("learned schema not closed strictly: %+v", vs)
	}
	if again, _, _ := s.lookup("t00", true); again != sch {
		t.Error("an unchanged schema was compiled again")
	}
	// A different schema under the same name replaces the compiled one.
	s.learn([]mcp.ListedTool{{Name: "t00", InputSchema: json.RawMessage(`{"type":"object","properties":{"b":{"type":"string"}}}`)}}, false, 10, 100, nil)
	if sch2, _, _ := s.lookup("t00", true); sch2 == sch || len(sch2.Validate(map[string]any{"b": "x"})) != 0 {
		t.Error("a changed schema was not refreshed")
	}
	for i := range maxMCPServers + 5 {
		m.server(fmt.Sprintf("http://s%d/mcp", i))
	}
	if len(m.servers) != maxMCPServers {
		t.Errorf("%d servers remembered, want the bound of %d", len(m.servers), maxMCPServers)
	}
	if !bytes.Equal(withoutProgressToken(json.RawMessage(`{"progressToken":1,"x":2}`)), []byte(`{"x":2}`)) {
		t.Error("progressToken kept")
	}
}

// TestLearnedSchemasHammer runs lookups, relearning with changing schemas
// and forgetting from many goroutines at once (run with -race): every
// lookup sees a whole schema, old or new, never a torn one.
func TestLearnedSchemasHammer(t *testing.T) {
	var m mcpSchemas
	schemas := []json.RawMessage{
		json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`),
		json.RawMessage(`{"type":"object","properties":{"b":{"type":"string"}}}`),
	}
	const workers, rounds = 8, 200
	done := make(chan struct{})
	for w := range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range rounds {
				s := m.server(fmt.Sprintf("http://s%d/mcp", i%3))
				switch (w + i) % 4 {
				case 0:
					s.learn([]mcp.ListedTool{{Name: "t", InputSchema: schemas[i%2]}}, true, 10, 1<<10, nil)
				case 1:
					m.forget(fmt.Sprintf("http://s%d/mcp", i%3))
				default:
					sch, known, why := s.lookup("t", i%2 == 0)
					if why != nil {
						t.Errorf("lookup: %v", why)
						return
					}
					if known && sch == nil {
						t.Error("a known tool without a schema")
						return
					}
					if sch != nil {
						// Strict, exactly one of a and b is accepted.
						va, vb := len(sch.Validate(map[string]any{"a": "x"})), len(sch.Validate(map[string]any{"b": "x"}))
						strict := i%2 == 0
						if sch.Validate(map[string]any{}) != nil || (strict && (va == 0) == (vb == 0)) {
							t.Errorf("torn schema: a %d, b %d", va, vb)
							return
						}
					}
					_ = s.names()
					_ = s.isListed()
				}
			}
		}()
	}
	for range workers {
		<-done
	}
}

// FuzzMCPEnvelope feeds request bodies and header values from outside to
// the 2026-07-28 readers: they never panic, and a name that matches its
// own plain header always agrees.
func FuzzMCPEnvelope(f *testing.F) {
	f.Add(`{"name":"get_weather","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","traceparent":"00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"}}`, "=?base64?SGVsbG8=?=")
	f.Add(`{"uri":"file:///x","_meta":{"io.modelcontextprotocol/protocolVersion":7}}`, "plain")
	f.Add(`[]`, "=?base64??=")
	f.Fuzz(func(t *testing.T, params, header string) {
		for _, method := range []string{"tools/call", "resources/read", "tools/list"} {
			msg := &mcp.Message{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: method, Params: json.RawMessage(params)}
			env := mcp.ReadEnvelope(msg)
			r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil)
			r.Header["Mcp-Protocol-Version"] = []string{env.Version}
			r.Header["Mcp-Method"] = []string{method}
			r.Header["Mcp-Name"] = []string{header}
			why := mcp.HeaderMismatch(r, msg, env)
			if v, ok := mcp.DecodeHeaderValue(header); ok && env.HasName && v == env.Name && env.Version == mcp.BoundedText(env.Version) && why != "" && isASCIIHeader(env.Version) {
				t.Errorf("name %q from header %q agrees, yet: %s", v, header, why)
			}
			_, _ = traceIDOf(env.Traceparent)
			_ = mcp.ProtocolOf(r, msg, env)
		}
	})
}

func isASCIIHeader(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// TestLearnedListFreshnessAndScope covers the 2026-07-28 caching hints: a
// list with ttlMs goes stale after it (at least minListTTL, so a ttlMs of 0
// does not cost a tools/list per call), one without stays fresh; a private
// list is found only by its authorization context; a list change forgets
// every context's list.
func TestLearnedListFreshnessAndScope(t *testing.T) {
	var m mcpSchemas
	tools := []mcp.ListedTool{{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	zero := int64(0)
	pub := m.server("k")
	pub.learn(tools, true, 10, 1<<10, &zero)
	if pub.stale() {
		t.Fatal("a list with ttlMs 0 is stale at once; want it used for minListTTL")
	}
	old := m.server("old")
	old.learn(tools, true, 10, 1<<10, nil)
	time.Sleep(minListTTL + 100*time.Millisecond)
	if !pub.stale() {
		t.Error("a list with ttlMs 0 is still fresh after minListTTL")
	}
	if old.stale() {
		t.Error("a list without ttlMs went stale; it should last until it changes")
	}
	priv := m.server("k|auth:abc")
	priv.learn([]mcp.ListedTool{{Name: "mine", InputSchema: json.RawMessage(`{"type":"object"}`)}}, true, 10, 1<<10, nil)
	if got := m.resolve("k", "k|auth:abc"); got != priv {
		t.Error("the caller's private list was not found")
	}
	if got := m.resolve("k", "k|auth:def"); got != pub {
		t.Error("another caller got a private list")
	}
	m.forget("k")
	if got := m.resolve("k", "k|auth:abc"); got == priv || got == pub || got.size() != 0 {
		t.Error("a list change did not forget every context's list")
	}
}
