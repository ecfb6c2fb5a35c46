package budget

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// BenchmarkAdmit is one call through two budgets (per session, per agent
// and tool) and loop breaking, over 1000 sessions, in parallel.
func BenchmarkAdmit(b *testing.B) {
	cfg := Config{
		Limits: []Limit{
			{Name: "session", Per: []string{"session"}, Calls: 1 << 40, Window: time.Hour},
			{Name: "agent_tool", Per: []string{"agent", "tool"}, Calls: 1 << 40, Window: time.Hour},
		},
		Loops: LoopConfig{MaxRepeats: 1 << 40, Window: time.Hour},
	}
	if err := cfg.Validate([]string{"search"}); err != nil {
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
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			c := Call{Tool: "search", Agent: "agent-1", Session: sessions[i%len(sessions)], Args: args}
			if v := e.Admit(ctx, &c); v.Refused {
				b.Fatal(v)
			}
			e.Settle(&c, Outcome{})
			i++
		}
	})
}
