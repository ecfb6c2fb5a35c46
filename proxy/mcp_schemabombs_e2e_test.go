package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/sink"
)

// The MCP schema-bomb group of the adversarial suite: a server (or
// whoever answers for it) lists tools whose inputSchema costs minutes and
// gigabytes to compile. Judged by the process's state (how long the first
// call took, how far the heap grew) and by what the real SDK server
// executed: with mcp.unchecked: refuse, no call of a bomb tool reaches
// it; with pass (the default), each does, and its event says why it was
// not checked; a well-formed tool of the same server stays checked.

// schemaBombs are the listed schemas, each under max_schema_bytes.
func schemaBombs() map[string]string {
	nest := func(open, close string, d int) string {
		return `{"type":"object","properties":{"x":` + strings.Repeat(open, d) + `{"type":"string"}` + strings.Repeat(close, d) + `}}`
	}
	var wide, chain, en []string
	for i := range 2500 {
		wide = append(wide, fmt.Sprintf(`{"type":"object","properties":{"p%d":{}}}`, i))
	}
	for i := range 5000 {
		chain = append(chain, fmt.Sprintf(`"d%d":{"$ref":"#/$defs/d%d"}`, i, i+1))
	}
	chain = append(chain, `"d5000":{"type":"string"}`)
	for i := range 20000 {
		en = append(en, fmt.Sprintf("%d", i))
	}
	return map[string]string{
		// The SDK's server lists no schema nested past 1,000 levels; the
		// review's 9,900 is in policies.TestSchemaShapeRefused. Unbounded,
		// 900 levels cost about 10 s and gigabytes.
		"deep_items":      nest(`{"type":"array","items":`, `}`, 900),
		"deep_properties": nest(`{"type":"object","properties":{"a":`, `}}`, 450),
		"wide_anyof":      `{"type":"object","properties":{"x":{"anyOf":[` + strings.Join(wide, ",") + `]}}}`,
		"wide_allof":      `{"type":"object","allOf":[` + strings.Join(wide, ",") + `]}`,
		"ref_chain":       `{"type":"object","properties":{"x":{"$ref":"#/$defs/d0"}},"$defs":{` + strings.Join(chain, ",") + `}}`,
		"huge_enum":       `{"type":"object","properties":{"x":{"enum":[` + strings.Join(en, ",") + `]}}}`,
		"huge_pattern":    `{"type":"object","properties":{"x":{"type":"string","pattern":"` + strings.Repeat("a{1000}", 200) + `"}}}`,
	}
}

// bombServer is a real SDK server listing every schema bomb and one
// well-formed tool, counting the invocations of each.
func bombServer(t *testing.T) (*httptest.Server, map[string]*atomic.Int64) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "bombs", Version: "1.0.0"}, nil)
	counts := map[string]*atomic.Int64{}
	tools := schemaBombs()
	tools["create_issue"] = issueSchema
	for name, schema := range tools {
		n := &atomic.Int64{}
		counts[name] = n
		s.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(schema)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				n.Add(1)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
			})
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv, counts
}

// TestAdversarialMCPSchemaBombs lists the bombs to a sidecar in each
// unchecked mode and calls every tool. Not parallel: it measures the heap.
func TestAdversarialMCPSchemaBombs(t *testing.T) {
	for _, mode := range []string{"refuse", "pass"} {
		t.Run(mode, func(t *testing.T) {
			up, counts := bombServer(t)
			cfg := strings.ReplaceAll(mcpConfig, "MCPUP", up.URL) + "    mcp: {unchecked: " + mode + "}\n"
			e := newEnvTo(t, cfg, nil, nil, nil, 10*time.Millisecond)
			proxyURL := &url.URL{Scheme: "http", Host: e.srv.Addr("forward", 0)}
			cs := connect(t, up.URL+"/mcp", &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}, "2025-11-25", nil)

			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			var tried, refused, reached int
			for name := range schemaBombs() {
				tried++
				res := callTool(t, cs, name, map[string]any{"x": "a"})
				ref := refusalOf(t, res)
				switch n := counts[name].Load(); {
				case mode == "refuse" && (n != 0 || ref == nil || ref.Reason != "unchecked" || !strings.Contains(ref.Detail, "schema_too_complex")):
					t.Errorf("%s: the server ran it %d times, refusal %+v; want refused as unchecked, naming schema_too_complex", name, n, ref)
				case mode == "refuse":
					refused++
				case mode == "pass" && (n != 1 || ref != nil):
					t.Errorf("%s: the server ran it %d times, refusal %+v; want passed once (mcp.unchecked: pass)", name, n, ref)
				default:
					reached++
				}
			}
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			// Unbounded, deep_items alone took over 240 s and ~2 GB; the
			// bounds refuse each bomb before it is compiled.
			if took > 30*time.Second {
				t.Errorf("the calls took %s", took)
			}
			if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 256<<20 {
				t.Errorf("the heap grew by %d MiB", grew>>20)
			}
			t.Logf("unchecked: %s: %d bombs tried, %d refused, %d passed unchecked by configuration, in %s; heap in use %+d MiB",
				mode, tried, refused, reached, took.Round(time.Millisecond), (int64(after.HeapAlloc)-int64(before.HeapAlloc))>>20)

			// The well-formed tool of the same server is still checked.
			if ref := refusalOf(t, callTool(t, cs, "create_issue", map[string]any{"title": "x", "titel": "y"})); ref == nil || counts["create_issue"].Load() != 0 {
				t.Errorf("create_issue with a typo: refusal %+v, server ran it %d times; want refused, never run", ref, counts["create_issue"].Load())
			}
			// /status names every bomb, with its reason.
			got := map[string]string{}
			for _, u := range e.srv.UnusableSchemas() {
				got[u.Tool] = u.Reason
			}
			for name := range schemaBombs() {
				if got[name] != "schema_too_complex" {
					t.Errorf("UnusableSchemas: %s is %q, want schema_too_complex (%v)", name, got[name], got)
				}
			}
			// Each bomb's event says why it was not checked.
			evs := e.waitEventsWhere(t, func(evs []sink.Event) bool {
				n := 0
				for _, ev := range evs {
					if _, bomb := schemaBombs()[ev.Tool]; bomb && ev.RPCMethod == "tools/call" {
						n++
					}
				}
				return n == len(schemaBombs())
			})
			for _, ev := range evs {
				if _, bomb := schemaBombs()[ev.Tool]; !bomb || ev.RPCMethod != "tools/call" {
					continue
				}
				if mode == "pass" && (ev.Inspected || ev.PolicyError != "schema: schema_too_complex") {
					t.Errorf("%s passed: inspected %v, policy_error %q; want false, schema: schema_too_complex", ev.Tool, ev.Inspected, ev.PolicyError)
				}
				if mode == "refuse" && (!ev.Refused || ev.Reason != "unchecked") {
					t.Errorf("%s refused: refused %v, reason %q", ev.Tool, ev.Refused, ev.Reason)
				}
			}
		})
	}
}
