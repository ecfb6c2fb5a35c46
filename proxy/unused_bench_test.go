package proxy_test

import (
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/demotools"
	"github.com/toolgate/toolgate/policies/budget"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/proxy/budgetengine"
)

// unusedFeaturesTool is a second tool beside the validated bench route
// with answer checks (a schema and the detectors) and the only budget,
// while the budgets' one upstream is a host the validated route never
// calls: nothing of either applies to the validated route.
const unusedFeaturesTool = `
  - name: guarded
    match: {host: 127.0.0.1, method: POST, path: /bench/guarded}
    answer:
      schema: {type: object}
      detect: [secrets]
`

// BenchmarkUnusedFeatures shows that a tool pays nothing for answer checks
// and budgets other tools have: the validated bench route in front of two
// sidecars, one whose configuration holds only that route, the other also
// a tool with answer checks, a budget naming that tool and an upstream
// rate on another host (so the validated route's chain has neither answer
// steps nor a budget step: budget.Engine.MayApply). Both are called in
// alternating bursts from 32 goroutines (pairedBursts: added CPU per call,
// whole process, and throughput lost), then one call at a time for the
// allocations per call of each (whole process, medians of 5 rounds of 2000
// calls). Run it with -benchtime 1x.
func BenchmarkUnusedFeatures(b *testing.B) {
	sidecar := func(cfg string, budgets bool) (string, *http.Client) {
		up, err := demotools.Start("127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { up.Close() })
		snap := proxy.Snapshot{Version: "v-bench"}
		if budgets {
			bcfg := budget.Config{
				Limits:    []budget.Limit{{Name: "guarded", Tools: []string{"guarded"}, Calls: 1 << 40, Window: time.Hour}},
				Upstreams: []budget.Upstream{{Host: "files.example.org", Rate: 1e9, Burst: 1e9}},
			}
			if err := bcfg.Validate([]string{"bench_validated", "guarded"}, proxy.UpstreamKey); err != nil {
				b.Fatal(err)
			}
			snap.Budgets = budgetengine.Adapt(budget.New(&bcfg, nil))
		}
		srv, _, _ := serveConfig(b, cfg, schemaDir(b), snap, nil, 100*time.Millisecond)
		return up.URL() + "/bench/validated", benchClient(b, &url.URL{Scheme: "http", Host: srv.Addr("forward", 0)}, true, 32)
	}
	aloneURL, aloneC := sidecar(budgetBenchConfig, false)
	besideURL, besideC := sidecar(budgetBenchConfig+strings.TrimPrefix(unusedFeaturesTool, "\n"), true)
	clients := map[string]*http.Client{aloneURL: aloneC, besideURL: besideC}
	call := func(u string) error { return benchCall(clients[u], u) }
	pairedBursts(b, call, aloneURL, besideURL)

	allocs := func(u string) float64 {
		const n = 2000
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for range n {
			if err := call(u); err != nil {
				b.Fatal(err)
			}
		}
		runtime.ReadMemStats(&m1)
		return float64(m1.Mallocs-m0.Mallocs) / n
	}
	allocs(aloneURL)
	allocs(besideURL)
	var alone, beside []float64
	for i := range 5 {
		if i%2 == 0 {
			alone, beside = append(alone, allocs(aloneURL)), append(beside, allocs(besideURL))
		} else {
			beside, alone = append(beside, allocs(besideURL)), append(alone, allocs(aloneURL))
		}
	}
	slices.Sort(alone)
	slices.Sort(beside)
	b.ReportMetric(alone[2], "allocs-alone")
	b.ReportMetric(beside[2], "allocs-beside")
}
