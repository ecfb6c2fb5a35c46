package budget

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/internal/redisstate"
	"github.com/toolgate/toolgate/internal/redistest"
)

// TestFleetSentinelFailover runs a budget through two engines in sentinel
// mode (state.redis.mode: sentinel, master_name; addrs the Sentinel's):
// racing calls let exactly the budget through. Then, with half a second
// budget spent and the replica in sync, the master is killed: while the
// Sentinel promotes the replica every call is decided by on_unavailable
// (deny: refused as limit_unavailable, never let through); once the
// clients find the new master (go-redis asks the Sentinel for it) the
// fleet counts on from the replicated counters, and no more calls pass in
// total than the budget allows, judged by the engines' verdicts.
func TestFleetSentinelFailover(t *testing.T) {
	sn := redistest.StartSentinel(t)
	const n = 40
	rc := redisstate.Config{Addrs: []string{sn.Sentinel.Addr()}, Mode: redisstate.ModeSentinel, MasterName: sn.MasterName,
		Timeout: 300 * time.Millisecond, BreakerFailures: 3, BreakerCooldown: 200 * time.Millisecond}
	es, cs := fleetEngines(t, 2, Config{Limits: []Limit{
		{Name: "per-agent", Per: []string{"agent"}, Calls: n, Window: time.Minute, OnUnavailable: UnavailableDeny},
	}}, rc, "search")

	// (a) Eight workers race 120 calls of agent "race" (each its own
	// session) over the two engines: exactly n pass.
	var passedRace atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				v := es[(w+i)%2].Admit(context.Background(), &Call{Tool: "search", Agent: "race", Session: fmt.Sprint("s", w, i)})
				if v.Scope != ScopeFleet {
					t.Errorf("scope %q (%s)", v.Scope, v.Detail)
				}
				if !v.Refused {
					passedRace.Add(1)
				} else if v.Reason != bucketing.ReasonBudgetExhausted {
					t.Errorf("refused as %s: %s", v.Reason, v.Detail)
				}
			}
		}()
	}
	wg.Wait()
	if passedRace.Load() != n {
		t.Fatalf("%d of 120 racing calls passed through two engines in sentinel mode; want exactly %d", passedRace.Load(), n)
	}

	// (b) The failover, on agent "failover"'s budget.
	call := func(i int) Verdict {
		return es[i%2].Admit(context.Background(), &Call{Tool: "search", Agent: "failover", Session: fmt.Sprint("f", i)})
	}
	passed := 0
	for i := range n / 2 {
		if v := call(i); v.Refused || v.Scope != ScopeFleet {
			t.Fatalf("call %d before the failover: %+v", i, v)
		}
		passed++
	}
	sn.InSync(t) // the counters are on the replica: the failover loses none
	start := time.Now()
	sn.Master.Kill() // before the calls below, so none reaches the old master
	done := make(chan struct{})
	var during []Verdict
	go func() { // calls go on while the Sentinel switches
		defer close(done)
		for i := 0; ; i++ {
			v := call(i)
			if v.Scope == ScopeFleet {
				during = append(during, v)
				return
			}
			during = append(during, v)
			if time.Since(start) > 60*time.Second {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	sn.Failover(t) // waits until the Sentinel names the replica
	switched := time.Since(start)
	<-done
	unavailable, fleetAgain := 0, false
	for _, v := range during {
		if v.Scope == ScopeFleet {
			fleetAgain = true
			if !v.Refused {
				passed++
			}
			continue
		}
		if !v.Refused || v.Reason != bucketing.ReasonLimitUnavailable {
			t.Fatalf("call during the failover: %+v; want limit_unavailable (deny)", v)
		}
		unavailable++
	}
	if !fleetAgain {
		t.Fatalf("the fleet did not count again within 60s of the master's death (%d calls refused meanwhile)", unavailable)
	}
	back := time.Since(start)
	exhausted := 0
	for i := range 2 * n {
		v := call(i)
		if v.Scope != ScopeFleet {
			// An engine whose breaker was still open: deny refuses.
			if !v.Refused || v.Reason != bucketing.ReasonLimitUnavailable {
				t.Fatalf("call after the failover decided locally: %+v; want limit_unavailable (deny)", v)
			}
			unavailable++
			continue
		}
		if !v.Refused {
			passed++
		} else if v.Reason == bucketing.ReasonBudgetExhausted {
			exhausted++
		}
	}
	if passed > n {
		t.Fatalf("%d calls passed in total across the failover; want at most the budget's %d", passed, n)
	}
	// A call the new master counted but whose answer timed out is refused
	// (deny) yet counted: only those may make passed fall short of n.
	if passed < n-unavailable {
		t.Fatalf("%d calls passed in total, %d refused as unavailable; the budget's %d were not all usable after the failover", passed, unavailable, n)
	}
	if exhausted == 0 {
		t.Fatal("no call refused by the exhausted budget after the failover: the new master does not count")
	}
	// The counters as the fleet reads them; an engine whose breaker opened
	// on the failover's last errors reads its local ones until it closes.
	var counted any
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		lim := es[0].Counters(&Call{Tool: "search", Agent: "failover", Session: "x"})["limits"].(map[string]any)["per-agent"].(map[string]any)
		if counted = lim["calls"]; counted == int64(n) || time.Now().After(deadline) {
			break
		}
	}
	if counted != int64(n) {
		t.Fatalf("the new master counts %v calls of the agent budget; want %d", counted, n)
	}
	t.Logf("sentinel failover: promoted after %v, the fleet counted again after %v; %d calls refused as unavailable; %d passed in total (budget %d); client errors %d %d",
		switched.Round(time.Millisecond), back.Round(time.Millisecond), unavailable, passed, n, cs[0].Errors(), cs[1].Errors())
}
