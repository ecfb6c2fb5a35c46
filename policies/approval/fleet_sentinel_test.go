package approval_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/redisstate"
	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/policies/approval/audit"
)

// TestFleetStoreUsesSentinelFailover: in sentinel mode twelve racing uses
// of a grant through three stores take exactly its uses; when the master
// dies a use fails with redisstate.ErrUnavailable (never taken locally)
// until the Sentinel has promoted the replica, then the grant's one use is
// taken once, on the new master.
func TestFleetStoreUsesSentinelFailover(t *testing.T) {
	sn := redistest.StartSentinel(t)
	stores := fleetStores(t, redisstate.Config{Addrs: []string{sn.Sentinel.Addr()}, Mode: redisstate.ModeSentinel, MasterName: sn.MasterName,
		Timeout: 300 * time.Millisecond, BreakerFailures: 1, BreakerCooldown: 50 * time.Millisecond})
	raceUses(t, stores, 50, 2)

	ctx := context.Background()
	id := fmt.Sprintf("%032x", 1000)
	now := time.Now().UTC()
	if err := stores[0].PutRequest(ctx, audit.ApprovalRequest{ID: id, Time: now, ExpiresAt: now.Add(time.Hour), Key: id}); err != nil {
		t.Fatal(err)
	}
	if err := stores[1].PutDecision(ctx, audit.ApprovalDecision{ID: id, Time: now, Verdict: audit.VerdictApproved, Decider: "t"}); err != nil {
		t.Fatal(err)
	}
	use := func(s *approval.FleetStore) (bool, error) {
		return s.Use(ctx, audit.ApprovalDecision{ID: id, Time: time.Now().UTC(), Verdict: audit.VerdictUsed, Decider: "sidecar:x"}, 1)
	}
	sn.InSync(t)
	sn.Master.Kill()
	if ok, err := use(stores[0]); ok || !errors.Is(err, redisstate.ErrUnavailable) {
		t.Fatalf("use with the master dead: %v, %v; want ErrUnavailable", ok, err)
	}
	sn.Failover(t)
	deadline := time.Now().Add(30 * time.Second)
	ok, err := use(stores[1])
	for errors.Is(err, redisstate.ErrUnavailable) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		ok, err = use(stores[1])
	}
	if !ok || err != nil {
		t.Fatalf("first use of the grant on the new master: %v, %v; want taken", ok, err)
	}
	for i := range 3 {
		if ok, err := use(stores[i]); ok || err != nil {
			t.Fatalf("store %d after the failover: %v, %v; want the used grant refused", i, ok, err)
		}
	}
	if rec, _, _ := stores[2].Find(ctx, id, ""); rec.Uses() != 1 {
		t.Fatalf("%d uses recorded; want 1", rec.Uses())
	}
}
