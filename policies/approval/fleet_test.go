package approval_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/redisstate"
	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/policies/approval/audit"
)

// fleetStores returns three FleetStores (three sidecars) over their own
// opens of one approvals file, their uses kept in the Redis at addrs.
func fleetStores(t *testing.T, rc redisstate.Config) []*approval.FleetStore {
	t.Helper()
	if err := rc.Validate(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "a.ndjson")
	var out []*approval.FleetStore
	for range 3 {
		fs, err := approval.OpenFileStore(path, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		c := redisstate.New(rc)
		t.Cleanup(func() { fs.Close(); c.Close() })
		out = append(out, approval.NewFleetStore(fs, c, time.Hour))
	}
	return out
}

func raceUses(t *testing.T, stores []*approval.FleetStore, rounds, uses int) {
	ctx := context.Background()
	for round := range rounds {
		id := fmt.Sprintf("%032x", round+1)
		now := time.Now().UTC()
		if err := stores[0].PutRequest(ctx, audit.ApprovalRequest{ID: id, Time: now, ExpiresAt: now.Add(time.Hour), Key: id}); err != nil {
			t.Fatal(err)
		}
		if err := stores[1].PutDecision(ctx, audit.ApprovalDecision{ID: id, Time: now, Verdict: audit.VerdictApproved, Decider: "t"}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var taken atomic.Int64
		for i := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := stores[i%3].Use(ctx, audit.ApprovalDecision{ID: id, Time: time.Now().UTC(), Verdict: audit.VerdictUsed, Decider: "sidecar:x"}, uses)
				if err != nil {
					t.Error(err)
				}
				if ok {
					taken.Add(1)
				}
			}()
		}
		wg.Wait()
		rec, _, _ := stores[2].Find(ctx, id, "")
		if taken.Load() != int64(uses) || rec.Uses() != uses {
			t.Fatalf("round %d: %d uses taken, %d recorded; want %d", round, taken.Load(), rec.Uses(), uses)
		}
	}
}

// TestFleetStoreUsesExactStandalone: twelve racing uses of a grant through
// three stores sharing one Redis take exactly uses uses, each recorded.
func TestFleetStoreUsesExactStandalone(t *testing.T) {
	srv := redistest.Start(t)
	raceUses(t, fleetStores(t, redisstate.Config{Addrs: []string{srv.Addr()}, Timeout: 2 * time.Second}), 200, 2)
}

// TestFleetStoreUsesExactCluster is the same on a 3-node Redis Cluster.
func TestFleetStoreUsesExactCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	raceUses(t, fleetStores(t, redisstate.Config{Addrs: cl.Addrs(), Mode: redisstate.ModeCluster, Timeout: 2 * time.Second}), 200, 1)
}

// TestFleetStoreUseNeverLocal: with Redis away a use fails with
// redisstate.ErrUnavailable and nothing is recorded; a Redis that comes
// back empty does not give a recorded use back.
func TestFleetStoreUseNeverLocal(t *testing.T) {
	srv := redistest.Start(t)
	stores := fleetStores(t, redisstate.Config{Addrs: []string{srv.Addr()}, Timeout: 300 * time.Millisecond, BreakerFailures: 1, BreakerCooldown: 50 * time.Millisecond})
	ctx := context.Background()
	id := fmt.Sprintf("%032x", 7)
	now := time.Now().UTC()
	stores[0].PutRequest(ctx, audit.ApprovalRequest{ID: id, Time: now, ExpiresAt: now.Add(time.Hour), Key: id})
	stores[0].PutDecision(ctx, audit.ApprovalDecision{ID: id, Time: now, Verdict: audit.VerdictApproved, Decider: "t"})
	use := func(s *approval.FleetStore) (bool, error) {
		return s.Use(ctx, audit.ApprovalDecision{ID: id, Time: time.Now().UTC(), Verdict: audit.VerdictUsed, Decider: "sidecar:x"}, 1)
	}
	srv.Kill()
	if ok, err := use(stores[0]); ok || !errors.Is(err, redisstate.ErrUnavailable) {
		t.Fatalf("use with Redis away: %v, %v; want ErrUnavailable", ok, err)
	}
	if rec, _, _ := stores[1].Find(ctx, id, ""); rec.Uses() != 0 {
		t.Fatalf("%d uses recorded with Redis away", rec.Uses())
	}
	srv.Restart(t)
	time.Sleep(100 * time.Millisecond)
	if ok, err := use(stores[1]); !ok || err != nil {
		t.Fatalf("use after recovery: %v, %v", ok, err)
	}
	srv.Restart(t) // loses the counter
	time.Sleep(100 * time.Millisecond)
	for i := range 3 {
		ok, err := use(stores[i])
		for try := 0; try < 200 && errors.Is(err, redisstate.ErrUnavailable); try++ {
			time.Sleep(50 * time.Millisecond)
			ok, err = use(stores[i])
		}
		if err != nil {
			t.Fatalf("store %d: %v", i, err)
		}
		if ok {
			t.Fatalf("store %d took a second use of a uses: 1 grant after Redis lost its data", i)
		}
	}
}
