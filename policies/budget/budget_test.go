package budget

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bucketing"
)

// clock is a settable clock for the engine's windows.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newEngine(t *testing.T, cfg Config, tools ...string) (*Engine, *clock) {
	t.Helper()
	if err := cfg.Validate(tools, nil); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	e := New(&cfg, nil)
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	e.now = clk.now
	return e, clk
}

func TestBudgetCallsPerSessionRecoverAfterWindow(t *testing.T) {
	e, clk := newEngine(t, Config{Limits: []Limit{{Name: "s", Per: []string{"session"}, Calls: 3, Window: time.Minute}}}, "search")
	call := func(session string) Verdict {
		return e.Admit(context.Background(), &Call{Tool: "search", Session: session})
	}
	for i := range 3 {
		if v := call("a"); v.Refused {
			t.Fatalf("call %d refused: %+v", i+1, v)
		}
	}
	v := call("a")
	if !v.Refused || v.Reason != bucketing.ReasonBudgetExhausted || v.Code != bucketing.CodePolicy || v.Name != "s" || v.Limit != 3 || v.Window != time.Minute {
		t.Fatalf("4th call: %+v", v)
	}
	if v.RetryAfter != time.Minute {
		t.Errorf("retry after = %s, want 1m (the window started with the first call)", v.RetryAfter)
	}
	if v := call("b"); v.Refused {
		t.Errorf("another session refused: %+v", v)
	}
	if v := call(""); v.Refused {
		t.Errorf("a call without a session is not counted per session: %+v", v)
	}
	clk.t = clk.t.Add(59 * time.Second)
	if v := call("a"); !v.Refused || v.RetryAfter != time.Second {
		t.Errorf("before the window ends: %+v", v)
	}
	clk.t = clk.t.Add(time.Second)
	if v := call("a"); v.Refused {
		t.Errorf("after the window: %+v", v)
	}
}

func TestBudgetCostCapAndHeader(t *testing.T) {
	two := 2.0
	e, _ := newEngine(t, Config{
		Limits: []Limit{{Name: "agent_cost", Per: []string{"agent"}, Cost: 9, Window: time.Hour}},
		Costs:  map[string]Cost{"expensive": {Cost: &two, Header: "X-Cost"}},
	}, "expensive", "cheap")
	ctx := context.Background()
	c := &Call{Tool: "expensive", Agent: "a1"}
	if v := e.Admit(ctx, c); v.Refused {
		t.Fatal(v)
	}
	// The answer says the call cost 7: 7 of 9 spent.
	e.Settle(c, Outcome{Header: map[string][]string{"X-Cost": {"7"}}})
	if v := e.Admit(ctx, &Call{Tool: "cheap", Agent: "a1"}); v.Refused {
		t.Fatalf("cheap call (1, total 8): %+v", v)
	}
	v := e.Admit(ctx, &Call{Tool: "expensive", Agent: "a1"})
	if !v.Refused || v.Unit != "cost" || v.Limit != 9 {
		t.Fatalf("8 + 2 > 9 is refused? %+v", v)
	}
	if v := e.Admit(ctx, &Call{Tool: "cheap", Agent: "a1"}); v.Refused {
		t.Fatalf("8 + 1 fits: %+v", v)
	}
	got := e.Counters(&Call{Tool: "cheap", Agent: "a1"})["limits"].(map[string]any)["agent_cost"].(map[string]any)
	if got["cost"] != 9.0 || got["calls"] != int64(3) {
		t.Errorf("counters = %v", got)
	}
}

func TestLoopDetected(t *testing.T) {
	e, clk := newEngine(t, Config{Loops: LoopConfig{MaxRepeats: 3, Window: 10 * time.Second}}, "search")
	ctx := context.Background()
	args := func(term string) map[string]any {
		return map[string]any{"term": term, "opts": map[string]any{"a": 1.0, "b": []any{"x", true}}}
	}
	for i := range 3 {
		if v := e.Admit(ctx, &Call{Tool: "search", Session: "s", Args: args("p53")}); v.Refused {
			t.Fatalf("call %d: %+v", i+1, v)
		}
	}
	v := e.Admit(ctx, &Call{Tool: "search", Session: "s", Args: args("p53")})
	if !v.Refused || v.Reason != bucketing.ReasonLoopDetected {
		t.Fatalf("4th identical call: %+v", v)
	}
	if v := e.Admit(ctx, &Call{Tool: "search", Session: "s", Args: args("brca1")}); v.Refused {
		t.Errorf("a changed call: %+v", v)
	}
	if v := e.Admit(ctx, &Call{Tool: "search", Session: "other", Args: args("p53")}); v.Refused {
		t.Errorf("another session: %+v", v)
	}
	clk.t = clk.t.Add(10 * time.Second)
	if v := e.Admit(ctx, &Call{Tool: "search", Session: "s", Args: args("p53")}); v.Refused {
		t.Errorf("after the window: %+v", v)
	}
}

func TestDigestOrderAndChange(t *testing.T) {
	e, _ := newEngine(t, Config{Loops: LoopConfig{MaxRepeats: 1}})
	a := map[string]any{"x": "1", "y": []any{1.0, "2"}, "z": map[string]any{"k": nil}}
	b := map[string]any{"z": map[string]any{"k": nil}, "y": []any{1.0, "2"}, "x": "1"}
	if Digest(e.seed, a) != Digest(e.seed, b) {
		t.Error("member order changed the digest")
	}
	for name, c := range map[string]map[string]any{
		"value":      {"x": "2", "y": []any{1.0, "2"}, "z": map[string]any{"k": nil}},
		"array":      {"x": "1", "y": []any{"2", 1.0}, "z": map[string]any{"k": nil}},
		"type":       {"x": 1.0, "y": []any{1.0, "2"}, "z": map[string]any{"k": nil}},
		"name":       {"w": "1", "y": []any{1.0, "2"}, "z": map[string]any{"k": nil}},
		"extra":      {"x": "1", "y": []any{1.0, "2"}, "z": map[string]any{"k": nil, "j": false}},
		"swap names": {"y": "1", "x": []any{1.0, "2"}, "z": map[string]any{"k": nil}},
	} {
		if Digest(e.seed, c) == Digest(e.seed, a) {
			t.Errorf("%s: changed arguments, same digest", name)
		}
	}
}

// TestMemoryBoundedMillionSessions sends calls from 1,000,000 distinct
// sessions (200,000 under the race detector, which makes each call some
// 20 times slower) through a per-session budget and loop breaking with
// max_keys 20000: the counters held stay under the cap, the heap does not
// grow with the sessions, and evictions are counted.
func TestMemoryBoundedMillionSessions(t *testing.T) {
	const maxKeys = 20000
	e, clk := newEngine(t, Config{
		MaxKeys: maxKeys,
		Limits:  []Limit{{Name: "per_session", Per: []string{"session"}, Calls: 5, Window: time.Hour}},
		Loops:   LoopConfig{MaxRepeats: 2, Window: time.Hour},
	}, "search")
	ctx := context.Background()
	args := map[string]any{"term": "p53"}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	sessions := 1_000_000
	if raceEnabled {
		sessions = 200_000
	}
	var before uint64
	var ids [64]byte
	for i := range sessions {
		if i == 50_000 {
			before = heap()
		}
		s := fmt.Appendf(ids[:0], "session-%d", i)
		if v := e.Admit(ctx, &Call{Tool: "search", Session: string(s), Args: args}); v.Refused {
			t.Fatalf("session %d refused: %+v", i, v)
		}
		if i%1000 == 0 {
			clk.t = clk.t.Add(time.Millisecond)
		}
	}
	after := heap()
	if n := e.store.keys(); n > maxKeys+shards {
		t.Errorf("keys held = %d, cap %d", n, maxKeys)
	}
	growth := int64(after) - int64(before)
	t.Logf("heap at 50k sessions %d B, at %d %d B (growth %d B); keys %d", before, sessions, after, growth, e.store.keys())
	if growth > 4<<20 {
		t.Errorf("heap grew %d bytes from 50k to %d sessions; want it bounded (< 4 MiB)", growth, sessions)
	}
	if got := counterValue(t, e.metrics.evictLive); got < float64(2*sessions-2*maxKeys-2*shards) {
		t.Errorf("live evictions = %v, want about %d", got, 2*sessions-2*maxKeys)
	}
}

// TestBackoffFromOutcome: a rate_limit outcome with a Retry-After (an
// upstream 429, or a rule's rate_limit such as a 403 whose body says the
// quota is spent) starts the upstream's backoff, capped by max_backoff;
// another code with a Retry-After (a 503) does not; the backoff ends on
// time.
func TestBackoffFromOutcome(t *testing.T) {
	e, clk := newEngine(t, Config{Upstreams: []Upstream{{Host: "api.example.org", MaxBackoff: 30 * time.Second}}}, "t")
	ctx := context.Background()
	call := func() (*Call, Verdict) {
		c := &Call{Tool: "t", Upstream: "api.example.org", UpstreamPort: "443", UpstreamDefaultPort: true}
		return c, e.Admit(ctx, c)
	}
	c, v := call()
	if v.Refused {
		t.Fatal(v)
	}
	e.Settle(c, Outcome{Code: bucketing.CodeUpstream, RetryAfter: 10 * time.Second})
	if _, v := call(); v.Refused {
		t.Fatalf("a 503's Retry-After started a backoff: %+v", v)
	}
	c, _ = call()
	e.Settle(c, Outcome{Code: bucketing.CodeRateLimit, RetryAfter: time.Hour})
	_, v = call()
	if !v.Refused || v.Reason != bucketing.ReasonUpstreamBackoff || v.Code != bucketing.CodeRateLimit || v.RetryAfter != 30*time.Second {
		t.Fatalf("during the backoff: %+v, want upstream_backoff for 30s (max_backoff)", v)
	}
	if other := e.Admit(ctx, &Call{Tool: "t", Upstream: "other.example.org", UpstreamPort: "443", UpstreamDefaultPort: true}); other.Refused {
		t.Errorf("another upstream refused: %+v", other)
	}
	clk.t = clk.t.Add(30 * time.Second)
	if _, v := call(); v.Refused {
		t.Errorf("after the backoff: %+v", v)
	}
}

// TestRateLimitRefundsBudgets: a call the upstream's rate refuses gives
// back what the budgets charged it.
func TestRateLimitRefundsBudgets(t *testing.T) {
	e, _ := newEngine(t, Config{
		Limits:    []Limit{{Name: "s", Per: []string{"session"}, Calls: 2, Window: time.Hour}},
		Upstreams: []Upstream{{Host: "api.example.org", Rate: 0.001, Burst: 1}},
	}, "t")
	ctx := context.Background()
	call := func() Verdict {
		return e.Admit(ctx, &Call{Tool: "t", Session: "s1", Upstream: "api.example.org", UpstreamPort: "443", UpstreamDefaultPort: true})
	}
	if v := call(); v.Refused {
		t.Fatal(v)
	}
	for range 3 {
		if v := call(); v.Reason != bucketing.ReasonLocalRateLimit {
			t.Fatalf("over the rate: %+v", v)
		}
	}
	got := e.Counters(&Call{Tool: "t", Session: "s1"})["limits"].(map[string]any)["s"].(map[string]any)["calls"]
	if got != int64(1) {
		t.Errorf("session budget counted %v calls, want 1 (the refused ones refunded)", got)
	}
}

// TestHammerExactUnderContention: 32 goroutines spend one shared budget
// (per agent) and 64 per-session budgets at once, with refunds from an
// upstream rate limit among them: exactly the budget's calls are admitted,
// never one more.
func TestHammerExactUnderContention(t *testing.T) {
	e, _ := newEngine(t, Config{
		MaxKeys: 1000,
		Limits: []Limit{
			{Name: "agent", Per: []string{"agent"}, Calls: 1000, Window: time.Hour},
			{Name: "session", Per: []string{"session"}, Calls: 20, Window: time.Hour},
		},
	}, "t")
	ctx := context.Background()
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				v := e.Admit(ctx, &Call{Tool: "t", Agent: "a", Session: fmt.Sprintf("s%d", (g*100+i)%64)})
				if v.Refused {
					refused.Add(1)
				} else {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	// 64 sessions × 20 = 1280 > 1000: the agent's budget is the limit.
	if admitted.Load() != 1000 || refused.Load() != 2200 {
		t.Errorf("admitted %d, refused %d; want exactly 1000 and 2200", admitted.Load(), refused.Load())
	}
	var sum int64
	for s := range 64 {
		n := e.Counters(&Call{Tool: "t", Agent: "a", Session: fmt.Sprintf("s%d", s)})["limits"].(map[string]any)["session"].(map[string]any)["calls"].(int64)
		if n > 20 {
			t.Errorf("session s%d counted %d calls, over its 20", s, n)
		}
		sum += n
	}
	if sum != 1000 {
		t.Errorf("sessions counted %d calls in all; want 1000 (a call the agent budget refused is refunded from its session's)", sum)
	}
}
