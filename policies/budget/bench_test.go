package budget

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time (user and system) this process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAdmit is one call through two budgets (per session, per agent
// and tool), loop breaking (a digest of two arguments) and an upstream's
// token bucket, over 1000 sessions, in parallel: Admit and Settle, as the
// proxy calls them. It reports the process's CPU time per call (cpu-ns/op),
// which, unlike ns/op, a shared machine's other load does not inflate.
func BenchmarkAdmit(b *testing.B) {
	for _, g := range []int{1, 16} {
		b.Run(fmt.Sprintf("goroutines-per-cpu-%d", g), func(b *testing.B) { benchAdmit(b, g) })
	}
}

func benchAdmit(b *testing.B, parallelism int) {
	cfg := Config{
		Limits: []Limit{
			{Name: "session", Per: []string{"session"}, Calls: 1 << 40, Window: time.Hour},
			{Name: "agent_tool", Per: []string{"agent", "tool"}, Calls: 1 << 40, Window: time.Hour},
		},
		Loops:     LoopConfig{MaxRepeats: 1 << 40, Window: time.Hour},
		Upstreams: []Upstream{{Host: "api.example.org", Rate: 1e9, Burst: 1e9}},
	}
	if err := cfg.Validate([]string{"search"}, nil); err != nil {
		b.Fatal(err)
	}
	e := New(&cfg, nil)
	sessions := make([]string, 1000)
	for i := range sessions {
		sessions[i] = "session-" + strconv.Itoa(i)
	}
	args := map[string]any{"term": "p53", "retmax": 20.0}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	b.SetParallelism(parallelism)
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			c := Call{Tool: "search", Agent: "agent-1", Session: sessions[i%len(sessions)], Upstream: "api.example.org", UpstreamPort: "443", UpstreamDefaultPort: true, Args: args}
			if v := e.Admit(ctx, &c); v.Refused {
				b.Fatal(v)
			}
			e.Settle(&c, Outcome{})
			i++
		}
	})
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkDigest is the loop digest of typical arguments: a string, a
// number as the proxy decodes it (json.Number), a float64 and a nested
// object with an array. It reports CPU time per digest (cpu-ns/op) as
// BenchmarkAdmit does.
func BenchmarkDigest(b *testing.B) {
	seed := maphash.MakeSeed()
	args := map[string]any{
		"term": "p53", "retmax": json.Number("20"), "ratio": 0.25,
		"filter": map[string]any{"year": json.Number("2024"), "ids": []any{json.Number("7"), json.Number("12.5e-1"), "x"}},
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		Digest(seed, args)
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
