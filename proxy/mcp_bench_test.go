package proxy_test

import (
	"context"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkMCP compares an MCP tools/call made directly to an SDK server
// over streamable HTTP with the same call through toolgate (forward proxy
// and reverse listener; the arguments checked against the schema learned
// from the server, strictly), in one run, in both protocol eras (2025-11-25
// with sessions; 2026-07-28, stateless, with its headers checked against
// the body): throughput with 16 clients calling at once, and latency
// percentiles with one client calling in turn.
// Each measurement gets a fresh server and sidecar, so sessions left by one
// do not weigh on the next.
func BenchmarkMCP(b *testing.B) {
	type target = mcpTarget
	// setup starts a server and a sidecar and returns where a route calls.
	setup := func(b *testing.B, route, era string) target {
		up := startMCPUpstreamEra(b, era == "2026-07-28")
		cfg := strings.ReplaceAll(mcpConfig, "MCPUP", up.srv.URL)
		if route == "forward-answers" {
			// The route's answer checks: the result held and scanned by
			// every detector (mcpcall/answer.go).
			cfg += "    answer: {output_schema: enforce, detect: [secrets, pii, instructions]}\n"
		}
		e := newEnvTo(b, cfg, nil, nil, nil, time.Second)
		switch route {
		case "forward", "forward-answers":
			return target{up.srv.URL + "/mcp", &url.URL{Scheme: "http", Host: e.srv.Addr("forward", 0)}}
		case "reverse":
			return target{e.reverse + "/mcp", nil}
		}
		return target{up.srv.URL + "/mcp", nil}
	}
	routes := []string{"direct", "forward", "reverse", "forward-answers"}
	args := map[string]any{"title": "Crash on save", "labels": []any{"bug", "p1"},
		"assignee": map[string]any{"login": "ada", "team": map[string]any{"id": 7, "name": "core"}},
		"steps":    []any{map[string]any{"action": "open", "count": 1}, map[string]any{"action": "save", "count": 2}}}
	session := func(b *testing.B, tg target, version string) *mcp.ClientSession {
		tr := &http.Transport{MaxIdleConnsPerHost: 64}
		b.Cleanup(tr.CloseIdleConnections)
		if tg.proxyURL != nil {
			tr.Proxy = http.ProxyURL(tg.proxyURL)
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: tg.endpoint, HTTPClient: &http.Client{Transport: tr}, DisableStandaloneSSE: true},
			&mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cs.Close() })
		return cs
	}
	call := func(cs *mcp.ClientSession) error {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_issue", Arguments: args})
		if err == nil && res.IsError {
			b.Fatalf("refused: %v", res.Content)
		}
		return err
	}
	for _, era := range []string{"2025-11-25", "2026-07-28"} {
		benchMCPEra(b, era, routes, setup, session, call)
	}
}

func benchMCPEra(b *testing.B, era string, routes []string, setup func(*testing.B, string, string) mcpTarget,
	session func(*testing.B, mcpTarget, string) *mcp.ClientSession, call func(*mcp.ClientSession) error) {
	for _, r := range routes {
		b.Run("throughput/"+era+"/"+r, func(b *testing.B) {
			const sessions = 16
			tg := setup(b, r, era)
			pool := make(chan *mcp.ClientSession, sessions)
			for range sessions {
				pool <- session(b, tg, era)
			}
			b.SetParallelism(max(1, sessions/runtime.GOMAXPROCS(0)))
			var failed atomic.Int64
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime()
			b.RunParallel(func(pb *testing.PB) {
				cs := <-pool
				defer func() { pool <- cs }()
				for pb.Next() {
					if call(cs) != nil {
						failed.Add(1)
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
			if failed.Load() > 0 {
				b.Fatalf("%d calls failed", failed.Load())
			}
		})
	}
	for _, r := range routes {
		b.Run("latency/"+era+"/"+r, func(b *testing.B) {
			cs := session(b, setup(b, r, era), era)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if err := call(cs); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
		})
	}
}

// mcpTarget is where a benchmark's client calls: an endpoint, and a forward
// proxy or none.
type mcpTarget struct {
	endpoint string
	proxyURL *url.URL
}
