package budget

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/redisstate"
	"github.com/toolgate/toolgate/internal/redistest"
)

// BenchmarkAdmitFleet is BenchmarkAdmit's call (two budgets, loop
// breaking, an upstream's rate; over 1000 sessions) one at a time, with
// the counters local and in a Redis on loopback (state.redis): the added
// cost per call of the fleet state. It reports the median latency of one
// Admit and Settle (p50-ns), this process's CPU time per call (cpu-ns/op)
// and, for Redis, the server's (redis-cpu-ns/op).
func BenchmarkAdmitFleet(b *testing.B) {
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
	srv := redistest.Start(b)
	for _, mode := range []string{"local", "redis"} {
		b.Run(mode, func(b *testing.B) {
			c := cfg
			e := New(&c, nil)
			if mode == "redis" {
				rc := redisstate.Config{Addrs: []string{srv.Addr()}, Timeout: time.Second}
				if err := rc.Validate(); err != nil {
					b.Fatal(err)
				}
				cl := redisstate.New(rc)
				b.Cleanup(func() { cl.Close() })
				e.UseFleet(cl)
			}
			sessions := make([]string, 1000)
			for i := range sessions {
				sessions[i] = "session-" + strconv.Itoa(i)
			}
			args := map[string]any{"term": "p53", "retmax": 20.0}
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			rcpu0 := srv.CPUTime()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				call := Call{Tool: "search", Agent: "agent-1", Session: sessions[i%len(sessions)], Upstream: "api.example.org", UpstreamPort: "443", UpstreamDefaultPort: true, Args: args}
				t0 := time.Now()
				v := e.Admit(ctx, &call)
				e.Settle(&call, Outcome{})
				lat = append(lat, time.Since(t0))
				if v.Refused {
					b.Fatal(v)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
			if mode == "redis" {
				b.ReportMetric(float64((srv.CPUTime()-rcpu0).Nanoseconds())/float64(b.N), "redis-cpu-ns/op")
			}
		})
	}
}
