package proxy_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/demotools"
	"github.com/toolgate/toolgate/policies/budget"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/proxy/budgetengine"
)

// budgetBenchConfig is the validated bench route alone.
const budgetBenchConfig = `
listen:
  forward: 127.0.0.1:0
tools:
  - name: bench_validated
    match: {host: 127.0.0.1, method: POST, path: /bench/validated}
    envelope: always
    schema:
      type: object
      additionalProperties: false
      required: [query]
      properties:
        query: {type: string, maxLength: 200}
        organism: {type: string}
        limit: {type: integer, minimum: 1, maximum: 100}
        filters:
          type: object
          additionalProperties: false
          properties:
            phase_min: {type: integer}
            modality: {type: string}
        ids: {type: array, items: {type: string}}
`

// budgetBenchSidecar serves the validated bench route in front of its own
// demo upstream, with benchBudgets for that upstream when withBudgets (else
// no budget step), and returns the route's URL and a client through the
// sidecar.
func budgetBenchSidecar(b *testing.B, withBudgets bool) (string, *http.Client) {
	up, err := demotools.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { up.Close() })
	snap := proxy.Snapshot{Version: "v-bench"}
	if withBudgets {
		snap.Budgets = budgetengine.Adapt(benchBudgets(b, up.Addr()))
	}
	srv, _, _ := serveConfig(b, budgetBenchConfig, schemaDir(b), snap, nil, 100*time.Millisecond)
	c := benchClient(b, &url.URL{Scheme: "http", Host: srv.Addr("forward", 0)}, true, 32)
	return up.URL() + "/bench/validated", c
}

// benchBudgets is a realistic budget step for the bench route: two
// budgets (per session; per agent and tool), loop breaking, and the
// upstream's token bucket (with a rate no bench reaches) and backoff.
func benchBudgets(b *testing.B, host string) *budget.Engine {
	cfg := budget.Config{
		Limits: []budget.Limit{
			{Name: "session", Per: []string{"session"}, Calls: 1 << 40, Window: time.Hour},
			{Name: "agent_tool", Per: []string{"agent", "tool"}, Calls: 1 << 40, Window: time.Hour},
		},
		Loops:     budget.LoopConfig{MaxRepeats: 1 << 40, Window: time.Hour},
		Upstreams: []budget.Upstream{{Host: host, Rate: 1e9, Burst: 1e9}},
	}
	if err := cfg.Validate([]string{"bench_validated"}, proxy.UpstreamKey); err != nil {
		b.Fatal(err)
	}
	return budget.New(&cfg, nil)
}

// BenchmarkBudgetOverhead measures what the budget step costs per call
// through the real sidecar: two sidecars in one process, one without
// budgets and one with benchBudgets, take 32-connection bursts in
// alternation (A B, then B A), each call from one of 1000 sessions; it
// reports the median of the paired differences in CPU per call (the whole
// process: client, sidecar, upstream) and in throughput. Run it with
// -benchtime 1x; one run takes about 25s. The budget step alone, without
// HTTP, is BenchmarkAdmit in policies/budget.
func BenchmarkBudgetOverhead(b *testing.B) {
	const rounds, burst = 8, 1500 * time.Millisecond
	baseURL, baseC := budgetBenchSidecar(b, false)
	budURL, budC := budgetBenchSidecar(b, true)
	sessions := make([]string, 1000)
	for i := range sessions {
		sessions[i] = fmt.Sprintf("session-%d", i)
	}
	run := func(u string, c *http.Client) (rps, cpuUS float64) {
		var calls, failed atomic.Int64
		stop := time.Now().Add(burst)
		start, cpu0 := time.Now(), cpuTime()
		var wg sync.WaitGroup
		for g := range 32 {
			wg.Go(func() {
				for i := g; time.Now().Before(stop); i += 32 {
					req, _ := http.NewRequest("POST", u, bytes.NewReader([]byte(benchBody)))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("X-Toolgate-Agent", "bench-agent")
					req.Header.Set("X-Toolgate-Session", sessions[i%len(sessions)])
					resp, err := c.Do(req)
					if err != nil {
						failed.Add(1)
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						failed.Add(1)
					}
					calls.Add(1)
				}
			})
		}
		wg.Wait()
		if failed.Load() > 0 {
			b.Fatalf("%d calls to %s failed", failed.Load(), u)
		}
		n := float64(calls.Load())
		return n / time.Since(start).Seconds(), float64((cpuTime() - cpu0).Microseconds()) / n
	}
	run(baseURL, baseC)
	run(budURL, budC)
	var added, ratio, baseCPU []float64
	for i := range b.N * rounds {
		var bRPS, bCPU, pRPS, pCPU float64
		if i%2 == 0 {
			bRPS, bCPU = run(baseURL, baseC)
			pRPS, pCPU = run(budURL, budC)
		} else {
			pRPS, pCPU = run(budURL, budC)
			bRPS, bCPU = run(baseURL, baseC)
		}
		added = append(added, pCPU-bCPU)
		ratio = append(ratio, pRPS/bRPS)
		baseCPU = append(baseCPU, bCPU)
	}
	slices.Sort(added)
	slices.Sort(ratio)
	slices.Sort(baseCPU)
	b.ReportMetric(baseCPU[len(baseCPU)/2], "base-cpu-us")
	b.ReportMetric(added[len(added)/2], "added-cpu-us")
	b.ReportMetric((1-ratio[len(ratio)/2])*100, "loss-%")
}
