package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLearnedSchemasBounded(t *testing.T) {
	var m Schemas
	s := m.Server("http://a/mcp")
	tools := make([]ListedTool, 0, 12)
	for i := range 12 {
		tools = append(tools, ListedTool{Name: fmt.Sprintf("t%02d", i), InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)})
	}
	tools = append(tools, ListedTool{Name: "big", InputSchema: json.RawMessage(`{"type":"object","description":"` + strings.Repeat("d", 200) + `"}`)})
	s.Learn(tools, true, 10, 100, nil)
	if s.Size() != 10 {
		t.Errorf("kept %d tools, want the bound of 10", s.Size())
	}
	if s.IsListed() || !s.IsCut() {
		t.Error("a list cut at the bound counts as complete: a dropped tool would be refused as unknown")
	}
	s.Learn(tools[:1], true, 10, 100, nil)
	if got := s.Names(); !reflect.DeepEqual(got, []string{"t00"}) || !s.IsListed() {
		t.Errorf("a complete list keeps %v (listed %v), want [t00]", got, s.IsListed())
	}
	s.Learn([]ListedTool{{Name: "big", InputSchema: tools[12].InputSchema}}, false, 10, 100, nil)
	if sch, known, why := s.Lookup("big", true); !known || sch != nil || why != ErrSchemaTooLarge {
		t.Errorf("a schema past the bound: %v %v %v", sch, known, why)
	}
	sch, known, why := s.Lookup("t00", true)
	if !known || sch == nil || why != nil {
		t.Fatalf("t00: %v %v %v", sch, known, why)
	}
	if vs := sch.Validate(map[string]any{"b": "x"}); len(vs) != 1 || vs[0].Path != "/b" {
		t.Errorf("learned schema not closed strictly: %+v", vs)
	}
	if again, _, _ := s.Lookup("t00", true); again != sch {
		t.Error("an unchanged schema was compiled again")
	}
	// A different schema under the same name replaces the compiled one.
	s.Learn([]ListedTool{{Name: "t00", InputSchema: json.RawMessage(`{"type":"object","properties":{"b":{"type":"string"}}}`)}}, false, 10, 100, nil)
	if sch2, _, _ := s.Lookup("t00", true); sch2 == sch || len(sch2.Validate(map[string]any{"b": "x"})) != 0 {
		t.Error("a changed schema was not refreshed")
	}
	for i := range maxMCPServers + 5 {
		m.Server(fmt.Sprintf("http://s%d/mcp", i))
	}
	if len(m.servers) != maxMCPServers {
		t.Errorf("%d servers remembered, want the bound of %d", len(m.servers), maxMCPServers)
	}
	if !bytes.Equal(WithoutProgressToken(json.RawMessage(`{"progressToken":1,"x":2}`)), []byte(`{"x":2}`)) {
		t.Error("progressToken kept")
	}
}

// TestLearnedSchemasHammer runs lookups, relearning with changing schemas
// and forgetting from many goroutines at once (run with -race): every
// lookup sees a whole schema, old or new, never a torn one.
func TestLearnedSchemasHammer(t *testing.T) {
	var m Schemas
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
				s := m.Server(fmt.Sprintf("http://s%d/mcp", i%3))
				switch (w + i) % 4 {
				case 0:
					s.Learn([]ListedTool{{Name: "t", InputSchema: schemas[i%2]}}, true, 10, 1<<10, nil)
				case 1:
					m.Forget(fmt.Sprintf("http://s%d/mcp", i%3))
				default:
					sch, known, why := s.Lookup("t", i%2 == 0)
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
					_ = s.Names()
					_ = s.IsListed()
				}
			}
		}()
	}
	for range workers {
		<-done
	}
}

// TestLearnedListFreshnessAndScope covers the 2026-07-28 caching hints: a
// list with ttlMs goes stale after it (at least minListTTL, so a ttlMs of 0
// does not cost a tools/list per call), one without stays fresh; a private
// list is found only by its authorization context; a list change forgets
// every context's list.
func TestLearnedListFreshnessAndScope(t *testing.T) {
	var m Schemas
	tools := []ListedTool{{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	zero := int64(0)
	pub := m.Server("k")
	pub.Learn(tools, true, 10, 1<<10, &zero)
	if pub.Stale() {
		t.Fatal("a list with ttlMs 0 is stale at once; want it used for minListTTL")
	}
	old := m.Server("old")
	old.Learn(tools, true, 10, 1<<10, nil)
	time.Sleep(minListTTL + 100*time.Millisecond)
	if !pub.Stale() {
		t.Error("a list with ttlMs 0 is still fresh after minListTTL")
	}
	if old.Stale() {
		t.Error("a list without ttlMs went stale; it should last until it changes")
	}
	priv := m.Server("k|auth:abc")
	priv.Learn([]ListedTool{{Name: "mine", InputSchema: json.RawMessage(`{"type":"object"}`)}}, true, 10, 1<<10, nil)
	if got := m.Resolve("k", "k|auth:abc"); got != priv {
		t.Error("the caller's private list was not found")
	}
	if got := m.Resolve("k", "k|auth:def"); got != pub {
		t.Error("another caller got a private list")
	}
	m.Forget("k")
	if got := m.Resolve("k", "k|auth:abc"); got == priv || got == pub || got.Size() != 0 {
		t.Error("a list change did not forget every context's list")
	}
}
