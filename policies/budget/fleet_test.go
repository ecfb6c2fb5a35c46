package budget

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/internal/redisstate"
	"github.com/toolgate/toolgate/internal/redistest"
)

// fleetEngines returns n engines (as n sidecars would build them from one
// configuration) sharing the Redis at addrs.
func fleetEngines(t *testing.T, n int, cfg Config, rc redisstate.Config, tools ...string) ([]*Engine, []*redisstate.Client) {
	t.Helper()
	if err := rc.Validate(); err != nil {
		t.Fatal(err)
	}
	var es []*Engine
	var cs []*redisstate.Client
	for range n {
		c := cfg
		c.Limits = append([]Limit(nil), cfg.Limits...)
		c.Upstreams = append([]Upstream(nil), cfg.Upstreams...)
		if err := c.Validate(tools, nil); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		e := New(&c, nil)
		cl := redisstate.New(rc)
		t.Cleanup(func() { _ = cl.Close() })
		e.UseFleet(cl)
		es = append(es, e)
		cs = append(cs, cl)
	}
	return es, cs
}

func TestFleetBudgetExactAcrossEngines(t *testing.T) {
	srv := redistest.Start(t)
	const n = 50
	es, _ := fleetEngines(t, 3, Config{Limits: []Limit{{Name: "per-session", Per: []string{"session"}, Calls: n, Window: time.Minute}}},
		redisstate.Config{Addrs: []string{srv.Addr()}, Timeout: 2 * time.Second}, "search")
	var passed, refused atomic.Int64
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				v := es[(w+i)%3].Admit(context.Background(), &Call{Tool: "search", Session: "s1"})
				if v.Scope != ScopeFleet {
					t.Errorf("scope %q, want fleet", v.Scope)
				}
				if v.Refused {
					if v.Reason != bucketing.ReasonBudgetExhausted {
						t.Errorf("refused as %s: %s", v.Reason, v.Detail)
					}
					refused.Add(1)
				} else {
					passed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if passed.Load() != n || refused.Load() != 240-n {
		t.Fatalf("passed %d, refused %d; want exactly %d of 240 through across three engines", passed.Load(), refused.Load(), n)
	}
	// Another session has its own budget.
	if v := es[1].Admit(context.Background(), &Call{Tool: "search", Session: "s2"}); v.Refused {
		t.Fatalf("session s2 refused: %+v", v)
	}
	// A refund gives the call back to the fleet.
	c := &Call{Tool: "search", Session: "s3"}
	for i := range n {
		if v := es[i%3].Admit(context.Background(), c); v.Refused {
			t.Fatalf("s3 call %d refused", i)
		}
		if i == n-1 {
			es[0].Refund(c)
		}
		c = &Call{Tool: "search", Session: "s3"}
	}
	if v := es[2].Admit(context.Background(), c); v.Refused {
		t.Fatalf("the refunded call's place was not given back: %+v", v)
	}
	if v := es[2].Admit(context.Background(), &Call{Tool: "search", Session: "s3"}); !v.Refused {
		t.Fatal("call past the budget after the refund let through")
	}
}

func TestFleetLoopAndCountersAcrossEngines(t *testing.T) {
	srv := redistest.Start(t)
	es, _ := fleetEngines(t, 3, Config{Loops: LoopConfig{MaxRepeats: 3, Window: time.Minute}},
		redisstate.Config{Addrs: []string{srv.Addr()}, Timeout: 2 * time.Second}, "search")
	args := map[string]any{"q": "same", "n": 5.0}
	for i := range 3 {
		// The arguments spelled another way on each engine are one call.
		a := map[string]any{"n": []any{5.0, int64(5), 5.0}[i], "q": "same"}
		if v := es[i].Admit(context.Background(), &Call{Tool: "search", Session: "s", Args: a}); v.Refused {
			t.Fatalf("repeat %d refused: %+v", i+1, v)
		}
	}
	v := es[0].Admit(context.Background(), &Call{Tool: "search", Session: "s", Args: args})
	if !v.Refused || v.Reason != bucketing.ReasonLoopDetected || v.Scope != ScopeFleet {
		t.Fatalf("4th identical call across engines: %+v; want loop_detected by the fleet", v)
	}
	if got := es[2].Counters(&Call{Tool: "search", Session: "s", Args: args})["repeats"]; got != int64(3) {
		t.Fatalf("input.budget.repeats = %v, want 3 (the fleet's)", got)
	}
	if v := es[1].Admit(context.Background(), &Call{Tool: "search", Session: "s", Args: map[string]any{"q": "other"}}); v.Refused {
		t.Fatalf("a changed call refused: %+v", v)
	}
}

func TestFleetRateAcrossEngines(t *testing.T) {
	srv := redistest.Start(t)
	const rate = 40.0
	es, _ := fleetEngines(t, 3, Config{Upstreams: []Upstream{{Host: "api.test", Rate: rate, Burst: 1, MaxWait: time.Second}}},
		redisstate.Config{Addrs: []string{srv.Addr()}, Timeout: 2 * time.Second}, "search")
	var passed atomic.Int64
	start := time.Now()
	stop := start.Add(2 * time.Second)
	var wg sync.WaitGroup
	for w := range 9 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				v := es[(w+i)%3].Admit(context.Background(), &Call{Tool: "search", Upstream: "api.test", UpstreamPort: "443", UpstreamDefaultPort: true})
				if !v.Refused {
					passed.Add(1)
				} else if v.Reason != bucketing.ReasonLocalRateLimit {
					t.Errorf("refused as %s", v.Reason)
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	want := rate*el + 1
	got := float64(passed.Load())
	if got > want*1.05+1 || got < want*0.95-1 {
		t.Fatalf("%v calls passed in %.2fs across three engines; want %.0f ±5%% (rate %v/s in total)", got, el, want, rate)
	}
}

func TestFleetUnavailableModes(t *testing.T) {
	srv := redistest.Start(t)
	rc := redisstate.Config{Addrs: []string{srv.Addr()}, Timeout: 200 * time.Millisecond, BreakerFailures: 2, BreakerCooldown: 100 * time.Millisecond}
	for _, mode := range []string{UnavailableLocal, UnavailableDeny, UnavailableAllow} {
		t.Run(mode, func(t *testing.T) {
			srv.Restart(t)
			es, cs := fleetEngines(t, 1, Config{Limits: []Limit{{Name: "b", Per: []string{"session"}, Calls: 3, Window: time.Minute, OnUnavailable: mode}}}, rc, "search")
			e := es[0]
			admit := func() Verdict { return e.Admit(context.Background(), &Call{Tool: "search", Session: "s-" + mode}) }
			for i := range 2 {
				if v := admit(); v.Refused || v.Scope != ScopeFleet {
					t.Fatalf("call %d: %+v", i, v)
				}
			}
			srv.Kill()
			var got []Verdict
			for range 5 {
				got = append(got, admit())
			}
			for i, v := range got {
				if v.Scope != ScopeLocal {
					t.Fatalf("call %d while Redis is away: scope %q, want local", i, v.Scope)
				}
				switch mode {
				case UnavailableLocal: // this engine's own counter: 3 pass, then refused
					if v.Refused != (i >= 3) {
						t.Fatalf("local mode call %d: refused=%v (%s)", i, v.Refused, v.Detail)
					}
				case UnavailableDeny:
					if !v.Refused || v.Reason != bucketing.ReasonLimitUnavailable || v.RetryAfter <= 0 {
						t.Fatalf("deny mode call %d: %+v", i, v)
					}
				case UnavailableAllow:
					if v.Refused {
						t.Fatalf("allow mode call %d refused: %+v", i, v)
					}
				}
			}
			if !cs[0].Degraded() {
				t.Fatal("client not degraded while Redis is away")
			}
			srv.Restart(t) // empty: the fleet's counter starts over
			deadline := time.Now().Add(10 * time.Second)
			for {
				v := admit()
				if v.Scope == ScopeFleet {
					if v.Refused {
						t.Fatalf("first fleet call after recovery refused: %+v", v)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no reconnection within 10s")
				}
				time.Sleep(50 * time.Millisecond)
			}
			if cs[0].Degraded() {
				t.Fatal("client still degraded after recovery")
			}
		})
	}
}

func TestFleetKeysAreBoundedAndHashed(t *testing.T) {
	srv := redistest.Start(t)
	es, cs := fleetEngines(t, 1, Config{Limits: []Limit{{Name: "b", Per: []string{"agent", "session"}, Calls: 1, Window: time.Minute}}},
		redisstate.Config{Addrs: []string{srv.Addr()}, Timeout: 2 * time.Second}, "search")
	huge := strings.Repeat("x", 1<<20)
	// Two calls whose agent and session concatenate alike must not share
	// a counter.
	for _, c := range []Call{{Agent: "ab", Session: "c"}, {Agent: "a", Session: "bc"}, {Agent: huge, Session: huge + "}{\x00*"}} {
		c.Tool = "search"
		if v := es[0].Admit(context.Background(), &c); v.Refused {
			t.Fatalf("call %.20q/%.20q refused: another caller's counter was used (%s)", c.Agent, c.Session, v.Detail)
		}
	}
	k := cs[0].Key(fleetTag, "b", "b", "a", huge, "s", huge)
	if len(k) > 64 || strings.Contains(k, "xxxx") {
		t.Fatalf("key %q is not bounded", k)
	}
	mem, err := srv.Do("INFO", "memory")
	if err != nil {
		t.Fatal(err)
	}
	if i := strings.Index(mem, "used_memory:"); i >= 0 {
		var used int64
		_, _ = fmt.Sscan(mem[i+len("used_memory:"):], &used)
		if used > 16<<20 {
			t.Fatalf("Redis uses %d bytes after a 1 MiB id; keys hold raw ids", used)
		}
	}
}

// TestFleetOnCluster runs the budget, loop and rate scripts on a 3-node
// Redis Cluster: a call's keys share one hash tag, so each call is one
// script on one slot, and three engines count as one.
func TestFleetOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	const n = 30
	es, cs := fleetEngines(t, 3, Config{
		Limits:    []Limit{{Name: "per-session", Per: []string{"session"}, Calls: n, Window: time.Minute}, {Name: "all", Calls: 1000, Window: time.Minute}},
		Loops:     LoopConfig{MaxRepeats: 1000, Window: time.Minute},
		Upstreams: []Upstream{{Host: "api.test", Rate: 10000, Burst: 10000}},
	}, redisstate.Config{Addrs: cl.Addrs(), Mode: redisstate.ModeCluster, Timeout: 2 * time.Second}, "search")
	var passed atomic.Int64
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				v := es[(w+i)%3].Admit(context.Background(), &Call{Tool: "search", Session: "s1", Upstream: "api.test", UpstreamPort: "443", UpstreamDefaultPort: true, Args: map[string]any{"i": float64(i)}})
				if v.Scope != ScopeFleet {
					t.Errorf("scope %q (%s)", v.Scope, v.Detail)
				}
				if !v.Refused {
					passed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if passed.Load() != n {
		t.Fatalf("%d of 120 passed on the cluster; want exactly %d", passed.Load(), n)
	}
	for _, c := range cs {
		if c.Degraded() {
			t.Fatal("a client is degraded on a healthy cluster")
		}
	}
}

// TestFleetCostFromHeader: a cost read from the answer's header replaces
// the charged cost in the fleet's counter, and the cost budget refuses
// on the fleet's sum.
func TestFleetCostFromHeader(t *testing.T) {
	srv := redistest.Start(t)
	one := 1.0
	es, _ := fleetEngines(t, 2, Config{
		Limits: []Limit{{Name: "spend", Per: []string{"agent"}, Cost: 10, Window: time.Minute}},
		Costs:  map[string]Cost{"search": {Cost: &one, Header: "X-Cost"}},
	}, redisstate.Config{Addrs: []string{srv.Addr()}, Timeout: 2 * time.Second}, "search")
	for i, cost := range []string{"4", "4.5"} {
		c := &Call{Tool: "search", Agent: "a"}
		if v := es[i].Admit(context.Background(), c); v.Refused {
			t.Fatalf("call %d refused: %+v", i, v)
		}
		es[i].Settle(c, Outcome{Header: http.Header{"X-Cost": {cost}}})
	}
	lim := es[0].Counters(&Call{Tool: "search", Agent: "a"})["limits"].(map[string]any)["spend"].(map[string]any)
	if lim["cost"] != 8.5 {
		t.Fatalf("fleet cost %v; want 8.5 (4 + 4.5 from the headers)", lim["cost"])
	}
	if v := es[1].Admit(context.Background(), &Call{Tool: "search", Agent: "a"}); v.Refused {
		t.Fatalf("9.5 of 10 refused: %+v", v)
	}
	v := es[0].Admit(context.Background(), &Call{Tool: "search", Agent: "a"})
	if !v.Refused || v.Unit != "cost" || v.Scope != ScopeFleet {
		t.Fatalf("10.5 of 10: %+v; want refused on cost by the fleet", v)
	}
}

// TestFleetClusterFailover kills the Cluster master that holds the
// budgets' slot while calls go on: while its replica takes over, each
// call is decided by on_unavailable (deny: refused, never let through);
// once it has, the fleet counts again, on the counters the replica had,
// and no more calls pass in total than the budget allows.
func TestFleetClusterFailover(t *testing.T) {
	cl := redistest.StartClusterWithReplicas(t)
	const n = 40
	es, cs := fleetEngines(t, 3, Config{
		Limits: []Limit{{Name: "per-session", Per: []string{"session"}, Calls: n, Window: time.Minute, OnUnavailable: UnavailableDeny}},
	}, redisstate.Config{Addrs: cl.Addrs(), Mode: redisstate.ModeCluster, Timeout: 300 * time.Millisecond, BreakerFailures: 3, BreakerCooldown: 200 * time.Millisecond}, "search")
	admit := func(i int) Verdict {
		return es[i%3].Admit(context.Background(), &Call{Tool: "search", Session: "s1"})
	}
	passed := 0
	for i := range n / 2 {
		if v := admit(i); v.Refused || v.Scope != ScopeFleet {
			t.Fatalf("call %d before the failover: %+v", i, v)
		}
		passed++
	}
	// The master of the budgets' slot (hash tag {b}).
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	defer rdb.Close()
	m, err := rdb.MasterForKey(context.Background(), "{b}")
	if err != nil {
		t.Fatal(err)
	}
	addr := m.Options().Addr
	var master *redistest.Server
	for _, s := range cl.Nodes {
		if s.Addr() == addr {
			master = s
		}
	}
	if master == nil {
		t.Fatalf("no node at %s", addr)
	}
	// Let the replica catch up: replication is ordered, so once a write
	// made after every call is acknowledged by the replica (WAIT), so are
	// the calls' counts. (A fixed sleep was not enough on a loaded machine.)
	mc := redis.NewClient(&redis.Options{Addr: addr})
	if err := mc.Set(context.Background(), "{b}:failover-sync", 1, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if acked, err := mc.Wait(context.Background(), 1, 20*time.Second).Result(); err != nil || acked < 1 {
		t.Fatalf("the replica did not acknowledge the counts within 20s: %d, %v", acked, err)
	}
	mc.Close()
	master.Kill()
	refusedAway, fleetAgain := 0, false
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		v := admit(i)
		if v.Scope == ScopeFleet {
			fleetAgain = true
			if !v.Refused {
				passed++
			}
			break
		}
		if !v.Refused || v.Reason != bucketing.ReasonLimitUnavailable {
			t.Fatalf("call during the failover: %+v; want limit_unavailable (deny)", v)
		}
		refusedAway++
		time.Sleep(20 * time.Millisecond)
	}
	if !fleetAgain {
		t.Fatal("the fleet did not count again within 30s of the master's death")
	}
	for i := range 2 * n {
		v := admit(i)
		if v.Scope != ScopeFleet {
			// A sidecar whose breaker was still open: deny refuses.
			if !v.Refused {
				t.Fatalf("call after the failover let through locally: %+v", v)
			}
			continue
		}
		if !v.Refused {
			passed++
		}
	}
	if passed != n {
		t.Fatalf("%d calls passed in total across the failover; want exactly the budget's %d", passed, n)
	}
	t.Logf("failover: %d calls refused while the slot had no master; %d passed in total (budget %d); client errors %d %d %d",
		refusedAway, passed, n, cs[0].Errors(), cs[1].Errors(), cs[2].Errors())
}
