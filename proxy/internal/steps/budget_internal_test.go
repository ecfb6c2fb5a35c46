package steps

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies/budget"
	"github.com/toolgate/toolgate/proxy/budgetengine"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/sink"
)

// BenchmarkBudgetStep is the proxy's budget step alone, as handle and
// finish run it for a call that passed every other check: admitBudget
// (filling the call's budget.Call, two budgets, loop breaking, the
// upstream's token bucket) and SettleBudget, over 1000 sessions. It
// reports the process's CPU time per call (cpu-ns/op) beside ns/op, which
// a shared machine's other load inflates. BenchmarkBudgetOverhead measures
// the same step through real sidecars, where HTTP's cost drowns it.
func BenchmarkBudgetStep(b *testing.B) {
	cfg := budget.Config{
		Limits: []budget.Limit{
			{Name: "session", Per: []string{"session"}, Calls: 1 << 40, Window: time.Hour},
			{Name: "agent_tool", Per: []string{"agent", "tool"}, Calls: 1 << 40, Window: time.Hour},
		},
		Loops:     budget.LoopConfig{MaxRepeats: 1 << 40, Window: time.Hour},
		Upstreams: []budget.Upstream{{Host: "api.example.org", Rate: 1e9, Burst: 1e9}},
	}
	if err := cfg.Validate([]string{"bench"}, conf.UpstreamKey); err != nil {
		b.Fatal(err)
	}
	st := &pipe.State{Snapshot: pipe.Snapshot{Budgets: budgetengine.Adapt(budget.New(&cfg, nil))}}
	sessions := make([]string, 1000)
	for i := range sessions {
		sessions[i] = fmt.Sprintf("session-%d", i)
	}
	args := map[string]any{"query": "EGFR kinase inhibitors", "organism": "human", "limit": 20.0,
		"filters": map[string]any{"phase_min": 2.0, "modality": "small_molecule"}, "ids": []any{"P00533", "P04626"}}
	r, _ := http.NewRequestWithContext(context.Background(), "GET", "http://api.example.org/x", nil)
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu0 := ru.Utime.Nano() + ru.Stime.Nano()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		c := &pipe.Call{State: st, Client: r.Context(), Canon: conf.Canon{Scheme: "http", Host: "api.example.org", Port: "80"}, Event: sink.Event{Tool: "bench", Agent: "agent-1", Session: sessions[i%len(sessions)], Host: "api.example.org"}, In: r, Args: args}
		if ref, ok := admitBudget(c); ref != nil || !ok {
			b.Fatal("refused")
		}
		c.SettleBudget(bucketing.Result{})
	}
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	b.ReportMetric(float64(ru.Utime.Nano()+ru.Stime.Nano()-cpu0)/float64(b.N), "cpu-ns/op")
}
